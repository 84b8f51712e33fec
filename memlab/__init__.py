"""memlab: a durable memory layer for LLM agents, and a lab that measures it."""

from memlab.errors import MemlabError

__version__ = "0.1.0"

__all__ = ["MemlabError", "__version__"]
