"""Voyage AI embeddings (``POST https://api.voyageai.com/v1/embeddings``), batched.

Wire format: Voyage's OpenAPI file and https://docs.voyageai.com/reference/embeddings-api (see
``tests/fixtures/voyage/README.md``). Unlike the reference port this embedder is a
``BatchEmbedder``: one request carries up to ``batch_size`` texts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError

from goagent_py.errors import ConfigurationError, NoEmbeddableContentError, ProviderError
from goagent_py.messages import ContentBlock, TextBlock
from goagent_py.providers._http import HTTPBackend, excerpt, resolve_api_key

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["VoyageEmbedder"]

_PROVIDER = "voyage"
_MAX_BATCH = 1000  # the documented limit on the number of texts per request

InputType = Literal["query", "document"]


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _WireEmbedding(_Wire):
    index: int
    embedding: list[float]


class _WireEmbeddings(_Wire):
    data: list[_WireEmbedding]


def _text(blocks: Sequence[ContentBlock]) -> str:
    text = "\n".join(b.text for b in blocks if isinstance(b, TextBlock) and b.text.strip())
    if not text:
        kinds = ", ".join(sorted({b.type for b in blocks})) or "nothing"
        raise NoEmbeddableContentError(f"no text to embed (got {kinds})")
    return text


class VoyageEmbedder(HTTPBackend):
    """Text embeddings from Voyage AI (``voyage-3.5``, ``voyage-3-large``, ``voyage-code-3``...).

    Implements ``Embedder`` and ``BatchEmbedder``: text blocks are joined by newlines, other
    blocks are ignored. Every vector is checked against ``output_dimension`` (or, when that is
    None, against the first vector received).

    Use it as an async context manager (or call :meth:`aclose`) so its HTTP client is closed.

    Args:
        model: the embedding model.
        api_key: the API key; defaults to the ``VOYAGE_API_KEY`` environment variable.
        input_type: ``"query"`` or ``"document"`` (Voyage prepends a retrieval prompt), or None.
        output_dimension: the vector size to ask for (256, 512, 1024 or 2048 on models that
            support it) and to expect.
        base_url: the API root including ``/v1``.
        http_client: an ``httpx.AsyncClient`` to use instead of creating one.
        batch_size: texts per request in :meth:`embed_batch` (at most 1000; mind the per-request
            token limit of your model).
        timeout: the timeout of the created client, in seconds or as ``httpx.Timeout``.

    Raises:
        ConfigurationError: no API key, or a bad argument.
    """

    def __init__(
        self,
        model: str = "voyage-3.5",
        *,
        api_key: str | None = None,
        input_type: InputType | None = None,
        output_dimension: int | None = None,
        base_url: str = "https://api.voyageai.com/v1",
        http_client: httpx.AsyncClient | None = None,
        batch_size: int = 128,
        timeout: float | httpx.Timeout | None = None,
    ) -> None:
        if not model:
            raise ConfigurationError("VoyageEmbedder: model must not be empty")
        if input_type not in (None, "query", "document"):
            raise ConfigurationError(
                f"VoyageEmbedder: input_type must be 'query', 'document' or None, "
                f"got {input_type!r}"
            )
        if output_dimension is not None and output_dimension < 1:
            raise ConfigurationError(
                f"VoyageEmbedder: output_dimension must be >= 1, got {output_dimension}"
            )
        if not 1 <= batch_size <= _MAX_BATCH:
            raise ConfigurationError(
                f"VoyageEmbedder: batch_size must be between 1 and {_MAX_BATCH}, got {batch_size}"
            )
        key = resolve_api_key(api_key, "VOYAGE_API_KEY", provider=_PROVIDER)
        super().__init__(
            _PROVIDER,
            base_url=base_url,
            http_client=http_client,
            timeout=timeout,
            headers={"Authorization": f"Bearer {key}"},
        )
        self._model = model
        self._input_type = input_type
        self._requested_dimensions = output_dimension
        self._dimensions = output_dimension
        self._batch_size = batch_size

    @property
    def model(self) -> str:
        """The embedding model's name."""
        return self._model

    @property
    def dimensions(self) -> int | None:
        """The vector size: as configured, else as first received (None before any call)."""
        return self._dimensions

    async def embed(self, blocks: Sequence[ContentBlock]) -> NDArray[np.float32]:
        """Embed the text of ``blocks`` as one 1-D float32 vector.

        Raises:
            NoEmbeddableContentError: ``blocks`` hold no text.
            ProviderError: the request failed or the vector has the wrong size.
        """
        vectors = await self._embed_texts([_text(blocks)])
        vector: NDArray[np.float32] = vectors[0]
        return vector

    async def embed_batch(self, inputs: Sequence[Sequence[ContentBlock]]) -> NDArray[np.float32]:
        """Embed each input; a 2-D float32 array with one row per input, in order.

        Inputs are sent ``batch_size`` at a time.

        Raises:
            NoEmbeddableContentError: an input holds no text (the message names which).
            ProviderError: a request failed or a vector has the wrong size.
        """
        import numpy as np

        texts: list[str] = []
        for i, blocks in enumerate(inputs):
            try:
                texts.append(_text(blocks))
            except NoEmbeddableContentError as exc:
                raise NoEmbeddableContentError(f"input {i}: {exc}") from None
        rows = [
            await self._embed_texts(texts[start : start + self._batch_size])
            for start in range(0, len(texts), self._batch_size)
        ]
        if not rows:
            return np.zeros((0, self._dimensions or 0), dtype=np.float32)
        return np.concatenate(rows, axis=0)

    def _body(self, texts: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"input": texts, "model": self._model}
        if self._input_type is not None:
            body["input_type"] = self._input_type
        if self._requested_dimensions is not None:
            body["output_dimension"] = self._requested_dimensions
        return body

    async def _embed_texts(self, texts: list[str]) -> NDArray[np.float32]:
        import numpy as np

        data = await self.post_json("/embeddings", self._body(texts))
        text = json.dumps(data, default=str)
        try:
            wire = _WireEmbeddings.model_validate(data)
        except ValidationError as exc:
            raise ProviderError(
                f"unexpected embeddings response: {excerpt(text)}",
                provider=_PROVIDER,
                status=200,
                body=text,
            ) from exc
        items = sorted(wire.data, key=lambda item: item.index)
        if [item.index for item in items] != list(range(len(texts))):
            raise ProviderError(
                f"asked for {len(texts)} embeddings, got indexes "
                f"{[item.index for item in items][:10]}",
                provider=_PROVIDER,
                status=200,
                body=excerpt(text),
            )
        sizes = {len(item.embedding) for item in items}
        expected = self._dimensions or next(iter(sizes))
        if sizes != {expected} or expected == 0:
            raise ProviderError(
                f"embedding size mismatch: expected {expected}, got {sorted(sizes)}",
                provider=_PROVIDER,
                status=200,
                body=excerpt(text),
            )
        self._dimensions = expected
        return np.asarray([item.embedding for item in items], dtype=np.float32)
