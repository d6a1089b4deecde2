"""What crosses the workflow boundary: plain data in, the same objects out; errors classified."""

from __future__ import annotations

import json
import pickle
from datetime import timedelta

import pytest

from goagent_py.durable._activities import _application_error, _retryable
from goagent_py.durable._wire import (
    DurableRunError,
    ErrorData,
    PayloadTooLargeError,
    RemoteToolError,
    check_size,
    error_to_data,
    request_from_data,
    request_to_data,
    response_from_data,
    response_to_data,
    tool_error_from_data,
    tool_error_to_data,
)
from goagent_py.errors import (
    ConfigurationError,
    CorruptedDataError,
    LeaseLostError,
    MemoryStoreError,
    ProviderError,
    SessionBusyError,
    ToolBlockedError,
    ToolError,
    ToolExecutionError,
    ToolTimeoutError,
)
from goagent_py.mcp.errors import MCPConnectionError, MCPServerRestartedError, MCPToolError
from goagent_py.messages import (
    ImageBlock,
    Message,
    Role,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    Usage,
    user_message,
)
from goagent_py.provider import CompletionRequest, CompletionResponse, ThinkingConfig
from goagent_py.tools import ToolDefinition


def test_requests_and_responses_round_trip_through_json() -> None:
    request = CompletionRequest(
        model="m",
        system_prompt="be brief",
        messages=[
            Message(
                Role.USER, [TextBlock("look"), ImageBlock(b"\x89PNG\r\n\x1a\n\xff", "image/png")]
            ),
            Message(
                Role.ASSISTANT,
                [ThinkingBlock("hmm", signature="s")],
                tool_calls=[ToolCall("c1", "t", {"a": [1, None]})],
            ),
        ],
        tools=[ToolDefinition("t", "a tool", {"type": "object", "properties": {}})],
        thinking=ThinkingConfig(1024),
        effort="low",
        max_tokens=100,
    )
    data = json.loads(json.dumps(request_to_data(request)))  # plain JSON, nothing pickled
    assert request_from_data(data) == request
    response = CompletionResponse(
        user_message("x"), StopReason.MAX_TOKENS, Usage(input_tokens=3, output_tokens=4), "m-1"
    )
    assert response_from_data(json.loads(json.dumps(response_to_data(response)))) == response


@pytest.mark.parametrize(
    ("exc", "retryable"),
    [
        (ProviderError("bad", status=400), False),
        (ProviderError("auth", status=401), False),
        (ProviderError("slow", status=429, retry_after=3), True),
        (ProviderError("timeout", status=408), True),
        (ProviderError("down", status=503), True),
        (ProviderError("no answer"), True),
        (ConfigurationError("misuse"), False),
        (RuntimeError("boom"), True),
    ],
)
def test_errors_are_classified(exc: Exception, retryable: bool) -> None:
    data = error_to_data(exc)
    assert data.retryable is retryable
    assert data.type == type(exc).__name__
    assert ErrorData.from_data(json.loads(json.dumps(data.to_data()))) == data


def test_retry_after_becomes_the_next_retry_delay_capped() -> None:
    error = error_to_data(ProviderError("slow", status=429, retry_after=3600))
    app = _application_error(error, "model 'm'", max_delay=60)
    assert app.next_retry_delay == timedelta(seconds=60)
    assert not app.non_retryable
    assert app.type == "ProviderError"
    assert app.message == "model 'm': provider: slow"
    fatal = _application_error(error_to_data(ProviderError("x", status=400)), "model 'm'", 60)
    assert fatal.non_retryable
    assert fatal.next_retry_delay is None


def test_payload_limit_names_what_is_too_big() -> None:
    check_size({"a": "x" * 10}, "tool 't' result", 100)
    with pytest.raises(PayloadTooLargeError, match="tool 't' result: the payload is") as info:
        check_size({"a": "x" * 200}, "tool 't' result", 100)
    assert isinstance(info.value, ConfigurationError)


