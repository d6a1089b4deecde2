"""Served approvals (issue 35): a tool call that waits for the person in the page.

A run whose calls need a decision ends (no task waits for the click: the waiting state is the
stored conversation, docs/approvals.md), its ``RUN_FINISHED`` carrying an AG-UI interrupt
outcome, one interrupt per waiting call (``id`` and ``toolCallId`` are the call's id). The page
shows a card per call; the person's decision goes to ``POST /api/threads/{id}/decisions``::

    {"decisions": {"<call id>": {"decision": "approve", "always": true}}}
    {"decisions": {"<call id>": {"decision": "deny", "message": "not now"}}}

or in AG-UI's own form, ``{"resume": [{"interruptId": "<call id>", "status": "resolved",
"payload": {"approved": true}}]}`` (``status: "cancelled"`` denies). The answer is the resumed
run's SSE stream. A reload (``GET /api/threads/{id}/messages``) lists the waiting calls under
``pending``, from the same stored record, so a restarted server shows the card and takes the
click. "Always for this thread" is recorded with the decision in the conversation; a later
call of that tool in the thread (of a command tool: that exact command) is approved by the
server without asking.

An OpenAI-compatible client (serve/_openai.py) gets the waiting calls as its ``tool_calls``;
its next request's tool messages are the decisions: ``"approved"`` (``"approved: always"``:
for the rest of the thread too), ``"denied"`` or
``"denied: <reason>"`` (an external tool's output as is), read by :func:`decisions_from_results`.
A tool message carries nothing but the call's id and its content, so the id the client is
given carries the wait's token (:func:`wire_id`): the answer names the wait it is for.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from goagent_py._metadata_keys import DECISIONS_KEY
from goagent_py._transcript import waiting_at
from goagent_py.approvals import (
    REPLY_HINT,
    Approve,
    Deny,
    ToolDecision,
    ToolOutput,
    answered_at,
    check_decisions,
    pending_of,
    reply_decision,
    reused_ids,
)
from goagent_py.errors import ConfigurationError, NotPendingError
from goagent_py.messages import Message
from goagent_py.results import PendingCall

__all__ = [
    "abandoned",
    "always_approved",
    "auto_decisions",
    "check_against",
    "decisions_from_body",
    "decisions_from_results",
    "interrupts_of",
    "pending_json",
    "waiting_calls",
    "wire_id",
]

# The routes (serve/_routes.py) answer ConfigurationError with a 400 and ApprovalError with a
# 409; this module imports neither the server nor the routes (the server imports it).
BadDecision = ConfigurationError


def pending_json(messages: list[Message]) -> list[dict[str, Any]]:
    """The waiting calls of a stored conversation, as the page shows them (empty: none)."""
    at = waiting_at(messages)
    if at < 0:
        return []
    _, calls = pending_of(messages[at])
    return [_call_json(p) for p in calls]


def _call_json(p: PendingCall) -> dict[str, Any]:
    return {
        "id": p.id,
        "name": p.name,
        "arguments": p.arguments,
        "kind": p.kind,
        "deadline": p.deadline,
        "token": p.token,
        "resolved": p.resolved,
    }


def interrupts_of(calls: list[PendingCall]) -> list[Any]:
    """AG-UI interrupts for the waiting calls: one each, named by the call's id."""
    from ag_ui.core import Interrupt  # ag-ui-protocol loads with the routes (the AG-UI side)

    out = []
    for p in calls:
        expires = (
            None
            if p.deadline is None
            else datetime.fromtimestamp(p.deadline, UTC).isoformat(timespec="seconds")
        )
        out.append(
            Interrupt(
                id=p.id,
                reason="tool_approval" if p.kind == "approval" else "external_tool",
                message=f"{p.name} waits for your decision",
                tool_call_id=p.id,
                expires_at=expires,
                metadata={
                    "toolName": p.name,
                    "arguments": p.arguments,
                    "kind": p.kind,
                    "token": p.token,
                    "resolved": p.resolved,
                },
            )
        )
    return out


