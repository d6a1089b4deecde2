"""What an approval question shows: the diff of an edit, the content of a write, the command.

Both front ends (the line mode and the Textual window) show :func:`approval_lines` above the
question (:func:`approval_question`), so the user approves what will happen, not a file name:
``edit_file`` and a ``write_file`` over an existing file as a unified diff of the file as it will
be when the call runs (the writes and edits of it approved earlier in the turn, which have not run
yet, applied: the file tools say which), a new file's content, a shell call's program and
arguments, another tool's arguments. Long previews are capped (the beginning is shown, then how
much was left out). Every line has passed through :func:`~goagent_py.coding._terminal.printable`.
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import Any

from goagent_py._paths import PathEscapeError, open_file_in_root
from goagent_py.coding._edit import apply_edit
from goagent_py.coding._terminal import printable
from goagent_py.coding._tool import CodingToolError
from goagent_py.coding.approvals import ApprovalRequest

__all__ = ["MAX_PREVIEW_CHARS", "MAX_PREVIEW_LINES", "approval_lines", "approval_question"]

MAX_PREVIEW_LINES = 60
"""The most lines of a diff or content shown above a question."""
MAX_PREVIEW_CHARS = 6000
"""The most characters of a diff or content shown above a question."""
_MAX_READ = 2_000_000
_MAX_LINE = 400


def approval_question(request: ApprovalRequest) -> str:
    """The question's line: ``allow edit_file a.py? [y]es [a]lways [n]o [s]top``."""
    what = printable(f"{request.call.name} {request.subject}".strip())
    return f"allow {what}? [y]es [a]lways [n]o [s]top"


def _before(request: ApprovalRequest, root: Path, path: str) -> tuple[str | None, str]:
    """The file ``request`` changes as it will be when the call runs (its tool applies the
    changes approved before it in the turn, read from the root it holds), else as it is now."""
    checked = request.subject

    def read(base: Any) -> tuple[str | None, str]:
        return _current(base, path, checked)

    planned = getattr(request.tool, "planned", None)
    if callable(planned):
        text, note = planned(request.call, read)
        return text, note
    return read(root)


def _current(root: Any, path: str, checked: str) -> tuple[str | None, str]:
    """The file's text now (None when it does not exist) and a note when it cannot be shown.

    Read by descriptor from the one open, never by name again: the file the open reached must
    be ``checked`` (the resolved path the rules were checked on; a link swapped in since leads
    elsewhere), and a file with other hard links is not shown (one of its other names may be a
    path the rules deny, the same inode: no check of this name can see it). The tool refuses
    both when it runs.
    """
    try:
        opened, real = open_file_in_root(root, path, "rb")
        with opened as f:
            if checked and real != checked:
                return None, f"({path} now leads to {real}, not {checked} as checked: not shown)"
            if os.fstat(f.fileno()).st_nlink > 1:
                return None, f"({path} has other hard links: its content is not shown)"
            data = f.read(_MAX_READ + 1)
    except FileNotFoundError:
        return None, ""
    except (PathEscapeError, OSError) as exc:
        return None, f"(cannot read {path}: {getattr(exc, 'reason', exc)})"
    if len(data) > _MAX_READ:
        return None, f"({path} is larger than {_MAX_READ} bytes: no diff shown)"
    # As edit_file decodes it (bytes that are not UTF-8 kept), so the edit matches the same.
    return data.decode("utf-8", "surrogateescape"), ""


