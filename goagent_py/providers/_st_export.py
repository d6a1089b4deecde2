"""The local embedder's ONNX export kept on disk, and run later without torch.

The first load of a model (torch, sentence-transformers) exports it to ONNX (see
:mod:`goagent_py.providers._st_onnx`); when that export gives ``encode``'s vectors, it is written
to a cache folder together with the tokenizer as the model uses it (truncation at the model's
``max_seq_length``, padding) and ``encode``'s own vectors for the probe texts. A later load
finds it there and runs it with ONNX Runtime and ``tokenizers`` alone: no torch, no
transformers, about 500 MB less resident memory. It is used only after the equality probe
passes: the stored export, run on the probe texts, must give the stored reference vectors
(``encode``'s, made when it was exported). Anything missing, stale or different means the
torch load as before, which writes a fresh export.

A cache folder is named by a key over the model folder (its resolved path, and each file's
name, size and modification time) and the normalisation setting, so an edited model is
exported again. Nothing here downloads anything.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = [
    "StoredExport",
    "default_cache_dir",
    "export_key",
    "load_export",
    "normalized",
    "same_vectors",
    "save_export",
    "session",
]

_log = logging.getLogger("goagent_py.providers.sentence_transformers")

FORMAT = 1
CACHE_ENV = "GOAGENT_EMBED_CACHE"
# The model's tensor inputs and the tokenizers.Encoding field each one is read from.
_ENCODING_FIELDS = {
    "input_ids": "ids",
    "attention_mask": "attention_mask",
    "token_type_ids": "type_ids",
}


def default_cache_dir() -> Path:
    """Where exports are kept: $GOAGENT_EMBED_CACHE, else the user's cache folder.

    The platform's cache folder (``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux), not the data
    folder: an export can be made again at any time, and every data folder shares it.
    """
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    elif sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home()))
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "goagent-py" / "embedders"


def export_key(model_path: Path, normalize: bool) -> str:
    """A name for the export of ``model_path``: changes when any of its files changes."""
    root = model_path.resolve()
    files = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        stat = path.stat()
        files.append([path.relative_to(root).as_posix(), stat.st_size, stat.st_mtime_ns])
    record = {"format": FORMAT, "model": str(root), "files": files, "normalize": normalize}
    digest = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()
    return f"{root.name}-{digest[:20]}"


@dataclass(frozen=True, slots=True)
class StoredExport:
    """An export loaded from the cache: one run function and what it was checked against."""

    folder: Path
    dimensions: int
    session: Any
    tokenizer: Any
    names: tuple[str, ...]
    normalize: bool
    lower_case: bool

    def run(self, texts: list[str]) -> NDArray[np.float32]:
        """Sentence vectors of ``texts`` (one batch, padded to its longest text)."""
        [vectors] = self.session.run(["sentence_embedding"], self._inputs(texts))
        return normalized(vectors, self.normalize)

    def tokens(self, texts: list[str]) -> list[NDArray[np.float32]]:
        """Each text's contextual token vectors, special tokens and padding left out."""
        import numpy as np

        inputs = self._inputs(texts)
        [vectors] = self.session.run(["token_embeddings"], inputs)
        return [
            np.ascontiguousarray(row[: int(mask.sum())][1:-1], dtype=np.float32)
            for row, mask in zip(vectors, inputs["attention_mask"], strict=True)
        ]

    def _inputs(self, texts: list[str]) -> dict[str, Any]:
        import numpy as np

        prepared = [t.strip().lower() if self.lower_case else t.strip() for t in texts]
        encodings = self.tokenizer.encode_batch(prepared)
        return {
            name: np.array([getattr(e, _ENCODING_FIELDS[name]) for e in encodings], dtype=np.int64)
            for name in self.names
        }


def normalized(vectors: Any, normalize: bool) -> NDArray[np.float32]:
    """``vectors`` as contiguous float32 rows, scaled to unit length when ``normalize``."""
    import numpy as np

    out: NDArray[np.float32] = np.ascontiguousarray(vectors, dtype=np.float32)
    if normalize:
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out = (out / np.where(norms == 0, 1, norms)).astype(np.float32)
    return out


def session(graph: str | bytes, threads: int | None) -> Any:
    """An ONNX Runtime session on the CPU for ``graph`` (a file path or the model's bytes)."""
    import onnxruntime  # type: ignore[import-untyped]

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    # The arena keeps the largest batch's buffers for good: +240 MB resident after one batch of
    # 32 texts of 256 tokens; without it that memory is returned (no slower per query, #36).
    options.enable_cpu_mem_arena = False
    if threads is not None:
        # One thread runs in the caller's thread: no pool to wake, nothing spinning after.
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(graph, options, providers=["CPUExecutionProvider"])


