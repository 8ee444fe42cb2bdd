"""Agent memory beside the documents: a retriever on the same budget.

Memories rank by `similarity x importance x 0.5^(age / half_life_days)`, the age
running from when a fact was last *said*: from creation, a preference confirmed
daily would decay as if said once; from the last read, an old preference and the
newer one contradicting it would tie. Every memory left out (superseded, stale
source, under the floor) is on the record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from langchain_ragbudget.budget._report import MemoryContext as MemoryContext
from langchain_ragbudget.budget._report import StaleFlag as StaleFlag
from langchain_ragbudget.config._memory_settings import MemorySettings as MemorySettings
from langchain_ragbudget.config._overrides import field_names, refuse_unknown
from langchain_ragbudget.config._settings import ConfigLike, as_config
from langchain_ragbudget.errors import InvalidInputError
from langchain_ragbudget.ledger._records import CandidateList, DropRecord
from langchain_ragbudget.memory._ranking import Ranking
from langchain_ragbudget.memory._score import (
    Factors,
    Scored,
    SourceHashes,
    best,
    checked_sources,
    score_all,
    superseded,
    under_floor,
)
from langchain_ragbudget.memory._store import Clock, timestamp
from langchain_ragbudget.memory._store import Memory as Memory
from langchain_ragbudget.memory._store import MemoryStore as MemoryStore
from langchain_ragbudget.memory._store import MemoryStoreError as MemoryStoreError

__all__ = [
    "Memory",
    "MemoryCandidates",
    "MemoryContext",
    "MemoryRecall",
    "MemoryRetriever",
    "MemorySettings",
    "MemoryStore",
    "MemoryStoreError",
    "SourceHashes",
    "StaleFlag",
]


class MemoryCandidates(CandidateList):
    """Recalled memories with their records, and how many ranked below `k`."""

    def __init__(
        self,
        documents: Sequence[Document] = (),
        drops: Sequence[DropRecord] = (),
        below_k: int = 0,
    ) -> None:
        super().__init__(documents, drops)
        self.below_k = below_k


@dataclass(frozen=True)
class MemoryRecall:
    """One recall: the memories returned, best first, and the records of the rest.

    `below_k` counts the memories that ranked below `k` and were not fetched as
    their subject's newest: left out without a record each (they were never
    candidates), but counted.
    """

    kept: list[Scored] = field(default_factory=list)
    drops: list[DropRecord] = field(default_factory=list)
    below_k: int = 0

    def documents(self) -> MemoryCandidates:
        """The kept memories as Documents, carrying the drop records and count."""
        return MemoryCandidates(
            [item.document() for item in self.kept], self.drops, self.below_k
        )


class MemoryRetriever(BaseRetriever):
    """Memories for a query: cosine x importance x recency since last said.

    `invoke(query)` gives the kept memories as a `CandidateList` carrying the
    `memory / ...` drop records; each one's metadata holds every factor of its
    score as plain floats, and `memory_stale` when its source changed. Recall
    writes `last_recalled_at`, never `said_at`.

    Attributes:
        store: The memory store.
        k: Memories recalled per query, before supersession and the stale check.
        half_life_days: Recency halves every this many days since last said.
        min_score: Recalled memories scoring below are dropped (recorded).
        supersede: Drop older memories of a subject a newer one has (recorded).
        stale: `keep` (flagged) or `drop` (recorded) a memory whose source changed.
        sources: Where source documents are checked (a `HybridIndex`); None:
            memories with a source are not checked.
        clock: "Now" for ages; the store's clock if None.

    Example:
        .. code-block:: python

            from langchain_ragbudget import MemoryRetriever, MemoryStore

            store = MemoryStore.from_config(
                config, path="memory.sqlite", embeddings=embeddings
            )
            store.remember("prefers the dark theme", subject="editor.theme")
            retriever = MemoryRetriever.from_config(config, store=store)
            memories = retriever.invoke("which theme?")
    """

    store: MemoryStore
    k: int = Field(MemorySettings().k, ge=1)
    half_life_days: float = Field(MemorySettings().half_life_days, gt=0)
    min_score: float = MemorySettings().min_score
    supersede: bool = MemorySettings().supersede
    stale: Literal["keep", "drop"] = MemorySettings().stale
    sources: Any = None
    clock: Clock | None = None

    model_config = ConfigDict(arbitrary_types_allowed=True)

    @classmethod
    def from_config(
        cls,
        config: ConfigLike = None,
        *,
        store: MemoryStore,
        sources: SourceHashes | None = None,
        **overrides: Any,
    ) -> MemoryRetriever:
        """A retriever over `store` with the configuration's `memory` settings.

        Raises:
            ConfigError: The file is invalid.
            TypeError: A keyword is not a field of the retriever.
        """
        settings = as_config(config).memory
        refuse_unknown(
            "MemoryRetriever.from_config()",
            overrides,
            field_names(cls) - {"store", "sources"},
        )
        values = {
            "k": settings.k,
            "half_life_days": settings.half_life_days,
            "min_score": settings.min_score,
            "supersede": settings.supersede,
            "stale": settings.stale,
        }
        return cls(store=store, sources=sources, **{**values, **overrides})

    def recall(
        self, query: str | None = None, *, vector: Sequence[float] | None = None
    ) -> MemoryRecall:
        """Recall the `k` best memories for `query` (or `vector`); record the rest.

        With `supersede`, each subject among them is served by its most recently
        said memory in the whole store, fetched even when it ranked below `k`;
        the older ones recalled are recorded as superseded.

        Raises:
            InvalidInputError: Neither or both of `query` and `vector`, or a
                vector of another dimension than the store's.
        """
        now = (self.clock or self.store.clock)()
        ranking = self.store.ranking()
        if not ranking.ids:
            if (query is None) == (vector is None):
                raise InvalidInputError(
                    "recall takes a query or a vector (one of them)"
                )
            return MemoryRecall()
        query_vector = self._query_vector(ranking, query, vector)
        factors = score_all(ranking, query_vector, timestamp(now), self.half_life_days)
        top = best(factors[3], self.k)
        newest = self._newest_of(ranking, factors[3], top) if self.supersede else []
        memories = self.store.get_many([ranking.ids[i] for i in [*top, *newest]])
        recalled = self._scored(ranking, factors, top, memories)
        kept, drops = under_floor(recalled, self.min_score)
        fetched = 0
        if self.supersede:
            with_newest = self._with_newest(ranking, factors, kept, memories)
            fetched = len(with_newest) - len(kept)
            kept, more = superseded(with_newest)
            drops += more
        kept, more = checked_sources(kept, self.sources, self.stale == "drop")
        drops += more
        self.store.mark_recalled([item.memory.id for item in kept], now)
        return MemoryRecall(
            kept,
            sorted(drops, key=lambda record: record.rank),
            below_k=len(ranking.ids) - len(recalled) - fetched,
        )

    def score(
        self, query: str | None = None, *, vector: Sequence[float] | None = None
    ) -> list[Scored]:
        """Every memory scored against `query` (or `vector`), best first; no writes."""
        ranking = self.store.ranking()
        if not ranking.ids:
            return []
        query_vector = self._query_vector(ranking, query, vector)
        now = timestamp((self.clock or self.store.clock)())
        factors = score_all(ranking, query_vector, now, self.half_life_days)
        top = best(factors[3], len(ranking.ids))
        memories = self.store.get_many([ranking.ids[i] for i in top])
        return self._scored(ranking, factors, top, memories)

    def _newest_of(
        self, ranking: Ranking, scores: np.ndarray, top: list[int]
    ) -> list[int]:
        """Where each subject in `top` has its newest memory, when not in `top`.

        Only the subjects of memories at or over the floor; read with `top`'s rows.
        """
        out: list[int] = []
        for at in top:
            subject = ranking.subjects[at]
            if subject is not None and scores[at] >= self.min_score:
                newest = ranking.newest[subject]
                if newest not in top and newest not in out:
                    out.append(newest)
        return out

    def _with_newest(
        self,
        ranking: Ranking,
        factors: Factors,
        kept: list[Scored],
        memories: dict[str, Memory],
    ) -> list[Scored]:
        """`kept` with each subject's newest memory put before its first.

        The newest is the most recently said in the whole store as the ranking
        read it (`Ranking.newest`; its row in `memories`); nothing is added when
        it is in `kept` already, or was forgotten since.
        """
        out: list[Scored] = []
        held = {item.memory.id for item in kept}
        done: set[str] = set()
        scores = factors[3]
        for item in kept:
            subject = item.memory.subject
            if subject is not None and subject not in done:
                done.add(subject)
                at = ranking.newest[subject]
                newest = memories.get(ranking.ids[at])
                if newest is not None and newest.id not in held:
                    rank = int(np.count_nonzero(scores > scores[at])) + 1
                    out.append(_scored_one(newest, at, rank, factors))
            out.append(item)
        return out

    def _query_vector(
        self, ranking: Ranking, query: str | None, vector: Sequence[float] | None
    ) -> np.ndarray:
        if (query is None) == (vector is None):
            raise InvalidInputError("recall takes a query or a vector (one of them)")
        if query is not None and not isinstance(query, str):
            raise InvalidInputError(
                f"a memory query must be a string; got {type(query).__name__}"
            )
        query_vector = (
            self.store.embed_query(query)
            if query is not None
            else np.asarray(vector, dtype=np.float64)
        )
        if query_vector.shape != (ranking.vectors.shape[1],):
            raise InvalidInputError(
                f"the query vector has shape {query_vector.shape}; the memory store "
                f"{self.store.path} holds {ranking.vectors.shape[1]}-dimensional ones"
            )
        return query_vector

    def _scored(
        self,
        ranking: Ranking,
        factors: Factors,
        top: list[int],
        memories: dict[str, Memory],
    ) -> list[Scored]:
        """The memories at positions `top`, in order, every factor of their scores.

        One forgotten by another process since the ranking was read (absent from
        `memories`) is left out.
        """
        recalled: list[Scored] = []
        for i in top:
            memory = memories.get(ranking.ids[i])
            if memory is not None:
                recalled.append(_scored_one(memory, i, len(recalled) + 1, factors))
        return recalled

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return self.recall(query).documents()


def _scored_one(memory: Memory, at: int, rank: int, factors: Factors) -> Scored:
    similarity, ages, recency, scores = factors
    return Scored(
        memory,
        rank=rank,
        similarity=float(similarity[at]),
        age_days=float(ages[at]),
        recency=float(recency[at]),
        score=float(scores[at]),
    )
