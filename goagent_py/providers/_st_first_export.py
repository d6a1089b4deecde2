"""The local embedder's first export, in a process of its own (private).

``python -m goagent_py.providers._st_first_export MODEL CACHE NORMALIZE THREADS`` loads the model
on torch, exports it to ONNX and stores the export in ``CACHE`` (see
:mod:`goagent_py.providers._st_export`), then exits: the process that asked
(:class:`~goagent_py.providers.sentence_transformers.SentenceTransformerEmbedder`'s first load)
then runs the stored export alone and never holds torch. Exit status 0: an export is stored;
3: none was (the ONNX path is not usable here, or the cache cannot be written).
"""

from __future__ import annotations

import sys

from goagent_py import _main_guard
from goagent_py.providers.sentence_transformers import _NOTHING_STORED, SentenceTransformerEmbedder


def main(argv: list[str]) -> int:
    model, cache, normalize, threads = argv
    embedder = SentenceTransformerEmbedder(
        model,
        normalize=normalize == "1",
        query_threads=int(threads) if threads else None,
        onnx_cache=cache,
    )
    with embedder._lock:  # the torch load only: the process that started this found no export
        stored = embedder._load_torch()
    return 0 if stored is not None else _NOTHING_STORED


if __name__ == "__main__":
    _main_guard.release()
    sys.exit(main(sys.argv[1:]))
