"""Graph: nodes joined by plain and conditional edges, run from a start node until END.

State is plain data (a dict of strings, lists and counts), so a later durable execution can
checkpoint it between nodes::

    graph = Graph(
        {"write": writer, "review": reviewer},
        edges={
            "write": "review",
            "review": Branch(lambda s: END if "APPROVED" in s["last"] else "write",
                             "write", END),
        },
        start="write",
        max_steps=6,
    )
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from goagent_py.budget import BudgetExceededError
from goagent_py.errors import ConfigurationError
from goagent_py.orchestration._core import (
    Flow,
    FlowResult,
    MaxStepsError,
    Node,
    Runnable,
    Scope,
    StepFailedError,
    as_nodes,
    combine,
    failed_partial,
    run_node,
)

__all__ = ["END", "Branch", "Graph", "GraphState"]

END = "__end__"
"""The edge target that ends a graph run."""

GraphState = dict[str, Any]
"""A graph's state: ``input`` (the graph's input), ``last`` (the last node's output),
``outputs`` ({node: its last output}), ``visits`` ({node: times run}) and ``path`` (the node
names run, in order). Plain data, one dict for the whole run: conditions and ``Node(...,
input=fn)`` mappings see the same dict, and keys they add (a retry count, a verdict) are kept
for the conditions after them and in ``result.state``."""

Condition = Callable[[GraphState], str | Awaitable[str]]


def _label(text: str) -> str:
    """``text`` safe inside a Mermaid label (quotes and brackets as entity codes)."""
    for char, code in (('"', "#quot;"), ("[", "#91;"), ("]", "#93;"), ("|", "#124;")):
        text = text.replace(char, code)
    return text


class Branch:
    """A conditional edge: ``condition(state)`` names the next node (or :data:`END`), one of
    ``targets`` (checked when the graph is built, and again on each answer)."""

    __slots__ = ("condition", "targets")

    def __init__(self, condition: Condition, *targets: str) -> None:
        if not callable(condition):
            raise ConfigurationError("Branch takes a condition function first")
        if not targets:
            raise ConfigurationError("Branch needs the targets its condition may name")
        self.condition = condition
        self.targets = tuple(targets)


class Graph(Flow):
    """Run nodes along edges from ``start`` until an edge leads to :data:`END`.

    A node's input is the previous node's output (the graph's input for the first); give a
    node ``Node(..., input=fn)`` to build its input from the state dict instead. A node with no
    outgoing edge ends the run.

    Args:
        nodes: ``{name: node}``.
        edges: ``{from: to}`` where ``to`` is a node name, :data:`END`, a :class:`Branch`, or a
            bare ``state -> name`` function (its answers are checked as they come).
        start: the first node.
        max_steps: the most node runs; past it the run fails with :class:`MaxStepsError`
            carrying the path taken (a guard against cycles).
        name: the graph's name in paths.

    Raises:
        ConfigurationError: no nodes, an unknown start, an edge from or to an unknown node, or
            a bad limit.
    """

    def __init__(
        self,
        nodes: Mapping[str, Runnable | Node],
        edges: Mapping[str, str | Branch | Condition],
        *,
        start: str,
        max_steps: int = 25,
        name: str = "graph",
    ) -> None:
        if not isinstance(nodes, Mapping) or not nodes:
            raise ConfigurationError(f"Graph {name!r} needs at least one node ({{name: node}})")
        self.nodes = {n.name: n for n in as_nodes(nodes, f"Graph {name!r}")}
        if END in self.nodes:
            raise ConfigurationError(f"Graph {name!r}: {END!r} is reserved for the end")
        known = ", ".join(self.nodes)
        if start not in self.nodes:
            raise ConfigurationError(f"Graph {name!r}: start {start!r} is not a node ({known})")
        for source, target in edges.items():
            if source not in self.nodes:
                raise ConfigurationError(
                    f"Graph {name!r}: an edge leaves {source!r}, which is not a node ({known})"
                )
            targets: tuple[str, ...]
            if isinstance(target, str):
                targets = (target,)
            elif isinstance(target, Branch):
                targets = target.targets
            elif callable(target):
                targets = ()
            else:
                raise ConfigurationError(
                    f"Graph {name!r}: the edge from {source!r} must be a node name, END, a "
                    f"Branch or a function, got {type(target).__name__}"
                )
            for t in targets:
                if t != END and t not in self.nodes:
                    raise ConfigurationError(
                        f"Graph {name!r}: the edge {source!r} -> {t!r} leads to an unknown "
                        f"node ({known}, or END)"
                    )
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise ConfigurationError(
                f"Graph {name!r}: max_steps must be a positive int, got {max_steps!r}"
            )
        self.edges = dict(edges)
        self.start = start
        self.max_steps = max_steps
        self.name = name

    def mermaid(self) -> str:
        """The graph as a Mermaid flowchart (for docs and reviews): plain edges solid,
        conditional ones dotted (to each target a :class:`Branch` declares, or to every node and
        the end for a bare function, which may name any), a node without an edge into the end.

        Example::

            print(graph.mermaid())   # paste into a ```mermaid block
        """
        ids = {name: f"n{i}" for i, name in enumerate(self.nodes)}
        ids[END] = "stop"
        lines = ["flowchart TD", "    start([start])", "    stop([end])"]
        lines += [f'    {ids[name]}["{_label(name)}"]' for name in self.nodes]
        lines.append(f"    start --> {ids[self.start]}")
        for name in self.nodes:
            edge = self.edges.get(name, END)
            if isinstance(edge, str):
                lines.append(f"    {ids[name]} --> {ids[edge]}")
                continue
            condition = edge.condition if isinstance(edge, Branch) else edge
            targets = edge.targets if isinstance(edge, Branch) else (*self.nodes, END)
            label = getattr(condition, "__name__", "")
            text = f"|{_label(label)}|" if label and label != "<lambda>" else ""
            lines += [f"    {ids[name]} -.->{text} {ids[t]}" for t in targets]
        return "\n".join(lines) + "\n"

    async def _next(self, current: str, state: GraphState) -> str:
        edge = self.edges.get(current, END)
        if isinstance(edge, str):
            return edge
        condition = edge.condition if isinstance(edge, Branch) else edge
        allowed = edge.targets if isinstance(edge, Branch) else (*self.nodes, END)
        answer = condition(state)  # the run's one state: what a condition adds, it keeps
        if inspect.isawaitable(answer):
            answer = await answer
        if answer not in allowed:
            raise ConfigurationError(
                f"Graph {self.name!r}: the edge from {current!r} chose {answer!r}, which is not "
                f"one of {', '.join(allowed)}"
            )
        return str(answer)

    async def _invoke(self, input: str, scope: Scope) -> FlowResult:
        start = time.perf_counter()
        state: GraphState = {"input": input, "last": input, "outputs": {}, "visits": {}, "path": []}
        parts: list[tuple[str, FlowResult]] = []
        current = self.start
        while current != END:
            if len(parts) >= self.max_steps:
                error = MaxStepsError(self.max_steps, tuple(state["path"]), scope.path)
                error.partial = combine(state["last"], parts, start, state=state)
                raise error
            node = self.nodes[current]
            try:
                result = await run_node(
                    node, state if node.input is not None else state["last"], scope
                )
            except (StepFailedError, BudgetExceededError) as exc:
                exc.partial = failed_partial(exc, parts, start, state=state)
                raise
            parts.append((current, result))
            state["last"] = result.text
            state["outputs"][current] = result.text
            state["visits"][current] = state["visits"].get(current, 0) + 1
            state["path"].append(current)
            current = await self._next(current, state)
        return combine(state["last"], parts, start, state=state)
