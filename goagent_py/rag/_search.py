"""What the knowledge-base tool needs of a pipeline, apart from the pipeline itself.

The tool depends on this protocol, not on :class:`~goagent_py.rag.pipeline.Pipeline`, so the
pipeline can build tools (``Pipeline.as_tool``) without the two modules importing each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from goagent_py.rag.results import SearchResult

__all__ = ["SearchMode", "Searchable"]

SearchMode = Literal["hybrid", "vector", "keyword"]


class Searchable(Protocol):
    """Anything that searches like :meth:`~goagent_py.rag.pipeline.Pipeline.search`."""

    async def search(
        self,
        query: str,
        *,
        top_k: int = 3,
        score_threshold: float | None = None,
        filter: Mapping[str, Any] | None = None,
        mode: SearchMode | None = None,
    ) -> list[SearchResult]:
        """The ``top_k`` results most relevant to ``query``, best first."""
        ...
