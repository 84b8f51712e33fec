"""The memory layer: records, stores, embeddings, ranking, summarization, eviction.

This package knows nothing about transcripts or metrics (memlab.lab uses it,
never the other way round).
"""

from memlab.memory.agent import AgentDeps, ChatModel, TurnResult, format_memory, run_turn
from memlab.memory.consolidate import (
    CONSOLIDATORS,
    Consolidator,
    ConsolidatorError,
    NoConsolidator,
    ScopeReader,
    Supersession,
)
from memlab.memory.evict import EvictionPolicy, EvictionReport
from memlab.memory.gating import ConfirmUntrustedMemory, ContextOrigin, GateDecision, ToolGate
from memlab.memory.layer import (
    MaintenanceReport,
    MemoryInput,
    MemoryLayer,
    NeighborPolicy,
    Ranking,
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
from memlab.memory.procedural import (
    Procedure,
    ProcedurePolicy,
    ToolCall,
    record_outcome,
    remember_procedure,
)
from memlab.memory.procedure_recorder import ProcedureRecorder
from memlab.memory.query import Hit, RecallQuery
from memlab.memory.rank import HalfLives, HybridRanker, RankWeights
from memlab.memory.records import (
    SPEAKER_KEY,
    MemoryKind,
    MemoryRecord,
    Source,
    Superseded,
    same_speaker,
)
from memlab.memory.reflect import (
    REFLECTORS,
    Reflection,
    Reflections,
    Reflector,
    ReflectPolicy,
)
from memlab.memory.rewrite import MemoryQuestionRewriter, NoRewrite, QueryRewriter
from memlab.memory.rule_consolidator import RuleConsolidator, RulePolicy
from memlab.memory.rule_reflector import RuleReflector
from memlab.memory.salience import estimate_salience
from memlab.memory.scopes import LayerPolicy, layers_of
from memlab.memory.stores import (
    STORES,
    Candidates,
    InMemoryStore,
    JsonlStore,
    MemoryStore,
    PgVectorStore,
    SqliteStore,
)
from memlab.memory.supersede import SupersedePolicy
from memlab.memory.text import estimate_tokens
from memlab.memory.timeparse import TimeWindow, parse_time

__all__ = [
    "CONSOLIDATORS",
    "EMBEDDERS",
    "REFLECTORS",
    "SPEAKER_KEY",
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
    "ConfirmUntrustedMemory",
    "Consolidator",
    "ConsolidatorError",
    "ContextOrigin",
    "Embedder",
    "EvictionPolicy",
    "EvictionReport",
    "ExtractiveSummarizer",
    "GateDecision",
    "HalfLives",
    "HashEmbedder",
    "Hit",
    "HybridRanker",
    "InMemoryStore",
    "JsonlStore",
    "LayerPolicy",
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
    "NoConsolidator",
    "NoRewrite",
    "OpenAIChat",
    "OpenAIEmbedder",
    "OpenAISummarizer",
    "PgVectorStore",
    "Procedure",
    "ProcedurePolicy",
    "ProcedureRecorder",
    "QueryRewriter",
    "RankWeights",
    "Ranking",
    "RecallQuery",
    "RecallResult",
    "ReflectPolicy",
    "Reflection",
    "Reflections",
    "Reflector",
    "RuleConsolidator",
    "RulePolicy",
    "RuleReflector",
    "ScopeReader",
    "Source",
    "SqliteStore",
    "StaticEmbedder",
    "SummarizePolicy",
    "Summarizer",
    "SupersedePolicy",
    "Superseded",
    "Supersession",
    "TimeWindow",
    "ToolCall",
    "ToolGate",
    "TurnResult",
    "default_cache_path",
    "estimate_salience",
    "estimate_tokens",
    "format_memory",
    "layers_of",
    "parse_time",
    "record_outcome",
    "remember_procedure",
    "run_turn",
    "same_speaker",
]
