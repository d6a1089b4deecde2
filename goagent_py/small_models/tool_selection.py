"""Tool selection by embedding similarity: offer the model only the tools relevant to the message.

A provider wrapper. Each request's tools are narrowed to those whose description (and optional
example requests) is most similar to the last user message, by cosine similarity of embeddings
from any :class:`~goagent_py.memory.base.Embedder`::

    provider = select_tools(LlamaCppProvider(), SentenceTransformerEmbedder(), top_k=2)
    agent = Agent(provider=provider, tools=[calculator, current_time, *mcp_tools])

Why: a small model offered tools it does not need calls them anyway (a chat greeting becomes a
clock call), and an agent with dozens of MCP tools spends its context on their schemas. With no
tool scoring at least ``threshold`` the model is offered none and answers in text.

Tool texts are embedded once and cached (per name, description and examples); the query is
embedded once per distinct message, so the iterations of one run share its embedding. What was
chosen last is in :attr:`ToolSelectingProvider.last_selection`, with the scores.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from goagent_py.errors import ConfigurationError
from goagent_py.memory.base import BatchEmbedder, Embedder
from goagent_py.messages import Message, Role, TextBlock
from goagent_py.provider import (
    CompletionRequest,
    CompletionResponse,
    Provider,
    StreamEvent,
    StreamingProvider,
)
from goagent_py.small_models.context_filters import INLINED_MEMORIES_KEY
from goagent_py.tools import ToolDefinition

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = [
    "ToolScore",
    "ToolSelectingProvider",
    "last_user_text",
    "limit_tool_rounds",
    "required_parameters_only",
    "select_tools",
    "trailing_tool_rounds",
]

_QUERY_CACHE = 64


@dataclasses.dataclass(frozen=True, slots=True)
class ToolScore:
    """One tool's similarity to the message, and whether it was offered."""

    name: str
    score: float
    offered: bool


def last_user_text(messages: Sequence[Message]) -> str:
    """The text of the last user message (the one the tools are chosen for); "" if none."""
    for message in reversed(messages):
        if message.role == Role.USER and message.text.strip():
            return message.text
    return ""


def required_parameters_only(tool: ToolDefinition) -> ToolDefinition:
    """``tool`` with its optional parameters left out of the schema (they keep their defaults).

    For small models, which fill an optional parameter with noise when it is offered (a time
    zone of ``",08:32.16"``) and cannot when the schema has none (their arguments are
    grammar-constrained to it).
    """
    properties = tool.parameters.get("properties")
    if not isinstance(properties, Mapping):
        return tool
    required = [str(n) for n in tool.parameters.get("required") or []]
    kept = {name: schema for name, schema in properties.items() if name in required}
    if len(kept) == len(properties):
        return tool
    return dataclasses.replace(tool, parameters={**tool.parameters, "properties": kept})


def _unit(matrix: NDArray[np.float32]) -> NDArray[np.float32]:
    import numpy as np

    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    out: NDArray[np.float32] = (matrix / np.where(norms == 0, 1.0, norms)).astype(np.float32)
    return out


