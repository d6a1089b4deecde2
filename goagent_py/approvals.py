"""A person in the loop: tool calls that wait for decisions, and the run context gates see.

A tool made with ``@tool(requires_approval=True)`` (or a predicate over its arguments), a call an
agent's ``requires_approval`` policy picks, and every :class:`ExternalTool` call make the run
stop before its tool batch runs: the assistant message is stored with the waiting calls in its
metadata (one record: the conversation itself, docs/approvals.md), ``result.stop_reason`` is
``StopReason.DEFERRED`` and ``result.pending`` lists the calls with their validated arguments.
``agent.resume(decisions)`` (or ``session.resume(...)``) goes on with the same conversation, in
this process or another one, once the decisions are in::

    result = await agent.run("Delete the build folder")
    if result.stop_reason is StopReason.DEFERRED:
        call = result.pending[0]
        result = await agent.resume({call.id: Approve()})

Decisions: :class:`Approve` (optionally with edited arguments), :class:`Deny` (a message the
model reads; ``stop=True`` also ends the run) and, for an external tool, :class:`ToolOutput`
(what the client's run of the tool gave).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from goagent_py._metadata_keys import (
    DECISIONS_KEY,
    PENDING_KEY,
    SYNTHETIC_METADATA_KEY,
    UI_ONLY_KEY,
)
from goagent_py._transcript import waiting_at
from goagent_py.errors import (
    ApprovalConflictError,
    ApprovalExpiredError,
    ConfigurationError,
    NotPendingError,
    ToolError,
)
from goagent_py.messages import (
    ContentBlock,
    Message,
    Role,
    StopReason,
    TextBlock,
    ToolCall,
    messages_from_json,
    messages_to_json,
)
from goagent_py.results import PendingCall, RunResult
from goagent_py.tools import ToolDefinition, validate_tool_name

__all__ = [
    "Approve",
    "Deny",
    "ExternalTool",
    "PendingCall",
    "RequiresApproval",
    "RunContext",
    "ToolDecision",
    "ToolOutput",
]


@dataclass(slots=True, frozen=True, kw_only=True)
class RunContext:
    """The run as a tool gate (``before_tool_call``) or an approval policy sees it.

    A gate receives it when its second parameter is annotated ``RunContext``::

        def gate(call: ToolCall, run: RunContext) -> str | None:
            if call.name == "refund" and run.deps.role != "admin":
                return "only admins may refund"
            return None

    Attributes:
        message: the assistant message that made the call.
        messages: the conversation so far (a copy), as the model saw it plus that message.
        tools: the tool definitions offered to the model in this turn.
        deps: the run's request-scoped dependencies (``agent.run(prompt, deps=...)``), or None.
        run_id: the run's id.
        iteration: the 0-based model call that made the call.
    """

    message: Message
    messages: list[Message] = field(default_factory=list)
    tools: list[ToolDefinition] = field(default_factory=list)
    deps: Any = None
    run_id: str = ""
    iteration: int = 0


RequiresApproval = Callable[[ToolCall, RunContext], "bool | Awaitable[bool]"]
"""An agent's approval policy: True when the call (its arguments validated) must wait for a
person's decision."""


@dataclass(slots=True, frozen=True)
class Approve:
    """Run the call; ``arguments`` replaces the model's (validated again before the run).
    ``always`` records the decider's wish to approve this tool's later calls in the same
    conversation (the served page's "always for this thread" reads it back). ``token``
    (optional, every decision has it) names the wait the decision is for
    (``PendingCall.token``): a decision whose wait is over is refused, not taken by a later
    call with the same id."""

    arguments: dict[str, Any] | None = None
    always: bool = False
    token: str = ""


@dataclass(slots=True, frozen=True)
class Deny:
    """Do not run the call: the model reads ``message`` as the call's error result, and
    ``stop=True`` ends the run after this batch (the run's text is the assistant's last)."""

    message: str = "The user denied this call."
    stop: bool = False
    token: str = ""


@dataclass(slots=True, frozen=True)
class ToolOutput:
    """What the client's run of an external tool gave: text or content blocks, and whether
    it failed (the model reads it as the call's result)."""

    content: str | Sequence[ContentBlock]
    is_error: bool = False
    token: str = ""

    def blocks(self) -> list[ContentBlock]:
        """The output as content blocks."""
        return [TextBlock(self.content)] if isinstance(self.content, str) else list(self.content)


ToolDecision = Approve | Deny | ToolOutput
"""What a person (or a client) decides for one waiting call."""


