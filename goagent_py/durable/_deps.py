"""Deps for durable runs: what crosses the wire is a spec (a name and JSON arguments), never the
live object; each worker turns it into the live deps with the resolver registered under that
name.

A durable run's workflow input, its history and every tool activity's input hold the spec as
``{"name": ..., "args": {...}}``; the live deps exist only inside the worker's activity that
resolved them (once to check the spec when the run starts, then once per tool call). Nothing of
them is recorded, so a resolver must not need to be replay-safe, and the arguments must not
carry secrets the Temporal history should not store (pass an id; let the worker look it up).
"""

from __future__ import annotations

import inspect
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from goagent_py.errors import ConfigurationError

__all__ = ["DepsRegistry", "DepsSpec"]

DepsResolver = Callable[..., Any]
"""Builds live deps from a spec's arguments, as keywords: ``resolver(**spec.args)``, sync or
async (a dataclass or a class works as it is: ``DepsRegistry({"tenant": Tenant})``)."""


@dataclass(slots=True, frozen=True)
class DepsSpec:
    """The deps of a durable run, as plain data: the resolver's ``name`` on the workers and the
    keyword arguments it gets (JSON values: strings, numbers, booleans, None, lists, dicts).

    Raises:
        ConfigurationError: the name is empty, or the arguments are not JSON.
    """

    name: str
    args: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigurationError(
                f"DepsSpec needs the name of a resolver registered on the workers, got "
                f"{self.name!r}"
            )
        if not isinstance(self.args, dict):
            raise ConfigurationError(f"DepsSpec({self.name!r}) args must be a dict of keywords")
        try:
            json.dumps(self.args, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(
                f"DepsSpec({self.name!r}) args must be JSON values (they are recorded in the "
                f"run's history and sent to workers), not live objects: {exc}; pass what the "
                "worker's resolver needs to build them (an id, a name)"
            ) from None

    def to_data(self) -> dict[str, Any]:
        """The spec as it crosses the wire: ``{"name": ..., "args": {...}}``."""
        return {"name": self.name, "args": dict(self.args)}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> DepsSpec:
        """The spec :meth:`to_data` made."""
        return cls(str(data["name"]), dict(data.get("args") or {}))


class DepsRegistry:
    """The resolvers a worker turns deps specs into live deps with, by name::

        deps = DepsRegistry({"tenant": lambda tenant_id: Tenant(db.connect(tenant_id))})
        worker = create_worker(client, [durable], deps=deps)

    A resolver runs in the worker's activities, once when a run starts (to check the spec) and
    once per tool call; cache inside it what is costly to build.
    """

    def __init__(self, resolvers: Mapping[str, DepsResolver] | None = None) -> None:
        self._resolvers: dict[str, DepsResolver] = {}
        self._lock = threading.Lock()
        for name, resolver in (resolvers or {}).items():
            self.register(name, resolver)

    def register(self, name: str, resolver: DepsResolver) -> None:
        """Resolve specs named ``name`` with ``resolver(**spec.args)``.

        Raises:
            ConfigurationError: an empty name or a resolver that is not callable.
        """
        if not isinstance(name, str) or not name or not callable(resolver):
            raise ConfigurationError(
                f"DepsRegistry.register: need a name and a callable, got {name!r}, {resolver!r}"
            )
        with self._lock:
            self._resolvers[name] = resolver

    async def resolve(self, spec: DepsSpec) -> Any:
        """The live deps ``spec`` stands for.

        Raises:
            ConfigurationError: no resolver is registered under the spec's name, or the
                resolver failed (the message names it and its error).
        """
        with self._lock:
            resolver = self._resolvers.get(spec.name)
            known = sorted(self._resolvers)
        if resolver is None:
            raise ConfigurationError(
                f"no deps resolver named {spec.name!r} on this worker (known: "
                f"{', '.join(known) or 'none'}); register one: create_worker(..., "
                f"deps=DepsRegistry({{{spec.name!r}: resolver}}))"
            )
        try:
            deps = resolver(**spec.args)
            if inspect.isawaitable(deps):
                deps = await deps
        except Exception as exc:
            raise ConfigurationError(
                f"deps resolver {spec.name!r} failed for args {spec.args!r} "
                f"({type(exc).__name__}: {exc})"
            ) from exc
        return deps


NO_DEPS = DepsRegistry()
"""What a worker created without ``deps=`` resolves with: nothing (every spec is refused)."""


async def resolve_data(registry: DepsRegistry, data: Any) -> Any:
    """The live deps of a spec as it crossed the wire (None: the run has none)."""
    if data is None:
        return None
    return await registry.resolve(DepsSpec.from_data(data))