AlwaysKey = tuple[str, tuple[str, ...]]


def _always_key(name: str, arguments: Mapping[str, Any], within: tuple[str, ...] = ()) -> AlwaysKey:
    """What "always" remembers of a call, as the coding agent's "always" does (issue 29,
    review8): for a command tool (``argv`` or ``command``) that exact command in that folder
    (``cwd``: the same argv elsewhere acts on other files); for a call with a ``path``, that
    tool on that path; else the tool. Paths are compared normalised as text (``./a.txt`` is
    ``a.txt``, ``src/../a.txt`` too): the page does not know the tool's root, so a link swapped
    between two calls is not seen here (the coding agent's own policy resolves it).
    ``within`` is the scope of a call made inside a tool (an agent used as a tool): that tool
    and the depth, so "always" on a sub-agent's ``erase`` is not the parent's ``erase``
    (review9c)."""
    # Here, not at the top: the coding package's import costs serve's start ~40 ms.
    from goagent_py.coding._commands import exact_key, is_command_call

    scope = ("\0within", *within) if within else ()
    if is_command_call(arguments):
        cwd = arguments.get("cwd")
        folder = posixpath.normpath(str(cwd)) if cwd else "."
        return (name, (*scope, *exact_key(arguments), "\0cwd", folder))
    path = arguments.get("path")
    if isinstance(path, str):
        return (name, (*scope, "\0path", posixpath.normpath(path)))
    return (name, scope)


def _within(message: Message, via: tuple[str, ...]) -> tuple[str, ...]:
    """The scope of a call made inside a tool of ``message``: the tool the outermost call
    ran, and how deep the call was made (the tools further in are not in this record)."""
    if not via:
        return ()
    outer = next((c.name for c in message.tool_calls if c.id == via[0]), "")
    return (outer, str(len(via)))


def always_approved(messages: list[Message]) -> set[AlwaysKey]:
    """What the person approved "always for this thread" (:func:`_always_key`), read from the
    decisions recorded in the conversation (its one record)."""
    keys: set[AlwaysKey] = set()
    for m in messages:
        decided = m.metadata.get(DECISIONS_KEY)
        if not isinstance(decided, dict):
            continue
        by_id = {c.id: c for c in m.tool_calls}
        for call_id, record in decided.items():
            if not isinstance(record, dict) or not record.get("always"):
                continue
            call = by_id.get(call_id)
            if call is not None:
                edited = record.get("arguments")
                arguments = edited if isinstance(edited, dict) else call.arguments
                keys.add(_always_key(call.name, arguments))
                continue
            # A sub-agent's call ("p1/k1") is not among the message's calls: its record names
            # its tool and the arguments shown (none in older records: then it counts for
            # that tool's calls that are not commands), in the scope of the sub-agent.
            name = record.get("name")
            if isinstance(name, str):
                given = record.get("arguments")
                if not isinstance(given, dict):
                    given = record.get("asked")
                via = tuple(call_id.split("/")[:-1])
                shown = given if isinstance(given, dict) else {}
                keys.add(_always_key(name, shown, _within(m, via)))
    return keys


def _one(call_id: str, raw: Any) -> ToolDecision:
    if not isinstance(raw, dict):
        raise BadDecision(f"the decision for {call_id!r} must be an object")
    kind = raw.get("decision")
    # The wait the decision is for (the listing's "token"): a late one for an earlier wait
    # whose call had this id is refused (a 409), not taken by the call that waits now.
    token = raw.get("token") or ""
    if not isinstance(token, str):
        raise BadDecision(f"the token for {call_id!r} must be a string (the listing's token)")
    if kind == "approve":
        arguments = raw.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            raise BadDecision(f"arguments for {call_id!r} must be an object")
        return Approve(arguments, always=bool(raw.get("always", False)), token=token)
    if kind == "deny":
        message = raw.get("message") or "The user denied this call."
        if not isinstance(message, str):
            raise BadDecision(f"the denial message for {call_id!r} must be a string")
        return Deny(message, stop=bool(raw.get("stop", False)), token=token)
    if kind == "output":
        content = raw.get("content")
        if not isinstance(content, str):
            raise BadDecision(f"the output for {call_id!r} must be a string")
        return ToolOutput(content, is_error=bool(raw.get("is_error", False)), token=token)
    raise BadDecision(
        f'the decision for {call_id!r} must be "approve", "deny" or "output", got {kind!r}'
    )


