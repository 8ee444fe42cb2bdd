"""Ranking metrics over plain ids, as trec_eval and BEIR compute them.

`ranked` holds document ids, best first; `relevant` maps an id to its graded
relevance (0 = not relevant).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def _gains(ranked: Sequence[str], relevant: Mapping[str, int], k: int) -> list[int]:
    seen: set[str] = set()
    gains: list[int] = []
    for doc_id in ranked:
        if len(gains) == k:
            break
        if doc_id in seen:
            continue
        seen.add(doc_id)
        gains.append(max(relevant.get(doc_id, 0), 0))
    return gains


def hit_at_k(ranked: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    """1.0 if any relevant document is in the top `k`, else 0.0."""
    return 1.0 if any(_gains(ranked, relevant, k)) else 0.0


def recall_at_k(ranked: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    """Share of the relevant documents found in the top `k`."""
    total = sum(1 for rel in relevant.values() if rel > 0)
    if total == 0:
        return 0.0
    return sum(1 for gain in _gains(ranked, relevant, k) if gain > 0) / total


def mrr_at_k(ranked: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    """1 / rank of the first relevant document in the top `k`, else 0."""
    for position, gain in enumerate(_gains(ranked, relevant, k), start=1):
        if gain > 0:
            return 1.0 / position
    return 0.0


def ndcg_at_k(ranked: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    """Normalised DCG with linear gains and log2(rank + 1) discount (trec_eval)."""
    dcg = sum(
        gain / math.log2(position + 1)
        for position, gain in enumerate(_gains(ranked, relevant, k), start=1)
    )
    ideal_gains = sorted((rel for rel in relevant.values() if rel > 0), reverse=True)
    ideal = sum(
        gain / math.log2(position + 1)
        for position, gain in enumerate(ideal_gains[:k], start=1)
    )
    return dcg / ideal if ideal > 0 else 0.0


def without_query_itself(ranked: Sequence[str], query_id: str) -> list[str]:
    """`ranked` minus the query's own id (BEIR's default): finding it is no search."""
    return [doc_id for doc_id in ranked if doc_id != query_id]