class ExternalTool:
    """A tool the client runs (a browser action, a mobile app): the model may call it, the run
    stops with the call in ``result.pending`` (kind "external"), and the client's
    :class:`ToolOutput` goes back in through ``resume``.

    Args:
        name: the tool's name.
        description: what the model reads about it.
        parameters: the JSON schema of its arguments.
    """

    external = True

    def __init__(
        self, name: str, description: str, parameters: Mapping[str, Any] | None = None
    ) -> None:
        validate_tool_name(name)
        self.definition = ToolDefinition(
            name, description, dict(parameters or {"type": "object", "properties": {}})
        )

    async def execute(self, args: dict[str, Any]) -> list[ContentBlock]:
        """Never run by the agent: the client runs it (reaching here is a bug)."""
        raise ToolError(f"tool {self.definition.name!r} runs on the client, not in the agent")

    def __repr__(self) -> str:
        return f"ExternalTool({self.definition.name!r})"


# -- the record --------------------------------------------------------------------------------


def new_token() -> str:
    """A random token naming one wait: the compare-and-set key of its decisions."""
    return os.urandom(12).hex()


def pending_metadata(
    token: str,
    calls: Sequence[PendingCall],
    *,
    inner: Mapping[str, Any] | None = None,
    done: Sequence[Message] = (),
) -> dict[str, Any]:
    """The JSON kept under ``goagent.pending`` on the waiting assistant message.

    ``inner`` holds, by call id, the state of each tool that waits inside (an agent used as a
    tool: its run's conversation); ``done`` the tool messages of the calls of the batch that
    finished before it stopped, so a resume does not run them twice.
    """
    data: dict[str, Any] = {
        "token": token,
        "calls": [_call_record(p) for p in calls],
    }
    if inner:
        data["inner"] = dict(inner)
    if done:
        data["done"] = json.loads(messages_to_json(list(done)))
    return data


def _call_record(p: PendingCall) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": p.id,
        "name": p.name,
        "arguments": p.arguments,
        "kind": p.kind,
        "deadline": p.deadline,
    }
    if p.via:
        out["via"] = list(p.via)
    if p.resolved:
        out["resolved"] = p.resolved
    return out


def pending_of(message: Message) -> tuple[str, list[PendingCall]]:
    """The wait's token and the waiting calls of ``message`` (``("", [])``: none)."""
    data = message.metadata.get(PENDING_KEY)
    if not isinstance(data, dict):
        return "", []
    token = str(data.get("token", ""))
    calls = [
        PendingCall(
            ToolCall(str(c["id"]), str(c["name"]), dict(c.get("arguments") or {})),
            "external" if c.get("kind") == "external" else "approval",
            None if c.get("deadline") is None else float(c["deadline"]),
            tuple(str(v) for v in c.get("via") or ()),
            token,
            str(c.get("resolved") or ""),
        )
        for c in data.get("calls", [])
    ]
    return token, calls


# -- calls that wait inside a tool (an agent used as a tool) ------------------------------------


def under(call_id: str, inner: Sequence[PendingCall]) -> list[PendingCall]:
    """The waiting calls of a tool's inner run as the run that made ``call_id`` lists them:
    ids prefixed with ``call_id/``, ``via`` starting with it."""
    return [
        replace(p, call=replace(p.call, id=f"{call_id}/{p.id}"), via=(call_id, *p.via))
        for p in inner
    ]


def inner_decisions(
    call_id: str, pending: Sequence[PendingCall], decisions: Mapping[str, ToolDecision]
) -> dict[str, ToolDecision]:
    """The decisions for the calls that wait under ``call_id``, by the ids its inner run
    knows them by (the inverse of :func:`under`)."""
    cut = len(call_id) + 1
    # The wait's token was checked against the outer wait, which lists these calls; the
    # inner run's own wait has a token of its own.
    return {
        p.id[cut:]: replace(decisions[p.id], token="")
        for p in pending
        if p.via[:1] == (call_id,) and p.id in decisions
    }


def kept_results(record: Mapping[str, Any]) -> dict[str, Message]:
    """The tool messages a wait kept for the calls that had finished, by call id."""
    done = record.get("done")
    if not done:
        return {}
    return {m.tool_call_id: m for m in messages_from_json(json.dumps(done))}


