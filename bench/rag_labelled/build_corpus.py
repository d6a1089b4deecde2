"""Extract the labelled-retrieval corpus from documentation shipped in installed packages.

The corpus is real reference documentation that ships inside the virtualenv: each package's
long description (its README, as PyPI shows it, read from ``*.dist-info/METADATA``) plus a few
Markdown files shipped as package data. All are under MIT, BSD or Apache-2.0 licences. It is
extracted, not committed: run

    python bench/rag_labelled/build_corpus.py DIR

and DIR gets one file per entry of :data:`SOURCES` (the names the questions in
``questions.jsonl`` cite). The versions the questions were written against are pinned in
:data:`SOURCES`; another installed version prints a warning (answers may have moved or gone,
and :func:`check_questions` then reports the labels whose answer phrase is missing).
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUESTIONS = HERE / "questions.jsonl"

# corpus file -> (distribution, pinned version, what: "readme" or a path inside the package)
SOURCES: dict[str, tuple[str, str, str]] = {
    "pydantic.md": ("pydantic", "2.14.3", "readme"),
    "temporalio.md": ("temporalio", "1.35.0", "readme"),
    "temporal-core-architecture.md": (
        "temporalio", "1.35.0", "temporalio/bridge/sdk-core/ARCHITECTURE.md"
    ),
    "temporal-sdks-intro.md": (
        "temporalio", "1.35.0", "temporalio/bridge/sdk-core/arch_docs/sdks_intro.md"
    ),
    "temporal-sticky-queues.md": (
        "temporalio", "1.35.0", "temporalio/bridge/sdk-core/arch_docs/sticky_queues.md"
    ),
    "openai.md": ("openai", "3.54.0", "readme"),
    "openai-responses-websocket.md": (
        "openai", "3.54.0", "openai/lib/responses_websocket/README.md"
    ),
    "orjson.md": ("orjson", "3.13.0", "readme"),
    "tabulate.md": ("tabulate", "0.10.0", "readme"),
    "python-dotenv.md": ("python-dotenv", "1.2.4", "readme"),
    "threadpoolctl.md": ("threadpoolctl", "3.8.0", "readme"),
    "httpcore.md": ("httpcore", "1.0.9", "readme"),
    "fastapi.md": ("fastapi", "0.165.0", "readme"),
    "fastapi-skill.md": ("fastapi", "0.165.0", "fastapi/.agents/skills/fastapi/SKILL.md"),
    "psutil.rst": ("psutil", "7.2.2", "readme"),
    "diskcache.rst": ("diskcache", "5.6.3", "readme"),
    "pgvector.md": ("pgvector", "0.5.1", "readme"),
    "rich.md": ("rich", "15.0.0", "readme"),
    "typer.md": ("typer", "0.29.2", "readme"),
    "sse-starlette.md": ("sse-starlette", "3.7.0", "readme"),
    "httpx-sse.md": ("httpx-sse", "0.4.3", "readme"),
    "textual.md": ("textual", "8.2.8", "readme"),
    "attrs.md": ("attrs", "26.1.0", "readme"),
    "llm.md": ("llm", "0.36", "readme"),
    "charset-normalizer.md": ("charset-normalizer", "3.5.2", "readme"),
}  # fmt: skip


def _readme(dist: importlib.metadata.Distribution) -> str:
    text = dist.read_text("METADATA") or ""
    _, _, body = text.partition("\n\n")  # headers, a blank line, then the long description
    if not body.strip():
        body = (dist.metadata.get_all("Description") or [""])[0]
    return body


def build(root: Path) -> dict[str, str]:
    """Write the corpus into ``root``; returns {file: installed version}."""
    root.mkdir(parents=True, exist_ok=True)
    versions: dict[str, str] = {}
    for name, (package, pinned, what) in SOURCES.items():
        dist = importlib.metadata.distribution(package)
        if dist.version != pinned:
            print(f"warning: {package} {dist.version} installed, questions are for {pinned}")
        if what == "readme":
            text = _readme(dist)
        else:
            text = Path(str(dist.locate_file(what))).read_text(encoding="utf-8")
        (root / name).write_text(text, encoding="utf-8")
        versions[name] = dist.version
    return versions


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def load_questions(path: Path = QUESTIONS) -> list[dict[str, str]]:
    """The labelled questions: question, kind, source, answer."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def check_questions(root: Path, questions: list[dict[str, str]]) -> list[str]:
    """Problems with the labels: unknown source, or an answer phrase not in its source."""
    texts = {name: _norm((root / name).read_text()) for name in SOURCES}
    problems = []
    for n, q in enumerate(questions, start=1):
        if q["source"] not in texts:
            problems.append(f"#{n} unknown source {q['source']!r}")
        elif _norm(q["answer"]) not in texts[q["source"]]:
            problems.append(f"#{n} answer {q['answer']!r} not in {q['source']}")
        if q["kind"] not in ("identifier", "paraphrase", "factual"):
            problems.append(f"#{n} bad kind {q['kind']!r}")
    return problems


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "rag_corpus")
    found = build(target)
    size = sum((target / name).stat().st_size for name in found)
    print(f"{len(found)} files, {size / 1024:.0f} KiB in {target}")
    if QUESTIONS.exists():
        issues = check_questions(target, load_questions())
        print("\n".join(issues) or "every answer phrase is in its source")
