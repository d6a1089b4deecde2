"""Documents to index, and loaders that read them from files.

A :class:`Document` is content (text or blocks) with a ``source`` (its identity: re-indexing the
same source replaces what was indexed for it) and metadata (kept on every chunk, filterable at
search time). The loaders read text, Markdown, reStructuredText, HTML (as text, with the
standard library's ``html.parser``) and PDF text (when ``pypdf`` is installed); each sets
``path``, ``title`` and ``format`` in the metadata.

A file is read once, as bytes, so what is indexed is one state of it even while it is being
written. Binary content (a NUL byte in the first 8 KB, git's rule) is refused with
:class:`~goagent_py.errors.UnreadableDocumentError`, and so is a PDF that does not parse. Text
that is not valid UTF-8 is read as Windows-1252 (the likeliest encoding of such a file, and
one that maps every byte to a character, so nothing is lost), and its document says so in
``metadata["encoding"]`` (set only for text not read as UTF-8).

Loaders do blocking file I/O: inside an event loop call them through ``asyncio.to_thread``.
"""

from __future__ import annotations

import codecs
import errno
import logging
import os
import re
import stat
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from goagent_py.errors import ConfigurationError, MissingExtraError, UnreadableDocumentError
from goagent_py.messages import ContentBlock, TextBlock, text_from

__all__ = [
    "FORMATS",
    "MAX_FILE_BYTES",
    "Document",
    "html_to_text",
    "iter_directory",
    "load_directory",
    "load_file",
    "source_key",
]

FORMATS: Mapping[str, str] = {
    ".txt": "text",
    ".text": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".rst": "rst",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
}
"""File suffix -> format name, for the suffixes the loaders read."""

BINARY_PROBE = 8192
"""How many leading bytes are searched for a NUL byte to call a file binary (git's rule)."""

MAX_FILE_BYTES = 20 * 1024 * 1024
"""The largest file the loaders read by default (20 MB; ``max_bytes=`` changes it).

A file is read whole (its bytes, then its text, then its chunks: several times its size in
memory), so a 2 GB log named ``.txt`` in a notes folder took the machine's memory. A larger
file is refused before it is read (:class:`~goagent_py.errors.UnreadableDocumentError`, skipped
in a folder): 20 MB of text is ~25,000 chunks, minutes of embedding on a CPU."""

FALLBACK_ENCODING = "cp1252"
"""The encoding a text file that is not valid UTF-8 is read with (see the module docstring)."""

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_log = logging.getLogger("goagent_py.rag")

_ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
_RST_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+:.])\1{2,}\s*$")


@dataclass(slots=True, frozen=True, init=False)
class Document:
    """Content to index under a ``source``.

    Args:
        content: the text, or a list of content blocks (text blocks are indexed; other blocks
            are kept on the chunks but have nothing to embed for a text embedder).
        source: what the document is (a path, a URL, a key). Chunk ids derive from it, and
            re-indexing the same source replaces its old chunks.
        metadata: JSON data kept on every chunk (``str``/``int``/``float``/``bool`` values can be
            filtered on at search time). ``title`` is shown in citations. Keys the pipeline sets
            itself (``source``, ``chunk_index``, ``location``...) win over these.

    Raises:
        ConfigurationError: an empty source.
    """

    source: str
    blocks: tuple[ContentBlock, ...]
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __init__(
        self,
        content: str | Sequence[ContentBlock],
        source: str,
        *,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(source, str) or not source.strip():
            raise ConfigurationError(f"Document source must be a non-empty str, got {source!r}")
        try:
            source.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ConfigurationError(
                f"Document source {source!r} holds a lone surrogate (a name that is not valid "
                "UTF-8, decoded with surrogateescape): give a source that is text"
            ) from exc
        blocks = (TextBlock(content),) if isinstance(content, str) else tuple(content)
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "blocks", blocks)
        object.__setattr__(self, "metadata", dict(metadata or {}))

    @property
    def text(self) -> str:
        """The text blocks joined by newlines."""
        return text_from(list(self.blocks))

    @property
    def title(self) -> str:
        """``metadata["title"]`` when it is a string, else ""."""
        title = self.metadata.get("title")
        return title if isinstance(title, str) else ""


