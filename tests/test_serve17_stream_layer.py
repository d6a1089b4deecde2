"""serve17 (issue 36): ``Session.stream`` and ``stream_resume`` hand out the run's own event
generator (no layer of their own, ~46,000 instructions a served turn); what a stream does when
is unchanged: the session is claimed and the prompt checked at its first step, not at the
call, and a refused stream leaves the running one as it was."""

from __future__ import annotations

import pytest

from goagent_py import Agent, Session, SessionBusyError
from goagent_py.errors import ConfigurationError
from goagent_py.events import AgentEnd
from goagent_py.testing import ScriptedProvider


def _session() -> Session:
    return Session(Agent(provider=ScriptedProvider("one", "two", "three")))


async def test_a_stream_never_read_claims_nothing() -> None:
    session = _session()
    unread = session.stream("never read")
    assert (await session.prompt("hi")).text == "one"
    await unread.aclose()
    assert (await session.prompt("again")).text == "two"
    assert [m.text for m in session.transcript] == ["hi", "one", "again", "two"]


async def test_a_bad_prompt_is_refused_at_the_first_step_and_leaves_the_session_idle() -> None:
    session = _session()
    stream = session.stream(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"prompt\(\)"):
        await anext(stream)
    assert (await session.prompt("hi")).text == "one"


async def test_a_second_stream_is_refused_and_the_first_goes_on() -> None:
    session = _session()
    first = session.stream("first")
    await anext(first)
    second = session.stream("second")
    with pytest.raises(SessionBusyError):
        await anext(second)
    with pytest.raises(SessionBusyError):  # the refusal did not end the first run's claim
        await session.prompt("third")
    events = [event async for event in first]
    assert isinstance(events[-1], AgentEnd)
    assert [m.text for m in session.transcript] == ["first", "one"]


async def test_closing_a_stream_early_settles_the_session() -> None:
    session = _session()
    stream = session.stream("first")
    await anext(stream)
    await stream.aclose()
    assert (await session.prompt("again")).text in ("one", "two")
