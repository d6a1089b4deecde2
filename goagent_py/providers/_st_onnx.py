"""The one-text paths of the local embedder: ONNX Runtime, then torch, then ``encode``.

A search query is one short text, where ``SentenceTransformer.encode`` spends much of its time
outside the model. The fastest path is the whole model (tokens to sentence vector: transformer,
pooling, normalisation) exported to ONNX from the loaded weights at load time (a temporary
file, deleted at once; no network) and run by ONNX Runtime, which also leaves the GIL for the
whole forward pass (torch takes it back between operations, so a pure-Python keyword search
running meanwhile stretched it). Without ``onnx``/``onnxruntime``, or if the export fails,
the model's own modules run under ``torch.inference_mode``. A path is used only if it gives
``encode``'s vectors on probe texts of several lengths; otherwise one text goes through
``encode`` too.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import tempfile
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["OneText", "one_text_path"]

_log = logging.getLogger("goagent_py.providers.sentence_transformers")

OneText = Callable[[list[str]], "NDArray[np.float32]"]

# Short, typical and beyond the 256-token limit: an export that fixed a shape fails one of them.
_PROBES = (
    "a",
    "Where is the retry policy of a tool configured? sqlite-vec, FTS5 and BM25.",
    " ".join(
        f"Sentence {i} of a long passage about vector search and keywords." for i in range(60)
    ),
)
_SAME_VECTOR = 0.99999


def features(model: Any, texts: list[str]) -> dict[str, Any]:
    """The model's own tokenization of ``texts``, on the model's device."""
    # preprocess() since sentence-transformers 6 (tokenize() is deprecated there).
    prepare = getattr(model, "preprocess", None) or model.tokenize
    prepared: dict[str, Any] = prepare(texts)
    device = model.device
    return {k: v.to(device) if hasattr(v, "to") else v for k, v in prepared.items()}


def _normalized(vectors: Any, normalize: bool) -> NDArray[np.float32]:
    import numpy as np

    out: NDArray[np.float32] = np.ascontiguousarray(vectors, dtype=np.float32)
    if normalize:
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out = (out / np.where(norms == 0, 1, norms)).astype(np.float32)
    return out


def torch_path(model: Any, normalize: bool) -> OneText:
    """The model's modules on the texts under ``inference_mode``, without ``encode``."""
    import torch

    def run(texts: list[str]) -> NDArray[np.float32]:
        prepared = features(model, texts)
        with torch.inference_mode():
            out = model(prepared)["sentence_embedding"].float().cpu().numpy()
        return _normalized(out, normalize)

    return run


def onnx_path(model: Any, normalize: bool, threads: int | None) -> OneText | None:
    """The whole model exported to ONNX in memory and run by ONNX Runtime on the CPU.

    None when ``onnx`` or ``onnxruntime`` is missing or the model is not on the CPU.
    """
    if importlib.util.find_spec("onnxruntime") is None or importlib.util.find_spec("onnx") is None:
        return None
    if str(model.device) != "cpu":
        return None
    import onnxruntime  # type: ignore[import-untyped]
    import torch

    probe = features(model, [_PROBES[1]])
    names = [k for k, v in probe.items() if isinstance(v, torch.Tensor)]
    extras = {k: v for k, v in probe.items() if not isinstance(v, torch.Tensor)}

    class _Whole(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *tensors: Any) -> Any:
            return self.model({**extras, **dict(zip(names, tensors, strict=True))})[
                "sentence_embedding"
            ]

    dynamic = {name: {0: "batch", 1: "tokens"} for name in names}
    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the exporter's notes on operators it decomposes
        model.eval()
        path = os.path.join(folder, "model.onnx")
        torch.onnx.export(
            _Whole(),
            tuple(probe[name] for name in names),
            path,
            input_names=names,
            output_names=["sentence_embedding"],
            dynamic_axes={**dynamic, "sentence_embedding": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
        with open(path, "rb") as f:
            graph = f.read()
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    if threads is not None:
        # One thread runs in the caller's thread: no pool to wake, nothing spinning after.
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(graph, options, providers=["CPUExecutionProvider"])

    def run(texts: list[str]) -> NDArray[np.float32]:
        prepared = features(model, texts)
        inputs = {name: prepared[name].numpy() for name in names}
        return _normalized(session.run(None, inputs)[0], normalize)

    return run


def matches_encode(model: Any, normalize: bool, run: OneText) -> bool:
    """Whether ``run`` gives ``encode``'s vector on every probe text.

    ``encode`` may add what the direct paths do not (a default prompt, a truncated dimension,
    a task the model routes on): then the path is not used.
    """
    import numpy as np

    for text in _PROBES:
        try:
            want = model.encode(
                [text],
                normalize_embeddings=normalize,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            got = run([text])
        except Exception as exc:
            _log.debug("one-text path failed on a probe: %r", exc)
            return False
        want = np.asarray(want, dtype=np.float64).reshape(1, -1)
        if got.shape != want.shape:
            return False
        a, b = got[0].astype(np.float64), want[0]
        na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
        if na == 0.0 or nb == 0.0 or abs(na - nb) > 1e-4 * max(1.0, nb):
            return False
        if float(a @ b) / (na * nb) < _SAME_VECTOR:
            return False
    return True


def one_text_path(
    model: Any, normalize: bool, threads: int | None, *, onnx: bool = True
) -> tuple[str, OneText | None]:
    """The fastest path that gives ``encode``'s vectors: ("onnxruntime" | "torch", run), or
    ("encode", None). ``onnx=False`` skips ONNX Runtime."""
    exported: OneText | None = None
    try:
        exported = onnx_path(model, normalize, threads) if onnx else None
    except Exception as exc:  # an architecture the exporter does not handle
        _log.debug("ONNX export of the embedder failed, using torch: %r", exc)
    if exported is not None and matches_encode(model, normalize, exported):
        return "onnxruntime", exported
    direct = torch_path(model, normalize)
    if matches_encode(model, normalize, direct):
        return "torch", direct
    return "encode", None
