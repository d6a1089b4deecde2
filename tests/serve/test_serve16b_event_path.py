"""The event path of a served run (issue 36): a run's AG-UI events as its own stream and its
followers read them (goagent_py/serve/_agui.py, ``RunEvents``)."""

from __future__ import annotations

from typing import Any

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
    events.put_delta(text_content, "m1", "a")
    owner = events.take()
    events.put_delta(text_content, "m1", "b")
    events.put_delta(text_content, "m1", "c")
    owner += events.take()
    events.put_nowait(text_end("m1"))
    events.put_nowait(None)
    owner += events.take()
    told = "".join(e["delta"] for e in owner if e and e["type"] == "TEXT_MESSAGE_CONTENT")
    assert told == "abc"
    followed = [e async for batch in follower for e in batch]
    assert "".join(e["delta"] for e in followed if e["type"] == "TEXT_MESSAGE_CONTENT") == "abc"


def test_a_delta_that_joins_builds_no_event_of_its_own() -> None:
    # Issue 36: each delta was a dict built only to be joined away; the run's log now builds an
    # event when one begins and when it is read, with the same builder (one way to map it).
    made: list[str] = []

    def make(target: str, delta: str) -> dict[str, Any]:
        made.append(delta)
        return text_content(target, delta)

    events = RunEvents()
    for piece in ["word0", " word1", " word2"]:
        events.put_delta(make, "m1", piece)
    events.put_nowait(text_end("m1"))
    assert events.take() == [text_content("m1", "word0 word1 word2"), text_end("m1")]
    assert made == ["word0", "word0 word1 word2"]


def test_a_mapped_turn_is_the_same_events_joined_or_not() -> None:
    # The mapper puts into any sink: the run's log joins what nobody read, a WireList keeps
    # every delta; the text and the order of the events are the same.
    from goagent_py.events import MessageDelta, MessageEnd, MessageStart
    from goagent_py.messages import Message, Role, TextBlock
    from goagent_py.serve._agui import AguiMapper, WireList

    pieces = ["Hel", "lo", " é字"]
    run = [
        MessageStart(Role.ASSISTANT, 1, streaming=True),
        *[MessageDelta("text", p) for p in pieces],
        MessageEnd(Message(Role.ASSISTANT, [TextBlock("".join(pieces))])),
    ]
    joined, every = RunEvents(), WireList()
    for out in (joined, every):
        mapper = AguiMapper("t", "r", out)
        for event in run:
            mapper.map(event)
        mapper.finished()
    log = [e for e in joined.take() if e is not None]
    assert [e["type"] for e in log] == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert log[2]["delta"] == "".join(pieces)
    assert [e["delta"] for e in every if e["type"] == "TEXT_MESSAGE_CONTENT"] == pieces
    assert log[-1]["result"]["text"] == every[-1]["result"]["text"] == "".join(pieces)


def test_a_batchs_frames_are_each_events_json_dumps_frame() -> None:
    import json

    from goagent_py.serve._sse import frames_of, sse_frame

    batch: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        text_content("m1", 'word0 é字 \U0001f600 "quoted" \\ \n\t\u2028'),
        {"type": "CUSTOM", "name": "x", "value": {"n": [1, 2.5, None, True, float("nan")]}},
        {"type": "RUN_FINISHED", "result": {"output": {"big": 10**30, "neg": -0.0}}},
    ]
    assert frames_of(batch) == b"".join(sse_frame(json.dumps(e)) for e in batch)
    assert frames_of([]) == b""
