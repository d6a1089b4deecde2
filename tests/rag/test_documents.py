"""Documents and loaders: text, Markdown, reST, HTML as text, PDF text; directories."""

from __future__ import annotations

from pathlib import Path

import pytest

from goagent_py.errors import ConfigurationError
from goagent_py.messages import ImageBlock, TextBlock
from goagent_py.rag import Document, Pipeline, html_to_text, load_directory, load_file
from goagent_py.rag.documents import markdown_headings, markdown_title, rst_title

from .conftest import BatchWordEmbedder


def make_pdf(pages: list[str], *, title: str = "") -> bytes:
    """A minimal valid PDF with one line of Helvetica text per page."""
    n = len(pages)
    page_ids = [4 + 2 * i for i in range(n)]
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{' '.join(f'{p} 0 R' for p in page_ids)}] /Count {n} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, text in enumerate(pages):
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 "
            f"0 R >> >> /Contents {page_ids[i] + 1} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    if title:
        objects.append(f"<< /Title ({title}) >>".encode())
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{off:010d} 00000 n \n".encode() for off in offsets)
    info = f" /Info {len(objects)} 0 R" if title else ""
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R{info} >>\nstartxref\n{xref}\n%%EOF\n"
    ).encode()
    return out


def test_document_from_text_or_blocks() -> None:
    doc = Document("hello", "a.txt", metadata={"title": "A"})
    assert doc.blocks == (TextBlock("hello"),)
    assert (doc.text, doc.title, doc.source) == ("hello", "A", "a.txt")
    image = ImageBlock(b"\x89PNG", "image/png")
    doc = Document([TextBlock("x"), image, TextBlock("y")], "b")
    assert doc.text == "x\ny"
    assert doc.title == ""
    with pytest.raises(ConfigurationError, match="source"):
        Document("x", "  ")
    meta = {"k": 1}
    doc = Document("x", "c", metadata=meta)
    meta["k"] = 2
    assert doc.metadata == {"k": 1}


def test_titles() -> None:
    assert markdown_title("intro\n## Sub\n# Main\n") == "Main"
    assert markdown_title("## Only sub\n") == "Only sub"
    assert markdown_title("---\ntitle: 'Front'\n---\n# Main\n") == "Front"
    assert markdown_title("```\n# not a heading\n```\n") == ""
    assert rst_title("Intro\n=====\n\ntext\n") == "Intro"
    assert rst_title("Abc\n===\nlonger line\n---\n") == "Abc"
    assert rst_title("Too long a title\n===\n") == ""
    assert rst_title("no title\n") == ""


def test_markdown_headings_skip_code_fences() -> None:
    text = "# A\n\n```bash\n# comment\n```\n\n## B\n\n### C\n\n## D\n"
    assert markdown_headings(text) == [(1, "A"), (7, "A > B"), (9, "A > B > C"), (11, "A > D")]


def test_html_to_text() -> None:
    html = """<html><head><title>Guide</title><style>p{}</style></head>
    <body><script>alert(1)</script><h1>Install</h1><p>Run   the
    installer.</p><ul><li>one</li><li>two</li></ul><pre>  keep   spaces</pre>
    <p>a &amp; b</p></body></html>"""
    text = html_to_text(html)
    assert "alert" not in text
    assert "p{}" not in text
    assert "# Install" in text
    assert "Run the installer." in text
    assert "- one" in text
    assert "- two" in text
    assert "  keep   spaces" in text
    assert "a & b" in text
    assert "Guide" not in text


