"""Token estimates for prompt budgets."""

from __future__ import annotations

from collections.abc import Callable


def estimate_tokens(text: str) -> int:
    """Estimated prompt tokens of a text: ``ceil(len(text) / 4)``, 0 for an empty string."""
    return -(-len(text) // 4)


TokenCounter = Callable[[str], int]