def test_a_server_limit_below_payload_limit_applies_and_says_so() -> None:
    check_size({"a": "x" * 200}, "tool 't' result", 10_000, server_limit=0)  # not known
    check_size({"a": "x" * 200}, "tool 't' result", 10_000, server_limit=50_000)  # higher
    with pytest.raises(PayloadTooLargeError, match="Temporal server's blob size limit") as info:
        check_size({"a": "x" * 200}, "tool 't' result", 10_000, server_limit=100)
    assert (info.value.limit, info.value.server) == (100, True)
    assert "tool 't' result" in str(info.value)
    assert "raise payload_limit" not in str(info.value)


def test_bad_stored_data_and_a_lost_lease_are_not_retried() -> None:
    assert not error_to_data(CorruptedDataError("seq=3 is corrupted")).retryable
    assert not error_to_data(LeaseLostError("taken over", token=1, current_token=2)).retryable
    assert error_to_data(MemoryStoreError("server unreachable")).retryable


@pytest.mark.parametrize(
    "exc",
    [
        PayloadTooLargeError("tool 't' result", 300, 100),
        PayloadTooLargeError("tool 't' result", 300, 100, server=True),
        DurableRunError("ProviderError", "bad request"),
        SessionBusyError("session 's' is busy", session_id="s", holder="host:1:abc"),
    ],
)
def test_new_errors_survive_pickle(exc: Exception) -> None:
    again = pickle.loads(pickle.dumps(exc))
    assert type(again) is type(exc)
    assert str(again) == str(exc)
    assert vars(again) == vars(exc)


def test_tool_errors_cross_as_data_and_come_back_as_the_model_would_read_them() -> None:
    for error in (ToolTimeoutError("slow", 0.5), ToolBlockedError("wipe", "not allowed")):
        data = json.loads(json.dumps(tool_error_to_data(error, False).to_data()))
        back = tool_error_from_data(error.tool_name, ErrorData.from_data(data))
        assert type(back) is type(error)
        assert str(back) == str(error)
    failed = ToolExecutionError("calc", {"a": 1}, ValueError("boom"))
    back = tool_error_from_data("calc", tool_error_to_data(failed, False))
    assert isinstance(back, RemoteToolError)
    assert isinstance(back, ToolError)  # the workflow's recovery passes it through as it is
    assert str(back) == "tool 'calc' failed: ValueError: boom"  # what a plain run shows
    assert (back.tool_name, back.type, back.retryable) == ("calc", "ToolExecutionError", False)
    again = pickle.loads(pickle.dumps(back))
    assert (str(again), again.tool_name, again.type) == (str(back), "calc", "ToolExecutionError")


def test_only_what_a_retry_can_cure_is_retried() -> None:
    def wrapped(cause: Exception) -> ToolExecutionError:
        return ToolExecutionError("t", {}, cause)

    assert _retryable(wrapped(ConnectionResetError("reset")))
    assert _retryable(wrapped(TimeoutError("read timed out")))
    assert _retryable(wrapped(MCPConnectionError("time", "unavailable")))
    assert not _retryable(wrapped(ValueError("bad input")))
    assert not _retryable(ToolTimeoutError("t", 1.0))  # the agent's own timeout is final
    assert not _retryable(MCPServerRestartedError("time", "t", "restarted"))
    assert not _retryable(MCPToolError("time", "t", "isError"))