def load_file(
    path: str | os.PathLike[str],
    *,
    source: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    format: str | None = None,
    encoding: str | None = None,
    max_bytes: int | None = MAX_FILE_BYTES,
) -> Document:
    """Read one file into a :class:`Document`.

    Args:
        path: the file.
        source: the document's source; defaults to ``path`` as given (as a POSIX path).
        metadata: extra metadata for the document (wins over what the loader sets).
        format: "text", "markdown", "rst", "html" or "pdf"; defaults to the one the suffix
            names in :data:`FORMATS` ("text" for an unknown suffix).
        encoding: the text encoding. None (the default): the encoding a byte-order mark names,
            else UTF-8, else :data:`FALLBACK_ENCODING`. A named encoding is strict: a file
            not valid in it is refused.
        max_bytes: the largest file read (:data:`MAX_FILE_BYTES` by default); a larger one is
            refused before it is read. None reads any size.

    Returns:
        The document, with ``path`` (absolute), ``title`` (the first heading, the HTML/PDF
        title, else the file name without suffix), ``format`` and, for text not read as
        UTF-8, ``encoding`` (the one it was read with) in its metadata. A PDF has one text
        block per page and ``pages`` in its metadata, so chunks know their page.

    Raises:
        MissingExtraError: a PDF and ``pypdf`` is not installed.
        ConfigurationError: an unknown ``format``, or a ``max_bytes`` that is not a positive
            int.
        UnreadableDocumentError: binary content, a PDF that does not parse, text not valid
            in the ``encoding`` named, or a file larger than ``max_bytes``.
        OSError: the file can't be read.
    """
    p = Path(path)
    _check_name(p)
    fmt = format or FORMATS.get(p.suffix.lower(), "text")
    if fmt not in set(FORMATS.values()):
        raise ConfigurationError(
            f"unknown document format {fmt!r}; use one of {sorted(set(FORMATS.values()))}"
        )
    _check_max_bytes(max_bytes)
    meta: dict[str, Any] = {"path": str(p.resolve()), "format": fmt}
    blocks: list[ContentBlock]
    if fmt == "pdf":
        if max_bytes is not None:
            _within(p, p.stat().st_size, max_bytes)
        pages, title = _read_pdf(p)
        blocks = [TextBlock(page) for page in pages]
        meta["pages"] = len(pages)
    else:
        raw, read_as = _read_text(p, encoding, max_bytes)
        if read_as not in ("utf-8", "utf-8-sig"):
            meta["encoding"] = read_as  # only then: UTF-8 files keep their chunk ids
        if fmt == "html":
            title, text = _HTMLText.convert(raw)
        else:
            text = raw
            title = {"markdown": markdown_title, "rst": rst_title}.get(fmt, _no_title)(text)
        blocks = [TextBlock(text)]
    meta["title"] = title or p.stem
    meta.update(metadata or {})
    return Document(blocks, source if source is not None else p.as_posix(), metadata=meta)


def load_directory(
    path: str | os.PathLike[str],
    *,
    glob: str = "**/*",
    formats: Sequence[str] | None = None,
    metadata: Mapping[str, Any] | None = None,
    encoding: str | None = None,
    source_root: str | os.PathLike[str] | None = None,
    on_skip: Callable[[str, str], None] | None = None,
    max_bytes: int | None = MAX_FILE_BYTES,
) -> list[Document]:
    """Read every supported file under a directory, sorted by path, into a list.

    Every document of the folder is in memory at once: for a large folder, index
    :func:`iter_directory` instead (one file in memory at a time). The arguments, what is
    skipped and the sources are :func:`iter_directory`'s.

    Returns:
        One document per file read.

    Raises:
        NotADirectoryError: ``path`` is not a directory.
    """
    return list(
        iter_directory(
            path,
            glob=glob,
            formats=formats,
            metadata=metadata,
            encoding=encoding,
            source_root=source_root,
            on_skip=on_skip,
            max_bytes=max_bytes,
        )
    )