def _shown(text: str) -> str:
    """Text decoded with ``surrogateescape`` as it can be shown (those bytes as U+FFFD)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _capped(lines: list[str]) -> list[str]:
    shown: list[str] = []
    size = 0
    for line in lines:
        if len(line) > _MAX_LINE:
            line = f"{line[:_MAX_LINE]}[... {len(line) - _MAX_LINE} more characters]"
        if len(shown) >= MAX_PREVIEW_LINES or size + len(line) > MAX_PREVIEW_CHARS:
            break
        shown.append(line)
        size += len(line)
    left = len(lines) - len(shown)
    if left:
        shown.append(f"[... {left} more line(s) not shown ...]")
    return shown


_DIFF_WORK = 250_000
"""The most (old lines x new lines) of a changed middle that difflib compares: its matching is
quadratic, and a rewrite of a 20,000-line file with every other line changed took 93 s (the
question waited for it). Past this the change is shown as the lines removed, then added."""
_SIDE = MAX_PREVIEW_LINES // 2 - 4


def _diff(path: str, before: str, after: str) -> list[str]:
    old, new = before.splitlines(), after.splitlines()
    if old == new:
        return ["(no change)"]
    # The lines both keep at the start and the end need no matching.
    start = 0
    while start < min(len(old), len(new)) and old[start] == new[start]:
        start += 1
    end = 0
    while end < min(len(old), len(new)) - start and old[-1 - end] == new[-1 - end]:
        end += 1
    gone, added = old[start : len(old) - end], new[start : len(new) - end]
    if len(gone) * len(added) <= _DIFF_WORK:
        diff = difflib.unified_diff(old, new, f"a/{path}", f"b/{path}", lineterm="")
        return list(diff)
    head = [f"--- a/{path}", f"+++ b/{path}"]
    head.append(f"@@ -{start + 1},{len(gone)} +{start + 1},{len(added)} @@")
    note = (
        f"(a large change: {len(gone)} line(s) replaced by {len(added)}; the first of each shown)"
    )
    return [note, *head, *_some("-", gone), *_some("+", added)]


def _some(mark: str, lines: list[str]) -> list[str]:
    shown = [mark + line for line in lines[:_SIDE]]
    if len(lines) > _SIDE:
        shown.append(f"[... {len(lines) - _SIDE} more {mark} line(s) ...]")
    return shown


def _edit_lines(root: Path, request: ApprovalRequest) -> list[str]:
    args = request.call.arguments
    path = str(args.get("path", ""))
    old, new = str(args.get("old_string", "")), str(args.get("new_string", ""))
    before, note = _before(request, root, path)
    if before is None:
        return [note or f"({path} does not exist: the edit will fail)"]
    head = [note] if note else []
    if not old:
        return ["(old_string is empty: the edit will fail)"]
    try:
        after, _ = apply_edit(
            before, old, new, replace_all=bool(args.get("replace_all")), path=path
        )
    except CodingToolError as exc:
        return [*head, f"(the edit will fail: {exc})"]
    return [*head, *_diff(path, _shown(before), _shown(after))]


def _write_lines(root: Path, request: ApprovalRequest) -> list[str]:
    args = request.call.arguments
    path = str(args.get("path", ""))
    content = str(args.get("content", ""))
    before, note = _before(request, root, path)
    if before is not None:
        return [*([note] if note else []), *_diff(path, _shown(before), content)]
    lines = content.splitlines()
    head = [note] if note else []
    return [*head, f"new file {path}, {len(lines)} line(s):", *(f"+{line}" for line in lines)]


def _shell_lines(args: dict[str, Any]) -> list[str]:
    lines = []
    if args.get("argv"):
        lines.append("argv: " + json.dumps(args["argv"], ensure_ascii=False))
    if args.get("command"):
        lines.append("command (run by /bin/sh -c): " + str(args["command"]))
    for key in ("cwd", "timeout"):
        if key in args:
            lines.append(f"{key}: {args[key]!r}")
    return lines


def approval_lines(request: ApprovalRequest, root: str | os.PathLike[str]) -> list[str]:
    """What to show above the question about ``request`` (blocking: it may read a file).

    Args:
        request: the call asked about; a file's content is shown only when the path opens the
            file ``request.subject`` names (the path the rules were checked on).
        root: the workspace root (the file tools' root).

    Returns:
        The lines, each made printable, the diff or content capped.
    """
    name, args = request.call.name, request.call.arguments
    base = Path(root)
    if name == "edit_file":
        lines = _edit_lines(base, request)
    elif name == "write_file":
        lines = _write_lines(base, request)
    elif "argv" in args or "command" in args:
        lines = _shell_lines(args)
    elif args:
        lines = json.dumps(args, indent=1, ensure_ascii=False, default=str).splitlines()
    else:
        lines = []
    return [printable(line) for line in _capped(lines)]
