"""The event path of a served run (issue 36): a run's AG-UI events as its own stream and its
followers read them (goagent_py/serve/_agui.py, ``RunEvents``)."""

from __future__ import annotations

from goagent_py.serve._agui import text_content, text_end
from goagent_py.serve._server import RunEvents


async def test_the_runs_own_stream_reads_every_delta_while_another_tab_follows() -> None:
    # A follower read the log further than the run's own stream has: what the owner then takes
    # must never change afterwards (a delta joined into an event it already took was lost to
    # it: the page that started the run showed "a" where the follower showed "abc").
    events = RunEvents()
    events.put_nowait({"type": "RUN_STARTED", "threadId": "t", "runId": "r"})
    follower = events.follow()
    assert [e["type"] for e in await anext(follower)] == ["RUN_STARTED"]
    events.put_nowait(text_content("m1", "a"))
    owner = events.take()
    events.put_nowait(text_content("m1", "b"))
    events.put_nowait(text_content("m1", "c"))
    owner += events.take()
    events.put_nowait(text_end("m1"))
    events.put_nowait(None)
    owner += events.take()
    told = "".join(e["delta"] for e in owner if e and e["type"] == "TEXT_MESSAGE_CONTENT")
    assert told == "abc"
    followed = [e async for batch in follower for e in batch]
    assert "".join(e["delta"] for e in followed if e["type"] == "TEXT_MESSAGE_CONTENT") == "abc"