class ToolSelectingProvider:
    """Wraps a provider; each request offers only the tools relevant to the last user message.

    Build it with :func:`select_tools` (which returns a streaming wrapper when the wrapped
    provider streams). Arguments are as there.
    """

    def __init__(
        self,
        provider: Provider,
        embedder: Embedder,
        *,
        top_k: int = 3,
        threshold: float | None = 0.3,
        always: Iterable[str] = (),
        examples: Mapping[str, Sequence[str]] | None = None,
        required_only: bool = False,
        defer_to_memory: bool = True,
    ) -> None:
        if not isinstance(provider, Provider):
            raise ConfigurationError(
                f"select_tools: provider must have async complete(request), "
                f"got {type(provider).__name__}"
            )
        if not isinstance(embedder, Embedder):
            raise ConfigurationError(
                f"select_tools: embedder must have async embed(blocks), "
                f"got {type(embedder).__name__}"
            )
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
            raise ConfigurationError(f"select_tools: top_k must be an int >= 0, got {top_k!r}")
        if threshold is not None and not -1.0 <= threshold <= 1.0:
            raise ConfigurationError(
                f"select_tools: threshold is a cosine similarity, -1 to 1 (or None), "
                f"got {threshold!r}"
            )
        self.provider = provider
        self.embedder = embedder
        self.top_k = top_k
        self.threshold = threshold
        self.always = frozenset(always)
        self.examples = {name: list(texts) for name, texts in (examples or {}).items()}
        self.required_only = required_only
        self.defer_to_memory = defer_to_memory
        self.last_selection: list[ToolScore] = []
        self._tool_vectors: dict[tuple[str, str], NDArray[np.float32]] = {}
        self._queries: OrderedDict[str, NDArray[np.float32]] = OrderedDict()

    def __repr__(self) -> str:
        return (
            f"select_tools({self.provider!r}, top_k={self.top_k}, threshold={self.threshold}, "
            f"always={sorted(self.always)})"
        )

    def __getattr__(self, name: str) -> Any:
        # Whatever else the wrapped provider offers (model_name, load, aclose...) stays reachable.
        if name == "provider":
            raise AttributeError(name)
        return getattr(self.provider, name)

    # -- embeddings ----------------------------------------------------------------------------

    def _texts(self, tool: ToolDefinition) -> list[str]:
        name = tool.name.replace("_", " ")
        return [f"{name}: {tool.description}", *self.examples.get(tool.name, [])]

    async def _embed_many(self, texts: list[str]) -> NDArray[np.float32]:
        import numpy as np

        blocks = [[TextBlock(t)] for t in texts]
        if isinstance(self.embedder, BatchEmbedder):
            matrix = await self.embedder.embed_batch(blocks)
        else:
            matrix = np.stack([await self.embedder.embed(b) for b in blocks])
        return _unit(np.asarray(matrix, dtype=np.float32))

    async def _tool_matrix(self, tool: ToolDefinition) -> NDArray[np.float32]:
        key = (tool.name, "\x00".join(self._texts(tool)))
        cached = self._tool_vectors.get(key)
        if cached is None:
            cached = await self._embed_many(self._texts(tool))
            self._tool_vectors[key] = cached
        return cached

    async def _query(self, text: str) -> NDArray[np.float32]:
        cached = self._queries.get(text)
        if cached is None:
            cached = (await self._embed_many([text]))[0]
            self._queries[text] = cached
            while len(self._queries) > _QUERY_CACHE:
                self._queries.popitem(last=False)
        else:
            self._queries.move_to_end(text)
        return cached

    # -- selection -----------------------------------------------------------------------------

    async def scores(self, text: str, tools: Sequence[ToolDefinition]) -> list[tuple[str, float]]:
        """Each tool's similarity to ``text`` (the best of its description and examples)."""
        if not tools:
            return []
        query = await self._query(text)
        out = []
        for tool in tools:
            matrix = await self._tool_matrix(tool)
            out.append((tool.name, float((matrix @ query).max())))
        return out

    async def select(self, request: CompletionRequest) -> list[ToolDefinition]:
        """The tools to offer for ``request``: the ``always`` ones, then the best ``top_k``
        scoring at least ``threshold``, in the request's order. Records :attr:`last_selection`.
        """
        if not request.tools:
            self.last_selection = []
            return []
        text = last_user_text(request.messages)
        inlined = _inlined_memories(request.messages)
        if inlined is not None:
            text = inlined[0]  # the question, without the facts said back before it
        candidates = [t for t in request.tools if t.name not in self.always]
        scored = await self.scores(text, candidates) if text else []
        ranked = sorted(scored, key=lambda item: -item[1])
        chosen = {
            name
            for name, score in ranked[: self.top_k]
            if self.threshold is None or score >= self.threshold
        }
        if chosen and inlined is not None and self.defer_to_memory:
            query = await self._query(text)
            memory = max([float(await self._query(m) @ query) for m in inlined[1]], default=-1.0)
            if memory >= ranked[0][1]:
                chosen = set()  # the user's own statement answers it better than any tool
        chosen |= {t.name for t in request.tools if t.name in self.always}
        score_of = dict(scored)
        self.last_selection = [
            ToolScore(t.name, score_of.get(t.name, 1.0), t.name in chosen) for t in request.tools
        ]
        return [t for t in request.tools if t.name in chosen]

    async def _narrow(self, request: CompletionRequest) -> CompletionRequest:
        tools = await self.select(request)
        if self.required_only:
            tools = [required_parameters_only(t) for t in tools]
        return dataclasses.replace(request, tools=tools)

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        """The wrapped provider's answer to ``request`` with only the selected tools."""
        return await self.provider.complete(await self._narrow(request))


class _StreamingToolSelectingProvider(ToolSelectingProvider):
    async def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        """The wrapped provider's stream for ``request`` with only the selected tools."""
        assert isinstance(self.provider, StreamingProvider)
        narrowed = await self._narrow(request)
        async for event in self.provider.stream(narrowed):
            yield event


