"""The user's steps around one tool call, shared by the loop and a durable run's tool activity:
``prepare_arguments`` before validation, ``before_tool_call`` (fail closed) and
``after_tool_call`` (a broken one keeps the result). Each runs where the call runs, so a plain
run and a durable one treat a call, and a callback that breaks, the same way.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from goagent_py._cancel import failed
from goagent_py._describe import described, message_of
from goagent_py._records import tool_call
from goagent_py.approvals import Approve, RunContext
from goagent_py.errors import ToolArgumentsError
from goagent_py.messages import INVALID_ARGUMENTS_KEY, Message, ToolCall
from goagent_py.results import ToolResult

if TYPE_CHECKING:
    from goagent_py.options import AfterToolCall, BeforeToolCall, PrepareArguments

__all__ = [
    "after_call",
    "bound_file",
    "checked_arguments",
    "gate_reason",
    "moved_reason",
    "prepared_call",
    "resolved_path",
    "take_place",
    "with_arguments",
]

_QUOTED_CHARS = 2000


def with_arguments(call: ToolCall, arguments: dict[str, Any]) -> ToolCall:
    """``replace(call, arguments=arguments)``, without its field-by-field walk for a plain call."""
    if type(call) is ToolCall:
        return tool_call(call.id, call.name, arguments)
    return replace(call, arguments=arguments)


def take_place(tool: object, call: ToolCall) -> Callable[[], None] | None:
    """Let ``tool`` take ``call``'s place in its own line before anything can delay the call.

    The loop calls this at the very start of each call's task, before ``prepare_arguments``
    and ``before_tool_call``: the tasks start in call order, so the places are taken in the
    order the model gave the calls, whatever order a gate answers in (the file tools queue the
    writes to one file this way). A tool offers it as ``tool.reserve(call) -> release | None``;
    the returned ``release`` is called when the call ends (a no-op once the body used its
    place). A ``reserve`` that raises takes no place: the call runs unordered, not blocked.
    """
    reserve = getattr(tool, "reserve", None)
    if not callable(reserve):
        return None
    try:
        release = reserve(call)
    except Exception:
        return None
    return release if callable(release) else None


def resolved_path(tool: object, call: ToolCall) -> str:
    """The file a file tool's call acts on, what a person who approves it approves: the
    tool's ``rule_path`` of the call's ``path`` (symlinks resolved), or what a tool that runs
    elsewhere reported for this call (``resolved_for(call)``: a durable run's tools, whose
    files are on the workers); "" for another tool, or a path it cannot resolve (the tool
    refuses it when it runs)."""
    elsewhere = getattr(tool, "resolved_for", None)
    if callable(elsewhere):
        try:
            return str(elsewhere(call) or "")
        except Exception:
            return ""
    rule = getattr(tool, "rule_path", None)
    path = call.arguments.get("path")
    if not callable(rule) or not isinstance(path, str):
        return ""
    try:
        return str(rule(path))
    except Exception:
        return ""


def bound_file(pending: Any, decision: object) -> tuple[str, str] | None:
    """What an approval of the waiting call ``pending`` (a ``PendingCall``) binds the call
    to: its ``path`` argument and the file it led to when it was listed
    (``pending.resolved``); None when nothing is bound (another decision, an approval with
    edited arguments, which the person wrote, or a call of no file tool). One rule for a plain
    run and a durable one (approve14, approve15)."""
    if not isinstance(decision, Approve) or decision.arguments is not None:
        return None
    path = pending.arguments.get("path")
    if not pending.resolved or not isinstance(path, str):
        return None
    return path, str(pending.resolved)


def moved_reason(
    tool: object, call: ToolCall, validated: dict[str, Any] | None, path: str, approved: str
) -> str | None:
    """Why an approved call of a file tool must not run: its path leads to another file than
    the one it led to when the person approved it (a link swapped meanwhile); None when it
    leads there still, or the call runs on another path (an edit: the person wrote it).
    Checked where the call runs, as late as can be (in a plain run, in the call's task after
    its place in the file's write queue was taken; in a durable run, in the tool's activity
    on the worker that holds the file), with the tool's own ``rule_path``."""
    arguments = validated if validated is not None else call.arguments
    if arguments.get("path") != path:
        return None
    rule = getattr(tool, "rule_path", None)
    now = ""
    if callable(rule):
        try:
            now = str(rule(path))
        except Exception:
            now = ""
    if now == approved:
        return None
    return (
        f"its path {path!r} now leads to {now or 'nothing it can open'!r}, not to {approved!r} "
        "as when it was approved (a link changed meanwhile); call it again to be asked about "
        "the file it leads to now"
    )


