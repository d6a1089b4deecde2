"""Sampling settings and ``extra_body`` for the HTTP chat providers (private).

The providers take ``temperature``, ``top_p``, ``stop`` and ``extra_body`` once, at
construction, and apply them to every request. Here they are checked against each vendor's
documented limits, so that a bad value fails where it is written, with a message that says what
to do, instead of coming back as a vendor 400 on the first call:

- :func:`check_sampling`: numbers in the vendor's range, ``stop`` a list of non-empty strings
  (not one string, which would be split into characters), within the vendor's count limit.
- :func:`check_extra_body`: a JSON object whose keys do not take over what the provider builds
  (``model``, ``messages``, ``stream``) or what has an argument of its own (``temperature``...).
  Any other key is merged last and so replaces what the provider would have sent.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from goagent_py.errors import ConfigurationError

__all__ = ["Sampling", "check_extra_body", "check_sampling"]


@dataclass(slots=True, frozen=True)
class Sampling:
    """Checked sampling settings; None (or an empty ``stop``) means "not sent"."""

    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()

    def fields(self, stop_key: str) -> dict[str, Any]:
        """The settings that are set, as body fields; ``stop`` goes under ``stop_key``."""
        fields: dict[str, Any] = {}
        if self.temperature is not None:
            fields["temperature"] = self.temperature
        if self.top_p is not None:
            fields["top_p"] = self.top_p
        if self.stop:
            fields[stop_key] = list(self.stop)
        return fields


def _number(provider: str, name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigurationError(
            f"{provider}: {name} must be a finite number, got {type(value).__name__} {value!r}"
        )
    return float(value)


def check_sampling(
    provider: str,
    *,
    temperature: float | None,
    top_p: float | None,
    stop: Sequence[str] | None,
    max_temperature: float | None,
    max_stop: int | None = None,
    stop_needs_non_whitespace: bool = False,
    vendor: str = "",
) -> Sampling:
    """Check the sampling arguments of a provider's constructor.

    Args:
        provider: the provider's name, for messages ("anthropic").
        temperature: the temperature, or None.
        top_p: the nucleus-sampling mass, or None.
        stop: the stop sequences, or None.
        max_temperature: the vendor's documented maximum temperature (None: no maximum).
        max_stop: the vendor's documented maximum number of stop sequences (None: no limit).
        stop_needs_non_whitespace: the vendor refuses stop sequences made of whitespace only.
        vendor: whose API documents the limits, for messages ("Anthropic", "OpenAI").

    Returns:
        The settings, with ``stop`` as a tuple.

    Raises:
        ConfigurationError: a value outside the vendor's range, or a malformed ``stop``.
    """
    source = f" (the {vendor} API's range)" if vendor else ""
    if temperature is not None:
        value = _number(provider, "temperature", temperature)
        if value < 0.0 or (max_temperature is not None and value > max_temperature):
            span = f"between 0 and {max_temperature:g}" if max_temperature is not None else ">= 0"
            raise ConfigurationError(
                f"{provider}: temperature must be {span}{source}, got {temperature!r}; "
                "leave it None for the model's default"
            )
        temperature = value
    if top_p is not None:
        value = _number(provider, "top_p", top_p)
        if not 0.0 < value <= 1.0:
            raise ConfigurationError(
                f"{provider}: top_p must be greater than 0 and at most 1, got {top_p!r}; "
                "leave it None for the model's default"
            )
        top_p = value
    return Sampling(
        temperature=temperature,
        top_p=top_p,
        stop=_check_stop(provider, stop, max_stop, stop_needs_non_whitespace, vendor),
    )


def _check_stop(
    provider: str,
    stop: Sequence[str] | None,
    max_stop: int | None,
    needs_non_whitespace: bool,
    vendor: str,
) -> tuple[str, ...]:
    if stop is None:
        return ()
    if isinstance(stop, str | bytes) or not isinstance(stop, Sequence):
        raise ConfigurationError(
            f"{provider}: stop must be a list of strings, got {type(stop).__name__} {stop!r}; "
            "for one sequence pass stop=[...] with it alone"
        )
    sequences = tuple(stop)
    for i, item in enumerate(sequences):
        if not isinstance(item, str) or not item:
            raise ConfigurationError(
                f"{provider}: stop[{i}] must be a non-empty string, got {item!r}"
            )
        if needs_non_whitespace and not item.strip():
            raise ConfigurationError(
                f"{provider}: stop[{i}] is only whitespace ({item!r}), which the {vendor} API "
                "refuses; use a sequence with a visible character"
            )
    if max_stop is not None and len(sequences) > max_stop:
        raise ConfigurationError(
            f"{provider}: the {vendor} API takes at most {max_stop} stop sequences, "
            f"got {len(sequences)}; keep the {max_stop} that matter most"
        )
    return sequences


def check_extra_body(
    provider: str, extra_body: Mapping[str, Any] | None, *, reserved: Mapping[str, str]
) -> dict[str, Any]:
    """Check ``extra_body`` and return a deep copy of it (later changes to it are not sent).

    Args:
        provider: the provider's name, for messages.
        extra_body: the fields to merge last into every request body, or None.
        reserved: the keys ``extra_body`` may not set, each with what to do instead.

    Returns:
        The fields as the JSON they will be sent as ({} for None).

    Raises:
        ConfigurationError: not a mapping of string keys, a reserved key, or a value that is
            not JSON.
    """
    if extra_body is None:
        return {}
    if not isinstance(extra_body, Mapping):
        raise ConfigurationError(
            f"{provider}: extra_body must be a mapping of JSON fields, "
            f"got {type(extra_body).__name__}"
        )
    body = dict(extra_body)
    for key in body:
        if not isinstance(key, str):
            raise ConfigurationError(f"{provider}: extra_body keys must be strings, got {key!r}")
        if key in reserved:
            raise ConfigurationError(f"{provider}: extra_body may not set {key!r}: {reserved[key]}")
    try:
        copy: dict[str, Any] = json.loads(json.dumps(body, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"{provider}: extra_body is not JSON: {exc}") from None
    return copy
