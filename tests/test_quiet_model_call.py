"""A run nobody can interrupt or stream calls the model without an async generator; what it
reports and raises is what the interruptible path (a session, a stream) reports and raises."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from goagent_py import Agent, Hooks, ProviderError
from goagent_py._control import RunControl
from goagent_py.results import ModelResponse
from goagent_py.testing import ScriptedProvider


async def one_run(make_error: Any, controlled: bool) -> tuple[Any, list[str], list[Any]]:
    seen: list[str] = []
    responses: list[ModelResponse] = []

    def on_provider_response(iteration: int, event: ModelResponse) -> None:
        responses.append(event)

    hooks = Hooks(on_provider_response=on_provider_response)
    agent = Agent(provider=ScriptedProvider(make_error()), model="m", hooks=hooks)
    run = await agent.start_run("hi", streaming=False, control=RunControl() if controlled else None)

    async def drain() -> None:
        async for event in run.events():
            seen.append(type(event).__name__)

    with pytest.raises(ProviderError) as info:
        await drain()
    return info.value, seen, responses


@pytest.mark.parametrize(
    "make_error",
    [lambda: ConnectionError("refused"), lambda: ProviderError("overloaded", status=529)],
    ids=["foreign", "own"],
)
async def test_a_failed_model_call_is_reported_and_raised_alike(
    make_error: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="goagent_py")
    quiet, quiet_seen, quiet_resp = await one_run(make_error, controlled=False)
    ctl, ctl_seen, ctl_resp = await one_run(make_error, controlled=True)
    assert quiet_seen == ctl_seen
    assert type(quiet) is type(ctl)
    assert str(quiet) == str(ctl)
    assert type(quiet.__cause__) is type(ctl.__cause__)
    assert type(quiet.__context__) is type(ctl.__context__)
    assert quiet.__suppress_context__ == ctl.__suppress_context__
    if quiet.__cause__ is not None:
        assert quiet.__cause__ is quiet.__context__
    assert [type(r.error) for r in quiet_resp] == [type(r.error) for r in ctl_resp]
    assert len([r for r in caplog.records if "provider error" in r.getMessage()]) == 2
