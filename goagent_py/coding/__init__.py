"""Building blocks for coding agents: workspace file tools, a shell tool, approvals, a REPL.

``file_tools(root)`` and ``shell_tool(root)`` give tools held inside one directory;
:class:`ApprovalPolicy` is a ``before_tool_call`` that lets read-only tools through and asks
about the rest (``sandbox_available()`` tells whether ``shell_tool(root, sandbox=True)`` can run
commands under bubblewrap here); :class:`Status` keeps a UI's status line (tokens, cost at a known
:class:`Price`, context fill). ``goagent-py code --root DIR`` is a coding agent built from them.
"""

from __future__ import annotations

from goagent_py.coding._sandbox import sandbox_available
from goagent_py.coding._tool import CodingTool, CodingToolError, is_mutating
from goagent_py.coding.approvals import Answer, ApprovalPolicy, ApprovalRequest, Decision
from goagent_py.coding.files import FileToolkit, file_tools
from goagent_py.coding.shell import command_text, shell_tool
from goagent_py.coding.status import Price, Status

__all__ = [
    "Answer",
    "ApprovalPolicy",
    "ApprovalRequest",
    "CodingTool",
    "CodingToolError",
    "Decision",
    "FileToolkit",
    "Price",
    "Status",
    "command_text",
    "file_tools",
    "is_mutating",
    "sandbox_available",
    "shell_tool",
]
