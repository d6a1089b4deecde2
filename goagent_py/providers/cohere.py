"""Cohere embeddings (``POST https://api.cohere.com/v2/embed``), batched.

Wire format: Cohere's Embed API (v2) reference, https://docs.cohere.com/reference/embed (see
``tests/fixtures/cohere/README.md``): the body carries ``texts``, ``model``, ``input_type`` and
``embedding_types: ["float"]``; the answer holds one vector per text, in input order, under
``embeddings.float``. Errors are ``{"id", "message"}`` with the status in the status line.
"""

from __future__ import annotations

import os
from typing import Any, Literal, get_args

import httpx
from pydantic import BaseModel, ConfigDict, Field

from goagent_py.errors import ConfigurationError
from goagent_py.providers._http import RemoteEmbedder, resolve_api_key

__all__ = ["CohereEmbedder"]

_PROVIDER = "cohere"
_MAX_BATCH = 96  # the documented limit on the number of texts per request

InputType = Literal["search_document", "search_query", "classification", "clustering"]


class _WireFloats(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    vectors: list[list[float]] = Field(alias="float")


class _WireEmbed(BaseModel):
    model_config = ConfigDict(extra="ignore")
    embeddings: _WireFloats


class CohereEmbedder(RemoteEmbedder):
    """Text embeddings from Cohere (``embed-v4.0``, ``embed-english-v3.0``, ...).

    Implements ``Embedder`` and ``BatchEmbedder``: text blocks are joined by newlines, other
    blocks are ignored; :meth:`embed_batch` sends up to ``batch_size`` texts per request. Every
    vector is checked against ``output_dimension`` (or, when that is None, against the first
    vector received).

    Cohere embeds documents and queries differently (``input_type``): store with
    ``"search_document"`` and search with an embedder made with ``"search_query"`` when the
    store allows two; one embedder for both (the default, documents) also works, a little less
    well.

    Use it as an async context manager (or call :meth:`aclose`) so its HTTP client is closed.

    Args:
        model: the embedding model.
        api_key: the API key; defaults to the ``CO_API_KEY`` environment variable (the Cohere
            SDK's), else ``COHERE_API_KEY``.
        input_type: ``"search_document"``, ``"search_query"``, ``"classification"`` or
            ``"clustering"``.
        output_dimension: the vector size to ask for (256, 512, 1024 or 1536 on ``embed-v4.0``)
            and to expect; None takes the model's own.
        base_url: the API root including ``/v2``.
        http_client: an ``httpx.AsyncClient`` to use instead of creating one.
        batch_size: texts per request in :meth:`embed_batch` (at most 96, Cohere's limit).
        timeout: the timeout of the created client, in seconds or as ``httpx.Timeout``.

    Raises:
        ConfigurationError: no API key, or a bad argument.
    """

    _path = "/embed"
    _vendor_url = "https://api.cohere.com/v2"

    def __init__(
        self,
        model: str = "embed-v4.0",
        *,
        api_key: str | None = None,
        input_type: InputType = "search_document",
        output_dimension: int | None = None,
        base_url: str = "https://api.cohere.com/v2",
        http_client: httpx.AsyncClient | None = None,
        batch_size: int = _MAX_BATCH,
        timeout: float | httpx.Timeout | None = None,
    ) -> None:
        if input_type not in get_args(InputType):
            allowed = ", ".join(repr(a) for a in get_args(InputType))
            raise ConfigurationError(
                f"CohereEmbedder: input_type must be one of {allowed}, got {input_type!r}"
            )
        if api_key is None and not os.environ.get("CO_API_KEY"):
            api_key = os.environ.get("COHERE_API_KEY") or None
        key = resolve_api_key(api_key, "CO_API_KEY", provider=_PROVIDER)
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

    @property
    def input_type(self) -> str:
        """What the texts are embedded as (``"search_document"``, ``"search_query"``...)."""
        return self._input_type

    def _body(self, texts: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self._model,
            "texts": texts,
            "input_type": self._input_type,
            "embedding_types": ["float"],
        }
        if self._requested_dimensions is not None:
            body["output_dimension"] = self._requested_dimensions
        return body

    def _parse(self, data: Any) -> list[list[float]]:
        return _WireEmbed.model_validate(data).embeddings.vectors
