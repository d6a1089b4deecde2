"""Approving tool calls: read-only tools go through, mutating ones are asked about.

:class:`ApprovalPolicy` is a ``before_tool_call``: ``Agent(..., before_tool_call=policy)``.
For each call, in this order:

1. a ``deny`` pattern that matches blocks it;
2. an ``allow`` pattern that matches (or one added by an "always" answer) lets it through;
3. a read-only tool (``tool.mutating`` False) goes through when ``allow_read_only``;
4. otherwise ``ask`` is called (one question at a time) and its answer decides: ``"allow"``,
   ``"always"`` (allow, and do not ask again this session: this command in this folder for a
   shell tool, this file (resolved) for a file tool, the whole tool otherwise), ``"deny"``
   (the model is told and may try something else) or ``"stop"`` (blocked, and
   ``stop(reason)`` is called to end the run: pass ``lambda reason:
   session.abort("after_tools")``, or make the agent with ``stop_on_denied=True``).
   Without ``ask``, such a call is denied.

A pattern is ``"tool"`` or ``"tool(subject)"`` where both parts are globs; the subject is the
call's ``path`` for file tools and the command line for a shell tool: ``"read_file"``,
``"write_file(src/**)"``, ``"shell(git status*)"``, ``"*(secrets/**)"``.

For a shell tool (see :mod:`goagent_py.coding._commands`), a deny pattern also matches each
program the call runs, named by its base name, through ``env``, ``sh -c``, ``;`` and ``&&``
(``shell(rm *)`` blocks ``/bin/rm x``, ``env rm x``, ``true; rm x``): advisory over a shell,
which can build a program name at run time. An allow pattern matches a command line only when
it has no shell syntax. An "always" answer to a shell call remembers exactly that argv (or that
command line) in that working directory (resolved), never a pattern; to a file tool's call, that
tool on that file (resolved). Before any of this, the call's arguments are checked
(:func:`~goagent_py.coding._preflight.preflight`): a call a tool would refuse, or one holding a
placeholder such as ``{path}``, is blocked with the reason and never asked about.

The same rules on any agent, with a person deciding later instead of ``ask``:
``Agent(..., **policy.deferred())`` (:meth:`ApprovalPolicy.deferred`) lets through what the
policy allows, denies what it denies with its message, and makes the calls it would ask about
wait for a decision (the run stops ``DEFERRED``; docs/approvals.md).
"""

from __future__ import annotations

import asyncio
import fnmatch
import inspect
import posixpath
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from goagent_py.approvals import RunContext
from goagent_py.coding._commands import (
    exact_key,
    has_shell_syntax,
    is_command_call,
    rule_matches_command,
)
from goagent_py.coding._preflight import preflight
from goagent_py.coding._tool import fold, is_mutating
from goagent_py.coding.shell import command_text
from goagent_py.errors import ConfigurationError
from goagent_py.messages import ToolCall
from goagent_py.options import AgentSettings
from goagent_py.tools import Tool

__all__ = ["Answer", "ApprovalPolicy", "ApprovalRequest", "Decision", "glob_escape"]

