"""The same content under two file names is one passage, naming both (docs/rag.md, "Copies").

A file copied into a second folder (``notes/setup.md`` and ``backup/setup.md``) was indexed
twice and both copies took top-k slots: with ``top_k=2`` the answer's context held the same
passage twice and nothing else. Search now keeps the best of passages with the same text and
names every source of it in ``metadata["sources"]``; it is computed from what is indexed at
search time, so it follows re-indexing and the removal of a copy.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from goagent_py.rag import Document
from tests.rag.conftest import PipelineFactory

SETUP = "Install the server with make install. The port is 8080 by default."
OTHER = "The server port can be changed in the settings file under network."


def _docs() -> list[Document]:
    return [
        Document(SETUP, "notes/setup.md"),
        Document(SETUP, "backup/setup.md"),
        Document(OTHER, "notes/settings.md"),
    ]


@pytest.mark.parametrize("mode", ["hybrid", "vector", "keyword"])
async def test_a_copy_takes_one_slot_and_both_sources_are_named(
    make_pipeline: PipelineFactory, mode: str
) -> None:
    pipeline = make_pipeline(chunker=None)
    await pipeline.index(_docs())
    results = await pipeline.search("server port", top_k=2, mode=mode)  # type: ignore[arg-type]
    texts = [r.text for r in results]
    assert sorted(texts) == sorted([SETUP, OTHER]), texts
    [copy] = [r for r in results if r.text == SETUP]
    assert sorted(copy.metadata["sources"]) == ["backup/setup.md", "notes/setup.md"]
    assert copy.source in copy.metadata["sources"]
    [other] = [r for r in results if r.text == OTHER]
    assert "sources" not in other.metadata  # one source: nothing added


async def test_the_sources_follow_reindexing_and_removal_of_a_copy(
    make_pipeline: PipelineFactory,
) -> None:
    pipeline = make_pipeline(chunker=None)
    await pipeline.index(_docs())
    before = await pipeline.search("server port", top_k=2)
    report = await pipeline.index(_docs())  # again: nothing changes
    assert report.written == 0
    assert [
        (r.id, r.metadata.get("sources")) for r in await pipeline.search("server port", top_k=2)
    ] == [(r.id, r.metadata.get("sources")) for r in before]
    await pipeline.remove("notes/setup.md")
    [copy] = [r for r in await pipeline.search("server port", top_k=2) if r.text == SETUP]
    assert copy.source == "backup/setup.md"
    assert "sources" not in copy.metadata
    await pipeline.index(Document(SETUP, "notes/setup.md"))
    [copy] = [r for r in await pipeline.search("server port", top_k=2) if r.text == SETUP]
    assert sorted(copy.metadata["sources"]) == ["backup/setup.md", "notes/setup.md"]


@pytest.mark.needs_extra("vector")
async def test_rag_ask_cites_one_passage_for_a_copied_file_naming_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import argparse
    import io

    import goagent_py.cli._common as cli_common
    from goagent_py.cli import _rag as _cli_rag
    from goagent_py.cli import main as cli
    from goagent_py.rag.pipeline import Pipeline
    from goagent_py.testing import FakeEmbedder, ScriptedProvider

    monkeypatch.setattr(
        _cli_rag,
        "_pipeline",
        lambda path: Pipeline.sqlite(path, FakeEmbedder(384), dimensions=384, table="rag"),
    )

    async def pick(spec: str | None, base_url: str | None = None) -> cli.Picked:
        return cli.Picked(
            ScriptedProvider("The port is 8080 by default [1]."), "scripted", "m", "test"
        )

    monkeypatch.setattr(cli_common, "pick_provider", pick)
    for folder in ("notes", "backup"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "setup.md").write_text(f"# Setup\n\n{SETUP}\n")
    db = tmp_path / "rag.db"
    console = cli.Console(io.StringIO(), io.StringIO(), interactive=False)
    paths = [str(tmp_path / "notes"), str(tmp_path / "backup")]
    index = argparse.Namespace(paths=paths, db=str(db), root=str(tmp_path))
    assert await _cli_rag.index(index, console) == cli.EXIT_OK
    ask = argparse.Namespace(
        question="What is the port of the server by default?",
        db=str(db),
        provider=None,
        base_url=None,
        top_k=2,
        min_score=-1.0,
        quote_score=2.0,
    )
    console = cli.Console(io.StringIO(), io.StringIO(), interactive=False)
    assert await _cli_rag.ask(ask, console) == cli.EXIT_OK
    out = console.out.getvalue()  # type: ignore[attr-defined]
    assert "[1] backup/setup.md" in out or "[1] notes/setup.md" in out, out
    assert "also in" in out, out
    assert "[2]" not in out, out


async def test_the_model_reads_the_other_sources_of_a_copied_passage(
    make_pipeline: PipelineFactory,
) -> None:
    from goagent_py.rag.format import format_passages

    pipeline = make_pipeline(chunker=None)
    await pipeline.index(_docs())
    results = await pipeline.search("server port", top_k=2)
    [copy] = [r for r in results if r.text == SETUP]
    [other_source] = [s for s in copy.metadata["sources"] if s != copy.source]
    text = format_passages(results)[0].text  # type: ignore[union-attr]
    assert f'source="{copy.source}"' in text
    assert f'also_in="{other_source}"' in text
    assert text.count(SETUP) == 1