def select_tools(
    provider: Provider,
    embedder: Embedder,
    *,
    top_k: int = 3,
    threshold: float | None = 0.3,
    always: Iterable[str] = (),
    examples: Mapping[str, Sequence[str]] | None = None,
    required_only: bool = False,
    defer_to_memory: bool = True,
) -> ToolSelectingProvider:
    """Wrap ``provider`` so that each request offers only the tools relevant to the message.

    Args:
        provider: the provider to wrap (the wrapper streams when it does).
        embedder: embeds tool texts and messages (e.g. the local ``SentenceTransformerEmbedder``
            already loaded for long-term memory).
        top_k: the most tools offered besides ``always`` (0: only ``always``).
        threshold: the least cosine similarity a tool needs to be offered (None: the ``top_k``
            best, however low). With the local MiniLM embedder unrelated texts score below 0.2
            and a request for the tool above 0.4.
        always: names of tools offered on every request, whatever their score.
        examples: per tool name, example requests it serves ("What is 2 + 2?"); a tool scores
            the best similarity of its description and its examples. Short tool descriptions
            match much better with a few examples.
        required_only: offer each tool with its required parameters only (see
            :func:`required_parameters_only`); for small models.
        defer_to_memory: when recalled memories were put before the message
            (:func:`~goagent_py.small_models.inline_memories` marks it), tools are scored
            against the message alone, and none is offered if a memory is at least as similar
            to the message as the best tool: "When is my birthday?", with "My birthday is on
            the 3rd of March." recalled, is about the user, not a request for the clock.

    Returns:
        The wrapping provider; give it to the agent instead of ``provider``.

    Raises:
        ConfigurationError: a provider or embedder of the wrong kind, or a bad number.
    """
    cls = (
        _StreamingToolSelectingProvider
        if isinstance(provider, StreamingProvider)
        else ToolSelectingProvider
    )
    return cls(
        provider,
        embedder,
        top_k=top_k,
        threshold=threshold,
        always=always,
        examples=examples,
        required_only=required_only,
        defer_to_memory=defer_to_memory,
    )


def _inlined_memories(messages: Sequence[Message]) -> tuple[str, list[str]] | None:
    """The question and the memories :func:`inline_memories` put before it, if it did."""
    for message in reversed(messages):
        if message.role != Role.USER:
            continue
        found = message.metadata.get(INLINED_MEMORIES_KEY)
        if isinstance(found, dict) and isinstance(found.get("question"), str):
            return found["question"], [str(m) for m in found.get("memories", [])]
        return None
    return None


# -- a limit on consecutive tool rounds ----------------------------------------------------------


def trailing_tool_rounds(messages: Sequence[Message]) -> int:
    """How many assistant tool-call turns, each followed by its results, end ``messages``."""
    rounds = 0
    i = len(messages) - 1
    while i >= 0 and messages[i].role == Role.TOOL:
        while i >= 0 and messages[i].role == Role.TOOL:
            i -= 1
        if i < 0 or messages[i].role != Role.ASSISTANT or not messages[i].tool_calls:
            break
        rounds += 1
        i -= 1
    return rounds


class _RoundLimitedProvider:
    def __init__(self, provider: Provider, rounds: int) -> None:
        self.provider = provider
        self.rounds = rounds

    def __repr__(self) -> str:
        return f"limit_tool_rounds({self.provider!r}, {self.rounds})"

    def __getattr__(self, name: str) -> Any:
        if name == "provider":
            raise AttributeError(name)
        return getattr(self.provider, name)

    def _limited(self, request: CompletionRequest) -> CompletionRequest:
        if request.tools and trailing_tool_rounds(request.messages) >= self.rounds:
            return dataclasses.replace(request, tools=[])
        return request

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        return await self.provider.complete(self._limited(request))


class _StreamingRoundLimitedProvider(_RoundLimitedProvider):
    async def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        assert isinstance(self.provider, StreamingProvider)
        async for event in self.provider.stream(self._limited(request)):
            yield event


def limit_tool_rounds(provider: Provider, rounds: int = 1) -> Provider:
    """Wrap ``provider`` so that after ``rounds`` consecutive rounds of tool results the model
    is offered no tools and must answer in text.

    For models (or servers) that never stop calling tools: what
    ``LlamaCppProvider(max_tool_rounds=...)`` does in-process, for any provider, e.g. an
    ``OpenAIProvider`` in front of llama-cpp-python's server, which leaves tool results out of
    the prompt.

    Raises:
        ConfigurationError: ``rounds`` < 1, or a provider of the wrong kind.
    """
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ConfigurationError(f"limit_tool_rounds: rounds must be an int >= 1, got {rounds!r}")
    if not isinstance(provider, Provider):
        raise ConfigurationError(
            f"limit_tool_rounds: provider must have async complete(request), "
            f"got {type(provider).__name__}"
        )
    if isinstance(provider, StreamingProvider):
        return _StreamingRoundLimitedProvider(provider, rounds)
    return _RoundLimitedProvider(provider, rounds)
