"""How recalled memories are scored, superseded and checked against their sources.

score = cosine similarity x importance x 0.5 ** (age / half-life), the age running
from when the fact was last *said*. Not from creation: a preference restated every
day would decay as if said once. Not from the last read: recall returns an old
preference and the newer one contradicting it together, and refreshing both would
tie them on recency, the one signal that lets the newer win.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from langchain_core.documents import Document

from langchain_ragbudget.ledger._metadata_keys import (
    MEMORY_AGE_DAYS,
    MEMORY_ID,
    MEMORY_IMPORTANCE,
    MEMORY_RECENCY,
    MEMORY_SAID_AT,
    MEMORY_SCORE,
    MEMORY_SIMILARITY,
    MEMORY_SOURCE_HASH,
    MEMORY_SOURCE_ID,
    MEMORY_STALE,
    MEMORY_SUBJECT,
    MEMORY_TIMES_SAID,
)
from langchain_ragbudget.ledger._names import display_name
from langchain_ragbudget.ledger._records import DropReason, DropRecord, Stage
from langchain_ragbudget.memory._ranking import Ranking
from langchain_ragbudget.memory._store import Memory

SECONDS_PER_DAY = 86_400.0


class SourceHashes(Protocol):
    """Where a memory's source document is checked (`HybridIndex` is one)."""

    def document_hash(self, doc_id: str) -> str | None:
        """The document's content hash in the index now, or None if absent."""
        ...


@dataclass(frozen=True)
class Scored:
    """One recalled memory and every factor of its score (plain floats).

    `rank` is 1 for the best score; `stale` says why its source makes it stale
    ('' when not, or unchecked).
    """

    memory: Memory
    rank: int
    similarity: float
    age_days: float
    recency: float
    score: float
    stale: str = ""

    def document(self) -> Document:
        """The memory as a Document, every factor in its metadata."""
        memory = self.memory
        metadata: dict[str, Any] = {
            MEMORY_ID: memory.id,
            MEMORY_SUBJECT: memory.subject,
            MEMORY_SIMILARITY: self.similarity,
            MEMORY_IMPORTANCE: memory.importance,
            MEMORY_AGE_DAYS: self.age_days,
            MEMORY_RECENCY: self.recency,
            MEMORY_SCORE: self.score,
            MEMORY_SAID_AT: memory.said_at.isoformat(),
            MEMORY_TIMES_SAID: memory.times_said,
            MEMORY_SOURCE_ID: memory.source_id,
            MEMORY_SOURCE_HASH: memory.source_hash,
        }
        if self.stale:
            metadata[MEMORY_STALE] = self.stale
        return Document(id=memory.id, page_content=memory.text, metadata=metadata)


# Similarity, age in days, recency and score of every memory, in ranking order.
Factors = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def score_all(
    ranking: Ranking, query: np.ndarray, now: float, half_life_days: float
) -> Factors:
    """Similarity, age in days, recency and score of every memory, as arrays.

    An age below zero (a clock behind the store's) counts as 0. In place where
    it can be: over 100,000 memories each pass over an array costs a tenth of
    the matrix-vector product.
    """
    unit = (query / np.linalg.norm(query)).astype(np.float32)
    similarity = cosines(ranking.vectors, unit)
    ages = np.subtract(now, ranking.said_at)
    np.maximum(ages, 0.0, out=ages)
    ages *= 1 / SECONDS_PER_DAY
    recency = np.multiply(ages, -1 / half_life_days)
    np.exp2(recency, out=recency)  # 0.5 ** (age / half-life)
    scores = np.multiply(similarity, ranking.importance)
    scores *= recency
    return similarity, ages, recency, scores


def cosines(vectors: np.ndarray, unit: np.ndarray) -> np.ndarray:
    """Each unit row's dot product with `unit`, in this thread (einsum, not BLAS).

    A pass over the vectors is bound by memory, not arithmetic: BLAS's threads
    were no faster at 100,000 memories on a quiet machine, far slower on busy
    cores, and, still spinning after the call, they delayed a server store's next
    round trip (BENCHMARKS.md, Agent memory).
    """
    return np.einsum("ij,j->i", vectors, unit)


