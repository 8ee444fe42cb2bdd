"""Neighbouring chunks of one document: fetched next to a hit, joined into one run.

`around` fetches the chunks next to retrieved ones, so evidence that runs on past a
retrieved chunk can reach the prompt (BENCHMARKS.md, Chunking). Chunks that know
their place (`chunk_start`, `chunk_end`, `chunk_gap`) and are adjacent or overlap
render as one run of the document's own text, the overlap once; `NeighbourCosts`
charges the packer what the joined text adds, so its sum is the rendered context.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from langchain_core.documents import Document

from langchain_ragbudget.config._tokens import count_tokens
from langchain_ragbudget.errors import InvalidInputError
from langchain_ragbudget.ledger._metadata_keys import CHUNK_END, CHUNK_GAP, CHUNK_START


def place(document: Document) -> tuple[int, int, int] | None:
    """(position, start, end) of a chunk in its document, or None if not known."""
    meta = document.metadata
    values = (meta.get("position"), meta.get(CHUNK_START), meta.get(CHUNK_END))
    if all(type(v) is int for v in values):
        position, start, end = values
        return position, start, end  # type: ignore[return-value]
    return None


def around(
    documents: Sequence[Document], chunks: Mapping[str, Document], reach: int
) -> list[tuple[str, Document, str]]:
    """`(chunk id, chunk, id of the hit it neighbours)` within `reach` of each hit.

    Looked up by the index's chunk ids (`<doc_id>::<position>`) and kept only when
    the chunk says the same document and place, so a store with other ids adds
    nothing. Each chunk comes once: the best hit's first, nearer ones first.

    Raises:
        InvalidInputError: A value found in `chunks` is not a Document.
    """
    taken = {str(d.metadata.get("chunk_id", d.id)) for d in documents}
    found: list[tuple[str, Document, str]] = []
    for document in documents:
        doc_id, position = (
            document.metadata.get("doc_id"),
            document.metadata.get("position"),
        )
        if not isinstance(doc_id, str) or type(position) is not int:
            continue
        for near in _places_near(position, reach):
            key = f"{doc_id}::{near}"
            chunk = chunks.get(key)
            if chunk is None or key in taken:
                continue
            if not isinstance(chunk, Document):
                raise InvalidInputError(
                    f"chunk_store[{key!r}] is a {type(chunk).__name__}, not a Document"
                )
            if chunk.metadata.get("doc_id") == doc_id and _at(chunk, near):
                taken.add(key)
                found.append((key, chunk, str(document.id)))
    return found


def _places_near(position: int, reach: int) -> Iterator[int]:
    """Places within `reach`, nearer first, the next before the previous."""
    for distance in range(1, reach + 1):
        yield position + distance
        if position - distance >= 0:
            yield position - distance


def _at(chunk: Document, position: int) -> bool:
    found = chunk.metadata.get("position")
    return type(found) is int and found == position


def joins(first: Document, second: Document) -> bool:
    """Whether `second` continues `first` (overlapping or the next chunk)."""
    a, b = place(first), place(second)
    if a is None or b is None or b[1] <= a[1] or b[2] <= a[2]:
        return False
    return b[1] <= a[2] or (
        b[0] == a[0] + 1 and isinstance(second.metadata.get(CHUNK_GAP), str)
    )


def runs(documents: Sequence[Document]) -> list[list[int]]:
    """Indices of `documents` in runs of neighbours, each in document order.

    Runs come in the order of their best (first given) member; a chunk with no
    known place is a run of its own.
    """
    placed = sorted(
        (i for i, d in enumerate(documents) if place(d) is not None),
        key=lambda i: place(documents[i]),  # type: ignore[arg-type,return-value]
    )
    run_of: dict[int, list[int]] = {}
    current: list[int] = []
    for i in placed:
        if current and joins(documents[current[-1]], documents[i]):
            current.append(i)
        else:
            current = [i]
        run_of[i] = current
    out: list[list[int]] = []
    seen: set[int] = set()
    for i in range(len(documents)):
        run = run_of.get(i, [i])
        if run[0] not in seen:  # a run is known by its first chunk
            seen.add(run[0])
            out.append(run)
    return out


def run_text(chunks: Sequence[Document]) -> str:
    """The document's text over a run's span: each chunk's new text, once."""
    text = chunks[0].page_content
    for before, chunk in itertools.pairwise(chunks):
        a, b = place(before), place(chunk)
        assert a is not None and b is not None
        if b[1] <= a[2]:
            text += chunk.page_content[a[2] - b[1] :]
        else:
            text += str(chunk.metadata[CHUNK_GAP]) + chunk.page_content
    return text


@dataclass
class NeighbourCosts:
    """The tokens a whole chunk adds to the kept whole chunks of its document.

    The rendered runs' tokens with the chunk minus without it; None when it
    joins none of them (it is then paid as a passage of its own).
    """

    documents: Sequence[Document]
    render_run: Callable[[Sequence[Document]], str]
    encoding: str
    _cache: dict[tuple[int, ...], int] = field(default_factory=dict)

    def __call__(self, index: int, kept: Sequence[int]) -> int | None:
        chunk = self.documents[index]
        if place(chunk) is None or not any(
            joins(self.documents[k], chunk) or joins(chunk, self.documents[k])
            for k in kept
        ):
            return None
        return self._tokens((*kept, index)) - self._tokens(tuple(kept))

    def _tokens(self, members: tuple[int, ...]) -> int:
        key = tuple(sorted(members))
        if key not in self._cache:
            chunks = [self.documents[i] for i in key]
            self._cache[key] = sum(
                count_tokens(self.render_run([chunks[i] for i in run]), self.encoding)
                for run in runs(chunks)
            )
        return self._cache[key]


class _Format(Protocol):
    @property
    def join_neighbours(self) -> bool: ...
    def render_run(self, chunks: Sequence[Document]) -> str: ...


def neighbour_costs(
    fmt: _Format, documents: Sequence[Document], encoding: str
) -> NeighbourCosts | None:
    """The packer's `joined_cost` for a format, None when it joins nothing."""
    if not fmt.join_neighbours or not any(CHUNK_START in d.metadata for d in documents):
        return None
    return NeighbourCosts(documents, fmt.render_run, encoding)
