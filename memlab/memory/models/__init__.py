"""Model adapters of the memory layer: embedders and summarizers behind one
protocol each, the HTTP client they share, and the caches in front of them.

- ``embedder``: the ``Embedder`` protocol, ``EMBEDDERS`` and the offline ``HashEmbedder``;
- ``summarizer``: the ``Summarizer`` protocol, ``SUMMARIZERS`` and the offline
  ``ExtractiveSummarizer``;
- ``minilm``: a local sentence-transformers model (extra ``minilm``, imported on use),
  run by ONNX Runtime (``minilm_onnx``: export, cache, padding-aware batching) or torch;
- ``static``: a static embedder distilled from MiniLM, for fast sweeps;
- ``openai``: embeddings and summaries from any OpenAI-compatible endpoint;
- ``chat``: chat completions (``OpenAIChat``: a reader's or judge's model, or the
  agent loop's ``ChatModel``);
- ``http``: the retrying JSON client those use;
- ``cache``: the on-disk ``ModelCache``; ``cached``: the wrappers that answer from it.

Every module here registers its classes on import (``EMBEDDERS`` and
``SUMMARIZERS`` import the whole package on first lookup), so none may import a
heavy dependency at import time.
"""

from memlab.memory.models.cache import ModelCache, default_cache_dir, default_cache_path
from memlab.memory.models.cached import (
    CachedChat,
    CachedEmbedder,
    CachedSummarizer,
    CacheStats,
    MemoEmbedder,
)
from memlab.memory.models.chat import ChatClient, Completion, OpenAIChat
from memlab.memory.models.embedder import EMBEDDERS, Embedder, HashEmbedder
from memlab.memory.models.minilm import MiniLMEmbedder
from memlab.memory.models.openai import OpenAIEmbedder, OpenAISummarizer
from memlab.memory.models.static import StaticEmbedder
from memlab.memory.models.summarizer import SUMMARIZERS, ExtractiveSummarizer, Summarizer

__all__ = [
    "EMBEDDERS",
    "SUMMARIZERS",
    "CacheStats",
    "CachedChat",
    "CachedEmbedder",
    "CachedSummarizer",
    "ChatClient",
    "Completion",
    "Embedder",
    "ExtractiveSummarizer",
    "HashEmbedder",
    "MemoEmbedder",
    "MiniLMEmbedder",
    "ModelCache",
    "OpenAIChat",
    "OpenAIEmbedder",
    "OpenAISummarizer",
    "StaticEmbedder",
    "Summarizer",
    "default_cache_dir",
    "default_cache_path",
]
