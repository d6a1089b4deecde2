"""What a shell tool call runs, as approval rules see it.

A rule like ``shell(rm *)`` is meant for the program ``rm``, however the model spells it:
``/bin/rm``, `` rm`` (leading blanks), ``env rm``, ``sh -c 'rm x'``, ``true; rm x``. Matching the
literal command text misses all of those, so deny rules are matched against every simple
command the call runs, with the program reduced to its base name (:func:`simple_commands`).

This is advisory over a shell: a command line can build a program name at run time
(``$(printf r)m``, ``eval``, an alias, a script that it writes and then runs), and no parser
sees through that. The OS sandbox (``shell_tool(sandbox=True)``) is the boundary; deny rules are
a guard against mistakes.

Allow rules and "always" answers must not let more through than was meant: an allow pattern
matches a command line only when it has no shell syntax (``;``, ``&&``, ``|``, ``$(...)``,
redirections...), and an "always" answer remembers the exact argv (or the exact command line),
never a pattern (:func:`exact_key`).
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from goagent_py.coding._tool import fold

__all__ = [
    "exact_key",
    "has_shell_syntax",
    "is_command_call",
    "rule_matches_command",
    "simple_commands",
]

_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "busybox"})
# Programs that run the rest of their arguments as a command (after their own options).
_WRAPPERS = frozenset(
    {"env", "command", "exec", "nohup", "sudo", "doas", "time", "nice", "ionice", "setsid",
     "stdbuf", "chroot", "xargs", "timeout", "watch", "unbuffer", "builtin"}
)  # fmt: skip
_TAKES_VALUE = {"env": {"-u", "--unset", "-C", "--chdir", "-S"}, "nice": {"-n"}, "sudo": {"-u"}}
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", "|&", ";;", "!", "{", "}"})
_SHELL_SYNTAX = re.compile(r"[;&|`$()<>\n\r{}*?\[\]~!#\\]")
_DEPTH = 8


def is_command_call(args: Mapping[str, Any]) -> bool:
    """Whether a call's arguments are a shell tool's (``argv`` or ``command``)."""
    return "argv" in args or "command" in args


def exact_key(args: Mapping[str, Any]) -> tuple[str, ...]:
    """What an "always" answer remembers: the exact argv, or the exact command line.

    A command line is compared as text, not as parsed words: ``echo "a;b"`` and ``echo a;b``
    parse to the same words but the second runs ``b``.
    """
    if args.get("command"):
        return ("command", str(args["command"]))
    return ("argv", *(str(a) for a in args.get("argv") or []))


def has_shell_syntax(line: str) -> bool:
    """Whether a command line uses anything beyond plain words (operators, expansions,
    redirections, globs, quoting tricks), so its text does not tell what it runs."""
    return bool(_SHELL_SYNTAX.search(line))


def _split_line(line: str) -> list[list[str]]:
    """The simple commands of a shell line, roughly (a parser of sh, not a shell)."""
    text = line.replace("`", " ; ").replace("\n", " ; ").replace("$(", " ; (")
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # unbalanced quotes: fall back to blanks
        tokens = text.split()
    commands: list[list[str]] = [[]]
    for token in tokens:
        if token in _SEPARATORS or set(token) <= set(";&|()"):
            commands.append([])
        else:  # a word, or a redirection (kept: it is part of the command)
            commands[-1].append(token)
    return [c for c in commands if c]


def _unwrap(words: list[str], depth: int) -> list[list[str]]:
    """``words`` as the program that really runs: assignments and wrappers (``env``,
    ``nohup``...) peeled off, ``sh -c LINE`` opened; the program reduced to its base name."""
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]  # VAR=value before the program
    if not words:
        return []
    program = os.path.basename(words[0]) or words[0]
    rest = words[1:]
    if depth < _DEPTH and program in _WRAPPERS:
        takes = _TAKES_VALUE.get(program, set())
        while rest and (rest[0].startswith("-") or (program == "env" and "=" in rest[0])):
            option = rest.pop(0)
            if option == "--":
                break
            if option in takes and rest:
                rest.pop(0)
        if program == "timeout" and rest:
            rest = rest[1:]  # its duration
        inner = _unwrap(rest, depth + 1)
        return [[program, *rest], *inner] if inner else [[program, *rest]]
    if depth < _DEPTH and program in _SHELLS:
        for i, option in enumerate(rest):
            if option.startswith("-") and "c" in option.lstrip("-") and i + 1 < len(rest):
                return [[program, *rest], *_from_line(rest[i + 1], depth + 1)]
    return [[program, *rest]]


def _from_line(line: str, depth: int) -> list[list[str]]:
    found: list[list[str]] = []
    for words in _split_line(line):
        found.extend(_unwrap(words, depth))
    return found


def simple_commands(args: Mapping[str, Any]) -> list[str]:
    """Every program a shell tool call runs, each as ``basename args...`` (one line each).

    ``{"argv": ["/usr/bin/env", "rm", "-f", "x"]}`` gives ``["env rm -f x", "rm -f x"]``;
    ``{"command": "true; sh -c 'rm x'"}`` gives ``["true", "sh -c 'rm x'", "rm x"]``.
    """
    if args.get("command"):
        commands = _from_line(str(args["command"]), 0)
    else:
        commands = _unwrap([str(a) for a in args.get("argv") or []], 0)
    return [" ".join(c) for c in commands]


def rule_matches_command(
    rules: Iterable[tuple[str, str | None]], name: str, args: Mapping[str, Any]
) -> bool:
    """Whether a (tool glob, subject glob) rule matches any program the call runs."""
    commands: list[str] | None = None
    for tool_glob, subject_glob in rules:
        if subject_glob is None or not fnmatch.fnmatchcase(name, tool_glob):
            continue
        if commands is None:
            commands = simple_commands(args)
        # In any case (macOS and Windows run /BIN/RM as rm): :func:`fold`, as path rules.
        pattern = fold(subject_glob.strip())
        if any(fnmatch.fnmatchcase(fold(c), pattern) for c in commands):
            return True
    return False
