"""Shared HTTP plumbing for the vendor providers and embedders (private).

What every HTTP backend needs, in one place:

- :class:`HTTPBackend`: owns or borrows an ``httpx.AsyncClient`` (closes only a client it
  created), is an async context manager with ``aclose()``, and sends requests through
  :meth:`HTTPBackend.post_json`, :meth:`HTTPBackend.stream_sse` and
  :meth:`HTTPBackend.stream_ndjson`, which turn every failure into a
  :class:`~goagent_py.errors.ProviderError`.
- :func:`error_from_response`: status, vendor error type and message parsed from the body, the
  raw body, Retry-After (read by :mod:`goagent_py._retry_after`, the rule the retry policy's
  ``parse_retry_after`` is) and the server's ``x-should-retry`` verdict.
- :func:`redact_error`: every error built here has the API keys it could echo taken out of its
  message and body (:func:`goagent_py._redact.redact`) before it leaves: what is logged or put in
  a span afterwards is safe. :meth:`HTTPBackend._redacting` does the same for the errors a vendor
  module builds from a stream.
- :func:`transport_error`: connection errors and timeouts become ``ProviderError(status=None)``
  with the httpx exception as ``__cause__``.
- :func:`resolve_api_key`: the argument, else the environment variable, else a
  :class:`~goagent_py.errors.ConfigurationError` naming the variable.
- :class:`RemoteEmbedder`: what the HTTP embedders share (argument checks, ``embed`` and
  ``embed_batch`` with batching, the text of an input, the count and size checks of an answer);
  a vendor adds only its request body and the parsing of its answer.

Secrets travel only in request headers; they never appear in an exception message, a ``repr``
or a log line (nothing here logs), even when the server echoes them back.
"""

from __future__ import annotations