async def _resolved(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def prepared_call(prepare: PrepareArguments, call: ToolCall) -> ToolCall:
    """``call`` with the arguments ``prepare`` returns (unchanged when it returns None).

    Raises:
        ToolArgumentsError: ``prepare`` raised (an error the model reads).
    """
    try:
        repaired = await _resolved(prepare(call))
    except (Exception, asyncio.CancelledError) as exc:
        if not failed(exc):
            raise
        raise ToolArgumentsError(
            call.name, f"preparing the arguments failed: {message_of(exc)}"
        ) from exc
    return call if repaired is None else with_arguments(call, dict(repaired))


def checked_arguments(tool: object, call: ToolCall) -> dict[str, Any] | None:
    """The arguments ``tool`` runs ``call`` on: its ``validate_arguments`` of them, or None for
    a tool without one (it takes them as they are). Every path that runs a model's call asks
    this after ``prepare_arguments`` and before anything sees the call.

    Raises:
        ToolArgumentsError: the model's JSON was malformed (a provider hands such a call on as
            ``{INVALID_ARGUMENTS_KEY: raw}``: no tool runs on that, whatever its schema), or the
            tool's validation refused the arguments. Either is an error the model reads.
    """
    arguments = call.arguments
    if INVALID_ARGUMENTS_KEY in arguments:
        raw = str(arguments[INVALID_ARGUMENTS_KEY])
        if len(raw) > _QUOTED_CHARS:
            raw = f"{raw[:_QUOTED_CHARS]}... ({len(raw)} characters in all)"
        raise ToolArgumentsError(
            call.name,
            f"the arguments are not valid JSON (one JSON object was expected): {raw}. "
            "Call the tool again with its arguments as one JSON object.",
        )
    validate = getattr(tool, "validate_arguments", None)
    return None if validate is None else cast("dict[str, Any]", validate(dict(arguments)))


async def gate_reason(
    gate: BeforeToolCall,
    sees_message: bool,
    call: ToolCall,
    message: Callable[[], Message],
    logger: logging.Logger,
    *,
    sees_run: bool = False,
    run: Callable[[], RunContext] | None = None,
) -> str | None:
    """Why ``gate`` blocks ``call`` (its validated form), or None to let it run. A gate that
    raises blocks the call: an approval check that breaks must not let it through. ``message``
    gives the assistant message that made the call, for a gate that takes it; ``run`` the run
    context, for a gate whose second parameter is a :class:`RunContext` (where there is no run
    to show, as in a durable activity, it sees the message alone)."""
    try:
        if sees_run:
            context = run() if run is not None else RunContext(message=message())
            verdict = gate(call, context)
        elif sees_message:
            verdict = gate(call, message())
        else:
            verdict = gate(call)
        reason = await _resolved(verdict)
    except (Exception, asyncio.CancelledError) as exc:
        if not failed(exc):
            raise
        logger.warning("before_tool_call raised; the call is blocked: %s", message_of(exc))
        return f"the approval check failed ({described(exc)})"
    return None if reason is None else str(reason)


async def after_call(
    after: AfterToolCall, result: ToolResult, logger: logging.Logger
) -> ToolResult:
    """``result`` as ``after`` replaces it (kept when it returns None or raises)."""
    try:
        replacement = await _resolved(after(result))
    except (Exception, asyncio.CancelledError) as exc:
        if not failed(exc):
            raise
        logger.warning("after_tool_call raised; the result is kept: %s", message_of(exc))
        return result
    return result if replacement is None else replacement
