"""``goagent-py rag index`` and ``goagent-py rag ask``: RAG over local files, from the shell."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from goagent_py.errors import GoAgentError, MissingExtraError

if TYPE_CHECKING:
    from goagent_py.cli import Console
    from goagent_py.rag.pipeline import Pipeline
    from goagent_py.rag.results import IndexProgress

ANSWER_PROMPT = (
    "Answer the question using only the numbered passages below. Cite the passages you use "
    "as [1], [2]... If the passages do not contain the answer, say so."
)


def _db(args: argparse.Namespace) -> Path:
    from goagent_py.cli import data_home

    return Path(args.db).expanduser() if args.db else data_home() / "rag.db"


def _pipeline(path: Path) -> Pipeline:
    try:
        from goagent_py.providers.sentence_transformers import SentenceTransformerEmbedder
        from goagent_py.rag.pipeline import Pipeline
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise MissingExtraError(str(exc.name or exc), "local,vector", feature="rag") from exc
    path.parent.mkdir(parents=True, exist_ok=True)
    embedder = SentenceTransformerEmbedder()
    return Pipeline.sqlite(path, embedder, dimensions=384, table="rag")


def _bar(progress: IndexProgress, out: Any) -> None:
    total = progress.total or progress.done
    width = 30
    filled = int(width * progress.done / total) if total else width
    line = (
        f"\rindexing [{'#' * filled}{'.' * (width - filled)}] {progress.done}/{total} "
        f"{progress.document.source[-40:]:<40}"
    )
    out.write(line)
    out.flush()


def _load(paths: list[str]) -> list[Any]:
    from goagent_py.rag.documents import load_directory, load_file

    documents: list[Any] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            documents.extend(load_directory(path))
        elif path.is_file():
            documents.append(load_file(path))
        else:
            raise FileNotFoundError(raw)
    return documents


async def index(args: argparse.Namespace, console: Console) -> int:
    """Index files and folders into the RAG database; prints a progress bar and a summary."""
    from goagent_py.cli import EXIT_OK, EXIT_USAGE

    try:
        documents = _load(args.paths)
    except FileNotFoundError as exc:
        console.note(f"goagent-py: no such file or folder: {exc.args[0]}")
        return EXIT_USAGE
    if not documents:
        console.note("goagent-py: nothing to index (no supported files found)")
        return EXIT_USAGE
    db = _db(args)
    start = time.perf_counter()
    async with _pipeline(db) as pipeline:
        report = await pipeline.index(documents, progress=lambda p: _bar(p, console.err))
    console.err.write("\n")
    console.say(
        f"indexed {len(documents)} documents into {db}: {report.written} chunks written, "
        f"{report.unchanged} unchanged, {report.deleted} stale removed "
        f"({time.perf_counter() - start:.1f}s)"
    )
    return EXIT_OK


async def ask(args: argparse.Namespace, console: Console) -> int:
    """Answer a question from the index; the answer is followed by its numbered sources."""
    from goagent_py.agent import Agent
    from goagent_py.cli import EXIT_OK, EXIT_TURN_FAILED, EXIT_USAGE, pick_provider
    from goagent_py.messages import TextBlock
    from goagent_py.rag.format import format_passages

    db = _db(args)
    if not db.exists():
        console.note(f"goagent-py: no index at {db}; run 'goagent-py rag index PATH...' first")
        return EXIT_USAGE
    async with _pipeline(db) as pipeline:
        results = await pipeline.search(args.question, top_k=args.top_k)
    if not results:
        console.say("No passage in the index matches the question.")
        return EXIT_OK
    picked = await pick_provider(args.provider)
    console.note(f"provider {picked.name} ({picked.model}): {picked.reason}")
    agent = Agent(
        provider=picked.provider, model=picked.model, system_prompt=ANSWER_PROMPT, max_iterations=1
    )
    passages = format_passages(results)
    status = EXIT_OK
    try:
        answer = (await agent.run([*passages, TextBlock(f"Question: {args.question}")])).text
        console.say(answer.strip())
    except GoAgentError as exc:
        console.note(f"goagent-py: could not get an answer: {exc}")
        status = EXIT_TURN_FAILED
    finally:
        close = getattr(picked.provider, "aclose", None)
        if close is not None:
            await close()
    console.say("\nSources:")
    for i, result in enumerate(results, 1):
        where = f", {result.location}" if result.location else ""
        console.say(f"  [{i}] {result.source}{where} (score {result.score:.3f})")
    sys.stdout.flush()
    return status
