"""What ranking reads of a memory store, as numpy arrays kept in step with the file.

A recall scores every memory, and a recall after a write must not read every row
again. Each write moves the store's `generation` and stamps the rows it wrote
(`changed`); an embedding never changes. So the cache reads only rows changed
since its generation, appends new vectors to a buffer that grows by doubling,
and reads everything again only when a memory was deleted (the count tells).
A recall while nothing changed reads one statement: the generation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import numpy as np

Query = Callable[[str, Sequence[Any]], list[Any]]
_RANKED = "id, importance, said_at, subject"
# An index search on `changed` (sorting by rowid here would scan every row).
CHANGED_SINCE = f"SELECT rowid, {_RANKED} FROM memories WHERE changed > ?"
# The generation, and the dimension once a memory is stored: one statement.
META = "SELECT key, value FROM meta WHERE key IN ('generation', 'dimension')"


@dataclass(frozen=True)
class Ranking:
    """What ranking reads of every memory, as arrays in one order.

    `vectors` are unit-length float32 rows. `said_at` (last stated, epoch
    seconds) is the only time ranking reads: never creation or last recall.
    `newest` is, per subject, the position of its most recently said memory
    (a tie: the smallest id), so supersession needs no query per subject.
    """

    generation: int
    ids: list[str]
    vectors: np.ndarray
    importance: np.ndarray
    said_at: np.ndarray
    subjects: list[str | None]
    newest: Mapping[str, int]


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Each row scaled to length 1; a zero row stays zero."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


class RankingCache:
    """One store's `Ranking`, brought up to date from the rows that changed.

    Not locked: the store calls it under its lock. The generation is read
    alone (one statement is atomic); rows are read in one snapshot, so every
    query sees the same committed state.
    """

    def __init__(self) -> None:
        self._ranking: Ranking | None = None
        self._buffer = np.empty((0, 0), dtype=np.float32)
        self._positions: dict[str, int] = {}
        self._members: dict[str, list[int]] = {}  # positions per subject

    def read(
        self,
        query: Query,
        embeddings: Callable[[Sequence[str]], dict[str, bytes]],
        snapshot: Callable[[], AbstractContextManager[Any]],
    ) -> Ranking:
        cached = self._ranking
        if cached is not None and cached.generation == _meta(query)[0]:
            return cached
        with snapshot():
            generation, dimension = _meta(query)  # again, in the snapshot
            ranking = None
            if cached is not None:
                ranking = self._updated(
                    query, embeddings, cached, generation, dimension
                )
            if ranking is None:
                rows = query(f"SELECT {_RANKED} FROM memories ORDER BY rowid", ())
                self._buffer = np.empty((max(len(rows), 1024), dimension), np.float32)
                self._positions, self._members = {}, {}
                ranking = self._appended(
                    rows, embeddings, _empty(generation, dimension)
                )
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
                if row[3] != cached.subjects[at]:
                    return None  # a subject never changes; if it did, read all
                importance[at], said_at[at] = row[1], row[2]
        base = Ranking(
            generation,
            cached.ids,
            cached.vectors,
            importance,
            said_at,
            cached.subjects,
            cached.newest,
        )
        return self._appended(new, embeddings, base, {row[3] for row in rows})

    def _appended(
        self,
        rows: list[Any],
        embeddings: Callable[[Sequence[str]], dict[str, bytes]],
        base: Ranking,
        restated: set[str | None] | None = None,
    ) -> Ranking:
        """`base` with `rows` appended.

        `newest` is found again for their subjects and the `restated` ones.
        """
        start, end = len(base.ids), len(base.ids) + len(rows)
        if rows:
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
            if row[3] is not None:
                self._members.setdefault(row[3], []).append(start + offset)
        ids = [*base.ids, *(row[0] for row in rows)]
        said_at = np.concatenate([base.said_at, [row[2] for row in rows]])
        subjects: set[str] = {
            subject
            for subject in {row[3] for row in rows} | (restated or set())
            if subject is not None
        }
        newest: Mapping[str, int] = base.newest
        if subjects:
            newest = dict(base.newest) | {
                subject: min(
                    self._members[subject], key=lambda at: (-said_at[at], ids[at])
                )
                for subject in subjects
            }
        return Ranking(
            base.generation,
            ids,
            self._buffer[:end],
            np.concatenate([base.importance, [row[1] for row in rows]]),
            said_at,
            [*base.subjects, *(row[3] for row in rows)],
            newest,
        )


def _meta(query: Query) -> tuple[int, int]:
    """The store's generation and dimension (0 before the first memory)."""
    values = dict(query(META, ()))
    return int(values["generation"]), int(values.get("dimension", 0))


def _empty(generation: int, dimension: int) -> Ranking:
    nothing = np.empty(0, dtype=np.float64)
    vectors = np.empty((0, dimension), dtype=np.float32)
    return Ranking(generation, [], vectors, nothing, nothing, [], {})