def test_load_file_formats(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Alpha\n\nText.\n")
    (tmp_path / "b.rst").write_text("Bravo\n=====\n\nText.\n")
    (tmp_path / "c.html").write_text("<title>Charlie</title><h1>Other</h1><p>Text.</p>")
    (tmp_path / "d.txt").write_text("just text")
    (tmp_path / "e.log").write_bytes(b"bad \xff byte")
    md = load_file(tmp_path / "a.md")
    assert md.metadata["title"] == "Alpha"
    assert md.metadata["format"] == "markdown"
    assert md.metadata["path"] == str((tmp_path / "a.md").resolve())
    assert md.source == (tmp_path / "a.md").as_posix()
    assert load_file(tmp_path / "b.rst").metadata["title"] == "Bravo"
    html = load_file(tmp_path / "c.html", source="c", metadata={"team": "x"})
    assert (html.metadata["title"], html.source, html.metadata["team"]) == ("Charlie", "c", "x")
    assert html.text.startswith("# Other")
    txt = load_file(tmp_path / "d.txt")
    assert (txt.metadata["title"], txt.metadata["format"]) == ("d", "text")
    # not UTF-8: read as Windows-1252, nothing replaced, and the document says so
    log = load_file(tmp_path / "e.log")
    assert (log.text, log.metadata["encoding"]) == ("bad \xff byte", "cp1252")
    with pytest.raises(ConfigurationError, match="unknown document format"):
        load_file(tmp_path / "d.txt", format="docx")
    with pytest.raises(FileNotFoundError):
        load_file(tmp_path / "missing.md")


def test_load_pdf_pages(tmp_path: Path) -> None:
    pytest.importorskip("pypdf", reason='needs the "pdf" extra')
    (tmp_path / "r.pdf").write_bytes(make_pdf(["First page", "Second page about kiwis"]))
    doc = load_file(tmp_path / "r.pdf")
    assert doc.metadata["format"] == "pdf"
    assert doc.metadata["pages"] == 2
    assert doc.metadata["title"] == "First page"
    assert [b.text for b in doc.blocks if isinstance(b, TextBlock)] == [
        "First page",
        "Second page about kiwis",
    ]
    (tmp_path / "t.pdf").write_bytes(make_pdf(["Body"], title="The Title"))
    assert load_file(tmp_path / "t.pdf").metadata["title"] == "The Title"


async def test_pdf_chunks_cite_their_page(tmp_path: Path) -> None:
    pytest.importorskip("pypdf", reason='needs the "pdf" extra')
    (tmp_path / "r.pdf").write_bytes(make_pdf(["First page", "Second page about kiwis"]))
    pipeline = Pipeline.in_memory(BatchWordEmbedder())
    await pipeline.index(load_directory(tmp_path))
    [hit] = await pipeline.search("kiwis", top_k=1, mode="keyword")
    assert (hit.source, hit.location) == ("r.pdf", "page 2")


def test_load_directory(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / ".hidden").mkdir()
    (tmp_path / "sub" / "b.md").write_text("# B\n")
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / ".secret.md").write_text("# no")
    (tmp_path / ".hidden" / "c.md").write_text("# no")
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    (tmp_path / "dir.md").mkdir()
    docs = load_directory(tmp_path, metadata={"corpus": "t"})
    assert [d.source for d in docs] == ["a.txt", "sub/b.md"]
    assert all(d.metadata["corpus"] == "t" for d in docs)
    assert [d.source for d in load_directory(tmp_path, glob="**/*.md")] == ["sub/b.md"]
    assert [d.source for d in load_directory(tmp_path, formats=["text"])] == ["a.txt"]
    with pytest.raises(NotADirectoryError):
        load_directory(tmp_path / "a.txt")


def test_load_directory_reads_no_link_that_leads_out_of_it(tmp_path: Path) -> None:
    """`rag index notes/` with a link to a secret outside: not indexed (a link to a file of
    the folder itself is read, under the link's name)."""
    (tmp_path / "secret.md").write_text("# Secret\nthe password")
    notes = tmp_path / "notes"
    (notes / "sub").mkdir(parents=True)
    (notes / "a.md").write_text("# A\nalpha")
    (notes / "out.md").symlink_to(tmp_path / "secret.md")
    (notes / "sub" / "again.md").symlink_to(notes / "a.md")
    (notes / "away").symlink_to(tmp_path, target_is_directory=True)
    sources = [d.source for d in load_directory(notes)]
    assert sources == ["a.md", "sub/again.md"]
    assert not any("password" in d.text for d in load_directory(notes))