def best(scores: np.ndarray, k: int) -> list[int]:
    """Positions of the `k` best scores, best first (ties: store order).

    Only the scores at or above a bound are sorted: the k-th best of every 64th
    score is never above the k-th best of all, so nothing of the top k is left
    out, and one comparison is cheaper than `argpartition` (0.1 against 1.0 ms
    over 100,000 scores), which also broke ties at the cut in no set order.
    """
    near = np.arange(len(scores))
    sample = scores[::64]
    if len(sample) > k:
        bound = np.partition(sample, len(sample) - k)[len(sample) - k]
        above = np.flatnonzero(scores >= bound)
        if len(above) >= k:  # fewer only with NaN scores
            near = above
    order = np.lexsort((near, -scores[near]))[:k]
    return [int(i) for i in near[order]]


def under_floor(
    recalled: Sequence[Scored], min_score: float
) -> tuple[list[Scored], list[DropRecord]]:
    """Memories at or over `min_score`, and a record of each under it."""
    kept = [item for item in recalled if item.score >= min_score]
    dropped = [
        record(
            item,
            DropReason.SCORE_FLOOR,
            f"score {item.score:.3f} is under the memory min_score {min_score}",
        )
        for item in recalled
        if item.score < min_score
    ]
    return kept, dropped


def superseded(recalled: Sequence[Scored]) -> tuple[list[Scored], list[DropRecord]]:
    """Per subject, the memory said most recently; a record for each older one.

    Memories without a subject never supersede each other; a tie on `said_at`
    goes to the better score.
    """
    newest: dict[str, Scored] = {}
    for item in recalled:
        subject = item.memory.subject
        if subject is None:
            continue
        held = newest.get(subject)
        if held is None or (item.memory.said_at, item.score) > (
            held.memory.said_at,
            held.score,
        ):
            newest[subject] = item
    kept, dropped = [], []
    for item in recalled:
        winner = newest.get(item.memory.subject or "")
        if winner is None or winner is item or item.memory.subject is None:
            kept.append(item)
            continue
        dropped.append(
            record(
                item,
                DropReason.SUPERSEDED,
                f"superseded by {display_name(winner.memory.id)} (same subject "
                f"{display_name(str(item.memory.subject))}, said "
                f"{winner.memory.said_at:%Y-%m-%d %H:%M}; this one "
                f"{item.memory.said_at:%Y-%m-%d %H:%M})",
            )
        )
    return kept, dropped


def stale_reason(memory: Memory, sources: SourceHashes) -> str:
    """Why `memory`'s source makes it stale, or '' (no source named, or unchanged)."""
    if memory.source_id is None:
        return ""
    current = sources.document_hash(memory.source_id)
    name = display_name(memory.source_id)
    if current is None:
        return f"its source {name} is no longer in the index"
    if memory.source_hash is not None and current != memory.source_hash:
        return f"its source {name} has changed since it was learned"
    return ""


def checked_sources(
    recalled: Sequence[Scored], sources: SourceHashes | None, drop: bool
) -> tuple[list[Scored], list[DropRecord]]:
    """Memories checked against their source documents now.

    A stale one is kept marked, or with `drop` dropped with a record. Without
    `sources` nothing can be checked.
    """
    if sources is None:
        return list(recalled), []
    kept, dropped = [], []
    for item in recalled:
        reason = stale_reason(item.memory, sources)
        if reason and drop:
            dropped.append(record(item, DropReason.STALE_SOURCE, reason))
        elif reason:
            kept.append(
                Scored(
                    item.memory,
                    item.rank,
                    item.similarity,
                    item.age_days,
                    item.recency,
                    item.score,
                    stale=reason,
                )
            )
        else:
            kept.append(item)
    return kept, dropped


def record(item: Scored, reason: DropReason, detail: str) -> DropRecord:
    return DropRecord(
        key=item.memory.id,
        stage=Stage.MEMORY,
        reason=reason,
        rank=item.rank,
        document=item.document(),
        detail=detail,
    )