def reused_ids(messages: Sequence[Message], at: int) -> set[str]:
    """The ids of the calls waiting in ``messages[at]`` that an earlier call of the
    conversation had: a call made before it (any message before ``at``) or decided in an
    earlier wait of that message itself (a tool that waited inside it again, ``"p1/k1"``).

    Local models' servers number calls per turn (Ollama's ``ollama-tool-0``), so a decision
    by id alone for such a call may be a late one meant for the earlier call."""
    _, pending = pending_of(messages[at])
    ids = {p.id for p in pending}
    if not ids:
        return set()
    seen: set[str] = set()
    for i, m in enumerate(messages[: at + 1]):
        if i < at:
            seen.update(c.id for c in m.tool_calls)
            if m.tool_call_id:
                seen.add(m.tool_call_id)
        decided = m.metadata.get(DECISIONS_KEY)
        if isinstance(decided, dict):
            seen.update(str(k) for k in decided)
    return ids & seen


async def record_of(memory: Any) -> list[Message]:
    """The whole record of a short-term memory: its ``transcript()`` (every stored message
    but the compaction boundaries), or its model's view for a memory without one (a
    third-party memory). What the decisions are checked against: a window or a compaction
    may have cut an earlier call with a waiting call's id, or a decided wait, off the view."""
    whole = getattr(memory, "transcript", None)
    if callable(whole):
        return list(await whole())
    return list(await memory.messages())


def check_decisions(
    pending: Sequence[PendingCall],
    decisions: Mapping[str, ToolDecision],
    *,
    now: float | None = None,
    reused: Collection[str] = (),
) -> None:
    """Refuse decisions that cannot be applied, before anything is claimed or run.

    ``reused`` names the waiting calls whose id an earlier call of the conversation had
    (:func:`reused_ids`): a decision for one of them must carry the wait's token.

    Raises:
        NotPendingError: a decision names a call that is not waiting.
        ApprovalConflictError: a decision carries the token of another wait than the one its
            call waits in now (a late decision for an earlier call with the same id), or
            carries none for a call in ``reused`` (it cannot be told from such a one).
        ApprovalExpiredError: an approval (or output) came after its call's deadline.
        ConfigurationError: a waiting call has no decision, or a decision of the wrong kind.
    """
    waiting = {p.id: p for p in pending}
    unknown = [i for i in decisions if i not in waiting]
    if unknown:
        raise NotPendingError(
            f"no call with id {unknown[0]!r} waits for a decision; the waiting calls are "
            f"{sorted(waiting) or 'none'}"
        )
    for call_id, decision in decisions.items():
        token = getattr(decision, "token", "")
        if not isinstance(token, str):
            raise ConfigurationError(
                f"resume(): the token of the decision for {call_id!r} must be the str of "
                f"PendingCall.token, got {type(token).__name__}"
            )
        stale = stale_token(decision, waiting[call_id].token)
        if stale:
            raise ApprovalConflictError(
                f"the decision for {call_id!r} is for the wait {stale!r}, which is over (it "
                f"was decided, or its run went on); the call that waits now under this id is "
                f"a later one, in the wait {waiting[call_id].token!r}: list the waiting calls "
                "again and decide it with its own token, if at all"
            )
        if call_id in reused and not token and waiting[call_id].token:
            raise ApprovalConflictError(
                f"call {call_id!r} waits now, and an earlier call of this conversation had "
                "the same id (local models number calls per turn), so a decision by id alone "
                "may be a late one meant for that call: send it with the token of the wait it "
                f"is for (this one's is {waiting[call_id].token!r}: "
                "Approve(token=call.token) or Deny(message, token=call.token), the call from "
                "result.pending or session.pending)"
            )
    missing = [i for i in waiting if i not in decisions]
    if missing:
        raise ConfigurationError(
            f"resume(): decide every waiting call of the turn at once; no decision for "
            f"{missing} (Approve(), Deny(message) or, for an external tool, ToolOutput(...))"
        )
    at = time.time() if now is None else now
    for call_id, decision in decisions.items():
        p = waiting[call_id]
        if not isinstance(decision, Approve | Deny | ToolOutput):
            raise ConfigurationError(
                f"resume(): the decision for {call_id!r} is a {type(decision).__name__}; use "
                "Approve(), Deny(message) or ToolOutput(...)"
            )
        if p.kind == "external" and isinstance(decision, Approve):
            raise ConfigurationError(
                f"resume(): {p.name!r} is an external tool: send what it gave with "
                "ToolOutput(...), or Deny(message)"
            )
        if p.kind == "approval" and isinstance(decision, ToolOutput):
            raise ConfigurationError(
                f"resume(): {p.name!r} waits for approval: Approve() or Deny(message)"
            )
        if p.deadline is not None and at >= p.deadline and not isinstance(decision, Deny):
            raise ApprovalExpiredError(call_id, p.deadline)
        arguments = decision.arguments if isinstance(decision, Approve) else None
        if arguments is not None and not isinstance(arguments, dict):
            raise ConfigurationError(
                f"Approve(arguments=...) for {call_id!r} must be a dict, got "
                f"{type(arguments).__name__}"
            )


