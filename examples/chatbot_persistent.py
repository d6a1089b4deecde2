"""A chatbot that remembers across restarts: SQLite history plus long-term semantic recall.

Run it (each run is a new process; run it twice and it still knows you):

    python examples/chatbot_persistent.py "My name is Ada and I love chess."
    python examples/chatbot_persistent.py "What do you know about me?"
    python examples/chatbot_persistent.py --provider scripted "hello"   # offline stand-in model

Short-term memory keeps the conversation in ``chatbot.db`` (SQLite, one transaction per turn,
a token window on what is sent). Long-term memory embeds each turn with the local
all-MiniLM-L6-v2 model and stores it in ``chatbot-memory.db`` (sqlite-vec); the most relevant
memories are recalled into every new run as one delimited block. Needs the ``local`` and
``vector`` extras. ``--data DIR`` chooses the folder (default: the current one).
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from goagent_py import Agent, CompletionRequest, Hooks, Role, ScoredMessage
from goagent_py.memory import LongTermMemory, ShortTermMemory, SQLiteStorage, TokenWindow
from goagent_py.memory.vector import SqliteVecStore
from goagent_py.providers import SentenceTransformerEmbedder
from goagent_py.testing import FunctionProvider


def recall_echo(request: CompletionRequest) -> str:
    """A stand-in model that says what it was reminded of."""
    recalled = [m.text for m in request.messages if m.metadata.get("goagent.recall")]
    said = [m.text for m in request.messages if m.role is Role.USER and m.text]
    memory = recalled[0].splitlines()[2] if recalled else "nothing recalled yet"
    return f"You said {said[-1]!r}. I remember: {memory}"


async def main() -> None:
    parser = argparse.ArgumentParser(description="A chatbot with persistent memory.")
    parser.add_argument("message")
    parser.add_argument(
        "--provider",
        default="local",
        help="scripted, local, anthropic:MODEL, openai:MODEL or ollama:MODEL",
    )
    parser.add_argument("--data", default=".", help="where the two database files go")
    args = parser.parse_args()
    if args.provider == "scripted":
        provider, model = FunctionProvider(recall_echo), "scripted"
    else:
        from goagent_py.cli.main import provider_from_spec

        provider, model = provider_from_spec(args.provider)

    data = Path(args.data)
    embedder = SentenceTransformerEmbedder()
    recalled: list[ScoredMessage] = []
    async with (
        SQLiteStorage(data / "chatbot.db", session_id="demo") as storage,
        SqliteVecStore(data / "chatbot-memory.db", dimensions=embedder.dimensions) as store,
    ):
        agent = Agent(
            provider=provider,
            model=model,
            name="demo",
            system_prompt="You are a friendly assistant with a memory. Answer in one sentence.",
            short_term_memory=ShortTermMemory(storage, TokenWindow(2000)),
            long_term_memory=LongTermMemory(embedder, store),
            hooks=Hooks(on_long_term_retrieve=lambda results, d, e: recalled.extend(results)),
        )
        answer = (await agent.run(args.message)).text
        for scored in recalled:
            print(f"(recalled {scored.score:.2f}: {scored.message.text})")
        print(answer)


if __name__ == "__main__":
    asyncio.run(main())