def _from_resume(entries: Any) -> dict[str, ToolDecision]:
    if not isinstance(entries, list):
        raise BadDecision("resume must be a list of {interruptId, status, payload}")
    out: dict[str, ToolDecision] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("interruptId"), str):
            raise BadDecision("each resume entry needs an interruptId (the call's id)")
        given = entry.get("payload")
        payload: dict[str, Any] = given if isinstance(given, dict) else {}
        call_id = entry["interruptId"]
        if entry.get("status") == "cancelled" or payload.get("approved") is False:
            out[call_id] = _one(call_id, {"decision": "deny", **payload})
        elif "content" in payload:
            out[call_id] = _one(call_id, {"decision": "output", **payload})
        else:
            out[call_id] = _one(call_id, {"decision": "approve", **payload})
    return out


def decisions_from_body(body: Mapping[str, Any]) -> dict[str, ToolDecision]:
    """The decisions of a request body: ``{"decisions": {id: {...}}}`` or AG-UI's
    ``{"resume": [...]}``.

    Raises:
        ConfigurationError: the body is not one of those shapes (a 400).
    """
    if "resume" in body:
        return _from_resume(body["resume"])
    raw = body.get("decisions")
    if not isinstance(raw, dict) or not raw:
        raise BadDecision(
            'send {"decisions": {"<call id>": {"decision": "approve"}}} (or "deny" with a '
            '"message"), or AG-UI\'s {"resume": [...]}',
        )
    return {str(k): _one(str(k), v) for k, v in raw.items()}


_WIRE_ID = re.compile(r"(?s)(.+)_w([0-9a-f]{16,64})")
_TOKEN = re.compile(r"[0-9a-f]{16,64}")  # approvals.new_token: 24; a durable run: 32


def wire_id(call_id: str, token: str) -> str:
    """The id an OpenAI client is given for a call that waits: the call's id with the wait's
    token (``call_1_w<token>``). The client's tool message answers it by this id alone, so
    the decision names the wait it is for: a late answer to an earlier wait whose call had
    the same id (local models number calls per turn) is refused, not taken by the call that
    waits now. A wait listed without a token keeps the call's id."""
    return f"{call_id}_w{token}" if _TOKEN.fullmatch(token) else call_id


def _from_wire(answered: str) -> tuple[str, str]:
    """The call id and wait token a tool message's id names (:func:`wire_id`); the token is
    "" for a bare call id."""
    found = _WIRE_ID.fullmatch(answered)
    return (found.group(1), found.group(2)) if found else (answered, "")


def _from_tool_message(call_id: str, content: str, token: str) -> ToolDecision:
    decision = reply_decision(content, token=token)
    if decision is None:
        raise BadDecision(
            f"call {call_id!r} waits for your decision: answer it with a tool message whose "
            f"content is {REPLY_HINT} (got {content.strip()[:60]!r})"
        )
    return decision


