"""``ScriptedProvider(keep_requests=...)``: how many request records it keeps, and the script,
``remaining`` and ``calls`` counting every call whatever is kept (issue 36: the bench server's
records grew with the square of the turns)."""

from __future__ import annotations

from typing import Any

import pytest

import goagent_py.testing as testing
from goagent_py.errors import ConfigurationError
from goagent_py.messages import Message, Role, TextBlock
from goagent_py.provider import CompletionRequest, StreamDone, TextDelta
from goagent_py.testing import ScriptedProvider, ScriptExhaustedError


def _request(text: str) -> CompletionRequest:
    return CompletionRequest(model="m", messages=[Message(Role.USER, [TextBlock(text)])])


async def _drive(provider: ScriptedProvider, n: int) -> list[Any]:
    """``n`` calls, alternating complete and stream: each call's answer text or its error."""
    seen: list[Any] = []
    for i in range(n):
        try:
            if i % 2 == 0:
                seen.append((await provider.complete(_request(f"q{i}"))).message.text)
            else:
                events = [e async for e in provider.stream(_request(f"q{i}"))]
                assert isinstance(events[-1], StreamDone)
                text = "".join(e.text for e in events if isinstance(e, TextDelta))
                assert text == events[-1].response.message.text
                seen.append(text)
        except ScriptExhaustedError as exc:
            seen.append(str(exc))
        seen.append((provider.calls, provider.remaining))
    return seen


@pytest.mark.parametrize("keep", [None, 0, 1, 2, 10])
async def test_every_setting_replays_the_script_and_counts_as_keeping_all_does(
    keep: int | None,
) -> None:
    script = ("a b", "c", RuntimeError("scripted"), "d e f")
    reference = ScriptedProvider(*script)
    provider = ScriptedProvider(*script, keep_requests=keep)
    with pytest.raises(RuntimeError, match="scripted"):
        await _drive(reference, 6)  # the error is the third call's
    assert (reference.calls, reference.remaining) == (3, 1)
    with pytest.raises(RuntimeError, match="scripted"):
        await _drive(provider, 6)
    assert (provider.calls, provider.remaining) == (3, 1)

    after = await _drive(ScriptedProvider(*script[:2], keep_requests=keep), 4)
    assert after == [
        "a b",
        (1, 1),
        "c",
        (2, 0),
        "ScriptedProvider: no more responses queued (call #3, script has 2)",
        (3, -1),
        "ScriptedProvider: no more responses queued (call #4, script has 2)",
        (4, -2),
    ]
    assert after == await _drive(ScriptedProvider(*script[:2]), 4)


async def test_keeping_all_by_default_records_every_request() -> None:
    provider = ScriptedProvider("a", "b", "c")
    await _drive(provider, 4)
    assert [r.messages[0].text for r in provider.requests] == ["q0", "q1", "q2", "q3"]


@pytest.mark.parametrize("keep", [1, 2, 3])
async def test_keeping_n_records_the_last_n_requests_as_snapshots(keep: int) -> None:
    provider = ScriptedProvider("a", "b", "c", "d", keep_requests=keep)
    requests = [_request(f"q{i}") for i in range(5)]
    for request in requests[:4]:
        await provider.complete(request)
    with pytest.raises(ScriptExhaustedError):
        await provider.complete(requests[4])
    assert [r.messages[0].text for r in provider.requests] == [f"q{i}" for i in range(5)][-keep:]
    for request in requests:  # what the caller does to its request afterwards never shows
        request.messages[0].content[0] = TextBlock("changed")
        request.messages.append(Message(Role.USER, [TextBlock("more")]))
    assert [len(r.messages) for r in provider.requests] == [1] * keep
    assert [r.messages[0].text for r in provider.requests] == [f"q{i}" for i in range(5)][-keep:]


async def test_keeping_none_records_nothing_and_makes_no_snapshot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_snapshot(*args: Any) -> Any:
        raise AssertionError("a request was snapshotted")

    monkeypatch.setattr(testing, "snapshot_request", no_snapshot)
    provider = ScriptedProvider("a b", "c", keep_requests=0)
    seen = await _drive(provider, 3)
    assert seen[:4] == ["a b", (1, 1), "c", (2, 0)]
    assert provider.requests == []
    assert provider.remaining == -1


@pytest.mark.parametrize("bad", [-1, 1.5, "2", True])
def test_keep_requests_must_be_none_or_a_count(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="keep_requests"):
        ScriptedProvider("a", keep_requests=bad)
