"""A message a session takes into a running run (a follow-up, a steering message) is the user's
word as much as the prompt is: long-term memory's write policy gets it, paired with the answer
that replies to it, and the run's answer records the turn it answers (docs/memory.md,
"Corrections of the last answer"). Before the fix only the run's first prompt reached the write
policy: "I moved to Porto." said as a follow-up was never stored, the memory kept "I live in
Lisbon." as current, and the follow-up's answer was stored beside the prompt it did not answer.
"""

from __future__ import annotations

import asyncio

from goagent_py import Agent, Session, tool
from goagent_py._recall import turn_of
from goagent_py.memory import InMemoryStorage, InMemoryVectorStore, LongTermMemory, ShortTermMemory
from goagent_py.memory.base import MEMORY_TURN_KEY
from goagent_py.memory.deciders import RuleDecider
from goagent_py.memory.write_policies import user_statements
from goagent_py.messages import Message, Role, user_message
from goagent_py.testing import FakeEmbedder, ScriptedProvider, tool_call_response


def _slow_tool() -> tuple[object, asyncio.Event, asyncio.Event]:
    started, release = asyncio.Event(), asyncio.Event()

    @tool
    async def lookup() -> str:
        """Look something up."""
        started.set()
        await release.wait()
        return "nothing found"

    return lookup, started, release


async def test_a_follow_up_statement_reaches_long_term_memory_with_its_own_answer() -> None:
    lookup, started, release = _slow_tool()
    memory = LongTermMemory(embedder=FakeEmbedder(), store=InMemoryVectorStore())
    provider = ScriptedProvider(tool_call_response(("lookup", {})), "Hello!", "Noted: Porto.")
    seen: list[tuple[str, str]] = []

    def policy(user: Message, answer: Message) -> list[Message]:
        seen.append((user.text, answer.text))
        return [user, answer]

    agent = Agent(provider=provider, tools=[lookup], long_term_memory=memory, write_policy=policy)
    session = Session(agent)
    running = asyncio.create_task(session.prompt("hello there"))
    await started.wait()
    session.follow_up("I moved to Porto last week.")
    release.set()
    assert (await running).text == "Noted: Porto."
    assert seen == [("hello there", "Hello!"), ("I moved to Porto last week.", "Noted: Porto.")]
    stored = sorted((r.message.role, r.text) for r in await memory.records())
    assert stored == sorted(
        [
            (Role.USER, "hello there"),
            (Role.ASSISTANT, "Hello!"),
            (Role.USER, "I moved to Porto last week."),
            (Role.ASSISTANT, "Noted: Porto."),
        ]
    )


async def test_a_steering_message_is_stored_and_the_answer_is_stored_once() -> None:
    lookup, started, release = _slow_tool()
    memory = LongTermMemory(embedder=FakeEmbedder(), store=InMemoryVectorStore())
    provider = ScriptedProvider(tool_call_response(("lookup", {})), "Done, Bob.")
    session = Session(Agent(provider=provider, tools=[lookup], long_term_memory=memory))
    running = asyncio.create_task(session.prompt("find my order"))
    await started.wait()
    session.steer("By the way, my name is Bob.")
    release.set()
    await running
    stored = sorted((r.message.role, r.text) for r in await memory.records())
    assert stored == sorted(
        [
            (Role.USER, "find my order"),
            (Role.ASSISTANT, "Done, Bob."),
            (Role.USER, "By the way, my name is Bob."),
        ]
    )


async def test_a_fact_corrected_in_a_follow_up_replaces_the_stale_one() -> None:
    memory = LongTermMemory(
        embedder=FakeEmbedder(), store=InMemoryVectorStore(), decider=RuleDecider()
    )
    policy = user_statements(about_user=True)
    storage = InMemoryStorage()
    lookup, started, release = _slow_tool()
    provider = ScriptedProvider(
        "Nice, Lisbon!", tool_call_response(("lookup", {})), "Here it is.", "Noted: Porto."
    )
    agent = Agent(
        provider=provider,
        tools=[lookup],
        long_term_memory=memory,
        write_policy=policy,
        short_term_memory=ShortTermMemory(storage=storage),
    )
    session = Session(agent)
    await session.prompt("I live in Lisbon.")
    running = asyncio.create_task(session.prompt("What's the weather like today?"))
    await started.wait()
    follow_up = user_message("I moved to Porto last week.")
    session.follow_up(follow_up)
    release.set()
    await running
    current = [r.text for r in await memory.records()]
    assert any("Porto" in text for text in current), current
    assert not any("Lisbon" in text for text in current), current
    # The answer records the turn it answers: the follow-up's (what a correction said next
    # refers to), not the run's first prompt's.
    answer = (await storage.load())[-1]
    assert answer.role is Role.ASSISTANT
    assert answer.metadata[MEMORY_TURN_KEY] == turn_of(follow_up)


async def test_a_follow_up_question_gets_the_memories_recalled_for_it() -> None:
    memory = LongTermMemory(embedder=FakeEmbedder(), store=InMemoryVectorStore(), top_k=1)
    await memory.store([user_message("My dog is called Biscuit.")])
    await memory.store([user_message("I live in Lisbon by the sea.")])
    lookup, started, release = _slow_tool()
    provider = ScriptedProvider(tool_call_response(("lookup", {})), "Biscuit.", "In Lisbon.")
    session = Session(Agent(provider=provider, tools=[lookup], long_term_memory=memory))
    running = asyncio.create_task(session.prompt("What is my dog called?"))
    await started.wait()
    session.follow_up("Where do I live by the sea?")
    release.set()
    await running
    first, last = provider.requests[0].messages, provider.requests[-1].messages
    assert "Biscuit" in first[0].text  # the prompt's memories
    # The follow-up's request opens on the memories recalled for the follow-up, once.
    assert "Lisbon" in last[0].text
    assert [m.text for m in last].count(last[0].text) == 1
    assert last[-1].text == "Where do I live by the sea?"