def iter_directory(
    path: str | os.PathLike[str],
    *,
    glob: str = "**/*",
    formats: Sequence[str] | None = None,
    metadata: Mapping[str, Any] | None = None,
    encoding: str | None = None,
    source_root: str | os.PathLike[str] | None = None,
    on_skip: Callable[[str, str], None] | None = None,
    max_bytes: int | None = MAX_FILE_BYTES,
) -> Iterator[Document]:
    """Read the supported files under a directory one at a time, sorted by path.

    The folder is listed now (names only); each file is read when the iterator reaches it,
    so one document is in memory at a time: ``await pipeline.index(iter_directory("notes"))``
    indexes a folder of any size in bounded memory (the pipeline reads each file in a worker
    thread). ``operator.length_hint`` of the iterator is the number of files still to read.

    Hidden files and directories (a name starting with ".") are skipped, and so are files whose
    suffix is not in :data:`FORMATS` (and PDFs when ``pypdf`` is not installed), and symbolic
    links that lead out of the directory (a link to ``/etc/shadow`` in a folder of notes is
    not a note); a link to a file inside it is read. A supported file that cannot be read
    (binary content, a PDF that does not parse, a link loop, a file deleted or unreadable
    since the listing) is skipped and reported to ``on_skip``: one bad file does not lose
    the rest of the folder.

    Args:
        path: the directory.
        glob: which files, relative to ``path`` (``"**/*.md"`` for Markdown only).
        formats: only these formats (e.g. ``["markdown", "rst"]``); None for all.
        metadata: extra metadata for every document.
        encoding: the text encoding (see :func:`load_file`).
        source_root: make sources relative to this folder instead of ``path`` (see
            :func:`source_key`), so that two folders holding the same file names
            (``a/README.md``, ``b/README.md``) do not share sources in one index.
        on_skip: called with ``(path, reason)`` for each supported file skipped because it
            cannot be read (or is larger than ``max_bytes``); None logs a warning on the
            ``goagent_py.rag`` logger.
        max_bytes: the largest file read (see :func:`load_file`); None reads any size.

    Returns:
        An iterator of one document per file; each source is the file's path relative to
        ``path`` (POSIX separators), so the same folder indexes the same way from any working
        directory; or relative to ``source_root`` when given.

    Raises:
        NotADirectoryError: ``path`` is not a directory (raised by this call, not by the
            iteration).
    """
    _check_max_bytes(max_bytes)
    root = Path(path)
    if not root.is_dir():
        raise NotADirectoryError(f"{os.fspath(path)!r} is not a directory")
    wanted = set(formats) if formats is not None else set(FORMATS.values())
    if "pdf" in wanted and not _has_pypdf():
        wanted.discard("pdf")
    files = []
    for file in sorted(root.glob(glob)):
        rel = file.relative_to(root)
        if any(part.startswith(".") for part in rel.parts):
            continue
        fmt = FORMATS.get(file.suffix.lower())
        if fmt is not None and fmt in wanted:
            files.append((file, fmt))
    inside = root.resolve()
    skip = on_skip or _log_skip

    def load(file: Path, fmt: str) -> Document | None:
        try:
            if not file.is_file():
                if file.is_symlink() and not file.exists():
                    file.stat()  # a dangling link or a loop: raise what is wrong with it
                return None
            if not file.resolve().is_relative_to(inside):
                return None  # a link (of the file or a folder on its way) out of the directory
            rel = file.relative_to(root)
            source = rel.as_posix() if source_root is None else source_key(file, source_root)
            return load_file(
                file,
                source=source,
                metadata=metadata,
                format=fmt,
                encoding=encoding,
                max_bytes=max_bytes,
            )
        except UnreadableDocumentError as exc:
            skip(file.as_posix(), exc.reason)
        except (OSError, RuntimeError) as exc:  # RuntimeError: resolve() on a loop (3.11, 3.12)
            skip(file.as_posix(), describe_os_error(exc))
        return None

    return _Reading(files, load)


