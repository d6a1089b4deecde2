"""The model-free decider reads changes in Spanish, French and German as it does in English
(docs/memory.md, "The model-free decider", "Other languages"): a move, a new employer, a
name, an age, and "no longer" replace or retract the old fact instead of being added beside it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from goagent_py.memory._fact_slots import parse_fact
from goagent_py.memory.deciders import RuleDecider
from goagent_py.memory.long_term import LongTermMemory
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.memory.write_policies import user_statements
from goagent_py.messages import assistant_message, user_message
from goagent_py.testing import FakeEmbedder

ALL = ("current", "superseded", "deleted")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(minutes=1)
        return self.now


def memory() -> LongTermMemory:
    return LongTermMemory(FakeEmbedder(64), InMemoryVectorStore(), decider=RuleDecider(),
                          clock=Clock())  # fmt: skip


async def say(m: LongTermMemory, *turns: str) -> None:
    policy = user_statements(about_user=True)
    for turn in turns:
        kept = policy(user_message(turn), assistant_message("ok")) or []
        await m.store(kept, session="alice")


async def current(m: LongTermMemory) -> list[str]:
    return sorted(r.text for r in await m.records(session="alice"))


async def states(m: LongTermMemory) -> dict[str, str]:
    return {r.text: r.state for r in await m.records(session="alice", states=ALL)}


@pytest.mark.parametrize(
    ("old", "new", "now"),
    [
        # Spanish
        ("Vivo en Madrid.", "Me mudé a Barcelona.", "Vivo en Barcelona."),
        ("Vivo en Madrid.", "Ahora vivo en Sevilla.", "Ahora vivo en Sevilla."),
        ("Trabajo en Telefónica.", "Ahora trabajo en Google.", "Ahora trabajo en Google."),
        ("Me llamo Ana.", "Me llamo Lucía.", "Me llamo Lucía."),
        ("Tengo 34 años.", "Tengo 35 años.", "Tengo 35 años."),
        # French
        ("J'habite à Paris.", "J'ai déménagé à Lyon.", "J'habite à Lyon."),
        ("J'habite à Paris.", "Nous avons déménagé au Canada.", "J'habite au Canada."),
        ("Je travaille chez Renault.", "Je travaille maintenant chez Airbus.",
         "Je travaille maintenant chez Airbus."),
        ("Je m'appelle Marie.", "Je m'appelle Claire.", "Je m'appelle Claire."),
        ("J'ai 34 ans.", "J'ai 35 ans.", "J'ai 35 ans."),
        # German
        ("Ich wohne in Berlin.", "Ich bin nach München gezogen.", "Ich wohne in München."),
        ("Ich wohne in Berlin.", "Ich wohne jetzt in Hamburg.", "Ich wohne jetzt in Hamburg."),
        ("Ich arbeite bei Siemens.", "Ich arbeite jetzt bei SAP.", "Ich arbeite jetzt bei SAP."),
        ("Ich heiße Jonas.", "Mein Name ist Lukas.", "Mein Name ist Lukas."),
        # across languages: the same slot
        ("I live in Lisbon.", "Ich bin nach München gezogen.", "Ich wohne in München."),
        ("Vivo en Madrid.", "I moved to Porto.", "I live in Porto."),
    ],
)  # fmt: skip
async def test_a_change_in_another_language_replaces_the_old_fact(
    old: str, new: str, now: str
) -> None:
    m = memory()
    await say(m, old, new)
    assert await current(m) == [now]
    assert (await states(m))[old] == "superseded"


@pytest.mark.parametrize(
    ("old", "retraction"),
    [
        ("Vivo en Madrid.", "Ya no vivo en Madrid."),
        ("Trabajo en Telefónica.", "Ya no trabajo en Telefónica."),
        ("J'habite à Paris.", "Je n'habite plus à Paris."),
        ("Je travaille chez Renault.", "Je ne travaille plus chez Renault."),
        ("Ich wohne in Berlin.", "Ich wohne nicht mehr in Berlin."),
        ("Ich arbeite bei Siemens.", "Ich arbeite nicht mehr bei Siemens."),
    ],
)
async def test_no_longer_in_another_language_retracts_the_fact(old: str, retraction: str) -> None:
    m = memory()
    await say(m, "I like tea.", old, retraction)
    assert await current(m) == ["I like tea."]
    assert (await states(m))[old] == "deleted"


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("Vivo en Madrid.", "Trabajo en Google."),
        ("J'habite à Paris.", "Je travaille chez Renault."),
        ("Ich wohne in Berlin.", "Ich arbeite bei Siemens."),
        # someone else's, or not the user's assertion
        ("Vivo en Madrid.", "Mi hermano vive en Roma."),
        ("J'habite à Paris.", "Mon frère habite à Rome."),
        ("Ich wohne in Berlin.", "Mein Bruder wohnt in Rom."),
        ("Trabajo en Telefónica.", "Mi trabajo en Google era aburrido."),
        ("Vivo en Madrid.", "Mi madre dice que vivo en Roma."),
        # hypotheticals
        ("Vivo en Madrid.", "Si vivo en Roma, tomo el metro."),
        ("J'habite à Paris.", "Si j'habite à Lyon, je prends le tram."),
        ("Ich wohne in Berlin.", "Falls ich in Hamburg wohne, fahre ich Rad."),
    ],
)
async def test_compatible_facts_and_other_peoples_stay(first: str, second: str) -> None:
    m = memory()
    await say(m, first, second)
    assert await current(m) == sorted([first, second])


@pytest.mark.parametrize(
    "text", ["¿Vivo en Madrid?", "Wohne ich in Berlin?", "Est-ce que j'habite à Paris ?"]
)
def test_questions_in_those_languages_are_no_facts(text: str) -> None:
    assert parse_fact(text) is None
