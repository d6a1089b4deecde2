"""``goagent-py chat``'s long-term memory: the decider it consolidates with, and ``/memory``.

``/memory`` lists the current facts, ``/memory history`` every memory with what happened to it
(added, updated, superseded, deleted: when, by which decider, from which message), and
``/memory recalled`` what recall brought to the last turn, with scores.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from goagent_py.messages import Message, ScoredMessage

__all__ = ["DECIDERS", "chat_decider", "memory_command", "tag_conversation"]

DECIDERS = ("rules", "model", "none")
"""The ``--memory-decider`` choices."""

USAGE = "usage: /memory [history|recalled]"


def chat_decider(name: str, provider: Any, model: str) -> Any:
    """The decider for ``--memory-decider``: rules (default), the chat's own model, or none."""
    if name == "none":
        return None
    if name == "model":
        from goagent_py.memory.deciders import ModelDecider

        return ModelDecider(provider, model=model)
    from goagent_py.memory.deciders import RuleDecider

    return RuleDecider()


def tag_conversation(
    policy: Callable[[Message, Message], list[Message] | None], conversation: str
) -> Callable[[Message, Message], list[Message] | None]:
    """``policy`` whose chosen messages record the conversation they came from."""
    from goagent_py.memory.records import SOURCE_SESSION_KEY

    def tagged(user: Message, answer: Message) -> list[Message] | None:
        chosen = policy(user, answer)
        if chosen is None:
            return None
        for message in chosen:
            message.metadata = {**message.metadata, SOURCE_SESSION_KEY: conversation}
        return chosen

    return tagged


def _day(moment: Any) -> str:
    return moment.date().isoformat() if moment is not None else "unknown date"


async def memory_command(
    argument: str,
    memory: Any,
    recalled: list[ScoredMessage],
    say: Callable[[str], None],
    *,
    off: str = "",
) -> None:
    """Run ``/memory [history|recalled]`` against the chat's long-term memory (``off``: why it
    is off though it was asked for)."""
    argument = argument.strip().lower()
    if argument == "recalled":
        if not recalled:
            say("(nothing recalled for the last turn)")
        for i, scored in enumerate(recalled, 1):
            say(f"[{i}] {scored.score:.3f} {scored.message.role}: {scored.message.text}")
        return
    if argument not in ("", "history"):
        say(USAGE)
        return
    if memory is None:
        say(f"(long-term memory is off: {off})" if off else "(long-term memory is off)")
        return
    from goagent_py.memory.records import CURRENT, DELETED, SUPERSEDED

    session = "goagent-chat"
    if argument == "":
        records = await memory.records(session=session)
        if not records:
            say("(no facts remembered yet)")
        for i, record in enumerate(records, 1):
            say(f"[{i}] {record.text} (since {_day(record.created_at)})")
        return
    records = await memory.records(session=session, states=(CURRENT, SUPERSEDED, DELETED))
    if not records:
        say("(no memories yet)")
    for record in records:
        state = "" if record.is_current else f" [{record.state} {_day(record.invalid_at)}]"
        say(f"- {record.text}{state}")
        for change in record.history:
            detail = f" (was: {change.previous})" if change.previous else ""
            if change.op == "superseded":
                detail = f" by: {change.text}"
            source = f", message {change.source_message}" if change.source_message else ""
            say(f"    {change.at[:19]} {change.op} by {change.decider}{source}{detail}")