class _Reading(Iterator[Document]):
    """The documents of listed files, each read when it is reached (see
    :func:`iter_directory`); its length hint is the number of files still to read."""

    def __init__(
        self, files: list[tuple[Path, str]], load: Callable[[Path, str], Document | None]
    ) -> None:
        self._files = files
        self._load = load
        self._next = 0

    def __iter__(self) -> Iterator[Document]:
        return self

    def __next__(self) -> Document:
        while self._next < len(self._files):
            file, fmt = self._files[self._next]
            self._next += 1
            document = self._load(file, fmt)
            if document is not None:
                return document
        raise StopIteration

    def __length_hint__(self) -> int:
        return len(self._files) - self._next


def describe_os_error(exc: BaseException) -> str:
    """What is wrong with a file, in words, from the error reading it raised."""
    if isinstance(exc, RuntimeError) or (isinstance(exc, OSError) and exc.errno == errno.ELOOP):
        return "a symbolic link loop"
    if isinstance(exc, FileNotFoundError):
        return "no such file (deleted, or a link to nothing)"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[0].lower() + exc.strerror[1:]
    return str(exc)


def _log_skip(path: str, reason: str) -> None:
    _log.warning("skipped %s: %s", path, reason)


def _check_name(path: Path) -> None:
    """Refuse a file whose path is not valid UTF-8: its name goes into the source, the title
    and every chunk's embedded context, none of which can hold the bytes Python decoded it to
    (lone surrogates): indexing it failed with UnicodeEncodeError and ended a folder's index."""
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        byte = ord(text[exc.start]) - 0xDC00 if 0xDC80 <= ord(text[exc.start]) <= 0xDCFF else None
        shown = f" (byte {byte:#04x})" if byte is not None else ""
        raise UnreadableDocumentError(
            text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace"),
            f"its name is not valid UTF-8{shown}; rename the file (e.g. with convmv) to index it",
        ) from exc


def _check_max_bytes(max_bytes: int | None) -> None:
    if max_bytes is not None and (
        isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1
    ):
        raise ConfigurationError(
            f"max_bytes must be a positive int (bytes) or None (any size), got {max_bytes!r}"
        )


def _size(count: int) -> str:
    if count < 1024 * 1024:
        return f"{count} bytes"
    return f"{count / (1024 * 1024):.1f} MB"


def _within(path: Path, size: int, max_bytes: int) -> None:
    if size > max_bytes:
        raise UnreadableDocumentError(
            str(path),
            f"{_size(size)}, more than the {_size(max_bytes)} limit (read whole, it would take "
            "several times that in memory); split it, or raise the limit (max_bytes=, "
            "rag index --max-file-size MB)",
        )


