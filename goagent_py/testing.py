"""Test doubles for code built on goagent-py: scripted and function-backed providers.

``ScriptedProvider`` replays responses in order and records every request; it fails loudly when
the script runs out, so a test never passes by accident on an unexpected extra call.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from goagent_py._deepcopy import Recorded, snapshot_request, snapshot_response
from goagent_py.errors import ConfigurationError, GoAgentError
from goagent_py.messages import (
    ContentBlock,
    Message,
    Role,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    Usage,
)
from goagent_py.provider import (
    CompletionRequest,
    CompletionResponse,
    StreamDone,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
)

__all__ = [
    "FakeEmbedder",
    "FunctionProvider",
    "ScriptExhaustedError",
    "ScriptedProvider",
    "text_response",
    "tool_call_response",
]

_ids = itertools.count(1)
T = TypeVar("T")


class ScriptExhaustedError(GoAgentError, AssertionError):
    """A scripted provider was called more times than it has responses."""


def text_response(
    text: str,
    *,
    stop_reason: StopReason = StopReason.END_TURN,
    usage: Usage | None = None,
) -> CompletionResponse:
    """A final answer: one assistant text message."""
    return CompletionResponse(
        Message(Role.ASSISTANT, [TextBlock(text)]), stop_reason, usage or Usage()
    )


def tool_call_response(
    *calls: ToolCall | tuple[str, dict[str, Any]],
    text: str = "",
    stop_reason: StopReason = StopReason.TOOL_USE,
    usage: Usage | None = None,
) -> CompletionResponse:
    """An assistant message asking for tool calls; ``(name, args)`` pairs get generated ids."""
    tool_calls = [
        c if isinstance(c, ToolCall) else ToolCall(f"call_{next(_ids)}", c[0], dict(c[1]))
        for c in calls
    ]
    content: list[ContentBlock] = [TextBlock(text)] if text else []
    return CompletionResponse(
        Message(Role.ASSISTANT, content, tool_calls=tool_calls), stop_reason, usage or Usage()
    )


def _stream_of(response: CompletionResponse) -> list[StreamEvent]:
    from pydantic_core import to_json  # here: a scripted answer needs no pydantic_core import

    events: list[StreamEvent] = []
    for block in response.message.content:
        if isinstance(block, ThinkingBlock):
            events.append(ThinkingDelta(block.thinking))
        elif isinstance(block, TextBlock):
            words = block.text.split(" ")
            events.extend(TextDelta(w if i == 0 else " " + w) for i, w in enumerate(words))
    for i, call in enumerate(response.message.tool_calls):
        events.append(ToolCallStart(i, call.id, call.name))
        events.append(ToolCallDelta(i, to_json(call.arguments).decode()))
    events.append(StreamDone(response))
    return events


class ScriptedProvider:
    """Replays ``responses`` in order; an exception in the script is raised at its turn.

    Every request is recorded in :attr:`requests` as a snapshot: what the loop later does to its
    lists, messages or tool definitions never shows in it. Each response returned is a copy, so
    changing it never changes the script. (An unchanged tool definition is copied once and that
    copy shared by the records, of this provider and of the next ones given the same definition
    while neither it nor the copy changed; a tool's generated schema is frozen, so the records
    share it with the tool.) Strings are shorthand for :func:`text_response`. It also
    streams (text split at spaces) so streaming paths can be tested with the same script.

    Args:
        *responses: The script, in order.
        keep_requests: How many requests :attr:`requests` keeps: ``None`` (the default) keeps
            every one; ``N`` keeps the last ``N``; ``0`` keeps none and makes no snapshot. A
            long-running use (a benchmark's server) passes ``0``: a request carries the whole
            conversation, so keeping them all costs memory that grows with the square of the
            turns. The script, :attr:`remaining` and :attr:`calls` count every call whatever
            is kept.
    """

    def __init__(
        self,
        *responses: CompletionResponse | BaseException | str,
        keep_requests: int | None = None,
    ) -> None:
        if keep_requests is not None and (
            isinstance(keep_requests, bool)
            or not isinstance(keep_requests, int)
            or keep_requests < 0
        ):
            raise ConfigurationError(
                f"ScriptedProvider: keep_requests must be None or an int >= 0, "
                f"got {keep_requests!r}"
            )
        self._script: list[CompletionResponse | BaseException] = [
            text_response(r) if isinstance(r, str) else r for r in responses
        ]
        self._keep = keep_requests
        self._calls = 0
        self._lock = threading.Lock()
        self._tools: Recorded = {}
        self.requests: list[CompletionRequest] = []

    @property
    def calls(self) -> int:
        """Requests received so far (a call past the end of the script included)."""
        return self._calls

    @property
    def remaining(self) -> int:
        """Responses not yet used."""
        return len(self._script) - self._calls

    def _next(self, request: CompletionRequest) -> CompletionResponse:
        with self._lock:
            index = self._calls
            self._calls = index + 1
            keep = self._keep
            if keep is None:
                self.requests.append(snapshot_request(request, self._tools))
            elif keep:
                self.requests.append(snapshot_request(request, self._tools))
                if len(self.requests) > keep:
                    del self.requests[: len(self.requests) - keep]
            if index >= len(self._script):
                raise ScriptExhaustedError(
                    f"ScriptedProvider: no more responses queued (call #{index + 1}, "
                    f"script has {len(self._script)})"
                )
            item = self._script[index]
        if isinstance(item, BaseException):
            raise item
        return snapshot_response(item)

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        """Return the next scripted response (or raise the next scripted error)."""
        return self._next(request)

    async def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        """Stream the next scripted response as deltas, then :class:`StreamDone`."""
        for event in _stream_of(self._next(request)):
            yield event


class FunctionProvider:
    """Computes each response from the request with ``fn`` (sync or async).

    ``fn`` may return a :class:`CompletionResponse` or a string (a final text answer).
    """

    def __init__(
        self,
        fn: Callable[[CompletionRequest], CompletionResponse | str | Awaitable[Any]],
    ) -> None:
        self._fn = fn
        self._tools: Recorded = {}
        self.requests: list[CompletionRequest] = []

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        """Call ``fn`` with a snapshot of the request (recorded in :attr:`requests`, as
        :class:`ScriptedProvider` records them)."""
        snapshot = snapshot_request(request, self._tools)
        self.requests.append(snapshot)
        result = self._fn(snapshot)
        if isinstance(result, Awaitable):
            result = await result
        if isinstance(result, str):
            return text_response(result)
        if not isinstance(result, CompletionResponse):
            raise ConfigurationError(
                f"FunctionProvider's function must return a CompletionResponse or str, "
                f"got {type(result).__name__}"
            )
        return result


# ---------------------------------------------------------------------------------------------
# Embeddings


if TYPE_CHECKING:  # numpy is imported on first use, not with this module
    from collections.abc import Sequence

    import numpy as np
    from numpy.typing import NDArray

_WORD = re.compile(r"\w+")
_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193


def _fnv32a(data: bytes) -> int:
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & 0xFFFFFFFF
    return h


def _lcg_vector(seed: int, dimensions: int) -> list[float]:
    # The reference MockEmbedder's generator: seed = seed * 1664525 + 1013904223 (uint32),
    # v[i] = (seed >> 16) / 65536 * 2 - 1.
    out = []
    for _ in range(dimensions):
        seed = (seed * 1664525 + 1013904223) & 0xFFFFFFFF
        out.append((seed >> 16) / 65536 * 2 - 1)
    return out


class FakeEmbedder:
    """A deterministic, offline embedder for tests: texts sharing words score higher.

    Each lower-cased word of the text blocks is hashed (FNV-32a) into the seed of the reference
    ``MockEmbedder``'s LCG, which spreads it into a vector; the word vectors are summed and
    scaled to unit length (float32). The same text always gives the same vector, and the cosine
    of two texts grows with the words they share. Text without any word character is hashed
    whole. Implements ``Embedder`` and ``BatchEmbedder``; counts its calls.

    Args:
        dimensions: the vector length.

    Attributes:
        embed_calls: how many times :meth:`embed` was called.
        batch_calls: how many times :meth:`embed_batch` was called.
    """

    def __init__(self, dimensions: int = 16) -> None:
        if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions <= 0:
            raise ConfigurationError(
                f"FakeEmbedder dimensions must be a positive int, got {dimensions!r}"
            )
        self.dimensions = dimensions
        self.embedder_identity = f"fake:fnv32a-lcg:{dimensions}"
        """Which vectors it makes (a RAG index records it; see ``docs/rag.md``)."""
        self.embed_calls = 0
        self.batch_calls = 0

    def _vector(self, blocks: Sequence[ContentBlock]) -> NDArray[np.float32]:
        import numpy as np

        from goagent_py.errors import NoEmbeddableContentError

        text = " ".join(b.text for b in blocks if isinstance(b, TextBlock)).strip()
        if not text:
            raise NoEmbeddableContentError("FakeEmbedder: no text to embed in the blocks")
        tokens = _WORD.findall(text.lower()) or [text]
        total = np.zeros(self.dimensions, dtype=np.float64)
        for token in tokens:
            total += _lcg_vector(_fnv32a(token.encode()), self.dimensions)
        norm = float(np.linalg.norm(total))
        if norm == 0.0:  # words that cancel out exactly: fall back to the whole text
            total = np.array(_lcg_vector(_fnv32a(text.encode()), self.dimensions))
            norm = float(np.linalg.norm(total))
        return (total / norm).astype(np.float32)

    async def embed(self, blocks: Sequence[ContentBlock]) -> NDArray[np.float32]:
        """Embed the text of ``blocks`` as one unit vector.

        Raises:
            NoEmbeddableContentError: ``blocks`` hold no text (e.g. only images).
        """
        self.embed_calls += 1
        return self._vector(blocks)

    async def embed_batch(self, inputs: Sequence[Sequence[ContentBlock]]) -> NDArray[np.float32]:
        """Embed each input; a 2-D array with one row per input.

        Raises:
            NoEmbeddableContentError: an input holds no text.
        """
        import numpy as np

        self.batch_calls += 1
        if not inputs:
            return np.empty((0, self.dimensions), dtype=np.float32)
        return np.stack([self._vector(blocks) for blocks in inputs])
