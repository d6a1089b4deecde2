"""The knowledge-base tool: lets the agent search a :class:`~goagent_py.rag.pipeline.Pipeline`.

The model calls it with ``{"query": "..."}`` and reads numbered passages with their source and
location, wrapped as retrieved data (not instructions), so its answer can cite ``[1]``, ``[2]``.
Make one with :meth:`Pipeline.as_tool <goagent_py.rag.pipeline.Pipeline.as_tool>`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from goagent_py.errors import ConfigurationError, InvalidInputError, ToolArgumentsError
from goagent_py.memory.vector._common import check_filter
from goagent_py.messages import ContentBlock
from goagent_py.rag.format import format_passages
from goagent_py.tools import ToolDefinition, validate_tool_name

if TYPE_CHECKING:
    from goagent_py.rag._search import Searchable, SearchMode
    from goagent_py.rag.format import Formatter

__all__ = ["DEFAULT_DESCRIPTION", "KnowledgeBaseTool"]

DEFAULT_DESCRIPTION = (
    "Search the knowledge base for passages relevant to a query. Returns numbered passages "
    "with their source and location; cite them by number, e.g. [1]. Include exact names, "
    "identifiers or error codes in the query when you have them."
)


class KnowledgeBaseTool:
    """A :class:`~goagent_py.tools.Tool` that searches a pipeline and formats the passages.

    Args:
        pipeline: what to search: a :class:`~goagent_py.rag.pipeline.Pipeline` (or anything
            with the same ``search`` method).
        name: the tool name the model sees.
        top_k: passages per call (> 0).
        description: what the model is told; None for :data:`DEFAULT_DESCRIPTION`.
        score_threshold: passed to :meth:`Pipeline.search`.
        filter: a fixed metadata filter for every call (e.g. one product's documents).
        mode: the search mode; None for the pipeline's default.
        formatter: turns results into blocks; None for
            :func:`~goagent_py.rag.format.format_passages`.

    Raises:
        ConfigurationError: a bad tool name, ``top_k`` or filter.
    """

    def __init__(
        self,
        pipeline: Searchable,
        *,
        name: str = "search_knowledge_base",
        top_k: int = 3,
        description: str | None = None,
        score_threshold: float | None = None,
        filter: Mapping[str, Any] | None = None,
        mode: SearchMode | None = None,
        formatter: Formatter | None = None,
    ) -> None:
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k <= 0:
            raise ConfigurationError(f"top_k must be a positive int, got {top_k!r}")
        self._pipeline = pipeline
        self._definition = ToolDefinition(
            name=validate_tool_name(name),
            description=description or DEFAULT_DESCRIPTION,
            parameters={
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": "What to look for: a question or keywords.",
                    }
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        )
        self._top_k = top_k
        self._threshold = score_threshold
        try:
            self._filter = check_filter(filter) or None
        except InvalidInputError as exc:  # the developer's fixed filter, not the model's
            raise ConfigurationError(str(exc)) from None
        self._mode = mode
        self._format: Formatter = formatter or format_passages

    @property
    def definition(self) -> ToolDefinition:
        """The name, description and ``{"query": string}`` schema shown to the model."""
        return self._definition

    def __repr__(self) -> str:
        return f"KnowledgeBaseTool({self._definition.name!r}, top_k={self._top_k})"

    async def execute(self, args: dict[str, Any]) -> list[ContentBlock]:
        """Search for ``args["query"]`` and return the formatted passages.

        Raises:
            ToolArgumentsError: ``query`` is missing, not a string, or blank (the model reads
                this).
        """
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolArgumentsError(
                self._definition.name,
                "missing or empty 'query' argument: pass the text to search for",
            )
        results = await self._pipeline.search(
            query,
            top_k=self._top_k,
            score_threshold=self._threshold,
            filter=self._filter,
            mode=self._mode,
        )
        return self._format(results)
