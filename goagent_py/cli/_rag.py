"""``goagent-py rag index`` and ``goagent-py rag ask``: RAG over local files, from the shell.

Sources are file paths relative to a root (``--root``, the current folder by default; files
outside it keep their absolute path), so two folders with the same file names never overwrite
each other, and citations show where a passage is. Re-indexing a folder removes what
disappeared from it. ``rag ask`` answers only when a passage is similar enough to the question
(``--min-score``); it lists the sources the answer cites, not everything retrieved.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from goagent_py.errors import GoAgentError, MissingExtraError

if TYPE_CHECKING:
    from goagent_py.cli._common import Console
    from goagent_py.rag.pipeline import Pipeline
    from goagent_py.rag.results import IndexProgress, SearchResult

ANSWER_PROMPT = (
    "Answer the question using only the numbered passages below. Cite the passages you use "
    "as [1], [2]... If the passages do not contain the answer, say so."
)
MIN_SCORE = 0.25
"""Least cosine similarity of the best passage for ``rag ask`` to answer (MiniLM: passages on
the question's subject score above 0.35, unrelated ones under 0.2)."""

NOT_IN_INDEX = "The indexed documents do not contain the answer to this question."
_CITATION = re.compile(r"\[(\d{1,3})\]")


def _db(args: argparse.Namespace) -> Path:
    from goagent_py.cli._common import data_home

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


@dataclass
class Loaded:
    """What ``rag index`` read: the documents, and the folders whose contents they are."""

    documents: list[Any]
    folders: list[str]  # the source prefixes of the folders given, "" for the root itself


def load_paths(paths: list[str], root_arg: str | None) -> Loaded:
    """Read the files and folders of ``paths``, with sources relative to ``root_arg`` (None:
    the current folder).

    Raises:
        FileNotFoundError: a path does not exist.
    """
    from goagent_py.rag.documents import load_directory, load_file, source_key

    root = Path(root_arg).expanduser() if root_arg else Path.cwd()
    documents: list[Any] = []
    folders: list[str] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            documents.extend(load_directory(path, source_root=root))
            key = source_key(path, root)
            folders.append("" if key == "." else key)
        elif path.is_file():
            documents.append(load_file(path, source=source_key(path, root)))
        else:
            raise FileNotFoundError(raw)
    return Loaded(documents, folders)


def gone(indexed: list[str], loaded: Loaded) -> list[str]:
    """The indexed sources inside a loaded folder that the folder no longer holds."""
    present = {d.source for d in loaded.documents}
    stale = []
    for source in indexed:
        if source in present:
            continue
        for folder in loaded.folders:
            inside = not folder or source.startswith(folder.rstrip("/") + "/")
            # Sources outside the root are absolute: never under the "" of the root itself.
            if inside and not (not folder and source.startswith("/")):
                stale.append(source)
                break
    return stale


async def index(args: argparse.Namespace, console: Console) -> int:
    """Index files and folders into the RAG database; prints a progress bar and a summary."""
    from goagent_py.cli._common import EXIT_OK, EXIT_USAGE

    try:
        loaded = load_paths(args.paths, args.root)
    except FileNotFoundError as exc:
        console.note(f"goagent-py: no such file or folder: {exc.args[0]}")
        return EXIT_USAGE
    documents = loaded.documents
    db = _db(args)
    start = time.perf_counter()
    async with _pipeline(db) as pipeline:
        removed = 0
        for source in gone(await pipeline.sources(), loaded):
            if await pipeline.remove(source):
                removed += 1
        if not documents and not removed:
            console.note("goagent-py: nothing to index (no supported files found)")
            return EXIT_USAGE
        report = await pipeline.index(documents, progress=lambda p: _bar(p, console.err))
    console.err.write("\n")
    console.say(
        f"indexed {len(documents)} documents into {db}: {report.written} chunks written, "
        f"{report.unchanged} unchanged, {report.deleted} stale removed, "
        f"{removed} documents removed (gone from their folder) "
        f"({time.perf_counter() - start:.1f}s)"
    )
    return EXIT_OK


def cited(answer: str, count: int) -> list[int]:
    """The passage numbers (1-based, in order of first citation) that ``answer`` cites."""
    seen: list[int] = []
    for match in _CITATION.finditer(answer):
        number = int(match.group(1))
        if 1 <= number <= count and number not in seen:
            seen.append(number)
    return seen


def _where(result: SearchResult) -> str:
    return f"{result.source}, {result.location}" if result.location else result.source


def _best_similarity(results: list[SearchResult]) -> float:
    scores = [r.vector_score for r in results if r.vector_score is not None]
    return max(scores, default=0.0)


async def ask(args: argparse.Namespace, console: Console) -> int:
    """Answer a question from the index, then list the sources the answer cites."""
    from goagent_py.agent import Agent
    from goagent_py.cli._common import EXIT_OK, EXIT_TURN_FAILED, EXIT_USAGE, pick_provider
    from goagent_py.messages import TextBlock
    from goagent_py.rag.format import format_passages

    db = _db(args)
    if not db.exists():
        console.note(f"goagent-py: no index at {db}; run 'goagent-py rag index PATH...' first")
        return EXIT_USAGE
    async with _pipeline(db) as pipeline:
        results = await pipeline.search(args.question, top_k=args.top_k)
    best = _best_similarity(results)
    if not results or best < args.min_score:
        console.say(NOT_IN_INDEX)
        if results:
            console.note(
                f"(closest passage: {_where(results[0])}, similarity {best:.2f} < "
                f"--min-score {args.min_score})"
            )
        return EXIT_OK
    picked = await pick_provider(args.provider, args.base_url)
    console.note(f"provider {picked.name} ({picked.model}): {picked.reason}")
    agent = Agent(
        provider=picked.provider, model=picked.model, system_prompt=ANSWER_PROMPT, max_iterations=1
    )
    passages = format_passages(results)
    status = EXIT_OK
    answer = ""
    try:
        question = TextBlock(f"Question: {args.question}")
        answer = (await agent.run([*passages, question])).text.strip()
        console.say(answer)
    except GoAgentError as exc:
        console.note(f"goagent-py: could not get an answer: {exc}")
        status = EXIT_TURN_FAILED
    finally:
        close = getattr(picked.provider, "aclose", None)
        if close is not None:
            await close()
    numbers = cited(answer, len(results))
    if numbers:
        console.say("\nSources:")
        for n in numbers:
            console.say(f"  [{n}] {_where(results[n - 1])}")
    elif answer:
        # The model cited nothing: say what it was given, best first, so the answer can be
        # checked, and say that it is not a citation.
        console.say("\nThe answer cites no passage; it was given:")
        for i, result in enumerate(results, 1):
            console.say(f"  [{i}] {_where(result)}")
    sys.stdout.flush()
    return status
