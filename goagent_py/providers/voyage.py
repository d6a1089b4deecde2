"""Voyage AI embeddings (``POST https://api.voyageai.com/v1/embeddings``), batched.

Wire format: Voyage's OpenAPI file and https://docs.voyageai.com/reference/embeddings-api (see
``tests/fixtures/voyage/README.md``). Unlike the reference port this embedder is a
``BatchEmbedder``: one request carries up to ``batch_size`` texts.
"""

from __future__ import annotations

from typing import Any, Literal

import httpx

from goagent_py.errors import ConfigurationError
from goagent_py.providers._http import RemoteEmbedder, resolve_api_key

__all__ = ["VoyageEmbedder"]

_PROVIDER = "voyage"
_MAX_BATCH = 1000  # the documented limit on the number of texts per request

InputType = Literal["query", "document"]


class VoyageEmbedder(RemoteEmbedder):
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

    _path = "/embeddings"
    _vendor_url = "https://api.voyageai.com/v1"

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
        if input_type not in (None, "query", "document"):
            raise ConfigurationError(
                f"VoyageEmbedder: input_type must be 'query', 'document' or None, "
                f"got {input_type!r}"
            )
        key = resolve_api_key(api_key, "VOYAGE_API_KEY", provider=_PROVIDER)
        super().__init__(
            _PROVIDER,
            model=model,
            dimensions=output_dimension,
            dimensions_arg="output_dimension",
            batch_size=batch_size,
            max_batch_size=_MAX_BATCH,
            base_url=base_url,
            http_client=http_client,
            timeout=timeout,
            headers={"Authorization": f"Bearer {key}"},
        )
        self._input_type = input_type

    def _body(self, texts: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"input": texts, "model": self._model}
        if self._input_type is not None:
            body["input_type"] = self._input_type
        if self._requested_dimensions is not None:
            body["output_dimension"] = self._requested_dimensions
        return body

    def _parse(self, data: Any) -> list[list[float]]:
        return self._vectors_by_index(data)
