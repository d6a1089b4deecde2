"""The set-up the tests of waits on a reused call id share (approve14 moved it here from each
file): a refund tool that waits for approval, and an agent whose model calls it twice under one
id (local models' servers number calls per turn: ``llama-tool-0``). Not a test module."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from goagent_py import Agent, ToolCall, tool
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.testing import ScriptedProvider, tool_call_response


def refund_tool(ran: list[str]) -> Any:
    """A refund tool that waits for approval and records each order it refunds in ``ran``."""

    @tool(requires_approval=True)
    def refund(order: str) -> str:
        """Refund an order.

        Args:
            order: the order id.
        """
        ran.append(order)
        return f"refunded {order}"

    return refund


def two_refunds(*tail: Any) -> ScriptedProvider:
    """A model that calls ``refund`` twice, each time as ``llama-tool-0`` (A-1, then A-2),
    then answers with ``tail``."""
    return ScriptedProvider(
        tool_call_response(ToolCall("llama-tool-0", "refund", {"order": "A-1"})),
        tool_call_response(ToolCall("llama-tool-0", "refund", {"order": "A-2"})),
        *tail,
    )


def two_waits_on_one_id(db: Path, ran: list[str], *tail: Any, **options: Any) -> Agent:
    """An agent on a SQLite memory whose model is :func:`two_refunds`."""
    memory = ShortTermMemory(storage=SQLiteStorage(db, session_id="s"))
    return Agent(
        provider=two_refunds(*tail), tools=[refund_tool(ran)], short_term_memory=memory, **options
    )
