"""Packing passages into a token and count budget: pure functions.

No passage is ever cut mid-sentence: each is kept verbatim, shortened to whole
sentences (policy `trim`), or dropped with a reason. Policy `skip` lets smaller
passages after an overflow still fit; `stop` stops at the first overflow, as a plain
truncator does; `trim` keeps a passage that fits whole and shortens one that does
not to its most relevant sentences that fit what is left, in their own order, with
an omission marker where sentences are left out. `min_docs` keeps the top passages
even when they alone exceed the budget, and says so through `over_budget`.
`max_per_source` and `max_per_retriever` cap the passages kept of one source
document and of one retriever, so one verbose source cannot fill the surface.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from langchain_ragbudget.ledger import DropReason

Policy = Literal["skip", "stop", "trim"]


Count = int | Callable[[], int]


class PackItem:
    """One candidate passage, as the packer sees it.

    `tokens` is the rendered passage; `group_tokens` the header its citation group
    costs if this passage is the group's first kept one; equal `content_key`s (the
    passage text) mark duplicates. Either count may be given as a function, called
    once on first use: the packer reads counts only for a passage it weighs, so a
    candidate past `max_docs`, a duplicate, or one after `stop` is never counted.
    `group` is also the source document `max_per_source` counts; `retriever` the
    retriever `max_per_retriever` counts (None: not counted against any).
    """

    __slots__ = ("_group_tokens", "_tokens", "content_key", "group", "retriever")

    def __init__(
        self,
        tokens: Count,
        group: str,
        group_tokens: Count,
        content_key: str,
        retriever: str | None = None,
    ) -> None:
        self._tokens = tokens
        self.group = group
        self._group_tokens = group_tokens
        self.content_key = content_key
        self.retriever = retriever

    @property
    def tokens(self) -> int:
        """The rendered passage's tokens (counted now if not yet)."""
        if callable(self._tokens):
            self._tokens = self._tokens()
        return self._tokens

    @property
    def group_tokens(self) -> int:
        """The citation header's tokens (counted now if not yet)."""
        if callable(self._group_tokens):
            self._group_tokens = self._group_tokens()
        return self._group_tokens

    @property
    def counted_tokens(self) -> int | None:
        """`tokens` if the packer has weighed this passage, else `None`."""
        return None if callable(self._tokens) else self._tokens

    @property
    def counted_group_tokens(self) -> int | None:
        """`group_tokens` if the packer has read them, else `None`."""
        return None if callable(self._group_tokens) else self._group_tokens

    def __repr__(self) -> str:
        return (
            f"PackItem(tokens={self.counted_tokens}, group={self.group!r}, "
            f"content_key={self.content_key[:20]!r})"
        )


@dataclass(frozen=True)
class Sentences:
    """One passage's sentences as the packer sees them, for policy `trim`.

    `relevance`: one score per sentence (higher first, ties to the earlier one);
    `cost(chosen)`: the exact tokens of the passage shortened to the sentences
    `chosen` (sorted), markers included.
    """

    relevance: tuple[float, ...]
    cost: Callable[[tuple[int, ...]], int]


@dataclass(frozen=True)
class PackResult:
    """Indices kept (in input order), indices dropped with reasons, tokens used.

    `trimmed` maps each shortened passage (also in `kept`) to the sentences kept;
    `joined` each passage kept as part of a run of neighbours to the tokens it added.
    """

    kept: tuple[int, ...]
    dropped: tuple[tuple[int, DropReason], ...]
    tokens_used: int
    over_budget: bool
    trimmed: tuple[tuple[int, tuple[int, ...]], ...] = ()
    joined: tuple[tuple[int, int], ...] = ()


def pack(
    items: Sequence[PackItem],
    *,
    max_tokens: int,
    max_docs: int,
    policy: Policy = "skip",
    min_docs: int = 1,
    sentences_of: Callable[[int], Sentences] | None = None,
    max_sentences: int | None = None,
    max_passage_tokens: int | None = None,
    max_per_source: int | None = None,
    max_per_retriever: int | None = None,
    joined_cost: Callable[[int, tuple[int, ...]], int | None] | None = None,
) -> PackResult:
    """Keep items in rank order while they fit; every other item gets a reason.

    With policy `trim`, `sentences_of(index)` describes a passage that does not fit
    whole (asked only for those); `max_sentences` caps what one shortened passage
    keeps; a passage over `max_passage_tokens` is shortened to that size even when
    the budget has room for it, leaving room for the passages after it. A passage
    whose source (`group`) or retriever already has `max_per_source` or
    `max_per_retriever` kept passages is dropped before `max_docs` is checked.
    `joined_cost(index, kept)` is what a whole passage adds to the passages `kept`
    whole of its group when it renders joined to one of them (None: it does not).
    """
    capped = _Caps(max_per_source, max_per_retriever)
    kept: list[int] = []
    trimmed: list[tuple[int, tuple[int, ...]]] = []
    joined: list[tuple[int, int]] = []
    whole: dict[str, tuple[int, ...]] = {}
    dropped: list[tuple[int, DropReason]] = []
    groups: set[str] = set()
    contents: set[str] = set()
    used = 0
    over_budget = False
    stopped = False
    for index, item in enumerate(items):
        if early := _early_drop(item, contents, capped, len(kept) >= max_docs, stopped):
            dropped.append((index, early))
            continue
        header = 0 if item.group in groups else item.group_tokens
        added = None
        if joined_cost is not None and item.group in whole:
            added = joined_cost(index, whole[item.group])
        tokens = item.tokens if added is None else added
        cost = tokens + header
        chosen: tuple[int, ...] = ()
        room = max_tokens - used - header
        if max_passage_tokens is not None:
            room = min(room, max_passage_tokens)
        if tokens > room and policy == "trim" and sentences_of is not None:
            left = room
            if left > 0:
                shape = sentences_of(index)
                chosen = choose_sentences(shape, left, max_sentences)
                if chosen:
                    cost = header + shape.cost(chosen)
        if used + cost <= max_tokens or len(kept) < min_docs:
            over_budget = over_budget or used + cost > max_tokens
            kept.append(index)
            if chosen:
                trimmed.append((index, chosen))
            else:
                whole[item.group] = (*whole.get(item.group, ()), index)
                if added is not None:
                    joined.append((index, added))
            groups.add(item.group)
            capped.count(item)
            contents.add(item.content_key)
            used += cost
        else:
            dropped.append((index, DropReason.MAX_TOKENS))
            stopped = policy == "stop"
    tuples = tuple(kept), tuple(dropped)
    return PackResult(*tuples, used, over_budget, tuple(trimmed), tuple(joined))


