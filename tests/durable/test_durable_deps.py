"""Durable runs take a serialisable deps spec: the app sends a name and JSON arguments, the
worker resolves them to live deps with the resolver registered under that name, and tools read
them from their context. An unknown name or a failing resolver ends the run before its first
model call, with an error naming what to register. Real Temporal dev server, in-process workers.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from goagent_py import Agent, ConfigurationError
from goagent_py.durable import (
    DepsRegistry,
    DepsSpec,
    DurableAgent,
    DurableRunError,
    ProviderRegistry,
    create_worker,
)
from goagent_py.messages import Role, ToolCall
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import FunctionProvider, tool_call_response
from goagent_py.tool_context import current_tool_context
from goagent_py.tools import tool


@dataclass
class Tenant:
    """Live deps: what a resolver builds on the worker (a connection, a client...)."""

    name: str
    plan: str


@tool
def plan_of() -> str:
    """The signed-in tenant's plan."""
    ctx = current_tool_context()
    assert ctx is not None
    tenant = ctx.deps_as(Tenant)
    return f"{tenant.name}: {tenant.plan}"


def _plan(request: CompletionRequest) -> CompletionResponse | str:
    results = [m for m in request.messages if m.role == Role.TOOL]
    if not results:
        return tool_call_response(ToolCall("c1", "plan_of", {}))
    return f"Your plan: {results[-1].text}"


def _durable(asked: list[Any]) -> tuple[DurableAgent, ProviderRegistry]:
    def plan(request: CompletionRequest) -> CompletionResponse | str:
        asked.append(request)
        return _plan(request)

    agent = Agent(provider=FunctionProvider(plan), model="m", name="billing", tools=[plan_of])
    durable = DurableAgent(agent, provider="fn:x", task_queue=f"q-{uuid.uuid4().hex[:8]}")
    return durable, ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})


def test_a_deps_spec_is_plain_json_and_refuses_what_is_not() -> None:
    spec = DepsSpec("tenant", {"name": "acme", "ids": [1, 2]})
    assert DepsSpec.from_data(json.loads(json.dumps(spec.to_data()))) == spec
    with pytest.raises(ConfigurationError, match="JSON"):
        DepsSpec("tenant", {"conn": object()})
    with pytest.raises(ConfigurationError, match="name"):
        DepsSpec("", {})


@pytest.mark.slow
async def test_the_worker_resolves_the_spec_and_tools_get_the_live_deps(
    temporal: WorkflowEnvironment,
) -> None:
    asked: list[Any] = []
    resolved: list[dict[str, Any]] = []

    async def tenant(name: str) -> Tenant:  # a resolver may be async
        resolved.append({"name": name})
        return Tenant(name, {"acme": "gold"}.get(name, "free"))

    durable, providers = _durable(asked)
    deps = DepsRegistry({"tenant": tenant})
    async with create_worker(temporal.client, [durable], registry=providers, deps=deps):
        result = await durable.execute(
            temporal.client, "What is my plan?", deps=DepsSpec("tenant", {"name": "acme"})
        )
    assert result.text == "Your plan: acme: gold"
    assert {"name": "acme"} in resolved


@pytest.mark.slow
@pytest.mark.parametrize("case", ["unknown name", "resolver fails", "no registry"])
async def test_a_spec_the_worker_cannot_resolve_ends_the_run_before_the_model(
    temporal: WorkflowEnvironment, case: str
) -> None:
    asked: list[Any] = []

    def broken(name: str) -> Tenant:
        raise LookupError(f"no tenant {name}")

    durable, providers = _durable(asked)
    registries = {
        "unknown name": DepsRegistry({"tenant": broken}),
        "resolver fails": DepsRegistry({"account": broken}),
        "no registry": None,
    }
    spec = DepsSpec("account" if case == "resolver fails" else "accounts", {"name": "x"})
    async with create_worker(temporal.client, [durable], registry=providers, deps=registries[case]):
        with pytest.raises(DurableRunError) as info:
            await durable.execute(temporal.client, "What is my plan?", deps=spec)
    assert info.value.type == "ConfigurationError"
    message = str(info.value)
    if case == "resolver fails":
        assert "deps resolver 'account' failed" in message
        assert "no tenant x" in message
    else:
        assert "'accounts'" in message
        assert "DepsRegistry" in message  # says what to register, and where
    assert asked == []  # no model call was made: nothing of the run to undo
