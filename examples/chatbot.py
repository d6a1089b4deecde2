"""Chatbot: a multi-turn conversation with short-term memory.

Run it:

    python examples/chatbot.py                        # the embedded local model, a demo chat
    python examples/chatbot.py --repl                 # type your own lines
    python examples/chatbot.py --provider scripted    # an echoing stand-in model (offline)
    python examples/chatbot.py --provider openai:gpt-4o-mini --repl

The agent keeps the conversation in a short-term memory and sends it with every turn, so the
model sees what was said before. For memory that survives restarts see chatbot_persistent.py.
"""

from __future__ import annotations

import argparse
import asyncio

from goagent_py import Agent, CompletionRequest, Message, Role
from goagent_py.testing import FunctionProvider


class ConversationMemory:
    """The smallest short-term memory: a list (goagent_py.memory has persistent ones)."""

    def __init__(self) -> None:
        self._messages: list[Message] = []

    async def messages(self) -> list[Message]:
        return list(self._messages)

    async def append(self, *messages: Message) -> None:
        self._messages.extend(messages)


def echo_model(request: CompletionRequest) -> str:
    """A stand-in model that shows it sees the whole conversation."""
    said = [m.text for m in request.messages if m.role is Role.USER]
    earlier = f" Before that you said: {said[-2]!r}." if len(said) > 1 else ""
    return f"You said {said[-1]!r} ({len(said)} messages from you so far).{earlier}"


async def main() -> None:
    parser = argparse.ArgumentParser(description="A multi-turn chatbot.")
    parser.add_argument(
        "--provider",
        default="local",
        help="scripted, local, anthropic:MODEL, openai:MODEL or ollama:MODEL",
    )
    parser.add_argument("--repl", action="store_true", help="type your own lines")
    args = parser.parse_args()
    if args.provider == "scripted":
        provider, model = FunctionProvider(echo_model), "echo"
    else:
        from goagent_py.cli.main import provider_from_spec

        provider, model = provider_from_spec(args.provider)
    memory = ConversationMemory()
    agent = Agent(
        provider=provider,
        model=model,
        short_term_memory=memory,
        system_prompt="You are a friendly assistant. Answer in one sentence.",
    )
    if args.repl:
        while True:
            try:
                line = (await asyncio.to_thread(input, "you> ")).strip()
            except EOFError:
                break
            if line in ("", "/exit"):
                break
            print("bot>", (await agent.run(line)).text)
        return
    for line in ("Hi, I'm Ada.", "I like chess.", "What do you know about me?"):
        print("you>", line)
        print("bot>", (await agent.run(line)).text)
    print(f"(memory holds {len(await memory.messages())} messages)")


if __name__ == "__main__":
    asyncio.run(main())