def stale_token(decision: object, token: str) -> str:
    """The token ``decision`` carries when it names another wait than ``token`` (the one its
    call waits in now); "" when it carries none, the same one, or the wait has none (a wait
    recorded before tokens were listed)."""
    carried = getattr(decision, "token", "")
    if not isinstance(carried, str) or not carried or not token or carried == token:
        return ""
    return carried


def decision_hint(pending: Sequence[PendingCall], *, now: float | None = None) -> str:
    """How to go on with ``pending``, as an error message says it: the decisions each
    waiting call still takes (after its deadline, only ``Deny``)."""
    at = time.time() if now is None else now
    parts = []
    for p in pending:
        if p.deadline is not None and at >= p.deadline:
            parts.append(f"{p.id!r}: Deny(...) (its deadline passed: an approval is refused)")
        elif p.kind == "external":
            parts.append(f"{p.id!r}: ToolOutput(...) or Deny(...)")
        else:
            parts.append(f"{p.id!r}: Approve() or Deny(...)")
    return "resume({" + ", ".join(parts) + "})"


_YES = frozenset({"approve", "approved", "yes", "y", "ok", "allow", "allowed"})
_NO = frozenset({"deny", "denied", "no", "n", "reject", "rejected"})
REPLY_HINT = '"approved", "approved: always" or "denied: <reason>"'
"""What :func:`reply_decision` understands, as a message tells a person or a client."""


def reply_decision(content: str, *, token: str = "") -> Approve | Deny | None:
    """The decision a person's (or a client's) text reply says: ``"approved"`` (approve,
    yes, ok, allow; ``"approved: always"`` also asks for the rest of the conversation),
    ``"denied"`` (deny, no, reject) or ``"denied: <reason>"``; None when it says neither.
    ``token`` names the wait the reply answers."""
    said = content.strip()
    word, _, reason = said.partition(":")
    word = word.strip().lower().rstrip(".!")
    if word in _YES:
        return Approve(always=reason.strip().lower() == "always", token=token)
    if word in _NO:
        return Deny(reason.strip() or "The user denied this call.", token=token)
    return None


def verdict_of(decision: ToolDecision) -> dict[str, Any]:
    """What the record keeps of ``decision``: everything it does (its verdict), not its
    token. An output's content is the call's result message: its digest is kept here, so a
    retry can be told from another output (:func:`same_verdict`)."""
    if isinstance(decision, Approve):
        out: dict[str, Any] = {"decision": "approve"}
        if decision.arguments is not None:
            out["arguments"] = decision.arguments
        if decision.always:
            out["always"] = True
        return out
    if isinstance(decision, Deny):
        return {"decision": "deny", "message": decision.message, "stop": decision.stop}
    content = messages_to_json([Message(Role.TOOL, decision.blocks())])
    digest = hashlib.sha256(content).hexdigest()[:32]
    return {"decision": "output", "is_error": decision.is_error, "content": digest}


# What a decision's record holds beside its verdict: the wait it was taken in, and for a call
# made inside a tool, that call's tool and the arguments shown.
_NOT_VERDICT = frozenset({"token", "name", "asked"})


def same_verdict(recorded: Mapping[str, Any], decision: ToolDecision) -> bool:
    """Whether ``decision`` does what the recorded decision did (the same kind, arguments,
    message, output): the one rule that tells a retried decision, taken as done, from a
    second one, refused (approve14). ``recorded`` is a decision's record
    (``goagent.decisions``) or a decision as data."""
    verdict = {k: v for k, v in recorded.items() if k not in _NOT_VERDICT}
    if verdict.get("decision") == "output" and "content" not in verdict:
        return False  # recorded before outputs kept their digest: it cannot tell
    try:
        return bool(verdict == json.loads(json.dumps(verdict_of(decision))))
    except (TypeError, ValueError):
        return False  # arguments that are not JSON: never what a record holds