def _read_text(path: Path, encoding: str | None, max_bytes: int | None) -> tuple[str, str]:
    """The text of ``path`` and the encoding it was read with (one read: one state of it)."""
    # A pipe or a device has no end to read to (a FIFO named notes.txt blocked for ever, and
    # opening one blocks too: checked before the open).
    if not stat.S_ISREG(path.stat().st_mode):
        raise UnreadableDocumentError(
            str(path), "not a regular file (a pipe, socket or device); index a file"
        )
    with path.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        if max_bytes is not None:
            _within(path, size, max_bytes)
        # Its size at once (one buffer of that size), then whatever it grew by since, a bounded
        # piece at a time: a file still being written stays within the limit.
        parts = [f.read(size)]
        total = len(parts[0])
        while more := f.read(1 << 16):
            total += len(more)
            if max_bytes is not None:
                _within(path, total, max_bytes)
            parts.append(more)
        data = parts[0] if len(parts) == 1 else b"".join(parts)
    named = encoding
    if named is None:
        named = next((name for bom, name in _BOMS if data.startswith(bom)), None)
    # UTF-16 and UTF-32 text is full of NUL bytes: the binary rule is for the other encodings.
    wide = named is not None and named.lower().replace("_", "-").startswith(("utf-16", "utf-32"))
    if not wide and b"\0" in data[:BINARY_PROBE]:
        raise UnreadableDocumentError(
            str(path),
            f"binary content (a NUL byte in its first {BINARY_PROBE // 1024} KB), not text; "
            "convert it to text first, or leave it out",
        )
    if named is not None:
        try:
            return data.decode(named), named
        except UnicodeDecodeError as exc:
            if encoding is not None:
                raise UnreadableDocumentError(
                    str(path),
                    f"not valid {encoding} (byte {data[exc.start]:#04x} at offset {exc.start}); "
                    "pass the encoding it is written in, or encoding=None to guess",
                ) from exc
        except LookupError as exc:
            raise ConfigurationError(f"unknown text encoding {encoding!r}") from exc
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        return data.decode(FALLBACK_ENCODING), FALLBACK_ENCODING
    except UnicodeDecodeError:
        # cp1252 leaves five bytes undefined; Latin-1 maps every byte, so nothing is lost.
        return data.decode("latin-1"), "latin-1"


