"""Shared HTTP plumbing for the vendor providers and embedders (private).

What every HTTP backend needs, in one place:

- :class:`HTTPBackend`: owns or borrows an ``httpx.AsyncClient`` (closes only a client it
  created), is an async context manager with ``aclose()``, and sends requests through
  :meth:`HTTPBackend.post_json`, :meth:`HTTPBackend.stream_sse` and
  :meth:`HTTPBackend.stream_ndjson`, which turn every failure into a
  :class:`~goagent_py.errors.ProviderError`.
- :func:`error_from_response`: status, vendor error type and message parsed from the body, the
  raw body, and Retry-After (:func:`parse_retry_after`).
- :func:`transport_error`: connection errors and timeouts become ``ProviderError(status=None)``
  with the httpx exception as ``__cause__``.
- :func:`resolve_api_key`: the argument, else the environment variable, else a
  :class:`~goagent_py.errors.ConfigurationError` naming the variable.

Secrets travel only in request headers; they never appear in an exception message, a ``repr``
or a log line (nothing here logs).
"""

from __future__ import annotations

import email.utils
import json
import os
import time
from collections.abc import AsyncGenerator, Mapping
from types import TracebackType
from typing import Any, Self

import httpx
from httpx_sse import ServerSentEvent, SSEError, aconnect_sse

from goagent_py.errors import ConfigurationError, ProviderError

__all__ = [
    "DEFAULT_TIMEOUT",
    "HTTPBackend",
    "INVALID_ARGUMENTS_KEY",
    "ServerSentEvent",
    "error_from_response",
    "excerpt",
    "parse_json",
    "parse_retry_after",
    "resolve_api_key",
    "transport_error",
]

DEFAULT_TIMEOUT = httpx.Timeout(600.0, connect=10.0)
"""Model calls can take minutes; connecting should not."""

_EXCERPT_CHARS = 300