def answered_at(messages: Sequence[Message], decisions: Mapping[str, ToolDecision]) -> int:
    """The index of the message whose wait took ``decisions`` already (a retried resume whose
    first attempt went through: the client lost the answer), or -1 when no wait did.

    Only decisions that all carry one wait's token can be told apart: by id alone a retry
    cannot be told from a late decision for another wait with the same id.

    Raises:
        ApprovalConflictError: that wait took another decision for one of these calls (the
            first decision wins), or none for it.
    """
    tokens = {getattr(d, "token", "") for d in decisions.values()}
    if len(tokens) != 1:
        return -1
    (token,) = tokens
    if not isinstance(token, str) or not token:
        return -1
    for i in range(len(messages) - 1, -1, -1):
        decided = messages[i].metadata.get(DECISIONS_KEY)
        if not isinstance(decided, dict):
            continue
        took = {
            str(k): v for k, v in decided.items() if isinstance(v, dict) and v.get("token") == token
        }
        if not took:
            continue
        for call_id, decision in decisions.items():
            recorded = took.get(call_id)
            if recorded is None:
                raise ApprovalConflictError(
                    f"the wait {token!r} was decided already, and it had no call "
                    f"{call_id!r}; list the waiting calls again"
                )
            if not same_verdict(recorded, decision):
                raise ApprovalConflictError(
                    f"call {call_id!r} of the wait {token!r} was already decided, "
                    f"otherwise ({recorded.get('decision')}); the first decision wins, and "
                    "the run went on with it: load the conversation again to see how"
                )
        return i
    return -1


def answered_result(messages: Sequence[Message], at: int) -> RunResult[Any]:
    """What a retried resume answers (:func:`answered_at` found its decisions on
    ``messages[at]``): nothing runs again; the result reports the record as it stands, the
    messages stored after the decided one (what the first resume's run added, and what came
    since), the last answer's text and what waits now; its stop reason ``DEFERRED`` when
    something waits, ``ABORTED`` after an abort, ``END_TURN`` after an answer, None when no
    answer is stored after the decided message (the first resume failed, or still runs). Its
    counts are this call's: none."""
    after = [m for m in messages[at + 1 :] if not m.metadata.get(UI_ONLY_KEY)]
    waiting = waiting_at(list(messages))
    pending = pending_of(messages[waiting])[1] if waiting >= at else []
    text = next((m.text for m in reversed(after) if m.role is Role.ASSISTANT), "")
    last = after[-1] if after else None
    stop: StopReason | None = None  # no answer stored after it: the run failed, or still runs
    if pending:
        stop = StopReason.DEFERRED
    elif last is not None and last.metadata.get(SYNTHETIC_METADATA_KEY) == "aborted":
        stop = StopReason.ABORTED
    elif last is not None and last.role is Role.ASSISTANT and not last.tool_calls:
        stop = StopReason.END_TURN
    return RunResult(text=text, stop_reason=stop, messages=after, output=text, pending=pending)


def settled(message: Message, token: str, decisions: Mapping[str, ToolDecision]) -> Message:
    """``message`` with its wait replaced by the record of ``decisions``: the compare-and-set
    step, run where the message is stored (inside the storage's transaction).

    Raises:
        ApprovalConflictError: the message no longer waits under ``token`` (another decider
            settled it first).
    """
    found, pending = pending_of(message)
    if not _waits(message) or found != token:
        raise ApprovalConflictError(
            "these calls were already decided by another resume (the first decision wins); "
            "load the conversation again to see how it went on"
        )
    metadata = {k: v for k, v in message.metadata.items() if k != PENDING_KEY}
    # A message can wait more than once (a tool that waits inside again): keep every decision.
    earlier = metadata.get(DECISIONS_KEY)
    # A call made inside a tool is not among the message's calls: its record names its tool
    # and the arguments the person was shown (what "always" covers, review9c).
    inner = {p.id: p for p in pending if p.via}
    # Each record names the wait it was taken in: a retry with that token and verdict is
    # answered as done (answered_at), another verdict refused.
    mark = {"token": token} if token else {}
    metadata[DECISIONS_KEY] = {
        **(earlier if isinstance(earlier, dict) else {}),
        **{
            i: {**verdict_of(d), **mark, "name": inner[i].name, "asked": inner[i].arguments}
            if i in inner
            else {**verdict_of(d), **mark}
            for i, d in decisions.items()
        },
    }
    return replace(message, metadata=metadata)


def waits_under(token: str) -> Callable[[Message], bool]:
    """A match for the stored message that waits under ``token``: one that waits (a record
    an older version made has no token, "", and neither has any message that waits for
    nothing, such as the one a first resume just settled: approve15)."""

    def match(message: Message) -> bool:
        return _waits(message) and pending_of(message)[0] == token

    return match


def _waits(message: Message) -> bool:
    """Whether ``message`` carries a wait's record (its calls wait for decisions)."""
    return isinstance(message.metadata.get(PENDING_KEY), dict)


Kind = Literal["approval", "external"]