def source_key(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> str:
    """The source of ``path`` in an index rooted at ``root``: the POSIX path relative to
    ``root``, or the absolute path for a file outside it. Symlinks are resolved first.
    """
    resolved = Path(path).resolve()
    try:
        return resolved.relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return resolved.as_posix()


# -- titles -----------------------------------------------------------------------------------


def _no_title(text: str) -> str:
    return ""


def markdown_title(text: str) -> str:
    """The first level-1 heading of Markdown text (front-matter ``title:`` first), or ""."""
    lines = text.splitlines()
    if lines and lines[0].strip() == "---":
        for line in lines[1:]:
            if line.strip() == "---":
                break
            key, _, value = line.partition(":")
            if key.strip() == "title" and value.strip():
                return value.strip().strip("\"'")
    fallback = ""
    for _, level, title in _atx_headings(text):
        if level == 1:
            return title
        fallback = fallback or title
    return fallback


def rst_title(text: str) -> str:
    """The first section title of reStructuredText (a line underlined with = - ~ ...), or ""."""
    lines = text.splitlines()
    for i in range(1, len(lines)):
        title = lines[i - 1].strip()
        if title and _RST_UNDERLINE.match(lines[i]) and len(lines[i].strip()) >= len(title):
            return title
    return ""


def _atx_headings(text: str) -> Iterator[tuple[int, int, str]]:
    """``(line_number, level, title)`` of each ATX heading outside fenced code (1-based lines)."""
    fence = ""
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            marker = stripped[:3]
            if not fence:
                fence = marker
            elif marker == fence:
                fence = ""
            continue
        if fence:
            continue
        match = _ATX_HEADING.match(line)
        if match:
            yield number, len(match.group(1)), match.group(2).strip()


def rst_headings(text: str) -> list[tuple[int, str]]:
    """``(line_number, heading path)`` for every reStructuredText section title, in order.

    A title is a line underlined (optionally also overlined) with a punctuation character at
    least as long as the title; levels follow the order in which the styles first appear, as
    docutils does. Line numbers are the title's, 1-based.
    """
    lines = text.splitlines()
    styles: list[tuple[str, bool]] = []
    stack: list[tuple[int, str]] = []
    out: list[tuple[int, str]] = []
    for i in range(1, len(lines)):
        title = lines[i - 1].strip()
        under = lines[i].strip()
        if not title or _RST_UNDERLINE.match(title) or not _RST_UNDERLINE.match(lines[i]):
            continue
        if len(under) < len(title) or (
            i >= 2 and lines[i - 2].strip() and not _RST_UNDERLINE.match(lines[i - 2])
        ):
            continue  # a paragraph line, or a table border, not a title
        over = i >= 2 and lines[i - 2].strip() == under
        style = (under[0], over)
        if style not in styles:
            styles.append(style)
        level = styles.index(style)
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        out.append((i, " > ".join(name for _, name in stack)))
    return out


def markdown_headings(text: str) -> list[tuple[int, str]]:
    """``(line_number, heading path)`` for every ATX heading outside fenced code, in order.

    The heading path joins the enclosing headings with " > " ("Config > Retries"); line numbers
    are 1-based.
    """
    out: list[tuple[int, str]] = []
    stack: list[tuple[int, str]] = []
    for number, level, title in _atx_headings(text):
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        out.append((number, " > ".join(name for _, name in stack)))
    return out


# -- HTML ---------------------------------------------------------------------------------------


class _HTMLText(HTMLParser):
    """HTML to readable text: headings become Markdown headings, scripts and styles go away."""

    _SKIP = frozenset({"script", "style", "noscript", "template", "svg"})
    # What a <head> may hold; any other tag starts the body (HTML5 lets </head> and <body> be
    # left out: counting <head> as skipped until its end tag dropped whole pages).
    _HEAD = frozenset(
        {"head", "title", "meta", "link", "base", "style", "script", "noscript", "template"}
    )
    _BLOCK = frozenset(
        {
            "p", "div", "br", "li", "ul", "ol", "tr", "table", "section", "article", "header",
            "footer", "nav", "aside", "main", "blockquote", "pre", "dt", "dd", "hr", "figure",
            "h1", "h2", "h3", "h4", "h5", "h6",
        }
    )  # fmt: skip

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._skip = 0
        self._in_head = False
        self._in_title = False
        self._pre = 0

    @classmethod
    def convert(cls, html: str) -> tuple[str, str]:
        parser = cls()
        parser.feed(html)
        parser.close()
        lines = []
        for line in "".join(parser.parts).split("\n"):
            lines.append(line.rstrip())
        text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
        title = parser.title.strip()
        if not title:
            title = markdown_title(text)
        return title, text

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "head":
            self._in_head = True
        elif tag not in self._HEAD:
            self._in_head = False
        if tag == "title":
            self._in_title = True
        elif tag in self._SKIP:
            self._skip += 1
        if tag == "pre":
            self._pre += 1
        if tag in self._BLOCK:
            self.parts.append("\n")
        if len(tag) == 2 and tag[0] == "h" and tag[1] in "123456" and not self._skip:
            self.parts.append("\n" + "#" * int(tag[1]) + " ")
        elif tag == "li" and not self._skip:
            self.parts.append("- ")

    def handle_endtag(self, tag: str) -> None:
        if tag == "head":
            self._in_head = False
        if tag == "title":
            self._in_title = False
        elif tag in self._SKIP:
            self._skip = max(0, self._skip - 1)
        if tag == "pre":
            self._pre = max(0, self._pre - 1)
        if tag in self._BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not self._skip and not self._in_head:
            self.parts.append(data if self._pre else re.sub(r"\s+", " ", data))


def html_to_text(html: str) -> str:
    """Readable text from HTML (standard library only); headings come out as ``# Heading``."""
    return _HTMLText.convert(html)[1]


# -- PDF ----------------------------------------------------------------------------------------


def _has_pypdf() -> bool:
    try:
        import pypdf  # noqa: F401
    except ImportError:
        return False
    return True


def _read_pdf(path: Path) -> tuple[list[str], str]:
    try:
        import pypdf
    except ImportError as exc:
        raise MissingExtraError("pypdf", "pdf", feature="loading PDF documents") from exc
    try:
        reader = pypdf.PdfReader(str(path))
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
        title = ""
        info = reader.metadata
        if info is not None and isinstance(info.title, str):
            title = info.title.strip()
    except OSError:
        raise
    except Exception as exc:  # pypdf raises many kinds on a damaged file
        raise UnreadableDocumentError(
            str(path), f"the PDF does not parse ({type(exc).__name__}: {exc})"
        ) from exc
    if not title:
        first = next((page for page in pages if page), "")
        title = first.splitlines()[0].strip()[:120] if first else ""
    return pages, title