import inspect
import json
import os
import urllib.parse
from abc import ABC, abstractmethod
from collections.abc import (
    AsyncGenerator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Self

import httpx
from httpx_sse import ServerSentEvent, SSEError, aconnect_sse
from pydantic import BaseModel, ConfigDict, ValidationError

from goagent_py._json_text import loads
from goagent_py._provider_retry import parse_should_retry, set_server_should_retry
from goagent_py._redact import redact, secrets_from_headers
from goagent_py._retry_after import retry_after_of
from goagent_py.errors import ConfigurationError, NoEmbeddableContentError, ProviderError
from goagent_py.messages import INVALID_ARGUMENTS_KEY, ContentBlock, TextBlock

if TYPE_CHECKING:
    # numpy is imported where vectors are built, so that importing a chat provider stays light.
    import numpy as np
    from numpy.typing import NDArray

__all__ = [
    "DEFAULT_TIMEOUT",
    "HTTPBackend",
    "INVALID_ARGUMENTS_KEY",
    "RemoteEmbedder",
    "ServerSentEvent",
    "error_from_response",
    "excerpt",
    "null_is_absent",
    "parse_json",
    "redact_error",
    "resolve_api_key",
    "transport_error",
]

DEFAULT_TIMEOUT = httpx.Timeout(600.0, connect=10.0)
"""Model calls can take minutes; connecting should not."""

_EXCERPT_CHARS = 300


KeySource = Callable[[], "str | Awaitable[str]"]
"""A function giving the API key for each request (sync or async): short-lived tokens."""


def key_headers(
    source: KeySource, make: Callable[[str], dict[str, str]], *, provider: str
) -> Callable[[], Awaitable[Mapping[str, str]]]:
    """A ``header_source`` that asks ``source`` for the key before each request."""

    async def headers() -> Mapping[str, str]:
        key = source()
        if inspect.isawaitable(key):
            key = await key
        if not isinstance(key, str) or not key:
            raise ConfigurationError(
                f"{provider}: the api_key function returned {key!r}, not a key"
            )
        return make(key)

    return headers


def resolve_api_key(
    api_key: str | None, env_var: str, *, provider: str, required: bool = True
) -> str:
    """The API key from the argument, else from ``env_var``.

    Args:
        api_key: the key passed by the user, or None.
        env_var: the environment variable to read when ``api_key`` is None.
        provider: the provider's name, for the error message.
        required: raise when no key is found (False returns "").

    Returns:
        The key, or "" when it is not required and not set.

    Raises:
        ConfigurationError: the key is required and neither given nor set in ``env_var``.
    """
    key = api_key if api_key is not None else os.environ.get(env_var, "")
    if not key and required:
        raise ConfigurationError(f"{provider}: no API key: set {env_var} or pass api_key=...")
    return key


def null_is_absent(cls: type[BaseModel], data: Any) -> Any:
    """A ``model_validator(mode="before")`` for the models that read a vendor's JSON.

    Compatible servers and proxies send ``"usage": null`` or ``"content": null`` where the
    vendor leaves the field out; both mean "not given", so a null takes the field's default
    instead of failing the whole answer.
    """
    if isinstance(data, dict):
        return {k: v for k, v in data.items() if v is not None}
    return data


def excerpt(text: str, limit: int = _EXCERPT_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters (for readable error messages)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def redact_error(error: ProviderError, secrets: Iterable[str] = ()) -> ProviderError:
    """Take ``secrets`` and every known key shape out of ``error``'s text, in place.

    The message (``args``), the body and every other text attribute are redacted, so the
    exception is safe to log, record or pickle whatever reads it. The messages of the errors it
    was raised from (``__cause__``/``__context__``, e.g. an httpx error naming a URL) are
    redacted too: a logged traceback shows them.

    Returns:
        ``error`` itself.
    """
    secrets = tuple(secrets)
    for name, value in list(vars(error).items()):
        if isinstance(value, str):
            setattr(error, name, redact(value, secrets))
    _redact_chain(error, secrets)
    return error


def _redact_chain(error: BaseException, secrets: Sequence[str]) -> None:
    """Redact the text ``args`` of ``error`` and of every error it was raised from."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.args = tuple(redact(a, secrets) if isinstance(a, str) else a for a in current.args)
        current = current.__cause__ or current.__context__


def _vendor_error(body: str) -> tuple[str, str]:
    """The (error type, message) in a vendor error body, or ("", "") when there is none.

    Understands ``{"error": {"type", "message", "code"}}`` (Anthropic, OpenAI and compatible
    servers), ``{"error": "message"}`` (Ollama), ``{"detail": ...}`` (Voyage, FastAPI) and
    ``{"message": ...}`` (Cohere).
    """
    try:
        data = loads(body)
    except ValueError:
        return "", ""
    if not isinstance(data, dict):
        return "", ""
    error = data.get("error")
    if isinstance(error, dict):
        kind = error.get("type") or error.get("code") or ""
        message = error.get("message") or ""
        return str(kind), str(message)
    if isinstance(error, str):
        return "", error
    detail = data.get("detail")
    if detail:
        return "", detail if isinstance(detail, str) else json.dumps(detail)
    message = data.get("message")
    if isinstance(message, str) and message:
        return "", message
    return "", ""


def _answered_error(
    response: httpx.Response, message: str, kind: str, body: str, provider: str
) -> ProviderError:
    error = ProviderError(
        message,
        provider=provider,
        status=response.status_code,
        error_type=kind,
        body=body,
        retry_after=retry_after_of(response.headers),
    )
    set_server_should_retry(error, parse_should_retry(response.headers.get("x-should-retry")))
    return error


def error_from_response(
    response: httpx.Response, *, provider: str, secrets: Iterable[str] = ()
) -> ProviderError:
    """A :class:`ProviderError` for an error response whose body has been read.

    Args:
        response: the response (its body must have been read, e.g. with ``aread()``).
        provider: the provider's name.
        secrets: the credentials sent with the request, taken out of the text should the
            server echo them (known key shapes are taken out in any case).

    Returns:
        The error, with status, the vendor's error type and message, the body (redacted),
        Retry-After and the ``x-should-retry`` verdict.
    """
    secrets = tuple(secrets)
    body = redact(_body_text(response), secrets)  # before any excerpt can cut a key in two
    kind, message = _vendor_error(body)
    summary = message or excerpt(body) or response.reason_phrase or "no body"
    label = f"HTTP {response.status_code}" + (f" {kind}" if kind else "")
    advice = _key_advice(provider) if response.status_code == 401 else ""
    error = _answered_error(response, f"{label}: {summary}{advice}", kind, body, provider)
    return redact_error(error, secrets)


# The variable each vendor's key is read from (resolve_api_key's env_var), for the advice of a 401.
_KEY_VARIABLES = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "voyage": "VOYAGE_API_KEY",
    "cohere": "CO_API_KEY",
}


def _key_advice(provider: str) -> str:
    """What to do about a refused key (Anthropic's 401 says only "invalid x-api-key")."""
    # Not "api_key=...": the redaction takes that for a key and blanks it.
    variable = _KEY_VARIABLES.get(provider)
    where = f"{variable}, or the api_key you passed" if variable else "the api_key you passed"
    return f" (the server refused the API key: check {where})"


def transport_error(
    exc: httpx.HTTPError,
    *,
    provider: str,
    during: str = "",
    url: str = "",
    secrets: Iterable[str] = (),
) -> ProviderError:
    """A :class:`ProviderError` with ``status=None`` for a failure without an HTTP answer.

    The message names ``url`` when given (httpx's own messages do not: "Name or service not
    known" alone does not say which host). The caller raises it ``from exc`` so the httpx
    error stays attached as the cause.
    """
    secrets = tuple(secrets)
    _redact_chain(exc, secrets)  # it becomes the cause: a logged traceback prints it
    what = type(exc).__name__
    where = f" {during}" if during else ""
    detail = str(exc)
    message = f"{what}{where}: {detail}" if detail else f"{what}{where}"
    if url:
        message += f" (POST {url})"
    if isinstance(exc, httpx.ConnectError):
        message += ": nothing answers at that address; start the server or fix the base URL"
    error = ProviderError(message, provider=provider, status=None)
    return redact_error(error, secrets)


def parse_json(text: str, *, provider: str, status: int | None, secrets: Iterable[str] = ()) -> Any:
    """Parse a response body, raising :class:`ProviderError` with an excerpt when it is not JSON."""
    try:
        return loads(text)
    except ValueError as exc:
        secrets = tuple(secrets)
        text = redact(text, secrets)
        raise redact_error(
            ProviderError(
                f"malformed response body (not JSON): {excerpt(text) or 'empty body'}",
                provider=provider,
                status=status,
                body=text,
            ),
            secrets,
        ) from exc


def _body_text(response: httpx.Response) -> str:
    try:
        return response.text
    except (UnicodeDecodeError, httpx.ResponseNotRead):
        return ""


class HTTPBackend:
    """Base of the HTTP providers and embedders: one ``httpx.AsyncClient``, owned or borrowed.

    A client passed as ``http_client`` is borrowed and never closed here; otherwise one is created
    on first use and closed by :meth:`aclose`. URLs are built from ``base_url`` so a borrowed
    client's own base URL does not matter.

    Args:
        provider: the name used in errors ("anthropic", "openai", ...).
        base_url: the API root, e.g. ``"https://api.anthropic.com"``.
        http_client: a client to borrow (tests pass one with ``httpx.MockTransport``).
        timeout: the timeout of a created client (ignored for a borrowed client).
        headers: headers sent with every request (API keys go here, never in URLs).
        header_source: headers computed anew for each request (a short-lived token from
            :class:`KeySource`), merged over ``headers``; what it returns is redacted too.
    """

    def __init__(
        self,
        provider: str,
        *,
        base_url: str,
        http_client: httpx.AsyncClient | None = None,
        timeout: float | httpx.Timeout | None = None,
        headers: Mapping[str, str] | None = None,
        header_source: Callable[[], Awaitable[Mapping[str, str]]] | None = None,
    ) -> None:
        self._provider = provider
        self._base_url = base_url.rstrip("/")
        self._client = http_client
        self._owns_client = http_client is None
        self._timeout = DEFAULT_TIMEOUT if timeout is None else timeout
        self._headers = dict(headers or {})
        self._secrets = secrets_from_headers(self._headers)
        self._header_source = header_source

    async def _request_headers(self) -> dict[str, str]:
        """The headers of one request: the fixed ones, plus those resolved for it."""
        if self._header_source is None:
            return self._headers
        fresh = dict(await self._header_source())
        known = set(self._secrets)
        self._secrets = (
            *self._secrets,
            *(k for k in secrets_from_headers(fresh) if k not in known),
        )
        return {**self._headers, **fresh}

    def __repr__(self) -> str:
        # Never show headers: they hold the API key.
        return f"{type(self).__name__}(base_url={self._base_url!r})"

    @property
    def base_url(self) -> str:
        """The API root, without a trailing slash."""
        return self._base_url

    @property
    def client(self) -> httpx.AsyncClient:
        """The HTTP client (created on first use when none was passed)."""
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self._timeout)
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client if this object created it; a borrowed client stays open."""
        if self._owns_client and self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    @contextmanager
    def _redacting(self) -> Iterator[None]:
        """Redact every :class:`ProviderError` raised inside the block (see :func:`redact_error`).

        A vendor module wraps the parsing of answers and streams in it: the errors it builds
        from a body (an ``error`` event mid-stream) are redacted like those built here.
        """
        try:
            yield
        except ProviderError as exc:
            redact_error(exc, self._secrets)
            raise

    def url(self, path: str) -> str:
        """``base_url`` joined with ``path`` ("/v1/messages")."""
        return f"{self._base_url}/{path.lstrip('/')}"

    async def post_json(self, path: str, body: Mapping[str, Any]) -> Any:
        """POST ``body`` as JSON and return the parsed JSON answer.

        Raises:
            ProviderError: a non-2xx status, a transport failure, or a body that is not JSON.
        """
        try:
            response = await self.client.post(
                self.url(path), json=body, headers=await self._request_headers()
            )
        except httpx.HTTPError as exc:
            raise transport_error(
                exc, provider=self._provider, url=self.url(path), secrets=self._secrets
            ) from exc
        if not response.is_success:
            raise error_from_response(response, provider=self._provider, secrets=self._secrets)
        return parse_json(
            _body_text(response),
            provider=self._provider,
            status=response.status_code,
            secrets=self._secrets,
        )

    async def stream_sse(
        self, path: str, body: Mapping[str, Any]
    ) -> AsyncGenerator[ServerSentEvent, None]:
        """POST ``body`` and yield the server-sent events of the answer.

        A non-2xx status, or a 2xx answer that is not an event stream (e.g. a JSON error object),
        raises before the first event; a connection lost mid-stream raises
        ``ProviderError(status=None)``. Whether the stream was complete is the caller's to judge.

        Raises:
            ProviderError: see above.
        """
        try:
            async with aconnect_sse(
                self.client,
                "POST",
                self.url(path),
                json=body,
                headers=dict(await self._request_headers()),
            ) as source:
                response = source.response
                if not response.is_success:
                    await response.aread()
                    raise error_from_response(
                        response, provider=self._provider, secrets=self._secrets
                    )
                content_type = response.headers.get("content-type", "")
                if "text/event-stream" not in content_type:
                    await response.aread()
                    raise _not_a_stream(
                        response, self._provider, "text/event-stream", self._secrets
                    )
                try:
                    async for event in source.aiter_sse():
                        yield event
                except SSEError as exc:  # pragma: no cover - content type checked above
                    raise redact_error(
                        ProviderError(f"malformed event stream: {exc}", provider=self._provider),
                        self._secrets,
                    ) from exc
        except httpx.HTTPError as exc:
            raise transport_error(
                exc,
                provider=self._provider,
                during="during stream",
                url=self.url(path),
                secrets=self._secrets,
            ) from exc

    async def stream_ndjson(self, path: str, body: Mapping[str, Any]) -> AsyncGenerator[Any, None]:
        """POST ``body`` and yield each line of a newline-delimited JSON answer, parsed.

        Blank lines are skipped. Errors as for :meth:`stream_sse`; a line that is not JSON raises
        :class:`ProviderError` with an excerpt of it.
        """
        try:
            async with self.client.stream(
                "POST", self.url(path), json=body, headers=await self._request_headers()
            ) as response:
                if not response.is_success:
                    await response.aread()
                    raise error_from_response(
                        response, provider=self._provider, secrets=self._secrets
                    )
                async for line in response.aiter_lines():
                    if line.strip():
                        yield parse_json(
                            line,
                            provider=self._provider,
                            status=response.status_code,
                            secrets=self._secrets,
                        )
        except httpx.HTTPError as exc:
            raise transport_error(
                exc,
                provider=self._provider,
                during="during stream",
                url=self.url(path),
                secrets=self._secrets,
            ) from exc


def _not_a_stream(
    response: httpx.Response, provider: str, expected: str, secrets: Sequence[str]
) -> ProviderError:
    body = redact(_body_text(response), secrets)
    kind, message = _vendor_error(body)
    got = response.headers.get("content-type", "") or "no content type"
    summary = message or excerpt(body) or "empty body"
    error = _answered_error(
        response,
        f"HTTP {response.status_code}: expected {expected}, got {got}: {summary}",
        kind,
        body,
        provider,
    )
    return redact_error(error, secrets)


# --- embedders --------------------------------------------------------------------------------


class _WireIndexedEmbedding(BaseModel):
    model_config = ConfigDict(extra="ignore")
    index: int
    embedding: list[float]


class _WireIndexedEmbeddings(BaseModel):
    model_config = ConfigDict(extra="ignore")
    data: list[_WireIndexedEmbedding]


def _kinds(blocks: Sequence[ContentBlock]) -> str:
    """What an input without text held, for the error message ("image, blank text")."""
    if not blocks:
        return "no blocks"
    return ", ".join(sorted({"blank text" if isinstance(b, TextBlock) else b.type for b in blocks}))


def normalised_endpoint(url: str) -> str:
    """``url`` as an embedder's identity names it: ``scheme://host[:port]/path``, lower-cased
    scheme and host, no default port, no trailing slash, and nothing that may be a secret
    (user, password, query, fragment)."""
    parts = urllib.parse.urlsplit(url.strip())
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:  # not a number: the host and port as written (without a user)
        host = parts.netloc.rpartition("@")[2].lower()
    else:
        host = (parts.hostname or "").lower()
        if ":" in host:  # an IPv6 address
            host = f"[{host}]"
        if port is not None and (scheme, port) not in (("http", 80), ("https", 443)):
            host = f"{host}:{port}"
    return f"{scheme}://{host}{parts.path.rstrip('/')}"


class RemoteEmbedder(HTTPBackend, ABC):
    """Base of the HTTP embedders (OpenAI-compatible, Ollama, Voyage).

    Implements ``Embedder`` and ``BatchEmbedder``: the text blocks of an input are joined by
    newlines (blank ones skipped, other blocks ignored); an input without text raises
    :class:`~goagent_py.NoEmbeddableContentError`. ``embed_batch`` sends ``batch_size`` texts per
    request. Every answer is checked: one vector per text, each of the configured size, or, when
    none was configured, of the size of the first vector received (which then becomes
    :attr:`dimensions`).

    A subclass sets ``_path`` (the endpoint), builds the JSON body for a list of texts
    (:meth:`_body`) and turns the parsed answer into one vector per text, in input order
    (:meth:`_parse`), raising ``pydantic.ValidationError`` when the answer has the wrong shape.

    Args:
        provider: the name used in errors ("openai", "ollama", "voyage").
        model: the embedding model.
        dimensions: the vector size configured by the user, or None to take the model's.
        dimensions_arg: the name of the subclass's argument for ``dimensions``, for messages.
        batch_size: texts per request in :meth:`embed_batch`.
        max_batch_size: the vendor's limit on ``batch_size``, if it has one.
        base_url: the API root.
        http_client: an ``httpx.AsyncClient`` to use instead of creating one.
        timeout: the timeout of the created client.
        headers: headers sent with every request (the API key).

    Raises:
        ConfigurationError: an empty model, ``dimensions`` < 1 or ``batch_size`` out of range.
    """

    _path: ClassVar[str]
    """The endpoint, relative to ``base_url`` ("/embeddings")."""
    _vendor_url: ClassVar[str | None] = None
    """The vendor's API root: an embedder there leaves the endpoint out of its identity."""

    def __init__(
        self,
        provider: str,
        *,
        model: str,
        dimensions: int | None,
        dimensions_arg: str = "dimensions",
        batch_size: int,
        max_batch_size: int | None = None,
        base_url: str,
        http_client: httpx.AsyncClient | None = None,
        timeout: float | httpx.Timeout | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        name = type(self).__name__
        if not model:
            raise ConfigurationError(
                f"{name}: model must not be empty: pass the embedding model's name"
            )
        if dimensions is not None and dimensions < 1:
            raise ConfigurationError(
                f"{name}: {dimensions_arg} must be >= 1, got {dimensions}; "
                "leave it None to take the model's own size"
            )
        if batch_size < 1 or (max_batch_size is not None and batch_size > max_batch_size):
            limit = f"between 1 and {max_batch_size}" if max_batch_size is not None else ">= 1"
            raise ConfigurationError(f"{name}: batch_size must be {limit}, got {batch_size}")
        super().__init__(
            provider, base_url=base_url, http_client=http_client, timeout=timeout, headers=headers
        )
        self._model = model
        self._requested_dimensions = dimensions
        self._dimensions_arg = dimensions_arg
        self._dimensions = dimensions
        self._batch_size = batch_size

    @property
    def model(self) -> str:
        """The embedding model's name."""
        return self._model

    @property
    def dimensions(self) -> int | None:
        """The vector size: as configured, else as first received (None before any call)."""
        return self._dimensions

    @property
    def embedder_identity(self) -> str:
        """Which vectors this embedder makes: ``provider:model`` (``:dimensions`` when set),
        then ``@endpoint`` when the API root is not the vendor's.

        The same model name on two servers (a local llama.cpp and the vendor) may be two
        models. The endpoint is normalised (scheme and host lower-cased, a default port and a
        trailing slash dropped) and holds no secret (no user, password, query or fragment).
        The vendor's own is left out, so identities recorded before endpoints were named still
        match. A RAG index and a long-term memory's store record it and refuse vectors of
        another (``docs/rag.md``).
        """
        size = self._requested_dimensions
        identity = f"{self._provider}:{self._model}" + (f":{size}" if size is not None else "")
        endpoint = normalised_endpoint(self._base_url)
        vendor = self._vendor_url
        if vendor is not None and endpoint == normalised_endpoint(vendor):
            return identity
        return f"{identity}@{endpoint}"

    async def embed(self, blocks: Sequence[ContentBlock]) -> NDArray[np.float32]:
        """Embed the text of ``blocks`` as one 1-D float32 vector.

        Raises:
            NoEmbeddableContentError: ``blocks`` hold no text (the message says what they hold).
            ProviderError: the request failed, or the answer has no vector or one of the wrong
                size.
        """
        vectors = await self._embed_texts([self._text(blocks)])
        vector: NDArray[np.float32] = vectors[0]
        return vector

    async def embed_batch(self, inputs: Sequence[Sequence[ContentBlock]]) -> NDArray[np.float32]:
        """Embed each input; a 2-D float32 array with one row per input, in order.

        Inputs are sent ``batch_size`` at a time; no request is sent when any input has no text.
        No inputs give an array of shape ``(0, dimensions or 0)``.

        Raises:
            NoEmbeddableContentError: an input holds no text (the message names which).
            ProviderError: a request failed, or an answer has too few or too many vectors or one
                of the wrong size.
        """
        import numpy as np

        texts: list[str] = []
        for i, blocks in enumerate(inputs):
            try:
                texts.append(self._text(blocks))
            except NoEmbeddableContentError as exc:
                raise NoEmbeddableContentError(f"input {i}: {exc}") from None
        rows = [
            await self._embed_texts(texts[start : start + self._batch_size], first=start)
            for start in range(0, len(texts), self._batch_size)
        ]
        if not rows:
            return np.zeros((0, self._dimensions or 0), dtype=np.float32)
        return np.concatenate(rows, axis=0)

    @abstractmethod
    def _body(self, texts: list[str]) -> dict[str, Any]:
        """The JSON body asking for the embeddings of ``texts``."""

    @abstractmethod
    def _parse(self, data: Any) -> list[list[float]]:
        """The vectors of a parsed answer, in input order (any count: the caller checks it).

        Raises:
            pydantic.ValidationError: the answer has the wrong shape.
            ProviderError: the answer is an error, or its order cannot be known.
        """

    def _text(self, blocks: Sequence[ContentBlock]) -> str:
        text = "\n".join(b.text for b in blocks if isinstance(b, TextBlock) and b.text.strip())
        if not text:
            raise NoEmbeddableContentError(
                f"no text to embed (got {_kinds(blocks)}): "
                f"{type(self).__name__} embeds text blocks only"
            )
        return text

    async def _embed_texts(self, texts: list[str], *, first: int = 0) -> NDArray[np.float32]:
        """Embed ``texts``, which are the inputs numbered from ``first`` on (for messages)."""
        import numpy as np

        data = await self.post_json(self._path, self._body(texts))
        with self._redacting():
            try:
                vectors = self._parse(data)
            except ValidationError as exc:
                raise self._bad_answer(
                    f"unexpected embeddings response from model {self._model!r}: "
                    f"{excerpt(json.dumps(data, default=str))}",
                    data,
                ) from exc
            if len(vectors) != len(texts):
                raise self._bad_answer(
                    f"embeddings: asked model {self._model!r} for {len(texts)}, got {len(vectors)}",
                    data,
                )
            for i, vector in enumerate(vectors):
                self._check_size(len(vector), first + i, data)
        return np.asarray(vectors, dtype=np.float32)

    def _check_size(self, size: int, index: int, data: Any) -> None:
        if self._dimensions is None:
            if size == 0:
                raise self._bad_answer(
                    f"model {self._model!r} returned an empty vector for input {index}", data
                )
            self._dimensions = size  # the first vector received sets the size
            return
        if size != self._dimensions:
            source = (
                f"{self._dimensions_arg}={self._requested_dimensions}"
                if self._requested_dimensions is not None
                else "the size of its first vector"
            )
            raise self._bad_answer(
                f"embedding size mismatch: model {self._model!r} returned a vector of size "
                f"{size} for input {index}, expected {self._dimensions} ({source})",
                data,
            )

    def _vectors_by_index(self, data: Any) -> list[list[float]]:
        """The vectors of an OpenAI-style ``{"data": [{"index", "embedding"}, ...]}`` answer.

        Ordered by ``index``, not position (the API does not promise the order).

        Raises:
            pydantic.ValidationError: the answer has another shape.
            ProviderError: the indexes are not 0, 1, 2... each once.
        """
        items = sorted(
            _WireIndexedEmbeddings.model_validate(data).data, key=lambda item: item.index
        )
        indexes = [item.index for item in items]
        if indexes != list(range(len(items))):
            raise self._bad_answer(
                f"model {self._model!r} returned embeddings with indexes {indexes[:10]}, "
                f"expected 0 to {len(items) - 1}, each once",
                data,
            )
        return [item.embedding for item in items]

    def _bad_answer(self, message: str, data: Any) -> ProviderError:
        # Built only on failure: serializing a large answer is not free.
        return ProviderError(
            message, provider=self._provider, status=200, body=json.dumps(data, default=str)
        )
