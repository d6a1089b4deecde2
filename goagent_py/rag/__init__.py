"""Retrieval-augmented generation: index documents, search them, let the agent cite them.

::

    from goagent_py.rag import Pipeline, iter_directory

    pipeline = Pipeline.sqlite("kb.db", SentenceTransformerEmbedder(), dimensions=384)
    await pipeline.index(iter_directory("docs", glob="**/*.md"))
    agent = Agent(provider=..., tools=[pipeline.as_tool()])

Importing this package imports numpy (``import goagent_py`` does not).
"""

from goagent_py.rag.documents import (
    FORMATS,
    Document,
    html_to_text,
    iter_directory,
    load_directory,
    load_file,
)
from goagent_py.rag.format import (
    NO_RESULTS,
    Formatter,
    describe_location,
    format_multimodal,
    format_passages,
    format_plain,
)
from goagent_py.rag.fusion import (
    DEFAULT_FUSION,
    RRF_K,
    Fusion,
    FusionMethod,
    fuse,
    looks_like_identifier,
    reciprocal_rank_fusion,
    score_fusion,
)
from goagent_py.rag.grounding import GroundedAnswer, ground_answer
from goagent_py.rag.keyword import (
    BulkKeywordIndex,
    InMemoryKeywordIndex,
    KeywordEntry,
    KeywordIndex,
    SqliteKeywordIndex,
    fts5_query,
    query_terms,
)
from goagent_py.rag.manifest import ChunkManifest, InMemoryManifest, SqliteManifest
from goagent_py.rag.pipeline import Pipeline, SearchMode
from goagent_py.rag.rerank import CrossEncoderReranker, MaxSimReranker, Reranker, TokenEmbedder
from goagent_py.rag.results import (
    DocumentReport,
    IndexProgress,
    IndexReport,
    PipelineObserver,
    SearchResult,
)
from goagent_py.rag.tool import KnowledgeBaseTool

__all__ = [
    "BulkKeywordIndex",
    "ChunkManifest",
    "CrossEncoderReranker",
    "DEFAULT_FUSION",
    "describe_location",
    "Document",
    "DocumentReport",
    "format_multimodal",
    "format_passages",
    "format_plain",
    "FORMATS",
    "Formatter",
    "fts5_query",
    "fuse",
    "Fusion",
    "FusionMethod",
    "ground_answer",
    "GroundedAnswer",
    "html_to_text",
    "IndexProgress",
    "IndexReport",
    "InMemoryKeywordIndex",
    "InMemoryManifest",
    "iter_directory",
    "KeywordEntry",
    "KeywordIndex",
    "KnowledgeBaseTool",
    "load_directory",
    "load_file",
    "looks_like_identifier",
    "MaxSimReranker",
    "NO_RESULTS",
    "Pipeline",
    "PipelineObserver",
    "query_terms",
    "reciprocal_rank_fusion",
    "Reranker",
    "RRF_K",
    "score_fusion",
    "SearchMode",
    "SearchResult",
    "SqliteKeywordIndex",
    "SqliteManifest",
    "TokenEmbedder",
]
