"""The memory layer: records, stores, embeddings, ranking, summarization, eviction.

This package knows nothing about transcripts or metrics (memlab.lab uses it,
never the other way round).
"""

from memlab.memory.agent import AgentDeps, ChatModel, TurnResult, format_memory, run_turn
from memlab.memory.evict import EvictionPolicy, EvictionReport
from memlab.memory.layer import (
    MaintenanceReport,
    MemoryInput,
    MemoryLayer,
    NeighborPolicy,
    RecallResult,
    SummarizePolicy,
)
from memlab.memory.models import (
    EMBEDDERS,
    SUMMARIZERS,
    CachedChat,
    CachedEmbedder,
    CachedSummarizer,
    CacheStats,
    Completion,
    Embedder,
    ExtractiveSummarizer,
    HashEmbedder,
    MemoEmbedder,
    MiniLMEmbedder,
    ModelCache,
    OpenAIChat,
    OpenAIEmbedder,
    OpenAISummarizer,
    StaticEmbedder,
    Summarizer,
    default_cache_path,
)
from memlab.memory.rank import HalfLives, HybridRanker, RankWeights
from memlab.memory.records import Hit, MemoryKind, MemoryRecord, RecallQuery, Source
from memlab.memory.rewrite import MemoryQuestionRewriter, NoRewrite, QueryRewriter
from memlab.memory.salience import estimate_salience
from memlab.memory.stores import (
    STORES,
    Candidates,
    InMemoryStore,
    JsonlStore,
    MemoryStore,
    PgVectorStore,
    SqliteStore,
)
from memlab.memory.text import estimate_tokens
from memlab.memory.timeparse import TimeWindow, parse_time

__all__ = [
    "EMBEDDERS",
    "STORES",
    "SUMMARIZERS",
    "AgentDeps",
    "CacheStats",
    "CachedChat",
    "CachedEmbedder",
    "CachedSummarizer",
    "Candidates",
    "ChatModel",
    "Completion",
    "Embedder",
    "EvictionPolicy",
    "EvictionReport",
    "ExtractiveSummarizer",
    "HalfLives",
    "HashEmbedder",
    "Hit",
    "HybridRanker",
    "InMemoryStore",
    "JsonlStore",
    "MaintenanceReport",
    "MemoEmbedder",
    "MemoryInput",
    "MemoryKind",
    "MemoryLayer",
    "MemoryQuestionRewriter",
    "MemoryRecord",
    "MemoryStore",
    "MiniLMEmbedder",
    "ModelCache",
    "NeighborPolicy",
    "NoRewrite",
    "OpenAIChat",
    "OpenAIEmbedder",
    "OpenAISummarizer",
    "PgVectorStore",
    "QueryRewriter",
    "RankWeights",
    "RecallQuery",
    "RecallResult",
    "Source",
    "SqliteStore",
    "StaticEmbedder",
    "SummarizePolicy",
    "Summarizer",
    "TimeWindow",
    "TurnResult",
    "default_cache_path",
    "estimate_salience",
    "estimate_tokens",
    "format_memory",
    "parse_time",
    "run_turn",
]
