"""A short tour of the memory layer: two users, a dozen facts, recall under a budget."""

from __future__ import annotations

import tempfile
from pathlib import Path

from memlab.memory import (
    EvictionPolicy,
    ExtractiveSummarizer,
    HashEmbedder,
    MemoryInput,
    MemoryKind,
    MemoryLayer,
    RecallQuery,
    SqliteStore,
)

DAY = 86400.0
START = 1_780_000_000.0  # 2026-05-28, a fixed time so the demo prints the same numbers

FACTS = {
    "alice:support": [
        ("My name is Alice Moreau and I run the platform team.", 0.9, 0),
        ("We deploy everything on GKE in europe-west1.", 0.9, 0),
        ("Always page me on PagerDuty, never email.", 1.0, 1),
        ("I take my coffee as a flat white, by the way.", 0.2, 1),
        ("Our plan is Enterprise, billed annually.", 0.7, 3),
        ("Billing emails go to finance@moreau.example.", 0.7, 5),
        ("Thanks, that worked!", 0.05, 6),
    ],
    "bob:support": [
        ("I'm Bob; we run on AWS EKS in us-east-1.", 0.9, 0),
        ("Never page me before 9am Pacific.", 1.0, 2),
        ("We are on the Team plan for now.", 0.6, 4),
        ("Tool returned 200 OK for the health check.", 0.1, 5),
        ("Our billing contact is ap@bobco.example.", 0.7, 6),
    ],
}


def main(budget: int = 60) -> str:
    """Run the tour and return what it printed."""
    out: list[str] = []
    now = [START + 7 * DAY]
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "memory.db")
        layer = MemoryLayer(
            store,
            HashEmbedder(),
            clock=lambda: now[0],
            summarizer=ExtractiveSummarizer(),
            eviction=EvictionPolicy(episodic_ttl=24 * 30, salience_floor=0.8),
        )
        items = [
            MemoryInput(
                scope,
                text,
                kind=MemoryKind.SEMANTIC if sal >= 0.7 else MemoryKind.EPISODIC,
                salience=sal,
                created_at=START + day * DAY,
            )
            for scope, facts in FACTS.items()
            for text, sal, day in facts
        ]
        layer.remember_many(items)
        out.append(f"remembered {store.count()} memories for {len(store.scopes())} users")
        for scope, question in [
            ("alice:support", "Where do our workloads run, and how should I reach you?"),
            ("bob:support", "Which cloud region are we in?"),
        ]:
            result = layer.recall(RecallQuery(scope, question, token_budget=budget))
            out.append("")
            out.append(layer.explain(result))
        store.close()
    text = "\n".join(out)
    print(text)
    return text


if __name__ == "__main__":
    main()