def test_decisions_cross_as_data_and_come_back_the_same() -> None:
    from goagent_py import Approve, Deny, ToolOutput
    from goagent_py.durable._wire import decision_from_data, decision_to_data

    decisions = [
        Approve(),
        Approve(arguments={"amount": 25}, always=True),
        Deny("not on a Friday", stop=True),
        ToolOutput([TextBlock("Lisbon")], is_error=True),
    ]
    for decision in decisions:
        data = decision_to_data(decision)
        assert decision_from_data(json.loads(json.dumps(data))) == decision
    with pytest.raises(ConfigurationError, match="Approve"):
        decision_to_data("yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="unknown decision"):
        decision_from_data({"decision": "maybe"})


def test_a_waiting_messages_stand_in_keeps_its_calls_and_its_wait() -> None:
    from goagent_py.durable._wire import stand_in

    call = ToolCall("c1", "refund", {"order": "A-17"})
    plain = Message(Role.ASSISTANT, [TextBlock("x" * 100)], tool_calls=[call])
    waiting = Message(
        Role.ASSISTANT,
        [TextBlock("x" * 100)],
        tool_calls=[call],
        metadata={"goagent.pending": {"token": "t", "calls": []}},
    )
    # History by reference: no content, no arguments...
    assert stand_in(plain, "d").tool_calls == [ToolCall("c1", "refund", {})]
    assert stand_in(plain, "d").metadata == {"goagent.ref": "d"}
    # ...except what a resume runs and what the loop refuses a new prompt on.
    kept = stand_in(waiting, "d")
    assert kept.content == []
    assert kept.tool_calls == [call]
    assert kept.metadata == {"goagent.ref": "d", "goagent.pending": {"token": "t", "calls": []}}


class _Namespace:
    def __init__(self, limit: int) -> None:
        self.namespace_info = type(
            "Info", (), {"limits": type("L", (), {"blob_size_limit_error": limit})}
        )()


class _Service:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.asked = 0

    async def describe_namespace(self, request: object) -> _Namespace:
        self.asked += 1
        return _Namespace(self.limit)


class _SlottedClient:
    """A client object that takes no weak reference (a proxy or wrapper with slots)."""

    __slots__ = ("namespace", "workflow_service")

    def __init__(self, service: _Service) -> None:
        self.namespace = "default"
        self.workflow_service = service


async def test_the_payload_limit_of_a_client_without_weak_references_is_asked_each_time() -> None:
    """review4: the look-up of the kept answers must not fail where keeping one cannot."""
    from goagent_py.durable._wire import server_blob_limit

    service = _Service(2_000_000)
    client = _SlottedClient(service)
    assert await server_blob_limit(client) == 2_000_000
    assert await server_blob_limit(client) == 2_000_000
    assert service.asked == 2


def _turns(n: int) -> list[Message]:
    out: list[Message] = []
    for i in range(n):
        out.append(Message(Role.USER, [TextBlock(f"q{i}")]))
        out.append(
            Message(Role.ASSISTANT, [TextBlock("")], tool_calls=[ToolCall(f"c{i}", "t", {})])
        )
        out.append(Message(Role.TOOL, [TextBlock(f"r{i}")], tool_call_id=f"c{i}"))
        out.append(Message(Role.ASSISTANT, [TextBlock(f"a{i}")]))
    return out


def test_a_range_stand_in_takes_the_closed_turns_and_is_found_again() -> None:
    from goagent_py.durable._activities import _closed_prefix, _range_in
    from goagent_py.durable._wire import HISTORY_REF_KEY, history_digest, range_stand_in

    history = _turns(40)  # 160 messages, every call answered
    assert _closed_prefix(history) == 160
    # A turn left open at the end (a call without its result): the range stops before it.
    open_turn = history + _turns(1)[:2]
    assert _closed_prefix(open_turn) == 160
    # A call left open right before the next prompt: the range ends before its turn.
    unanswered = [*history, *_turns(1)[:2], *_turns(20)]
    assert _closed_prefix(unanswered) == 160
    # A result without its call inside: the loop would drop it, so no range covers it.
    orphan = [*history[:8], Message(Role.TOOL, [TextBlock("x")], tool_call_id="gone"), *history]
    assert _closed_prefix(orphan) == 0
    # Too few messages: one stand-in each, as before.
    assert _closed_prefix(_turns(10)) == 0
    digests = [history_digest(m) for m in history]
    ref = range_stand_in(digests[:100]).metadata[HISTORY_REF_KEY]
    stored = [Message(Role.USER, [TextBlock("older")]), *history]
    found = _range_in(ref, stored, [history_digest(m) for m in stored])
    assert found == history[:100]
    changed = [*history[:50], Message(Role.USER, [TextBlock("edited")]), *history[51:]]
    assert _range_in(ref, changed, [history_digest(m) for m in changed]) is None