INVALID_ARGUMENTS_KEY = "__invalid_arguments__"
"""Key of the arguments a provider gives a tool call whose JSON from the model is malformed.

``ToolCall(arguments={INVALID_ARGUMENTS_KEY: raw_text})``: the call still reaches the agent, the
tool's argument validation rejects it, and the model reads an error result naming the problem
instead of the run crashing.
"""


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


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait, from ``retry-after-ms`` or ``retry-after``.

    ``retry-after`` may be seconds (a float is accepted) or an HTTP date. The value is not capped
    here: the retry policy caps it at its own maximum delay.

    Args:
        headers: the response headers (case-insensitive mapping, e.g. ``httpx.Headers``).
        now: the current time as a Unix timestamp, for tests; defaults to ``time.time()``.

    Returns:
        Seconds (>= 0), or None when there is no usable header.
    """
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def excerpt(text: str, limit: int = _EXCERPT_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters (for readable error messages)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _vendor_error(body: str) -> tuple[str, str]:
    """The (error type, message) in a vendor error body, or ("", "") when there is none.

    Understands ``{"error": {"type", "message", "code"}}`` (Anthropic, OpenAI and compatible
    servers), ``{"error": "message"}`` (Ollama) and ``{"detail": ...}`` (Voyage, FastAPI).
    """
    try:
        data = json.loads(body)
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
    return "", ""


def error_from_response(response: httpx.Response, *, provider: str) -> ProviderError:
    """A :class:`ProviderError` for an error response whose body has been read.

    Args:
        response: the response (its body must have been read, e.g. with ``aread()``).
        provider: the provider's name.

    Returns:
        The error, with status, the vendor's error type and message, the raw body and
        Retry-After.
    """
    body = _body_text(response)
    kind, message = _vendor_error(body)
    summary = message or excerpt(body) or response.reason_phrase or "no body"
    label = f"HTTP {response.status_code}" + (f" {kind}" if kind else "")
    return ProviderError(
        f"{label}: {summary}",
        provider=provider,
        status=response.status_code,
        error_type=kind,
        body=body,
        retry_after=parse_retry_after(response.headers),
    )


def transport_error(exc: httpx.HTTPError, *, provider: str, during: str = "") -> ProviderError:
    """A :class:`ProviderError` with ``status=None`` for a failure without an HTTP answer.

    The caller raises it ``from exc`` so the httpx error stays attached as the cause.
    """
    what = type(exc).__name__
    where = f" {during}" if during else ""
    detail = str(exc)
    return ProviderError(
        f"{what}{where}: {detail}" if detail else f"{what}{where}",
        provider=provider,
        status=None,
    )


def parse_json(text: str, *, provider: str, status: int | None) -> Any:
    """Parse a response body, raising :class:`ProviderError` with an excerpt when it is not JSON."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ProviderError(
            f"malformed response body (not JSON): {excerpt(text) or 'empty body'}",
            provider=provider,
            status=status,
            body=text,
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
    """

    def __init__(
        self,
        provider: str,
        *,
        base_url: str,
        http_client: httpx.AsyncClient | None = None,
        timeout: float | httpx.Timeout | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._provider = provider
        self._base_url = base_url.rstrip("/")
        self._client = http_client
        self._owns_client = http_client is None
        self._timeout = DEFAULT_TIMEOUT if timeout is None else timeout
        self._headers = dict(headers or {})

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

    def url(self, path: str) -> str:
        """``base_url`` joined with ``path`` ("/v1/messages")."""
        return f"{self._base_url}/{path.lstrip('/')}"

    async def post_json(self, path: str, body: Mapping[str, Any]) -> Any:
        """POST ``body`` as JSON and return the parsed JSON answer.

        Raises:
            ProviderError: a non-2xx status, a transport failure, or a body that is not JSON.
        """
        try:
            response = await self.client.post(self.url(path), json=body, headers=self._headers)
        except httpx.HTTPError as exc:
            raise transport_error(exc, provider=self._provider) from exc
        if not response.is_success:
            raise error_from_response(response, provider=self._provider)
        return parse_json(
            _body_text(response), provider=self._provider, status=response.status_code
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
                self.client, "POST", self.url(path), json=body, headers=dict(self._headers)
            ) as source:
                response = source.response
                if not response.is_success:
                    await response.aread()
                    raise error_from_response(response, provider=self._provider)
                content_type = response.headers.get("content-type", "")
                if "text/event-stream" not in content_type:
                    await response.aread()
                    raise _not_a_stream(response, self._provider, "text/event-stream")
                try:
                    async for event in source.aiter_sse():
                        yield event
                except SSEError as exc:  # pragma: no cover - content type checked above
                    raise ProviderError(
                        f"malformed event stream: {exc}", provider=self._provider
                    ) from exc
        except httpx.HTTPError as exc:
            raise transport_error(exc, provider=self._provider, during="during stream") from exc

    async def stream_ndjson(self, path: str, body: Mapping[str, Any]) -> AsyncGenerator[Any, None]:
        """POST ``body`` and yield each line of a newline-delimited JSON answer, parsed.

        Blank lines are skipped. Errors as for :meth:`stream_sse`; a line that is not JSON raises
        :class:`ProviderError` with an excerpt of it.
        """
        try:
            async with self.client.stream(
                "POST", self.url(path), json=body, headers=self._headers
            ) as response:
                if not response.is_success:
                    await response.aread()
                    raise error_from_response(response, provider=self._provider)
                async for line in response.aiter_lines():
                    if line.strip():
                        yield parse_json(line, provider=self._provider, status=response.status_code)
        except httpx.HTTPError as exc:
            raise transport_error(exc, provider=self._provider, during="during stream") from exc


def _not_a_stream(response: httpx.Response, provider: str, expected: str) -> ProviderError:
    body = _body_text(response)
    kind, message = _vendor_error(body)
    got = response.headers.get("content-type", "") or "no content type"
    summary = message or excerpt(body) or "empty body"
    return ProviderError(
        f"HTTP {response.status_code}: expected {expected}, got {got}: {summary}",
        provider=provider,
        status=response.status_code,
        error_type=kind,
        body=body,
        retry_after=parse_retry_after(response.headers),
    )
