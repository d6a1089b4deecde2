"""Consolidation on write: each new fact is compared with the memories it may change.

:class:`~goagent_py.memory.long_term.LongTermMemory` given a ``decider`` does, for the user
facts of a turn (what the write policy chose): find the most similar *current* memories of the
same scope (the candidates), ask the decider, check its answer, and apply it. Per fact:

* ``ADD``: store the fact as a new memory (``text`` may rewrite it).
* ``UPDATE``: store ``text`` (the merged fact) as a new memory and mark the candidate
  ``target`` superseded by it (it stays, with its history, for questions about the past).
* ``DELETE``: mark the candidate ``target`` deleted (the fact itself is not stored).
* ``NOOP``: nothing to do (the fact is already known).

A fact the decider says nothing about is added. A decider that fails (raises, or answers with
an op it may not give, a fact index out of range or an id outside the candidates) changes
nothing: every fact is added as without a decider, and a :class:`ConsolidationReport` with the
warning goes to the memory's ``on_consolidation`` and to the ``goagent_py.memory`` logger.

Deciders: :class:`~goagent_py.memory.deciders.RuleDecider` (model-free, English first-person
facts), :class:`~goagent_py.memory.deciders.ModelDecider` (any provider, JSON), or None (every
fact is added; the behaviour before consolidation existed).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from goagent_py.errors import GoAgentError
from goagent_py.memory.records import MemoryRecord

__all__ = [
    "OPS",
    "ConsolidationReport",
    "Decider",
    "Decision",
    "DecisionError",
    "Op",
    "check_decisions",
]

Op = Literal["ADD", "UPDATE", "DELETE", "NOOP"]
OPS: tuple[Op, ...] = ("ADD", "UPDATE", "DELETE", "NOOP")


class DecisionError(GoAgentError, ValueError):
    """A decider's answer that cannot be applied (the facts are then added unchanged)."""


@dataclass(slots=True, frozen=True, kw_only=True)
class Decision:
    """What to do with one fact.

    Attributes:
        fact: the index of the fact in the list the decider was given.
        op: ADD, UPDATE, DELETE or NOOP.
        target: the id of the candidate memory an UPDATE replaces or a DELETE retracts.
        text: the memory's text: the merged fact for UPDATE, a rewording for ADD ("" keeps
            the fact's words).
    """

    fact: int
    op: Op
    target: str = ""
    text: str = ""


@runtime_checkable
class Decider(Protocol):
    """Decides what a turn's new facts do to the memories most similar to them."""

    name: str
    """Recorded in each change's history ("rules", "model", ...)."""

    async def decide(
        self, facts: Sequence[str], candidates: Sequence[MemoryRecord]
    ) -> Sequence[Decision]:
        """One or more decisions per fact (none: the fact is added).

        ``candidates`` are current memories of the same scope (most similar first, then the
        latest one); a decision may only target their ids.
        """
        ...


@dataclass(slots=True, kw_only=True)
class ConsolidationReport:
    """What one consolidation did (given to ``LongTermMemory(on_consolidation=...)``).

    Attributes:
        decider: the decider's name.
        facts: the facts of the turn.
        decisions: the decisions applied (all ADD after a failure).
        warning: why the decider's answer was not used ("" when it was).
        duration: seconds spent finding candidates and deciding (every attempt).
        attempts: how many times the candidates were read and decided: more than 1 when
            another writer (another process) changed the scope before this one could write.
    """

    decider: str
    facts: list[str]
    decisions: list[Decision] = field(default_factory=list)
    warning: str = ""
    duration: float = 0.0
    attempts: int = 1


_collecting: ContextVar[list[ConsolidationReport] | None] = ContextVar(
    "goagent_consolidations", default=None
)


@contextlib.contextmanager
def collect_consolidations() -> Iterator[list[ConsolidationReport]]:
    """Collect the reports of the consolidations that run inside the block (in this context
    and the tasks it starts), besides any ``on_consolidation`` callback: how a caller that
    shares one memory with others (a durable run's store activity) records what its own call
    decided.
    """
    reports: list[ConsolidationReport] = []
    token = _collecting.set(reports)
    try:
        yield reports
    finally:
        _collecting.reset(token)


def report_consolidation(report: ConsolidationReport) -> None:
    """Give ``report`` to the enclosing :func:`collect_consolidations` block, if any."""
    reports = _collecting.get()
    if reports is not None:
        reports.append(report)


def check_decisions(
    decisions: Sequence[Decision], *, facts: int, candidates: Sequence[MemoryRecord]
) -> list[Decision]:
    """``decisions`` checked against the facts and candidates, with an ADD for each fact that
    got none; one change per target: the last fact's (the facts are in the order the user said
    them, so a later fact's change of a memory replaces an earlier one's, which becomes a NOOP).
    Two changes of one target for the same fact contradict each other: the first stands, as
    the model gave it (a small model answered "UPDATE m1, DELETE m1" for "I moved to Porto").

    Raises:
        DecisionError: an unknown op, a fact index out of range, an UPDATE or DELETE without a
            target or with one outside ``candidates``, or an UPDATE without text.
    """
    known = {c.id for c in candidates}
    for d in decisions:
        if not isinstance(d, Decision):
            raise DecisionError(f"expected Decision objects, got {type(d).__name__}")
        if d.op not in OPS:
            raise DecisionError(f"unknown op {d.op!r}: use one of {', '.join(OPS)}")
        if isinstance(d.fact, bool) or not isinstance(d.fact, int) or not 0 <= d.fact < facts:
            raise DecisionError(f"fact index {d.fact!r} is outside 0..{facts - 1}")
        if d.op in ("UPDATE", "DELETE") and d.target not in known:
            raise DecisionError(f"{d.op} names {d.target!r}, which is not a candidate")
        if d.op == "UPDATE" and not d.text.strip():
            raise DecisionError(f"UPDATE of {d.target!r} has no text")
    out: list[Decision] = []
    changing: dict[str, int] = {}  # target -> the index in out of its latest change
    for d in sorted(decisions, key=lambda d: d.fact):  # in the order the facts were said
        if d.op in ("UPDATE", "DELETE"):
            earlier = changing.get(d.target)
            if earlier is not None:
                if out[earlier].fact == d.fact:
                    continue  # the same fact's second word on it: the first stands
                out[earlier] = Decision(fact=out[earlier].fact, op="NOOP")
            changing[d.target] = len(out)
        out.append(d)
    decided = {d.fact for d in out}
    out.extend(Decision(fact=i, op="ADD") for i in range(facts) if i not in decided)
    return sorted(out, key=lambda d: d.fact)