def decisions_from_results(
    messages: list[Message], results: Mapping[str, str]
) -> dict[str, ToolDecision]:
    """The decisions an OpenAI client's tool messages carry (call id -> content): for a call
    that waits for approval, ``"approved"`` or ``"denied: <reason>"``; for an external tool,
    its output.

    Raises:
        ApprovalError: nothing waits, or a message answers a call that does not wait (a 409).
        ConfigurationError: a content that is neither, or a waiting call left out (a 400).
    """
    at = waiting_at(messages)
    _, pending = pending_of(messages[at]) if at >= 0 else ("", [])
    waiting = {p.id: p for p in pending}
    out: dict[str, ToolDecision] = {}
    for answered, content in results.items():
        call_id, token = _from_wire(answered)
        if call_id in out:
            raise BadDecision(f"two tool messages answer the call {call_id!r}: send one")
        p = waiting.get(call_id)
        kind = (
            p.kind
            if p is not None and token in ("", p.token)
            else _decided_kind(messages, call_id, token)
        )
        if kind is None:
            out[call_id] = Approve(token=token)  # check_against names what is wrong with it
        elif kind == "approval":
            out[call_id] = _from_tool_message(call_id, content, token)
        else:
            out[call_id] = ToolOutput(content, token=token)
    if answered_at(messages, out) >= 0:
        return out  # a retry: the resume answers it, running nothing
    if at < 0:
        raise NotPendingError(
            "no call in this thread waits for a decision (it was decided, or the run ended); "
            "send a user message"
        )
    check_decisions(pending, out, reused=reused_ids(messages, at))
    return out


def _decided_kind(messages: list[Message], call_id: str, token: str) -> str | None:
    """The kind of ``call_id`` in the wait ``token`` decided already (its record), so that a
    retried answer is read as it was the first time; None when no such decision is known."""
    if not token:
        return None
    for m in reversed(messages):
        decided = m.metadata.get(DECISIONS_KEY)
        record = decided.get(call_id) if isinstance(decided, dict) else None
        if isinstance(record, dict) and record.get("token") == token:
            return "external" if record.get("decision") == "output" else "approval"
    return None


def check_against(messages: list[Message], decisions: Mapping[str, ToolDecision]) -> None:
    """Refuse, before a run starts, decisions that cannot apply to the stored record
    (``messages``: the whole record, :func:`~goagent_py.approvals.record_of`, as the resume
    checks it: a window may have cut an earlier call with a waiting call's id off the view).
    Decisions a wait took already (a retry) pass: the resume answers them, running nothing.

    Raises:
        ApprovalError: nothing waits, a call does not wait, a deadline passed, or the wait
            took other decisions (a 409).
        ConfigurationError: a decision is missing or of the wrong kind (a 400).
    """
    if answered_at(messages, decisions) >= 0:
        return
    at = waiting_at(messages)
    if at < 0:
        raise NotPendingError("nothing in this thread waits for a decision")
    _, pending = pending_of(messages[at])
    check_decisions(pending, decisions, reused=reused_ids(messages, at))


def waiting_calls(messages: list[Message]) -> dict[str, str]:
    """Every call (id -> tool name) of the message that waits, for the resumed run's stream."""
    at = waiting_at(messages)
    return {} if at < 0 else {c.id: c.name for c in messages[at].tool_calls}


_WENT_ON = "the user sent a new message instead of deciding on this call"


def abandoned(messages: list[Message]) -> dict[str, ToolDecision] | None:
    """Denials for every call that waits, when the person sends a new message instead of
    deciding (the message is their answer); None when nothing waits."""
    at = waiting_at(messages)
    if at < 0:
        return None
    _, pending = pending_of(messages[at])
    # The server's own decisions name the wait they are for (a call id may be reused).
    return {p.id: Deny(_WENT_ON, stop=True, token=p.token) for p in pending}


def auto_decisions(
    messages: list[Message], *, spent: int = 0, budget: int | None = None
) -> dict[str, ToolDecision] | None:
    """Approvals the person gave already ("always for this thread") for every call that
    waits now; None when any waiting call still needs them, or when the runs since the
    person last acted made ``spent`` model calls of the agent's ``budget`` (its
    ``max_iterations``): each approval resumes the run with a budget of its own, so without
    this a model that kept calling an "always" tool was called without end (review9c). The
    person is then asked again."""
    at = waiting_at(messages)
    if at < 0 or (budget is not None and spent >= budget):
        return None
    _, pending = pending_of(messages[at])
    allowed = always_approved(messages)
    waiting = messages[at]
    if not pending or any(
        p.kind != "approval"
        or _always_key(p.name, p.arguments, _within(waiting, p.via)) not in allowed
        for p in pending
    ):
        return None
    return {p.id: Approve(token=p.token) for p in pending}
