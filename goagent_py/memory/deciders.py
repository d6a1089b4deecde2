"""The consolidation deciders: model-free rules, and any model answering in JSON.

:class:`RuleDecider` needs no model (the default of ``goagent-py chat``, offline use and the
embedded small model): it reads English first-person facts with one value at a time (where I
live, my name, my job or employer, my phone, email, age, partner, car, and any "my X is Y"),
the same of the user's people ("My wife works at Google", "Anna moved to Oslo": slots of
theirs), and, in Spanish, French and German, home, work, name, age and origin and their
changes (any other language is added as said: use :class:`ModelDecider` for it);
replaces the old value with the new one, leaves compatible facts alone ("I like tea" + "I also
like coffee"; "my sister is Meera" + "my brother is Ravi") and deletes on explicit requests
("forget that I live in Lisbon", "I don't work at Acme anymore", "that's no longer true").

:class:`ModelDecider` asks a model (any :class:`~goagent_py.provider.Provider`) for a JSON
answer (the request's structured output: a schema whose ids are the candidates' aliases),
validates it, retries once with the error, and only ever sees the candidates under short
aliases (``m1``, ``m2``...), so it cannot name a memory outside them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from goagent_py._json_text import loads
from goagent_py.errors import ConfigurationError
from goagent_py.memory._corrections import corrected_text, parse_correction
from goagent_py.memory._fact_slots import Fact, named_as, parse_fact, same_slot, same_value
from goagent_py.memory._people import CHANGE, one_person, person_of, with_name
from goagent_py.memory.consolidation import OPS, Decision, DecisionError
from goagent_py.memory.records import MemoryRecord
from goagent_py.memory.write_policies import statement_clauses
from goagent_py.messages import Usage, user_message
from goagent_py.provider import CompletionRequest, OutputFormat, Provider

__all__ = ["ModelDecider", "RuleDecider"]

_STOP = frozenset(
    [
        "i",
        "i'm",
        "me",
        "my",
        "mine",
        "we",
        "our",
        "us",
        "a",
        "an",
        "the",
        "that",
        "this",
        "is",
        "am",
        "are",
        "was",
        "were",
        "to",
        "in",
        "at",
        "of",
        "on",
        "for",
        "and",
        "about",
    ]
)
_EPOCH = datetime.min.replace(tzinfo=UTC)


class RuleDecider:
    """The model-free decider for English first-person facts, and the main ones in Spanish,
    French and German (see the module docstring)."""

    name = "rules"

    def __repr__(self) -> str:
        return "RuleDecider()"

    async def decide(
        self, facts: Sequence[str], candidates: Sequence[MemoryRecord]
    ) -> list[Decision]:
        """Decisions for ``facts`` against ``candidates`` (see :class:`Decider`)."""
        return self.decide_sync(facts, candidates)

    def decide_sync(
        self, facts: Sequence[str], candidates: Sequence[MemoryRecord]
    ) -> list[Decision]:
        """The same, without an event loop (the rules do no I/O).

        The facts are read in order, as the user said them: a fact of the turn that a later
        one changes ("I live in Lisbon, but I moved to Porto") or takes back ("... That's no
        longer true.") is not stored, and the later one alone is decided against the
        candidates (each candidate is changed once, by the last word).
        """
        known = [(c, parse_fact(c.text)) for c in candidates if c.message.role == "user"]
        decided: list[list[Decision]] = []
        said: list[tuple[int, Fact]] = []  # this turn's facts still standing, in order
        meant: dict[int, str] = {}  # a corrected fact of this turn: the text it stands for
        for index, text in enumerate(facts):
            fixed = _correct(index, text, facts, meant, known)
            if fixed is not None:
                text, replaced, earlier_fix = fixed
                meant[index] = text
                if earlier_fix is not None:  # the previous fact of this turn was the slip
                    decided[earlier_fix] = [Decision(fact=earlier_fix, op="NOOP")]
                    said = [(i, f) for i, f in said if i != earlier_fix]
                else:  # the latest memory was the slip: it was never true
                    known = [(c, f) for c, f in known if c is not replaced]
                decided.append(
                    [Decision(fact=index, op="DELETE", target=replaced.id)]
                    if replaced is not None
                    else []
                )
                fact = parse_fact(text)
                if fact is None:
                    decided[-1].append(Decision(fact=index, op="ADD", text=text))
                    continue
            else:
                fact = parse_fact(text)
                decided.append([])
            if fact is None:
                decided[-1].append(Decision(fact=index, op="ADD"))
                continue
            if fact.kind != "retract" and any(_same(f, fact) for _, f in said):
                decided[-1].append(Decision(fact=index, op="NOOP"))  # said twice this turn
                continue
            earlier = _replaced_in_turn(fact, said)
            for i in earlier:
                decided[i] = [Decision(fact=i, op="NOOP")]
            if fact.kind == "retract" and fact.slot == "" and earlier:
                # "That's no longer true" right after a fact of this turn takes that one back,
                # and the memory that says the same, if one does (not the latest memory).
                (taken,) = [f for i, f in said if i in earlier]
                fact = Fact(taken.slot, taken.value, "retract")
            said = [(i, f) for i, f in said if i not in earlier]
            if fact.kind == "retract":
                decided[-1] += _retract(index, fact, known)
                continue
            said.append((index, fact))
            # A negation stored as said ("I don't like coffee.") is no longer true once the
            # user says the fact itself.
            decided[-1] += [
                Decision(fact=index, op="DELETE", target=c.id) for c in _negations(fact, known)
            ]
            known = [(c, f) for c, f in known if not _negates(f, fact)]
            # A message stored whole ("I live in Porto and my sister is Meera.", the agent's
            # default write policy) says more than the one fact read in it: it is kept as said,
            # never dropped as known nor reworded to that fact alone.
            more = len(statement_clauses(text)) > 1
            if fact.kind == "multi":
                same = [c for c, f in known if f == fact or (f and _same(f, fact))]
                decided[-1].append(Decision(fact=index, op="NOOP" if same and not more else "ADD"))
            else:
                decided[-1] += _set(index, text, fact, known, more=more)
        # A corrected fact is stored as the statement it corrects, never as "I meant John".
        return [
            replace(d, text=meant[d.fact])
            if d.fact in meant and d.op == "ADD" and not d.text
            else d
            for ds in decided
            for d in ds
        ]


def _correct(
    index: int,
    text: str,
    facts: Sequence[str],
    meant: dict[int, str],
    known: list[tuple[MemoryRecord, Fact | None]],
) -> tuple[str, MemoryRecord | None, int | None] | None:
    """``text`` read as a correction of the statement before it ("Sorry, I meant John."):
    the corrected statement, the memory it replaces (None when the slip is this turn's
    previous fact) and the index of that fact (None when it is a memory); None when
    ``text`` is no correction or fits nothing said before it.

    The statement before it is this turn's previous fact, or, for a turn's first fact, the
    memories the turn follows: ``just_said`` (the latest, stored together, in this
    conversation and minutes ago) and ``recalled`` (those the answer the turn replies to was
    given: "Where do I live?" answered from a week-old "I live in Lisbon."): the just-said
    memory the correction fits best, else the best recalled one it fits. Any other fact is
    never what a correction is about.
    """
    correction = parse_correction(text)
    if correction is None:
        return None
    if index > 0:
        previous = meant.get(index - 1, facts[index - 1])
        said = parse_fact(previous)
        if said is not None and said.kind == "retract":
            return None
        fixed = corrected_text(previous, correction)
        return (fixed[0], None, index - 1) if fixed is not None else None
    usable = [(c, f) for c, f in known if f is None or f.kind != "retract"]
    best: tuple[float, str, MemoryRecord] | None = None
    for candidate in [c for c, _ in usable if c.just_said]:
        fixed = corrected_text(candidate.text, correction)
        if fixed is not None and (best is None or fixed[1] > best[0]):
            best = (fixed[1], fixed[0], candidate)
    if best is not None:
        return best[1], best[2], None
    # The answer's memories, best recalled first: "Madrid" corrects the home the answer
    # gave, not a sister's name recalled beside it that is spelled more like it.
    for candidate in sorted((c for c, _ in usable if c.recalled), key=lambda c: c.recalled):
        fixed = corrected_text(candidate.text, correction)
        if fixed is not None:
            return fixed[0], candidate, None
    return None


def _negates(known: Fact | None, fact: Fact) -> bool:
    """Whether ``known`` (a memory read as a retraction, "I don't like coffee.") denies what
    ``fact`` says ("I like coffee.")."""
    return (
        known is not None
        and known.kind == "retract"
        and not known.past  # "I used to live in Paris" stays true when the user is back
        and known.slot == fact.slot
        and bool(known.value)
        and same_value(known.value, fact.value)
    )


def _negations(fact: Fact, known: list[tuple[MemoryRecord, Fact | None]]) -> list[MemoryRecord]:
    return [c for c, f in known if _negates(f, fact)]


def _replaced_in_turn(fact: Fact, said: list[tuple[int, Fact]]) -> set[int]:
    """The indexes of this turn's earlier facts that ``fact`` changes or takes back."""
    if fact.kind == "set":
        return {i for i, f in said if f.kind == "set" and f.slot == fact.slot}
    if fact.kind != "retract":
        return set()
    if fact.slot == "":
        return {said[-1][0]} if said else set()
    if fact.slot == "?":
        words = _content_words(fact.value)
        return {i for i, f in said if words and words <= _content_words(f.value)}
    return {
        i
        for i, f in said
        if same_slot(f.slot, fact) and (not fact.value or same_value(f.value, fact.value))
    }


def _same(a: Fact, b: Fact) -> bool:
    return a.kind == b.kind and a.slot == b.slot and same_value(a.value, b.value)


def _rivals(
    fact: Fact, known: list[tuple[MemoryRecord, Fact | None]], *, change: bool = False
) -> list[MemoryRecord]:
    """The memories holding the value ``fact`` gives: of its slot, or of the same person
    named with or without the relation ("My brother Tom lives in Oslo." for "Tom moved to
    Bergen."), unless two people of that name are known ("my brother Tom", "my colleague
    Tom"): then a fact of "Tom" alone is said of neither; or of the relation said with and
    without a name when they are one person (:func:`_linked`; ``change``: the fact says a
    change)."""
    sets = [(c, f) for c, f in known if f is not None and f.kind == "set"]
    same = [(c, f) for c, f in sets if same_slot(f.slot, fact)]
    if any(f.slot != fact.slot for _, f in same) and _two_of(fact.slot, known):
        same = [(c, f) for c, f in same if f.slot == fact.slot]
    linked = [c for c, f in sets if _linked(f, fact, known, change=change)]
    return [c for c, _ in same] + [c for c in linked if all(c is not d for d, _ in same)]


def _linked(
    memory: Fact, fact: Fact, known: list[tuple[MemoryRecord, Fact | None]], *, change: bool
) -> bool:
    """Whether ``memory`` is ``fact``'s slot of the same person said with and without a name
    ("sister:home", "sister ana:home"; :func:`~goagent_py.memory._people.one_person`)."""
    known_who, colon, what = memory.slot.rpartition(":")
    said_who, said_colon, said_what = fact.slot.rpartition(":")
    if not (colon and said_colon) or what != said_what or known_who == said_who:
        return False
    people = [said_who] + [f.slot.rpartition(":")[0] or f.slot for _, f in known if f]
    same = bool(memory.value) and same_value(memory.value, fact.value)
    return one_person(known_who, said_who, same_value=same, change=change, people=people)


def _holds(memory: Fact, fact: Fact) -> bool:
    """Whether ``memory`` already says ``fact``: the same, or the same value said of the same
    person with the name the fact leaves out ("My sister Ana lives in Lisbon." holds "My
    sister lives in Lisbon.")."""
    if _same(memory, fact):
        return True
    if memory.kind != fact.kind or not same_value(memory.value, fact.value):
        return False
    known, said = memory.slot.rpartition(":")[0], fact.slot.rpartition(":")[0]
    a, b = person_of(known), person_of(said)
    return a is not None and b is not None and bool(a[1]) and b[2] and a[0] == b[0]


def _two_of(slot: str, known: list[tuple[MemoryRecord, Fact | None]]) -> bool:
    """Whether two people known by relation share the name of ``slot``'s person."""
    who = slot.rpartition(":")[0]
    name = who.split()[-1] if who else ""
    said = [who] + [f.slot.rpartition(":")[0] for _, f in known if f is not None]
    people = {p for p in said if len(p.split()) == 2 and named_as(p, name)}
    return len(people) > 1


def _set(
    index: int,
    text: str,
    fact: Fact,
    known: list[tuple[MemoryRecord, Fact | None]],
    *,
    more: bool = False,
) -> list[Decision]:
    """``fact``'s new value against the memories holding one (``more``: ``text`` says more
    than ``fact``, so it is stored as said)."""
    rivals = _rivals(fact, known, change=bool(CHANGE.search(text)))
    canonical = "" if more else fact.canonical
    if not rivals:
        return [Decision(fact=index, op="ADD", text=canonical)]
    if any(_holds(f, fact) for c, f in known if f is not None and c in rivals):
        stale = [c for c, f in known if c in rivals and f is not None and not _holds(f, fact)]
        keep = [Decision(fact=index, op="ADD" if more else "NOOP")]
        return keep + [Decision(fact=index, op="DELETE", target=c.id) for c in stale]
    newest, *older = sorted(rivals, key=lambda c: c.created_at or _EPOCH, reverse=True)
    merged = canonical or text
    relation = person_of(fact.slot.rpartition(":")[0])
    if relation is not None and relation[2]:  # "my sister" for the one named before: her name
        merged = with_name(merged, relation[0], newest.text)
    return [Decision(fact=index, op="UPDATE", target=newest.id, text=merged)] + [
        Decision(fact=index, op="DELETE", target=c.id) for c in older
    ]


def _retract(
    index: int, fact: Fact, known: list[tuple[MemoryRecord, Fact | None]]
) -> list[Decision]:
    if fact.slot == "":
        # "That's no longer true." takes back what the turn follows, never an older fact:
        # the statement just said, else the best memory the answer it replies to used.
        said = [c for c, _ in known if c.just_said]
        used = sorted((c for c, _ in known if c.recalled), key=lambda c: c.recalled)
        if said:
            latest = max(said, key=lambda c: c.created_at or _EPOCH)
        elif used:
            latest = used[0]
        else:
            return [Decision(fact=index, op="NOOP")]
        return [Decision(fact=index, op="DELETE", target=latest.id)]
    if fact.slot == "?":
        words = _content_words(fact.value)
        targets = [
            c
            for c, f in known
            if words and words <= _content_words(c.text) and (f is None or f.kind != "retract")
        ]
    else:
        # A retraction says a change: "my sister" takes back her named self's fact when
        # she is the only sister compared, or the value says which one.
        targets = [
            c
            for c, f in known
            if f is not None
            and f.kind != "retract"
            and (same_slot(f.slot, fact) or _linked(f, fact, known, change=True))
            and (not fact.value or same_value(f.value, fact.value))
        ]
    if not targets and fact.words:
        # Nothing of the slot: a memory the rules cannot read as a slot ("My sister lives in
        # Paris.", "I have a cat named Tom.") that holds every word of what is taken back.
        # A memory read as another slot is not one ("forget my number" leaves "my wife's
        # phone number is ...").
        words = _content_words(fact.words)
        targets = [
            c
            for c, f in known
            if (f is None or f.kind == "multi") and words and words <= _content_words(c.text)
        ]
    if not targets:
        # "Forget X" with nothing to forget stores nothing; "I quit Acme" is kept as said.
        return [Decision(fact=index, op="ADD" if fact.event else "NOOP")]
    deleted = [Decision(fact=index, op="DELETE", target=c.id) for c in targets]
    # A sentence that says more than what it takes back is kept as said, nothing lost.
    return deleted + ([Decision(fact=index, op="ADD")] if fact.more else [])


def _content_words(text: str) -> set[str]:
    """The words of ``text`` that say something, a verb's or noun's "s" dropped ("My brother
    eats meat" holds "My brother eat meat", what "My brother no longer eats meat" takes
    back)."""
    words = re.findall(r"[a-z0-9']+", text.casefold().replace("\u2019", "'"))
    return {_stem(w) for w in words if w not in _STOP}


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


# -- model decider ----------------------------------------------------------------------------

_SYSTEM = """You keep a user's long-term memory up to date. You get the NEW FACTS the user just \
stated and the EXISTING MEMORIES most similar to them. For each new fact decide:
- ADD: it is new information (also when it adds to a memory without contradicting it, e.g. \
"I like tea" then "I also like coffee").
- UPDATE: it changes an existing memory (a new value for something that has one value: where \
the user lives, their name, job, employer, phone, age, partner, car, a favourite...). Give the \
memory's id and the merged text, written as the user would say it now ("I live in Porto.").
- DELETE: the user says an existing memory is no longer true or asks to forget it. Give its id.
- NOOP: the memory already says it.
A correction of what the user just said ("Sorry, I meant John.", "*John") is an UPDATE of \
the memory marked (latest) that it corrects, with the corrected text ("My brother is called \
John."); a correction of the last answer ("No wait, Madrid.") is an UPDATE of the memory \
marked (used in the last answer) that it corrects.
Only use ids from EXISTING MEMORIES. Answer with JSON only, no prose:
{"decisions": [{"fact": 0, "op": "UPDATE", "id": "m1", "text": "I live in Porto."}]}"""


class _WireDecision(BaseModel):
    model_config = ConfigDict(extra="ignore")
    fact: int
    op: Literal["ADD", "UPDATE", "DELETE", "NOOP"]
    id: str | None = None
    text: str | None = None


class _WireAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")
    decisions: list[_WireDecision]


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


def parse_model_answer(text: str, aliases: dict[str, str], facts: int) -> list[Decision]:
    """The model's JSON answer as decisions, its aliases mapped back to memory ids.

    Raises:
        DecisionError: not JSON of the expected shape, a fact index out of range, or an id
            that is not one of ``aliases`` (the candidates).
    """
    body = _FENCE.sub("", text.strip())
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end < start:
        raise DecisionError("the answer holds no JSON object")
    try:
        answer = _WireAnswer.model_validate(loads(body[start : end + 1]))
    except (ValueError, ValidationError) as exc:
        raise DecisionError(f"the answer is not valid decisions JSON: {exc}") from None
    out: list[Decision] = []
    for d in answer.decisions:
        if not 0 <= d.fact < facts:
            raise DecisionError(f"fact {d.fact} is outside 0..{facts - 1}")
        target = ""
        if d.op in ("UPDATE", "DELETE"):
            if d.id not in aliases:
                raise DecisionError(f"{d.op} names {d.id!r}, which is not one of the memories")
            target = aliases[d.id]
        if d.op == "UPDATE" and not (d.text or "").strip():
            raise DecisionError(f"UPDATE of {d.id} has no text")
        out.append(Decision(fact=d.fact, op=d.op, target=target, text=(d.text or "").strip()))
    return out


class ModelDecider:
    """A decider that asks ``provider`` (see the module docstring).

    Args:
        provider: any provider; a small local model does poorly here (use :class:`RuleDecider`).
        model: the model name to ask.
        max_tokens: the answer's token limit.
        retries: how many times an invalid answer is asked again, with the error (default 1).

    Attributes:
        usage: the tokens all its calls used so far (for cost figures).
        calls: how many model calls it made.
    """

    name = "model"

    def __init__(
        self, provider: Provider, *, model: str, max_tokens: int = 600, retries: int = 1
    ) -> None:
        if not isinstance(provider, Provider):
            raise ConfigurationError(
                f"ModelDecider needs a provider with async complete(request), "
                f"got {type(provider).__name__}"
            )
        if retries < 0:
            raise ConfigurationError(f"retries must be >= 0, got {retries}")
        self.provider = provider
        self.model = model
        self.max_tokens = max_tokens
        self.retries = retries
        self.usage = Usage()
        self.calls = 0

    def __repr__(self) -> str:
        return f"ModelDecider({type(self.provider).__name__}, model={self.model!r})"

    async def decide(
        self, facts: Sequence[str], candidates: Sequence[MemoryRecord]
    ) -> list[Decision]:
        """Ask the model; an invalid answer is asked again ``retries`` times. Without
        candidates, every fact is added and the model is not called.

        Raises:
            DecisionError: the last answer was still invalid.
        """
        if not candidates:
            return []  # nothing it could change: every fact is added, without a model call
        aliases = {f"m{i}": c.id for i, c in enumerate(candidates, 1)}
        prompt = _prompt(facts, candidates)
        error: DecisionError | None = None
        for _ in range(self.retries + 1):
            text = prompt
            if error is not None:
                text += f"\n\nYour previous answer was invalid ({error}). Answer with JSON only."
            request = CompletionRequest(
                model=self.model,
                system_prompt=_SYSTEM,
                messages=[user_message(text)],
                max_tokens=self.max_tokens,
                output=_answer_format(len(facts), list(aliases)),
            )
            response = await self.provider.complete(request)
            self.calls += 1
            self.usage = self.usage + response.usage
            try:
                return parse_model_answer(response.message.text, aliases, len(facts))
            except DecisionError as exc:
                error = exc
        assert error is not None
        raise error


def _answer_format(facts: int, aliases: list[str]) -> OutputFormat:
    """The answer's JSON schema, sent as the request's structured output: a provider that
    enforces it (OpenAI, Anthropic, Ollama, llama.cpp's grammar) can only name one of the
    facts and a candidate's alias (or "" for ADD and NOOP). The answer is still validated:
    others ignore it."""
    decision = {
        "type": "object",
        "properties": {
            "fact": {"type": "integer", "enum": list(range(facts))},
            "op": {"type": "string", "enum": list(OPS)},
            "id": {"type": "string", "enum": [*aliases, ""]},
            "text": {"type": "string"},
        },
        "required": ["fact", "op", "id", "text"],
        "additionalProperties": False,
    }
    schema = {
        "type": "object",
        "properties": {"decisions": {"type": "array", "items": decision}},
        "required": ["decisions"],
        "additionalProperties": False,
    }
    return OutputFormat("memory_decisions", schema, "what each new fact does to the memories")


def _prompt(facts: Sequence[str], candidates: Sequence[MemoryRecord]) -> str:
    lines: list[Any] = ["NEW FACTS:"]
    lines += [f"{i}: {json.dumps(f)}" for i, f in enumerate(facts)]
    lines.append("EXISTING MEMORIES:")
    for i, c in enumerate(candidates, 1):
        said = f" (said {c.created_at.date().isoformat()})" if c.created_at else ""
        if c.just_said:  # what this turn follows (not a fact a week old)
            said += " (latest)"
        if c.recalled:  # what the answer this turn replies to was given
            said += " (used in the last answer)"
        lines.append(f"m{i}{said}: {json.dumps(c.text)}")
    if not candidates:
        lines.append("(none)")
    return "\n".join(lines)
