"""A prompt another agent wrote is not the user's word. An agent used as a tool gets its task
from the parent's model, and a flow node after the first gets the node before's output (text a
web page or a tool may have shaped). Before the fix such a prompt reached long-term memory as
the user's own statement: "I moved to Paris." in a page the first node summarised became a
user fact of the second node's memory and replaced the user's "I live in Lisbon.". Now the
prompt is recorded as written by an agent (``goagent.provenance`` "assistant"): it is kept,
never consolidated with the user's facts, and recalled marked as not the user's.
"""

from __future__ import annotations

import pytest

from goagent_py import Agent
from goagent_py._recall import recall_message
from goagent_py.memory import InMemoryVectorStore, LongTermMemory
from goagent_py.memory.deciders import RuleDecider
from goagent_py.memory.long_term import PROVENANCE_KEY
from goagent_py.memory.write_policies import user_statements
from goagent_py.messages import ScoredMessage, TextBlock, user_message
from goagent_py.orchestration import Pipeline
from goagent_py.testing import FakeEmbedder, ScriptedProvider, tool_call_response


async def _memory() -> LongTermMemory:
    memory = LongTermMemory(
        embedder=FakeEmbedder(), store=InMemoryVectorStore(), decider=RuleDecider()
    )
    await memory.store([user_message("I live in Lisbon.")], session="assistant")
    return memory


def _assistant(memory: LongTermMemory) -> Agent:
    return Agent(
        provider=ScriptedProvider("Noted."),
        name="assistant",
        long_term_memory=memory,
        write_policy=user_statements(about_user=True),
    )


async def _check(memory: LongTermMemory) -> None:
    records = {r.text: r for r in await memory.records(session="assistant")}
    assert "I live in Lisbon." in records  # the user's fact stays current
    (delegated,) = [r for text, r in records.items() if "Paris" in text]
    assert delegated.message.metadata[PROVENANCE_KEY] == "assistant"
    recalled = await memory.retrieve([TextBlock("Paris")], top_k=5, session="assistant")
    block = recall_message(recalled).text
    line = next(line for line in block.splitlines() if "Paris" in line)
    assert "not the user" in line


async def test_a_flow_nodes_input_from_another_node_is_not_a_user_fact() -> None:
    memory = await _memory()
    web = Agent(provider=ScriptedProvider("I moved to Paris."), name="web")
    await Pipeline(web, _assistant(memory)).run("Summarise this page.")
    await _check(memory)


async def test_a_task_from_a_parent_agent_is_not_a_user_fact() -> None:
    memory = await _memory()
    call = tool_call_response(("assistant", {"prompt": "I moved to Paris."}))
    lead = Agent(
        provider=ScriptedProvider(call, "Done."),
        tools=[_assistant(memory).as_tool(name="assistant", description="Keeps notes.")],
    )
    await lead.run("Read the page and tell the assistant.")
    await _check(memory)


async def test_the_flows_own_input_is_still_the_users() -> None:
    memory = await _memory()
    await Pipeline(_assistant(memory)).run("I moved to Porto.")
    texts = [r.text for r in await memory.records(session="assistant")]
    assert texts == ["I live in Porto."]


@pytest.mark.parametrize("origin", ["assistant"])
def test_a_recalled_agent_written_memory_is_marked(origin: str) -> None:
    said = user_message("I moved to Paris.")
    said.metadata[PROVENANCE_KEY] = origin
    text = recall_message([ScoredMessage(said, 0.9, "m1")]).text
    assert "not the user" in text
