"""``rag chat`` on the embedded model: where an answer's time goes, and how grounded answers are.

Run it (the embedded model is slow on a shared machine: run it with ``nice``):

    nice python bench/rag_chat.py latency [--corpus docs] [--whole-passages]
    nice python bench/rag_chat.py grounding [--half dev|test] [--count N] [--whole-passages]
    python bench/rag_chat.py quotes [--half dev|test]

``latency`` indexes ``--corpus`` (``docs/`` by default) with the ``rag index`` pipeline, loads
the models once as ``rag chat`` does, and answers a few questions about it, printing per
answer: search (query embedding + hybrid search), picking the sentences, the model (prompt
tokens read, answer tokens written) and the whole.

``grounding`` answers questions of the labelled set (``bench/rag_labelled``: its paraphrase and
factual questions, of one half of its dev/test split) and questions the corpus does not answer,
and reports: the share of answerable questions whose reply holds the expected fact (most of the
label's content words), the share of unanswerable ones answered with an honest "not in the
documents", and the share of cited sources that are the question's own.

``quotes`` needs no chat model: for each question of a half, the similarity of the passage
sentence closest to it and whether that sentence holds the fact; it prints how many quotes
each threshold would give, right and wrong, and for unanswerable questions (this is how
``QUOTE_SCORE`` was picked, on the dev half).

``--whole-passages`` answers as ``rag chat`` did before (2 whole passages, the long prompt,
120 tokens, no quote), for the before/after figures.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import time
from pathlib import Path
from typing import Any

import rag_labelled as labelled

from goagent_py.cli import _rag
from goagent_py.cli._common import Console
from goagent_py.rag.grounding import _content, excerpts

DOCS_QUESTIONS = [
    "How do I limit the tokens a run may spend?",
    "Which vector stores can long-term memory use?",
    "How do I make a tool retry when it fails?",
    "What is the capital of Peru?",
]
UNANSWERABLE = [
    # not in the labelled corpus (25 package READMEs and docs); alternate halves
    "What is the capital of Peru?",
    "Who won the 1998 football world cup?",
    "How do I bake sourdough bread?",
    "How many moons does Jupiter have?",
    "How do I configure pod autoscaling in Kubernetes?",
    "What is the boiling point of ethanol?",
    "Who wrote the novel War and Peace?",
    "How do I set up a Kafka consumer group in Java?",
    "What year did the Berlin Wall fall?",
    "How do I change the oil in a car?",
]


def _console() -> Console:
    return Console(io.StringIO(), io.StringIO(), interactive=False)


async def _open(db: Path, whole: bool) -> Any:
    args = argparse.Namespace(
        db=str(db), provider=None, base_url=None, top_k=None, min_score=0.25, quote_score=None
    )
    answerer = await _rag.open_answerer(args, _console())
    assert answerer is not None
    if whole:  # rag chat before issue 37's second part: 2 whole passages, no quote
        from goagent_py.agent import Agent

        answerer.small = False
        answerer.top_k = 2
        answerer.quote_score = 2.0
        answerer.agent = Agent(
            provider=answerer.provider,
            model=answerer.agent.options.model,
            system_prompt=_rag.ANSWER_PROMPT,
            max_iterations=1,
            max_tokens=_rag.ANSWER_TOKENS,
        )
    start = time.perf_counter()
    await _rag.warm_up(answerer)
    print(f"models loaded in {time.perf_counter() - start:.1f} s", flush=True)
    return answerer


async def _index(db: Path, paths: list[str], root: str) -> None:
    if db.exists():  # noqa: ASYNC240
        return
    args = argparse.Namespace(paths=paths, root=root, db=str(db))
    await _rag.index(args, _console())


async def latency(args: argparse.Namespace) -> None:
    db = Path(args.work) / "docs.db"
    await _index(db, [args.corpus], ".")
    answerer = await _open(db, args.whole_passages)
    print(
        f"{'search':>7} {'sent.':>6} {'model':>6} {'in':>5} {'out':>4} {'total':>6} "
        f"{'cpu':>6}  kind (seconds; in/out: prompt/answer tokens; cpu: the process's CPU s)"
    )
    try:
        for question in DOCS_QUESTIONS:
            start, cpu = time.perf_counter(), time.process_time()
            reply = await _rag.respond(answerer, question)
            total, cpu = time.perf_counter() - start, time.process_time() - cpu
            s = reply.seconds
            print(
                f"{s.get('search', 0):7.2f} {s.get('excerpts', 0):6.2f} {s.get('model', 0):6.2f} "
                f"{reply.prompt_tokens:5d} {reply.answer_tokens:4d} {total:6.2f} {cpu:6.2f}  "
                f"{reply.kind}: "
                f"{question}\n        -> {reply.text[:150]!r}",
                flush=True,
            )
    finally:
        await answerer.aclose()


def _questions(half: str, count: int) -> tuple[list[dict[str, str]], list[str]]:
    dev, test = labelled.split(labelled.corpus.load_questions())
    chosen = [q for q in (dev if half == "dev" else test) if q["kind"] != "identifier"][:count]
    unanswerable = UNANSWERABLE[0::2] if half == "dev" else UNANSWERABLE[1::2]
    return chosen, unanswerable


def _holds(reply: str, fact: str) -> bool:
    words = _content(fact)
    return bool(words) and len(words & _content(reply)) >= 0.6 * len(words)


async def _labelled_db(work: Path) -> Path:
    root = work / "labelled"
    if not root.exists():
        labelled.corpus.build(root / "corpus")
    db = root / "rag.db"
    await _index(db, [str(root / "corpus")], str(root / "corpus"))
    return db


async def grounding(args: argparse.Namespace) -> None:
    db = await _labelled_db(Path(args.work))
    answerable, unanswerable = _questions(args.half, args.count)
    answerer = await _open(db, args.whole_passages)
    kinds: dict[str, int] = {}
    facts = honest = cited = right_source = 0
    times: list[float] = []
    cpus: list[float] = []
    try:
        for q in [*answerable, *({"question": u} for u in unanswerable)]:
            start, cpu = time.perf_counter(), time.process_time()
            reply = await _rag.respond(answerer, q["question"])
            times.append(time.perf_counter() - start)
            cpus.append(time.process_time() - cpu)
            kinds[reply.kind] = kinds.get(reply.kind, 0) + 1
            if "answer" in q:
                ok = reply.kind in ("answer", "quote") and _holds(reply.text, q["answer"])
                facts += ok
                for line in reply.sources:
                    cited += 1
                    right_source += line.split(" ", 1)[1].startswith(q["source"])
                mark = "FACT" if ok else "----"
            else:
                honest += reply.kind == "none"
                mark = "HONEST" if reply.kind == "none" else "INVENTED"
            print(
                f"{mark:8} {reply.kind:6} {times[-1]:5.1f}s cpu {cpus[-1]:4.1f}s "
                f"in {reply.prompt_tokens:4d} out {reply.answer_tokens:3d} {q['question'][:60]!r}"
            )
            print(f"         -> {reply.text[:140]!r}", flush=True)
    finally:
        await answerer.aclose()
    times.sort()
    cpus.sort()
    print(
        f"\n{args.half} half, {'whole passages (before)' if args.whole_passages else 'now'}: "
        f"expected fact in the reply {facts}/{len(answerable)}; honest 'not in the documents' "
        f"{honest}/{len(unanswerable)}; cited sources that are the question's own "
        f"{right_source}/{cited}; replies {kinds}; seconds per answer p50 "
        f"{times[len(times) // 2]:.1f}, max {times[-1]:.1f} (CPU s p50 {cpus[len(cpus) // 2]:.1f}, "
        f"max {cpus[-1]:.1f})"
    )


async def quotes(args: argparse.Namespace) -> None:
    db = await _labelled_db(Path(args.work))
    answerable, unanswerable = _questions(args.half, 10_000)
    pipeline = _rag._pipeline(db)
    rows: list[tuple[float, bool | None]] = []
    try:
        for q in [*answerable, *({"question": u} for u in unanswerable)]:
            results = await pipeline.search(q["question"], top_k=_rag.SMALL_TOP_K)
            best = max((r.vector_score or 0.0 for r in results), default=0.0)
            if not results or best < 0.25:
                rows.append((0.0, None if "answer" not in q else False))
                continue
            chosen = await excerpts(
                q["question"],
                [r.text for r in results],
                pipeline.embedder,
                max_sentences=_rag.SENTENCES,
            )
            top = max(chosen, key=lambda e: e.similarity, default=None)
            if top is None:
                rows.append((0.0, None if "answer" not in q else False))
                continue
            holds = _holds(top.best, q["answer"]) if "answer" in q else None
            rows.append((top.similarity, holds))
    finally:
        await pipeline.aclose()
    print(f"{args.half} half: {len(answerable)} answerable, {len(unanswerable)} unanswerable")
    print(f"{'threshold':>9} {'quotes':>7} {'right':>6} {'wrong':>6} {'unanswerable quoted':>20}")
    for threshold in (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7):
        quoted = [(s, h) for s, h in rows if s >= threshold]
        right = sum(h is True for _, h in quoted)
        wrong = sum(h is False for _, h in quoted)
        off = sum(h is None for _, h in quoted)
        print(f"{threshold:9.2f} {len(quoted):7d} {right:6d} {wrong:6d} {off:20d}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("latency", "grounding", "quotes"))
    parser.add_argument("--corpus", default="docs")
    parser.add_argument("--half", default="dev", choices=("dev", "test"))
    parser.add_argument("--count", type=int, default=16)
    parser.add_argument("--whole-passages", action="store_true")
    parser.add_argument("--work", default="/tmp/rag_chat_bench", help="indexes are kept here")
    args = parser.parse_args()
    Path(args.work).mkdir(parents=True, exist_ok=True)
    run = {"latency": latency, "grounding": grounding, "quotes": quotes}[args.what]
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