Answer = Literal["allow", "always", "deny", "stop"]
_ANSWERS = ("allow", "always", "deny", "stop")


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What ``ask`` is shown.

    Attributes:
        call: the call as the model made it.
        subject: the path or command line the call acts on ("" when it has none).
        mutating: whether the tool can change something.
        tool: the tool called (None when the policy does not know it): a preview asks a file
            tool how the file will be when the call runs (the changes approved before it in
            the turn applied).
    """

    call: ToolCall
    subject: str
    mutating: bool
    tool: Tool | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    """An answer with a message for the model (why it was denied, what to do instead)."""

    answer: Answer
    reason: str = ""


def _subject(call: ToolCall) -> str:
    args = call.arguments
    if "path" in args and isinstance(args["path"], str):
        # A tool the policy cannot resolve paths for (an MCP server's): ``.`` and ``..`` are
        # taken out as text, so ``a/../secrets/k`` is checked as ``secrets/k`` (a deny pattern
        # holds) and ``src/../.git/x`` as ``.git/x`` (``allow=["t(src/**)"]`` does not cover
        # it). Links are not seen: the file tools match the resolved path instead.
        path = args["path"].replace("\\", "/")
        return posixpath.normpath(path) if path else "."
    if "argv" in args or "command" in args:
        return command_text(args)
    return ""


def glob_escape(text: str) -> str:
    """``text`` as a glob that matches exactly ``text`` (``*``, ``?`` and ``[`` made literal)."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def _parse(pattern: str) -> tuple[str, str | None]:
    if not isinstance(pattern, str) or not pattern.strip():
        raise ConfigurationError(f"ApprovalPolicy: a pattern must be a non-empty str: {pattern!r}")
    if pattern.endswith(")") and "(" in pattern:
        name, _, rest = pattern.partition("(")
        return name.strip() or "*", rest[:-1]
    return pattern.strip(), None


@dataclass
class ApprovalPolicy:
    """A ``before_tool_call`` for coding agents (see the module docstring).

    For the file tools a path is matched RESOLVED, relative to the root (``.//secrets/k`` and
    a symlink ``alias -> secrets`` as ``alias/k`` are both ``secrets/k``), and the deny
    patterns also filter what the walks return: with ``*(secrets/**)``, grep, glob and
    list_dir leave out what is under ``secrets/``, and a read or write that reaches it through
    a link swapped in later is refused when the file is opened (the tools hold the patterns:
    a caller that shares the tool objects without the policy meets them too).

    Args:
        tools: the agent's tools, to tell read-only ones (``tool.mutating`` False) from the
            rest; a tool not listed counts as mutating.
        allow_read_only: let read-only tools through without asking.
        ask: ``ask(request) -> Answer | Decision`` (sync or async); None denies what it would ask.
        allow: patterns always allowed.
        deny: patterns always denied (checked first).
        stop: called with the reason on a "stop" answer, to end the run.
    """

    tools: Sequence[Tool] = ()
    allow_read_only: bool = True
    ask: Callable[[ApprovalRequest], Answer | Decision | Awaitable[Answer | Decision]] | None = None
    allow: Iterable[str] = ()
    deny: Iterable[str] = ()
    stop: Callable[[str], Any] | None = None
    _allow: list[tuple[str, str | None]] = field(default_factory=list, repr=False)
    _deny: list[tuple[str, str | None]] = field(default_factory=list, repr=False)
    _read_only: set[str] = field(default_factory=set, repr=False)
    _rule_paths: dict[str, Callable[[str], str]] = field(default_factory=dict, repr=False)
    _asking: asyncio.Lock | None = field(default=None, repr=False)
    _reservers: dict[str, Callable[[ToolCall], Callable[[], None] | None]] = field(
        default_factory=dict, repr=False
    )
    _by_name: dict[str, Tool] = field(default_factory=dict, repr=False)
    _always: set[tuple[str, tuple[str, ...]]] = field(default_factory=set, repr=False)
    stopped: bool = field(default=False, init=False)
    """True once a "stop" answer was given (until :meth:`reset_stop`)."""

    def __post_init__(self) -> None:
        self._allow = [_parse(p) for p in self.allow]
        self._deny = [_parse(p) for p in self.deny]
        self._read_only = {t.definition.name for t in self.tools if not is_mutating(t)}
        self._by_name = {t.definition.name: t for t in self.tools}
        self._reservers = {
            t.definition.name: r for t in self.tools if (r := getattr(t, "reserve", None))
        }
        if self.ask is not None and not callable(self.ask):
            raise ConfigurationError("ApprovalPolicy(ask=...): expected a callable")
        self._use_path_rules()

    # -- path rules: one normalisation (the tool's rule_path), the same matcher everywhere ---

    def _use_path_rules(self) -> None:
        """Learn each file tool's path normalisation, and give the tools the deny patterns
        to filter their walks and opens with."""
        for t in self.tools:
            normalise = getattr(t, "rule_path", None)
            if callable(normalise):
                self._rule_paths[t.definition.name] = normalise
            add_rule = getattr(t, "add_path_rule", None)
            if callable(add_rule):
                add_rule(self.denies_path)

    def denies_path(self, tool: str, path: str) -> bool:
        """Whether a deny pattern covers ``tool`` on ``path`` (resolved, relative to the root),
        in any case or Unicode normal form (:func:`~goagent_py.coding._tool.fold`)."""
        return self._matches(self._deny, tool, path, folded=True)

    def _path_subject(self, call: ToolCall) -> str | None:
        """The resolved path a file tool's call acts on (None for other calls)."""
        normalise = self._rule_paths.get(call.name)
        path = call.arguments.get("path")
        if normalise is None or not isinstance(path, str):
            return None
        return normalise(path)

    def allow_for_session(self, pattern: str) -> None:
        """Allow calls matching ``pattern`` from now on (what an "always" answer does)."""
        self._allow.append(_parse(pattern))

    def reset_stop(self) -> None:
        """Forget a "stop" answer (a new run may ask again)."""
        self.stopped = False

    @staticmethod
    def _matches(
        rules: list[tuple[str, str | None]], name: str, subject: str, *, folded: bool = False
    ) -> bool:
        """Whether a rule covers ``name`` on ``subject``; ``folded`` (the deny rules): the
        subject compared in any case and normal form (:func:`~goagent_py.coding._tool.fold`)."""
        if folded:
            subject = fold(subject)
        for tool_glob, subject_glob in rules:
            if not fnmatch.fnmatchcase(name, tool_glob):
                continue
            if subject_glob is None:
                return True
            if fnmatch.fnmatchcase(subject, fold(subject_glob) if folded else subject_glob):
                return True
        return False

    def _denied(self, name: str, subject: str, call: ToolCall) -> bool:
        if self._matches(self._deny, name, subject, folded=True):
            return True
        return is_command_call(call.arguments) and rule_matches_command(
            self._deny, name, call.arguments
        )

    def _allowed(self, name: str, subject: str, call: ToolCall) -> bool:
        args = call.arguments
        key = self._exact(name, subject, call)
        if key is not None and (name, key) in self._always:
            return True
        if not is_command_call(args):
            return self._matches(self._allow, name, subject)
        # A pattern cannot tell what a line with shell syntax runs: `git status; rm -rf x`
        # matches "git status*". Such a line is asked about.
        if args.get("command") and has_shell_syntax(str(args["command"])):
            return False
        return self._matches(self._allow, name, subject)

    def _exact(self, name: str, subject: str, call: ToolCall) -> tuple[str, ...] | None:
        """What an "always" answer to ``call`` remembers, in the form it is checked in: the
        exact command and its working directory resolved (the same argv in another folder acts
        on other files), or the file tool's resolved path; None for a tool with neither (the
        whole tool is remembered)."""
        args = call.arguments
        if is_command_call(args):
            if not subject:
                return None
            cwd = self._command_cwd(name, args)
            return None if cwd is None else (*exact_key(args), "\0cwd", cwd)
        if name in self._rule_paths and isinstance(args.get("path"), str):
            return ("\0path", subject)
        return None

    def _command_cwd(self, name: str, args: dict[str, Any]) -> str | None:
        """The folder a command call runs in, resolved by its tool's own check (None when the
        tool refuses the arguments); the literal ``cwd`` for a tool without a check."""
        check = getattr(self._by_name.get(name), "check", None)
        if not callable(check):
            return str(args.get("cwd") or ".")
        try:
            checked = check(args)
        except Exception:  # refused: the tool says why when it runs; nothing is remembered
            return None
        if isinstance(checked, tuple) and len(checked) > 1 and isinstance(checked[1], Path):
            return str(checked[1])
        return str(args.get("cwd") or ".")

    def _remember(self, name: str, subject: str, call: ToolCall) -> None:
        """An "always" answer: exactly this command in this folder for a shell tool, exactly
        this file (resolved) for a file tool, else the whole tool."""
        key = self._exact(name, subject, call)
        if key is not None:
            self._always.add((name, key))
        elif is_command_call(call.arguments):
            return  # a command that cannot be pinned down: allowed once, not remembered
        else:
            self.allow_for_session(glob_escape(name))

    async def __call__(self, call: ToolCall) -> str | None:
        """The reason to block ``call``, or None to let it run."""
        # Before any await, so in call order: a write held by a question keeps its place in
        # its file's queue, and a later write to that file allowed at once waits behind it.
        reserve = self._reservers.get(call.name)
        release = reserve(call) if reserve is not None else None
        try:
            reason = await self._decide(call)
        except BaseException:
            if release is not None:
                release()
            raise
        if reason is not None and release is not None:
            release()
        return reason

    def _verdict(
        self, call: ToolCall, subject: str | None = None
    ) -> tuple[Literal["allow", "deny", "ask"], str]:
        """What the rules say of ``call`` before anyone is asked: allow, deny (with the
        reason), or ask. ``subject``: the call's path or command as already resolved (a path
        is resolved once per decision: a link swapped in between two resolutions would make
        the question, and an "always", name another file than the one checked)."""
        name = call.name
        if subject is None:
            subject = self._path_subject(call) or _subject(call)
        problem = preflight(self._by_name.get(name), call)
        if problem is not None:
            return "deny", problem
        if self._denied(name, subject, call):
            return "deny", f"{name} is not allowed on {subject or 'this'} (denied by policy)"
        if self.stopped:
            return "deny", "the user stopped this run"
        if self._allowed(name, subject, call):
            return "allow", ""
        if name in self._read_only and self.allow_read_only:
            return "allow", ""
        return "ask", ""

    def deferred(self) -> AgentSettings:
        """This policy as an agent's deferred-approval rule: ``Agent(..., **policy.deferred())``.

        Gives ``requires_approval`` (the calls the policy would ask about wait for a person's
        decision: ``agent.resume({call_id: Approve() or Deny(...)})``) and ``before_tool_call``
        (the calls it denies get its reason as their error result; the others run). ``ask``
        and ``stop`` are not used: the person decides through ``resume``. To keep a gate of
        your own, call ``settings["before_tool_call"]`` from it.
        """
        return {"requires_approval": self.waits, "before_tool_call": self.refusal}

    def waits(self, call: ToolCall, run: RunContext) -> bool:
        """Whether ``call`` waits for a person (the policy would ask about it)."""
        return self._verdict(call)[0] == "ask"

    def refusal(self, call: ToolCall) -> str | None:
        """The policy's reason to deny ``call``, or None (allowed, or approved by a person)."""
        verdict, reason = self._verdict(call)
        return reason if verdict == "deny" else None

    async def _decide(self, call: ToolCall) -> str | None:
        name, subject = call.name, self._path_subject(call) or _subject(call)
        verdict, reason = self._verdict(call, subject)
        if verdict == "deny":
            return reason
        if verdict == "allow":
            return None
        mutating = name not in self._read_only
        if self.ask is None:
            return f"{name} needs approval and nobody can give it here"
        if self._asking is None:
            self._asking = asyncio.Lock()
        async with self._asking:  # one question at a time, in the order the calls came
            if self.stopped:
                return "the user stopped this run"
            if self._allowed(name, subject, call):  # an "always" given meanwhile
                return None
            got = self.ask(ApprovalRequest(call, subject, mutating, self._by_name.get(name)))
            if inspect.isawaitable(got):
                got = await got
            decision = got if isinstance(got, Decision) else Decision(got)
        if decision.answer not in _ANSWERS:
            return f"the approval answer {decision.answer!r} is not understood: denied"
        if decision.answer == "allow":
            return None
        if decision.answer == "always":
            self._remember(name, subject, call)
            return None
        where = f" on {subject}" if subject else ""
        reason = decision.reason or f"the user denied {name}{where}"
        if decision.answer == "stop":
            self.stopped = True
            if self.stop is not None:
                self.stop(reason)
            return reason + " and stopped the run"
        return reason