def _early_drop(
    item: PackItem, contents: set[str], capped: _Caps, full: bool, stopped: bool
) -> DropReason | None:
    """Why `item` is dropped before it is weighed, in the order checked; or None."""
    if item.content_key in contents:
        return DropReason.DUPLICATE
    if over_cap := capped.reason(item):
        return over_cap
    if full:
        return DropReason.MAX_DOCS
    return DropReason.MAX_TOKENS if stopped else None


CAP_REASONS = (DropReason.MAX_PER_SOURCE, DropReason.MAX_PER_RETRIEVER)


class _CapSettings(Protocol):
    @property
    def max_per_source(self) -> int | None: ...
    @property
    def max_per_retriever(self) -> int | None: ...


def cap_detail(reason: DropReason, settings: _CapSettings, item: PackItem) -> str:
    """Why a passage over a per-source or per-retriever cap was dropped, in words."""
    if reason == DropReason.MAX_PER_SOURCE:
        return f"max_per_source={settings.max_per_source} of its source already kept"
    return (
        f"max_per_retriever={settings.max_per_retriever} of retriever "
        f"{item.retriever!r} already kept"
    )


class _Caps:
    """Kept passages per source and per retriever, against their caps."""

    def __init__(self, per_source: int | None, per_retriever: int | None) -> None:
        self.per_source = per_source
        self.per_retriever = per_retriever
        self.sources: dict[str, int] = {}
        self.retrievers: dict[str, int] = {}

    def reason(self, item: PackItem) -> DropReason | None:
        """Why `item` may not be kept under the caps, or None if it may."""
        if (
            self.per_source is not None
            and self.sources.get(item.group, 0) >= self.per_source
        ):
            return DropReason.MAX_PER_SOURCE
        if (
            self.per_retriever is not None
            and item.retriever is not None
            and self.retrievers.get(item.retriever, 0) >= self.per_retriever
        ):
            return DropReason.MAX_PER_RETRIEVER
        return None

    def count(self, item: PackItem) -> None:
        """Count a kept `item` against its source and retriever."""
        self.sources[item.group] = self.sources.get(item.group, 0) + 1
        if item.retriever is not None:
            self.retrievers[item.retriever] = self.retrievers.get(item.retriever, 0) + 1


def choose_sentences(
    shape: Sentences, budget: int, max_sentences: int | None = None
) -> tuple[int, ...]:
    """The most relevant sentences that fit `budget` together, in passage order.

    Greedy by relevance (ties to the earlier sentence): a sentence that would
    overflow is passed over and a shorter, less relevant one may still fit.
    """
    order = sorted(range(len(shape.relevance)), key=lambda i: (-shape.relevance[i], i))
    chosen: tuple[int, ...] = ()
    for candidate in order:
        if max_sentences is not None and len(chosen) >= max_sentences:
            break
        trial = tuple(sorted([*chosen, candidate]))
        if shape.cost(trial) <= budget:
            chosen = trial
    return chosen


def omission_points(chosen: Sequence[int], total: int) -> list[int]:
    """Where markers go: before each kept sentence after a gap, and at a cut end.

    Returned as positions in `chosen` (len(chosen) for the end).
    """
    points = [
        position
        for position, sentence in enumerate(chosen)
        if sentence > (chosen[position - 1] + 1 if position else 0)
    ]
    if chosen and chosen[-1] < total - 1:
        points.append(len(chosen))
    return points


def header_costs(items: Sequence[PackItem], kept: Sequence[int]) -> list[int | None]:
    """Citation-header tokens each passage paid (kept) or needed (dropped).

    As `packing.pack` counts them: a header is paid by the first kept passage of
    its source document; later passages of that document pay none. `None` for a
    passage the packer never weighed.
    """
    kept_set: set[int] = set(kept)
    paid: set[str] = set()
    out: list[int | None] = []
    for index, item in enumerate(items):
        out.append(0 if item.group in paid else item.counted_group_tokens)
        if index in kept_set:
            paid.add(item.group)
    return out
