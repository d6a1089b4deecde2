"""loop15: a tool that cancels its own task fails alone on every path; every user-code hook the
loop awaits follows the one cancellation rule (``goagent_py/_cancel.py``); a run refuses an
empty prompt (docs/architecture.md, rules 5 and 10, "Running an agent")."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from goagent_py import (
    Agent,
    ImageBlock,
    InvalidInputError,
    Session,
    TextBlock,
    user_message,
)
from goagent_py.testing import ScriptedProvider

# -- an empty prompt ------------------------------------------------------------------------

EMPTY = ["", "   ", "\n\t ", [TextBlock("")], [TextBlock(" "), TextBlock("\n")]]


async def _start(agent: Agent[Any], prompt: Any, how: str) -> None:
    if how == "run":
        await agent.run(prompt)
    elif how == "stream":
        async for _ in agent.stream(prompt):
            pass
    elif how == "session":
        await Session(agent).prompt(prompt)
    else:
        assert how == "run_sync"
        await asyncio.to_thread(agent.run_sync, prompt)


@pytest.mark.parametrize("how", ["run", "stream", "session", "run_sync"])
@pytest.mark.parametrize("prompt", EMPTY, ids=repr)
async def test_an_empty_prompt_is_refused_before_the_model_is_called(prompt: Any, how: str) -> None:
    """A run on nothing sent the model a blank user message (the vendors refuse one); there is
    nothing to answer, so the run is refused before anything is called or stored, saying what
    to do."""
    provider = ScriptedProvider("Hi.")
    agent = Agent(provider=provider)
    with pytest.raises(InvalidInputError, match=r"continue_\(\)") as caught:
        await _start(agent, prompt, how)
    assert "empty" in str(caught.value)
    assert provider.requests == []


@pytest.mark.parametrize("prompt", ["", "  "])
async def test_an_empty_message_among_the_prompts_messages_is_refused(prompt: str) -> None:
    provider = ScriptedProvider("Hi.")
    agent = Agent(provider=provider)
    with pytest.raises(InvalidInputError):
        await agent.run([user_message(prompt), user_message("Hello")])
    session = Session(agent)
    for queue in (session.steer, session.follow_up):
        with pytest.raises(InvalidInputError):
            queue(prompt)
        with pytest.raises(InvalidInputError):
            queue(user_message(prompt))
    assert provider.requests == []


async def test_a_prompt_with_an_image_and_no_text_still_runs() -> None:
    provider = ScriptedProvider("A dot.")
    agent = Agent(provider=provider)
    png = bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c63000100000500010d0a2db40000000049454e44ae426082"
    )
    result = await agent.run([ImageBlock(data=png, media_type="image/png"), TextBlock("")])
    assert result.text == "A dot."
    assert len(provider.requests) == 1
