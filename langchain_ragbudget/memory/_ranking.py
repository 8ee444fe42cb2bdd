"""What ranking reads of a memory store, as numpy arrays kept in step with the file.

A recall scores every memory, and a recall after a write must not read every row
again. Each write moves the store's `generation` and stamps the rows it wrote
(`changed`); an embedding never changes. So the cache reads only rows changed
since its generation, appends new vectors to a buffer that grows by doubling,
and reads everything again only when a memory was deleted (the count tells).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Query = Callable[[str, Sequence[Any]], list[Any]]
_RANKED = "id, importance, said_at"
# An index search on `changed` (sorting by rowid here would scan every row).
CHANGED_SINCE = f"SELECT rowid, {_RANKED} FROM memories WHERE changed > ?"


@dataclass(frozen=True)
class Ranking:
    """What ranking reads of every memory, as arrays in one order.

    `vectors` are unit-length float32 rows. `said_at` (last stated, epoch
    seconds) is the only time ranking reads: never creation or last recall.
    """

    generation: int
    ids: list[str]
    vectors: np.ndarray
    importance: np.ndarray
    said_at: np.ndarray
    positions: Mapping[str, int] = field(default_factory=dict)

    def position(self, memory_id: str) -> int | None:
        """Where `memory_id` is in these arrays; None if absent or added since.

        `positions` is the cache's map, which only grows until a full read
        replaces it, so a position past these arrays belongs to a later ranking.
        """
        at = self.positions.get(memory_id)
        return at if at is not None and at < len(self.ids) else None


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Each row scaled to length 1; a zero row stays zero."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


class RankingCache:
    """One store's `Ranking`, brought up to date from the rows that changed.

    Not locked: the store calls it under its lock in one read transaction, so
    every query sees the same committed state.
    """

    def __init__(self) -> None:
        self._ranking: Ranking | None = None
        self._buffer = np.empty((0, 0), dtype=np.float32)
        self._positions: dict[str, int] = {}

    def read(
        self,
        query: Query,
        embeddings: Callable[[Sequence[str]], dict[str, bytes]],
        dimension: int,
    ) -> Ranking:
        generation = int(
            query("SELECT value FROM meta WHERE key = 'generation'", ())[0][0]
        )
        cached = self._ranking
        if cached is not None and cached.generation == generation:
            return cached
        ranking = None
        if cached is not None:
            ranking = self._updated(query, embeddings, cached, generation, dimension)
        if ranking is None:
            rows = query(f"SELECT {_RANKED} FROM memories ORDER BY rowid", ())
            self._buffer = np.empty((max(len(rows), 1024), dimension), np.float32)
            self._positions = {}
            ranking = self._appended(rows, embeddings, _empty(generation, dimension))
        self._ranking = ranking
        return ranking

    def _updated(
        self,
        query: Query,
        embeddings: Callable[[Sequence[str]], dict[str, bytes]],
        cached: Ranking,
        generation: int,
        dimension: int,
    ) -> Ranking | None:
        """`cached` with the rows changed since; None when one was deleted."""
        stamped = query(CHANGED_SINCE, (cached.generation,))
        rows = [row[1:] for row in sorted(stamped)]  # in rowid order, as a full read
        new = [row for row in rows if row[0] not in self._positions]
        count = int(query("SELECT count(*) FROM memories", ())[0][0])
        if count != len(cached.ids) + len(new) or cached.vectors.shape[1] != dimension:
            return None
        importance = cached.importance.copy()
        said_at = cached.said_at.copy()
        for row in rows:
            if (at := self._positions.get(row[0])) is not None:
                importance[at], said_at[at] = row[1], row[2]
        base = Ranking(
            generation, cached.ids, cached.vectors, importance, said_at, self._positions
        )
        return self._appended(new, embeddings, base)

    def _appended(
        self,
        rows: list[Any],
        embeddings: Callable[[Sequence[str]], dict[str, bytes]],
        base: Ranking,
    ) -> Ranking:
        if not rows:
            return base
        start, end = len(base.ids), len(base.ids) + len(rows)
        if end > len(self._buffer):  # grow by doubling; old views stay valid
            size = (max(end, 2 * len(self._buffer)), base.vectors.shape[1])
            grown = np.empty(size, dtype=np.float32)
            grown[:start] = self._buffer[:start]
            self._buffer = grown
        read = embeddings([row[0] for row in rows])
        blob = b"".join(read[row[0]] for row in rows)
        raw = np.frombuffer(blob, dtype=np.float32).reshape(len(rows), -1)
        self._buffer[start:end] = unit_rows(raw)
        for offset, row in enumerate(rows):
            self._positions[row[0]] = start + offset
        return Ranking(
            base.generation,
            [*base.ids, *(row[0] for row in rows)],
            self._buffer[:end],
            np.concatenate([base.importance, [row[1] for row in rows]]),
            np.concatenate([base.said_at, [row[2] for row in rows]]),
            self._positions,
        )


def _empty(generation: int, dimension: int) -> Ranking:
    nothing = np.empty(0, dtype=np.float64)
    vectors = np.empty((0, dimension), dtype=np.float32)
    return Ranking(generation, [], vectors, nothing, nothing)
