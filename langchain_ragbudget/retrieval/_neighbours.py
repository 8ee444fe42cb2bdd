"""Neighbouring chunks of one document: fetched next to a hit, joined into one run.

`around` fetches the chunks next to retrieved ones, so evidence that runs on past a
retrieved chunk can reach the prompt (BENCHMARKS.md, Chunking). Chunks that know
their place (`chunk_start`, `chunk_end`, `chunk_gap`) render as one run of the
document's own text where their texts overlap or only whitespace lies between
them, the overlap once; otherwise apart, whatever the offsets say. `NeighbourCosts`
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
    """Whether `second` continues `first`: their texts overlap, or it comes next."""
    return seam(first, second) is not None


def seam(first: Document, second: Document) -> str | None:
    """The text `second` adds after `first` when it continues it, else None.

    Offsets are claims, checked against the texts: an overlap must be the end of
    `first`'s text and the start of `second`'s, and the gap before the next chunk
    whitespace only (a gap or a seam with a visible character could carry or glue
    words). So a join shows each chunk's text exactly, the overlap once.
    """
    a, b = place(first), place(second)
    if a is None or b is None or b[1] <= a[1] or b[2] <= a[2]:
        return None
    head, tail = first.page_content, second.page_content
    shared = a[2] - b[1]
    if shared > 0:
        fits = shared < len(tail) and shared <= len(head)
        return tail[shared:] if fits and head.endswith(tail[:shared]) else None
    gap = second.metadata.get(CHUNK_GAP, "") if shared < 0 else ""
    if b[0] != a[0] + 1 or not isinstance(gap, str) or len(gap) != -shared:
        return None
    if gap and not gap.isspace():
        return None
    if not (gap or head[-1:].isspace() or tail[:1].isspace()):
        return None
    return gap + tail


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
    """The document's text over a run's span: each chunk's new text, once.

    Raises:
        ValueError: Two chunks of `chunks` in a row do not join.
    """
    text = chunks[0].page_content
    for before, chunk in itertools.pairwise(chunks):
        added = seam(before, chunk)
        if added is None:
            raise ValueError(f"chunk {chunk.id!r} does not continue {before.id!r}")
        text += added
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
