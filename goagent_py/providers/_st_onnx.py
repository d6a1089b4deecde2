"""The one-text paths of the local embedder: ONNX Runtime, then torch, then ``encode``.

A search query is one short text, where ``SentenceTransformer.encode`` spends much of its time
outside the model. The fastest path is the whole model (tokens to sentence vector: transformer,
pooling, normalisation) exported to ONNX from the loaded weights at load time (a temporary
file, deleted at once; no network) and run by ONNX Runtime, which also leaves the GIL for the
whole forward pass (torch takes it back between operations, so a pure-Python keyword search
running meanwhile stretched it). Without ``onnx``/``onnxruntime``, or if the export fails,
the model's own modules run under ``torch.inference_mode``. A path is used only if it gives
``encode``'s vectors on probe texts of several lengths; otherwise one text goes through
``encode`` too. An ONNX export that passes is kept on disk with ``encode``'s probe vectors, so
later loads can run it without torch (:mod:`goagent_py.providers._st_export`).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from goagent_py.providers._st_export import normalized, same_vectors, session

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = [
    "PROBES",
    "Chosen",
    "Exported",
    "OneText",
    "one_text_path",
]

_log = logging.getLogger("goagent_py.providers.sentence_transformers")

OneText = Callable[[list[str]], "NDArray[np.float32]"]

# Short, typical and beyond the 256-token limit: an export that fixed a shape fails one of them.
PROBES = (
    "a",
    "Where is the retry policy of a tool configured? sqlite-vec, FTS5 and BM25.",
    " ".join(
        f"Sentence {i} of a long passage about vector search and keywords." for i in range(60)
    ),
)


def features(model: Any, texts: list[str]) -> dict[str, Any]:
    """The model's own tokenization of ``texts``, on the model's device."""
    # preprocess() since sentence-transformers 6 (tokenize() is deprecated there).
    prepare = getattr(model, "preprocess", None) or model.tokenize
    prepared: dict[str, Any] = prepare(texts)
    device = model.device
    return {k: v.to(device) if hasattr(v, "to") else v for k, v in prepared.items()}


def torch_path(model: Any, normalize: bool) -> OneText:
    """The model's modules on the texts under ``inference_mode``, without ``encode``."""
    import torch

    def run(texts: list[str]) -> NDArray[np.float32]:
        prepared = features(model, texts)
        with torch.inference_mode():
            out = model(prepared)["sentence_embedding"].float().cpu().numpy()
        return normalized(out, normalize)

    return run


@dataclass(frozen=True, slots=True)
class Exported:
    """The model exported to ONNX: its run function, the graph, and its tensor inputs."""

    run: OneText
    graph: bytes
    names: list[str]


def onnx_path(model: Any, normalize: bool, threads: int | None) -> Exported | None:
    """The whole model exported to ONNX in memory and run by ONNX Runtime on the CPU.

    The graph has two outputs: the sentence vector and the contextual token vectors (for late
    interaction). None when ``onnx`` or ``onnxruntime`` is missing or the model is not on the
    CPU.
    """
    if importlib.util.find_spec("onnxruntime") is None or importlib.util.find_spec("onnx") is None:
        return None
    if str(model.device) != "cpu":
        return None
    import torch

    probe = features(model, [PROBES[1]])
    names = [k for k, v in probe.items() if isinstance(v, torch.Tensor)]
    extras = {k: v for k, v in probe.items() if not isinstance(v, torch.Tensor)}

    class _Whole(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *tensors: Any) -> Any:
            out = self.model({**extras, **dict(zip(names, tensors, strict=True))})
            return out["sentence_embedding"], out["token_embeddings"]

    dynamic = {name: {0: "batch", 1: "tokens"} for name in names}
    dynamic["token_embeddings"] = {0: "batch", 1: "tokens"}
    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the exporter's notes on operators it decomposes
        model.eval()
        path = os.path.join(folder, "model.onnx")
        torch.onnx.export(
            _Whole(),
            tuple(probe[name] for name in names),
            path,
            input_names=names,
            output_names=["sentence_embedding", "token_embeddings"],
            dynamic_axes={**dynamic, "sentence_embedding": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
        with open(path, "rb") as f:
            graph = f.read()
    runner = session(graph, threads)

    def run(texts: list[str]) -> NDArray[np.float32]:
        prepared = features(model, texts)
        inputs = {name: prepared[name].numpy() for name in names}
        return normalized(runner.run(["sentence_embedding"], inputs)[0], normalize)

    return Exported(run, graph, names)


def reference(model: Any, normalize: bool) -> NDArray[np.float32]:
    """``encode``'s vectors of the probe texts, one text at a time (one row each)."""
    import numpy as np

    rows = [
        model.encode(
            [text], normalize_embeddings=normalize, convert_to_numpy=True, show_progress_bar=False
        )
        for text in PROBES
    ]
    return np.concatenate([np.asarray(r, dtype=np.float32).reshape(1, -1) for r in rows])


def matches(run: OneText, want: NDArray[np.float32]) -> bool:
    """Whether ``run`` gives the reference vector ``want`` of every probe text.

    ``encode`` may add what the direct paths do not (a default prompt, a truncated dimension,
    a task the model routes on): then the path is not used.
    """
    import numpy as np

    try:
        got = np.concatenate([run([text]) for text in PROBES])
    except Exception as exc:
        _log.debug("one-text path failed on a probe: %r", exc)
        return False
    return same_vectors(got, want)


@dataclass(frozen=True, slots=True)
class Chosen:
    """The one-text path chosen at load, and (for ONNX Runtime) what may be stored."""

    name: str  # "onnxruntime", "torch" or "encode"
    run: OneText | None
    exported: Exported | None = None
    reference: NDArray[np.float32] | None = None


def one_text_path(model: Any, normalize: bool, threads: int | None, *, onnx: bool = True) -> Chosen:
    """The fastest path that gives ``encode``'s vectors: "onnxruntime" (with the export and
    ``encode``'s probe vectors, to store), "torch", or "encode" (run None). ``onnx=False``
    skips ONNX Runtime."""
    try:
        want = reference(model, normalize)
    except Exception as exc:
        _log.debug("encode failed on a probe text: %r", exc)
        return Chosen("encode", None)
    exported: Exported | None = None
    try:
        exported = onnx_path(model, normalize, threads) if onnx else None
    except Exception as exc:  # an architecture the exporter does not handle
        _log.debug("ONNX export of the embedder failed, using torch: %r", exc)
    if exported is not None and matches(exported.run, want):
        return Chosen("onnxruntime", exported.run, exported, want)
    direct = torch_path(model, normalize)
    if matches(direct, want):
        return Chosen("torch", direct)
    return Chosen("encode", None)
