"""RAG over a folder of Markdown: index it, let the agent search it, answer with a citation.

Run it:

    python examples/rag_docs.py [--provider local|scripted|anthropic:MODEL|...]
                                [--embedder auto|local|fake] [--docs FOLDER]

It indexes ``examples/docs`` (three Markdown pages of a made-up weather API) into one SQLite
file (sqlite-vec vectors + FTS5 keywords, hybrid search), shows that re-indexing the unchanged
folder writes nothing, then runs an agent with the ``search_knowledge_base`` tool; the tool
result it reads is printed. The model is the embedded local one by default (offline; tiny, so
its answer is rough); ``--provider scripted`` is a stand-in that calls the tool and answers
citing passage [1]; any ``vendor:MODEL`` works too. The embedder is the local
all-MiniLM-L6-v2 when the ``local`` extra is installed (``--embedder auto``, the default), else
goagent_py.testing.FakeEmbedder.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import tempfile
from pathlib import Path
from typing import Any

from goagent_py import Agent, Hooks, ToolCall, ToolResult
from goagent_py.rag import IndexProgress, Pipeline, load_directory
from goagent_py.testing import FakeEmbedder, ScriptedProvider, text_response, tool_call_response

DOCS = Path(__file__).resolve().parent / "docs"
QUESTION = "What does error WX-504 mean, and what should I do about it?"


def make_embedder(choice: str) -> tuple[Any, int]:
    """The local sentence embedder when available (or asked for), else the fake one."""
    if choice == "local" or (
        choice == "auto" and importlib.util.find_spec("sentence_transformers") is not None
    ):
        from goagent_py.providers.sentence_transformers import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(), 384
    return FakeEmbedder(384), 384


def scripted_model() -> ScriptedProvider:
    """A stand-in model that searches the knowledge base, then answers with a citation."""
    return ScriptedProvider(
        tool_call_response(ToolCall("call_1", "search_knowledge_base", {"query": "error WX-504"})),
        text_response(
            "WX-504 means the upstream weather station did not answer in time. Retry after a few "
            "seconds; if it keeps failing for one city, ask for the nearest larger city [1] "
            "(errors.md)."
        ),
    )


def show_progress(p: IndexProgress) -> None:
    d = p.document
    print(f"  [{p.done}/{p.total}] {d.source}: {d.chunks} chunks, {d.written} written")


def show_tool_result(result: ToolResult) -> None:
    text = "".join(getattr(b, "text", "") for b in result.content)
    print(f"\ntool {result.call.name}({result.call.arguments}) returned:\n{text}\n")


async def main(embedder_choice: str, docs: Path, provider_spec: str = "scripted") -> None:
    embedder, dims = make_embedder(embedder_choice)
    print(f"embedder: {type(embedder).__name__}")
    with tempfile.TemporaryDirectory() as tmp:
        async with Pipeline.sqlite(Path(tmp) / "kb.db", embedder, dimensions=dims) as pipeline:
            documents = load_directory(docs, glob="**/*.md")
            print(f"indexing {len(documents)} documents:")
            report = await pipeline.index(documents, progress=show_progress)
            print(f"indexed: {report.written} chunks written")
            again = await pipeline.index(load_directory(docs, glob="**/*.md"))
            print(
                f"re-indexed unchanged folder: {again.written} written, "
                f"{again.unchanged} unchanged, {again.deleted} deleted"
            )

            if provider_spec == "scripted":
                provider, model = scripted_model(), "scripted"
            else:
                from goagent_py.providers import provider_from_string

                provider, model = provider_from_string(provider_spec)
            agent = Agent(
                provider=provider,
                model=model,
                max_iterations=4,
                tools=[pipeline.as_tool(top_k=2)],
                system_prompt="Answer from the knowledge base and cite passages as [n].",
                hooks=Hooks(on_tool_result=show_tool_result),
            )
            print(f"question: {QUESTION}")
            answer = (await agent.run(QUESTION)).text
            print(f"answer: {answer}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--provider",
        default="local",
        help="local, scripted, anthropic:MODEL, openai:MODEL or ollama:MODEL",
    )
    parser.add_argument("--embedder", choices=["auto", "local", "fake"], default="auto")
    parser.add_argument("--docs", type=Path, default=DOCS)
    args = parser.parse_args()
    asyncio.run(main(args.embedder, args.docs, args.provider))
