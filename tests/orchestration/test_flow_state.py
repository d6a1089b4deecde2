"""Typed outputs between nodes and the flow's shared state (issues 30 and 32)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from goagent_py import Agent, ConfigurationError
from goagent_py.orchestration import (
    FlowState,
    NodeEnd,
    Parallel,
    Pipeline,
    current_flow_state,
)
from goagent_py.output import FINAL_RESULT_TOOL
from goagent_py.testing import ScriptedProvider, tool_call_response


class Invoice(BaseModel):
    vendor: str
    total: float


def extractor() -> Agent[Any, Invoice]:
    provider = ScriptedProvider(
        tool_call_response((FINAL_RESULT_TOOL, {"vendor": "ACME", "total": 12.5}))
    )
    return Agent(provider=provider, model="m", name="extract", output_type=Invoice)


async def test_a_typed_node_passes_json_on_and_its_object_is_the_nodes_output() -> None:
    received: list[str] = []

    async def approve(text: str) -> str:
        received.append(text)
        state = current_flow_state()
        assert state is not None
        invoice = state.output_as("extract", Invoice)
        state.put("decision", {"approved": invoice.total < 100})
        return "approved" if invoice.total < 100 else "refused"

    result = await Pipeline(extractor(), approve, name="ap").run("invoice text")
    assert json.loads(received[0]) == {"vendor": "ACME", "total": 12.5}
    assert result.text == "approved"
    assert result.steps[0].output == Invoice(vendor="ACME", total=12.5)
    state = result.flow_state
    assert state is not None
    assert state.outputs == {"extract": {"vendor": "ACME", "total": 12.5}, "approve": "approved"}
    assert state.artifacts == {"decision": {"approved": True}}
    # Plain data: the state survives a JSON round trip (a checkpoint) unchanged.
    again = FlowState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert again == state
    assert again.output_as("extract", Invoice).vendor == "ACME"


async def test_a_pattern_whose_last_node_is_typed_has_that_output() -> None:
    async def clean(text: str) -> str:
        return text.strip()

    result = await Pipeline(clean, extractor(), name="p").run("  text ")
    assert result.output == Invoice(vendor="ACME", total=12.5)


async def test_nested_flows_and_parallel_branches_share_one_state() -> None:
    async def left(text: str) -> str:
        state = current_flow_state()
        assert state is not None
        state.put("left", [1, 2])
        return "L"

    async def right(text: str) -> str:
        return "R"

    async def after(text: str) -> str:
        state = current_flow_state()
        assert state is not None
        return ",".join(sorted(state.outputs)) + f" {state.artifacts['left']}"

    inner = Parallel(left, right, name="both")
    events = [e async for e in Pipeline(inner, after, name="outer").stream("x")]
    end = events[-1]
    assert isinstance(end, NodeEnd)
    assert end.result is not None
    assert end.result.text == "both,both/left,both/right [1, 2]"
    assert end.result.flow_state is not None
    assert end.result.flow_state.outputs["after"] == end.result.text


async def test_each_run_has_its_own_state() -> None:
    async def count(text: str) -> str:
        state = current_flow_state()
        assert state is not None
        state.put("seen", len(state.artifacts))
        return text

    flow = Pipeline(count, name="p")
    first, second = await flow.run("a"), await flow.run("b")
    assert first.flow_state is not second.flow_state
    assert second.flow_state is not None
    assert second.flow_state.artifacts == {"seen": 0}
    assert current_flow_state() is None


async def test_an_artifact_that_is_not_plain_data_is_refused_with_what_to_do() -> None:
    async def bad(text: str) -> str:
        state = current_flow_state()
        assert state is not None
        state.put("conn", object())
        return text

    # Misuse, like every ConfigurationError in a flow: raised as itself, never retried.
    with pytest.raises(ConfigurationError, match=r"FlowState.put\('conn'\): .* not plain data"):
        await Pipeline(bad, name="p").run("x")
    with pytest.raises(KeyError, match="the outputs are"):
        FlowState().output_as("missing", Invoice)
