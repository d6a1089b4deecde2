"""The chat's built-in tools: the current time and a safe calculator (no shell, files or network).

Their schemas carry patterns: a model whose arguments are grammar-constrained to the schema
(the embedded one) can then write only a plausible zone name or arithmetic, never prose.

The clock names the zone of its answer ("2026-11-27T14:10:00+09:00 (Asia/Tokyo)"), and with no
zone asked (or UTC, the default) it takes the place the user's message names ("What time is
it in Tokyo?"): the small model is offered required parameters only, so it called the clock
with the default, and "It is 05:10 UTC" was given as Tokyo's time.
"""

from __future__ import annotations

import ast
import datetime as _dt
import functools
import math
import operator
import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import Field

from goagent_py.messages import Role
from goagent_py.tool_context import current_tool_context
from goagent_py.tools import tool

__all__ = ["calculator", "current_time"]

# Patterns in the schemas: a model whose arguments are grammar-constrained to the schema (the
# embedded one) can then only write a plausible zone name or arithmetic, never prose.
_TimeZone = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+){0,2}$")]
_Expression = Annotated[str, Field(pattern=r"^[0-9(a-z][0-9a-z.+*/%() -]*$", max_length=200)]


@tool
def current_time(timezone: _TimeZone = "UTC") -> str:
    """The current date and time, with the zone it is in.

    Args:
        timezone: an IANA time zone such as "Europe/Paris"; "UTC" by default.
    """
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if timezone == "UTC":
        timezone = _zone_asked_for() or timezone
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {timezone!r}") from exc
    return f"{_dt.datetime.now(zone).isoformat(timespec='seconds')} ({zone.key})"


_PLACE = re.compile(r"\b(?:in|at|for)\s+((?:[^\W\d_][\w'.-]*\s*){1,3})", re.IGNORECASE)


@functools.cache
def _zones_by_place() -> dict[str, str]:
    """Place name (lower case, spaces) -> IANA zone, from the zone database's city names."""
    from zoneinfo import available_timezones

    places: dict[str, str] = {}
    for key in sorted(available_timezones()):
        area, _, city = key.rpartition("/")
        if area and not area.startswith(("Etc", "SystemV")):
            places.setdefault(city.replace("_", " ").lower(), key)
    return places


def _zone_asked_for() -> str | None:
    """The zone of a place named in the user's last message ("... in Tokyo?"), or None."""
    context = current_tool_context()
    if context is None:
        return None
    asked = next((m.text for m in reversed(context.transcript()) if m.role == Role.USER), "")
    places = _zones_by_place()
    for match in _PLACE.finditer(asked):
        words = re.findall(r"[\w'.-]+", match.group(1).lower())
        for n in range(len(words), 0, -1):  # the longest name first: "new york city"
            zone = places.get(" ".join(words[:n]).strip(".'-"))
            if zone is not None:
                return zone
    return None


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_FUNCTIONS: dict[str, Callable[..., float]] = {
    "sqrt": math.sqrt,
    "log": math.log,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "abs": abs,
    "round": round,
}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 1000:
            raise ValueError("exponent too large")
        return float(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.Name) and node.id in ("pi", "e"):
        return math.pi if node.id == "pi" else math.e
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        return float(_FUNCTIONS[node.func.id](*(_evaluate(a) for a in node.args)))
    raise ValueError(f"unsupported expression: {ast.dump(node)[:60]}")


@tool
def calculator(expression: _Expression) -> str:
    """Evaluate an arithmetic expression such as "2 * (3 + 4) / sqrt(2)".

    Args:
        expression: numbers, + - * / // % **, parentheses, pi, e, and sqrt/log/exp/sin/cos/tan/
            abs/round.
    """
    if len(expression) > 200:
        raise ValueError("expression too long (200 characters at most)")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not an arithmetic expression: {expression!r}") from exc
    result = _evaluate(tree)
    return str(int(result)) if float(result).is_integer() and abs(result) < 1e15 else str(result)