SAME_VECTOR = 0.99999  # least cosine between a path's vector and the reference


def same_vectors(got: NDArray[np.float32], want: NDArray[np.float32]) -> bool:
    """Whether each row of ``got`` is the same vector as that of ``want`` (direction and
    length)."""
    import numpy as np

    if got.shape != want.shape:
        return False
    for a, b in zip(got.astype(np.float64), want.astype(np.float64), strict=True):
        na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
        if na == 0.0 or nb == 0.0 or abs(na - nb) > 1e-4 * max(1.0, nb):
            return False
        if float(a @ b) / (na * nb) < SAME_VECTOR:
            return False
    return True


def load_export(
    cache: Path, key: str, *, normalize: bool, threads: int | None
) -> StoredExport | None:
    """The stored export named ``key`` if it is there, complete, and passes the probe.

    None (with the reason at debug level) for anything else: the caller loads torch then.
    """
    if importlib.util.find_spec("onnxruntime") is None:
        return None
    if importlib.util.find_spec("tokenizers") is None:
        return None
    folder = cache / key
    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT or meta.get("key") != key:
            _log.debug("stored export %s is of another format or model", folder)
            return None
        import numpy as np
        import tokenizers

        names = tuple(meta["inputs"])
        if not names or any(name not in _ENCODING_FIELDS for name in names):
            return None
        export = StoredExport(
            folder=folder,
            dimensions=int(meta["dimensions"]),
            session=session(str(folder / "model.onnx"), threads),
            tokenizer=tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json")),
            names=names,
            normalize=normalize,
            lower_case=bool(meta["lower_case"]),
        )
        probes = [str(t) for t in meta["probes"]]
        want = np.asarray(meta["reference"], dtype=np.float32)
        got = np.concatenate([export.run([text]) for text in probes])
    except Exception as exc:  # missing, truncated or foreign files: export again
        _log.debug("no usable stored export in %s: %r", folder, exc)
        return None
    if not same_vectors(got, want):
        _log.debug("stored export %s no longer gives the reference vectors", folder)
        return None
    _give_back_freed_memory()
    return export


def _give_back_freed_memory() -> None:
    """Hand the heap pages freed while loading back to the system (glibc only).

    Reading the 90 MB graph leaves ~65 MB of freed buffers that glibc keeps resident: RSS of a
    loaded embedder 239 -> 174 MB after ``malloc_trim(0)`` (#36).
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # another C library (musl): nothing to do
        pass


def save_export(
    cache: Path,
    key: str,
    *,
    graph: bytes,
    model: Any,
    names: list[str],
    probes: tuple[str, ...],
    reference: NDArray[np.float32],
) -> Path | None:
    """Write an export (checked already) and what a later load needs; None if not possible.

    ``model`` is the loaded SentenceTransformer: its tokenizer is stored as it tokenizes
    (truncation at ``max_seq_length``, padding). The folder appears complete or not at all
    (written beside it, then renamed); a cache that cannot be written is not an error.
    """
    if any(name not in _ENCODING_FIELDS for name in names):
        return None
    first = model[0]
    backend = getattr(getattr(model, "tokenizer", None), "backend_tokenizer", None)
    max_length = getattr(first, "max_seq_length", None)
    if backend is None or not isinstance(max_length, int):
        return None
    folder = cache / key
    try:
        import tokenizers

        tokenizer = tokenizers.Tokenizer.from_str(backend.to_str())
        tokenizer.enable_truncation(max_length=max_length)
        pad = model.tokenizer
        tokenizer.enable_padding(pad_id=int(pad.pad_token_id or 0), pad_token=str(pad.pad_token))
        cache.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=cache))
        try:
            (staging / "model.onnx").write_bytes(graph)
            tokenizer.save(str(staging / "tokenizer.json"))
            meta = {
                "format": FORMAT,
                "key": key,
                "dimensions": int(reference.shape[1]),
                "inputs": names,
                "lower_case": bool(getattr(first, "do_lower_case", False)),
                "probes": list(probes),
                "reference": reference.tolist(),
            }
            (staging / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
            if folder.exists():  # another process wrote it meanwhile, or a stale one
                shutil.rmtree(folder, ignore_errors=True)
            try:
                os.replace(staging, folder)
            except OSError:
                # Another process (a second first start on this machine) put its export there
                # between the removal and the rename: that one is kept, and the load that
                # follows checks it against its probe vectors like any stored export.
                if not (folder / "meta.json").is_file():
                    raise
        finally:
            with contextlib.suppress(OSError):
                shutil.rmtree(staging)
    except Exception as exc:  # a read-only or full disk: the next load exports again
        _log.debug("could not store the ONNX export in %s: %r", folder, exc)
        return None
    return folder
