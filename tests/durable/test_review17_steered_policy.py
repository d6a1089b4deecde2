"""A durable turn with steering taken before its answer: the worker runs the agent's write
policy on each user message (the prompt and the steering), as a plain run does
(tests/test_review17_queued_statements.py). Before, a turn of more than one user message was
stored whole, past the policy: a statements-only chat stored every request and the answer."""

from __future__ import annotations

import logging
from types import SimpleNamespace

from goagent_py.durable._activities import _AgentActivities
from goagent_py.memory.base import MEMORY_TURN_KEY
from goagent_py.memory.write_policies import user_statements
from goagent_py.messages import Message, assistant_message, user_message


async def test_each_user_message_of_a_durable_turn_goes_through_the_write_policy() -> None:
    worker = SimpleNamespace(
        options=SimpleNamespace(
            write_policy=user_statements(about_user=True), logger=logging.getLogger("t")
        )
    )
    prompt = user_message("What is the weather like today?")
    steer = user_message("By the way, my name is Priya.")
    steer = Message(steer.role, steer.content, metadata={MEMORY_TURN_KEY: "t2"})
    turn = [prompt, assistant_message("Sunny."), steer]
    kept = await _AgentActivities._chosen(worker, turn)  # type: ignore[arg-type]
    assert kept is not None
    assert [m.text for m in kept] == ["By the way, my name is Priya."]
    assert kept[0].metadata[MEMORY_TURN_KEY] == "t2"


async def test_the_answer_a_policy_keeps_for_two_messages_is_stored_once() -> None:
    def both(user: Message, answer: Message) -> list[Message]:
        return [user, answer]

    worker = SimpleNamespace(options=SimpleNamespace(write_policy=both, logger=None))
    turn = [user_message("one two three"), assistant_message("ok"), user_message("four five")]
    kept = await _AgentActivities._chosen(worker, turn)  # type: ignore[arg-type]
    assert kept is not None
    assert [m.text for m in kept] == ["one two three", "ok", "four five"]
