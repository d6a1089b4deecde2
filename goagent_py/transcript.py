"""The transcript validator: the pairing and role rules every vendor enforces on a request.

Vendors refuse a request whose messages break these rules (a dangling tool call is a 400 on the
next request, whatever the vendor); the request builders in :mod:`goagent_py.providers` are
lenient and send what they are given. :func:`validate_transcript` lists every violation, and
:func:`check_transcript` raises :class:`InvalidTranscriptError` when there is one::

    from goagent_py import check_transcript, validate_transcript

    problems = validate_transcript(request.messages, tools=request.tools, vendor="anthropic")
    for v in problems:
        print(v.index, v.rule, v.detail)
    check_transcript(request.messages)  # raises InvalidTranscriptError

The rules (each :class:`Violation` names one in :attr:`Violation.rule`):

* ``"empty"``: a request needs at least one message;
* ``"unanswered_call"``: every tool call of an assistant message is answered by a tool message
  right after it (the next message, or the run of tool messages that follows);
* ``"duplicate_result"``: each call is answered exactly once;
* ``"orphan_result"``: a tool message answers a call of the assistant message just before it;
* ``"duplicate_call_id"`` and ``"empty_call_id"``: call ids are unique in the transcript and
  not empty;
* ``"first_not_user"``: the first message comes from the user (Anthropic and Bedrock; checked
  for ``vendor="anthropic"`` and ``vendor="bedrock"``, and by default);
* ``"tool_blocks_without_tools"``: a request that defines no tools carries no tool calls and no
  tool results (Anthropic and Bedrock refuse it); checked when ``tools`` is given;
* ``"unnamed_tool_message"``: Ollama names a tool message after the call it answers, so the
  message must answer a call that has a name (``vendor="ollama"``).

Messages marked UI-only (``metadata["goagent.ui_only"]``) never reach a model and are skipped.

**Waiting calls are not unanswered.** A run that stops on tool calls waiting for decisions
(docs/approvals.md) stores the assistant message with the calls listed under
``metadata["goagent.pending"]``. While that message is the last one sent to the model, all
its calls wait (those needing no decision run with the decided ones): a stored transcript that
ends so is valid (``allow_pending=True``, the default). A request is not a stored
transcript: the loop never builds one from it (a new prompt raises
:class:`~goagent_py.errors.ApprovalPendingError`; ``resume`` answers every call first), and
``allow_pending=False`` checks a list as a request must be, counting those calls as unanswered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from goagent_py._metadata_keys import PENDING_KEY, UI_ONLY_KEY
from goagent_py.errors import ConfigurationError, GoAgentError
from goagent_py.messages import Message, Role

__all__ = [
    "InvalidTranscriptError",
    "Vendor",
    "Violation",
    "check_transcript",
    "validate_transcript",
]

Vendor = Literal["any", "anthropic", "bedrock", "openai", "ollama"]
_VENDORS = ("any", "anthropic", "bedrock", "openai", "ollama")


@dataclass(slots=True, frozen=True)
class Violation:
    """One broken rule.

    Attributes:
        index: the position of the offending message in the list given (-1: the whole list).
        rule: the rule's name (see the module docstring).
        detail: what is wrong, in words.
    """

    index: int
    rule: str
    detail: str

    def __str__(self) -> str:
        where = f"message {self.index}" if self.index >= 0 else "transcript"
        return f"{where}: {self.rule}: {self.detail}"


class InvalidTranscriptError(GoAgentError):
    """A transcript breaks a rule a vendor enforces; :attr:`violations` lists every one.

    Attributes:
        violations: the broken rules, in message order.
    """

    def __init__(self, violations: Sequence[Violation]) -> None:
        self.violations = list(violations)
        shown = "; ".join(str(v) for v in self.violations[:5])
        more = f" (and {len(self.violations) - 5} more)" if len(self.violations) > 5 else ""
        super().__init__(f"the transcript would be refused: {shown}{more}")

    def __reduce__(self) -> Any:
        return self._reduce_with(self.violations)


def validate_transcript(
    messages: Sequence[Message],
    *,
    tools: Sequence[object] | None = None,
    vendor: Vendor = "any",
    allow_pending: bool = True,
) -> list[Violation]:
    """Every violation of the vendors' pairing and role rules in ``messages`` (empty: valid).

    Args:
        messages: the messages of a request (or a stored transcript), oldest first.
        tools: the tool definitions the request offers; when given and empty, tool calls and
            tool results are violations. None: not checked.
        vendor: "any" checks the rules every vendor shares plus user-first (the strictest
            common set); "openai" leaves user-first out; "ollama" adds named tool messages.
        allow_pending: calls that wait for decisions on the last message are not unanswered
            (a stored transcript); False checks the list as a request (see the module
            docstring).

    Raises:
        ConfigurationError: ``vendor`` is not one of the names above.
    """
    if vendor not in _VENDORS:
        raise ConfigurationError(f"validate_transcript(vendor={vendor!r}): use one of {_VENDORS}")
    sent = [(i, m) for i, m in enumerate(messages) if not m.metadata.get(UI_ONLY_KEY)]
    out: list[Violation] = []
    if not sent:
        return [Violation(-1, "empty", "a request needs at least one message")]
    first_index, first = sent[0]
    if vendor != "openai" and first.role is not Role.USER:
        out.append(
            Violation(first_index, "first_not_user", f"opens on a {first.role.value} message")
        )
    if tools is not None and not tools:
        out.extend(_tool_blocks(sent))
    out.extend(_pairing(sent, named=vendor == "ollama", allow_pending=allow_pending))
    out.sort(key=lambda v: v.index)
    return out


def check_transcript(
    messages: Sequence[Message],
    *,
    tools: Sequence[object] | None = None,
    vendor: Vendor = "any",
    allow_pending: bool = True,
) -> None:
    """Raise :class:`InvalidTranscriptError` if :func:`validate_transcript` finds a violation."""
    violations = validate_transcript(
        messages, tools=tools, vendor=vendor, allow_pending=allow_pending
    )
    if violations:
        raise InvalidTranscriptError(violations)


def _tool_blocks(sent: list[tuple[int, Message]]) -> list[Violation]:
    out = []
    for i, m in sent:
        if m.tool_calls or m.role is Role.TOOL:
            out.append(Violation(i, "tool_blocks_without_tools", "the request defines no tools"))
    return out


def _pairing(
    sent: list[tuple[int, Message]], *, named: bool, allow_pending: bool = True
) -> list[Violation]:
    out: list[Violation] = []
    seen_ids: set[str] = set()
    open_calls: dict[str, str] = {}  # id -> name, calls of the last assistant message
    answered: set[str] = set()
    open_at = -1  # the index of the assistant message whose calls are open
    for i, m in sent:
        if m.role is Role.TOOL:
            call_id = m.tool_call_id
            if call_id in answered:
                out.append(Violation(i, "duplicate_result", f"call {call_id!r} answered again"))
            elif call_id not in open_calls:
                out.append(
                    Violation(
                        i, "orphan_result", f"result for {call_id!r} follows no call of that id"
                    )
                )
            else:
                answered.add(call_id)
                if named and not open_calls[call_id]:
                    out.append(
                        Violation(i, "unnamed_tool_message", f"call {call_id!r} has no name")
                    )
            continue
        out.extend(_unanswered(open_at, open_calls, answered))
        open_calls, answered, open_at = {}, set(), i
        for call in m.tool_calls if m.role is Role.ASSISTANT else []:
            if not call.id:
                out.append(Violation(i, "empty_call_id", f"a call of {call.name!r} has no id"))
            elif call.id in seen_ids:
                out.append(Violation(i, "duplicate_call_id", f"call id {call.id!r} used again"))
            seen_ids.add(call.id)
            open_calls[call.id] = call.name
        if m.tool_calls and m.role is not Role.ASSISTANT:
            out.append(Violation(i, "orphan_result", "only assistant messages carry tool calls"))
    last = sent[-1][1]
    if allow_pending and open_at == sent[-1][0] and last.metadata.get(PENDING_KEY):
        return out  # the waiting message's calls are pending, not unanswered
    out.extend(_unanswered(open_at, open_calls, answered))
    return out


def _unanswered(index: int, open_calls: dict[str, str], answered: set[str]) -> list[Violation]:
    missing = [c for c in open_calls if c not in answered]
    if not missing:
        return []
    return [Violation(index, "unanswered_call", f"no result for call(s) {missing}")]
