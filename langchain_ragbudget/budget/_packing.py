"""Packing passages into a token and count budget: pure functions.

No passage is cut mid-sentence: each is kept verbatim, shortened to whole sentences
(policy `trim`), or dropped with a reason. `skip` lets smaller passages after an
overflow still fit; `trim` shortens a passage that does not fit to its most
relevant sentences that do, in their own order. `min_docs` keeps the top passages
even over the budget and says so (`over_budget`). `max_per_source` and
`max_per_retriever` keep one verbose source from filling the surface.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from typing import Literal, Protocol, overload

from langchain_ragbudget.ledger._records import DropReason

Policy = Literal["skip", "trim"]


Count = int | Callable[[], int]
JoinedCost = Callable[[int, tuple[int, ...]], int | None]


class PackItem:
    """One candidate passage, as the packer sees it.

    `tokens` is the rendered passage; `group_tokens` the citation header it pays
    if it is its group's (source document's) first kept passage; equal
    `content_key`s mark duplicates. Counts may be functions, called on first use,
    so a candidate the packer never weighs is never counted. `retriever` is what
    `max_per_retriever` counts (None: nothing). A `neighbour` chunk (added, not
    retrieved) is weighed at its own rank, never with its document.
    """

    __slots__ = (
        "_group_tokens",
        "_tokens",
        "content_key",
        "group",
        "neighbour",
        "retriever",
    )

    def __init__(
        self,
        tokens: Count,
        group: str,
        group_tokens: Count,
        content_key: str,
        retriever: str | None = None,
        neighbour: bool = False,
    ) -> None:
        self._tokens = tokens
        self.group = group
        self._group_tokens = group_tokens
        self.content_key = content_key
        self.retriever = retriever
        self.neighbour = neighbour

    @property
    def tokens(self) -> int:
        if callable(self._tokens):
            self._tokens = self._tokens()
        return self._tokens

    @property
    def group_tokens(self) -> int:
        if callable(self._group_tokens):
            self._group_tokens = self._group_tokens()
        return self._group_tokens

    @property
    def counted_tokens(self) -> int | None:
        """`tokens` if already counted, else None."""
        return None if callable(self._tokens) else self._tokens

    @property
    def counted_group_tokens(self) -> int | None:
        """`group_tokens` if already counted, else None."""
        return None if callable(self._group_tokens) else self._group_tokens

    def __repr__(self) -> str:
        return (
            f"PackItem(tokens={self.counted_tokens}, group={self.group!r}, "
            f"content_key={self.content_key[:20]!r})"
        )


@dataclass(frozen=True)
class Sentences:
    """One passage's sentences as the packer sees them, for policy `trim`.

    `relevance`: one score per sentence (ties to the earlier one), scored when
    first read (`Scores`); `cost(chosen)`: the exact tokens of the passage
    shortened to the sorted `chosen`, markers included; `estimate(chosen)`: close
    to `cost` without calling the tokenizer (None: `cost` weighs every trial);
    `texts`: so a sentence two overlapping chunks share is offered once (empty:
    not known); `least`: no choice of sentences costs fewer tokens, by `cost` or
    by `estimate`, so a smaller room is refused before any sentence is counted.
    """

    relevance: Sequence[float]
    cost: Callable[[tuple[int, ...]], int]
    texts: tuple[str, ...] = ()
    retitled: Callable[[tuple[int, ...]], int] | None = None
    estimate: Callable[[tuple[int, ...]], int] | None = None
    least: int = 0

    def paying_header(self) -> Sentences:
        """The passage as the one that pays its citation's header.

        `retitled(chosen)` is what the header gains when the shortened passage no
        longer opens with the title line the header left out.
        """
        if self.retitled is None:
            return self
        base, extra, rough = self.cost, self.retitled, self.estimate
        return replace(
            self,
            cost=lambda chosen: base(chosen) + extra(chosen),
            estimate=None if rough is None else lambda c: rough(c) + extra(c),
        )


class Scores(Sequence[float]):
    """Sentence scores, computed when first read.

    Most passages the packer shapes have no sentence that fits the room left,
    and are never scored.
    """

    def __init__(self, count: int, score: Callable[[], Sequence[float]]) -> None:
        self._count = count
        self._score = score

    @cached_property
    def _values(self) -> tuple[float, ...]:
        return tuple(self._score())

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> float: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[float]: ...
    def __getitem__(self, index: int | slice) -> float | Sequence[float]:
        return self._values[index]


@dataclass(frozen=True)
class PackResult:
    """Indices kept (in the order weighed), indices dropped with reasons, tokens used.

    `trimmed`: shortened passage (also in `kept`) -> sentences kept; `joined`:
    passage kept joined to a run of neighbours -> tokens it added; `retitled`:
    shortened passage whose header shows its title -> tokens the header gained.
    """

    kept: tuple[int, ...]
    dropped: tuple[tuple[int, DropReason], ...]
    tokens_used: int
    over_budget: bool
    trimmed: tuple[tuple[int, tuple[int, ...]], ...] = ()
    joined: tuple[tuple[int, int], ...] = ()
    retitled: tuple[tuple[int, int], ...] = ()


def document_order(items: Sequence[PackItem]) -> list[int]:
    """Item indices with each group's passages together, where its best ranks.

    The order the context shows them in. Weighed by rank alone, evidence spread
    over chunks of one document is lost where the naive slice keeps it
    (BENCHMARKS.md, Chunking). A neighbour stays at its rank, so it only takes room
    the retrieved ones leave.
    """
    members: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        if not item.neighbour:
            members.setdefault(item.group, []).append(index)
    grouped = [index for group in members.values() for index in group]
    return grouped + [index for index, item in enumerate(items) if item.neighbour]


def pack(
    items: Sequence[PackItem],
    *,
    max_tokens: int,
    max_docs: int,
    policy: Policy = "skip",
    min_docs: int = 0,
    sentences_of: Callable[[int], Sentences] | None = None,
    max_sentences: int | None = None,
    max_per_source: int | None = None,
    max_per_retriever: int | None = None,
    joined_cost: JoinedCost | None = None,
) -> PackResult:
    """Keep items while they fit, a document's passages together; the rest get a reason.

    Items are weighed in `document_order`. With policy `trim`,
    `sentences_of(index)` describes a passage that does not fit whole; the best
    later passage of its document is shortened together with it (`_Pair`), so
    evidence split over two chunks survives a budget with room for part of it.
    `max_sentences` caps one shortened passage. The per-source and per-retriever
    caps are checked before `max_docs`. `joined_cost(index, kept)` is what a
    whole passage adds when it renders joined to its group's `kept` whole
    passages (None: it does not join); joined, it takes no `max_docs` slot.
    """
    packing = _Packing(
        items, max_tokens, policy, _Caps(max_per_source, max_per_retriever)
    )
    queue = _Queue(items)
    for index in queue:
        item = items[index]
        slots_left = max_docs - packing.slots  # a passage joined to a run takes none
        full = partial(packing.full, index, max_docs, joined_cost)
        if early := _early_drop(item, packing.contents, packing.capped, full):
            packing.dropped.append((index, early))
            continue
        added = packing.join_cost(index, joined_cost)  # counted once (NeighbourCosts)
        header = 0 if item.group in packing.groups else item.group_tokens
        tokens = item.tokens if added is None else added
        cost = tokens + header
        chosen: tuple[int, ...] | None = ()
        room = max_tokens - packing.used - header
        if index in packing.planned:  # shortened together with the passage before
            chosen, cost = packing.planned.pop(index)
        elif added is None and queue.must_wait(index, slots_left):
            continue  # it would take the slot of a better-ranked passage
        elif tokens > room > 0 and slots_left > 0 and policy == "trim" and sentences_of:
            chosen, shortened = packing.shorten(
                queue,
                index,
                room,
                sentences_of,
                max_sentences,
                pair_slots=slots_left if max_sentences is None else 0,
                pays_header=header > 0,
            )
            cost = header + shortened if chosen else cost
        if chosen is not None and (
            packing.used + cost <= max_tokens or len(packing.kept) < min_docs
        ):
            packing.keep(index, cost, chosen, added)
        else:
            packing.dropped.append((index, DropReason.MAX_TOKENS))
    return packing.result()


class _Queue:
    """The order `pack` weighs passages in: `document_order`, with waits.

    A passage ahead of its rank (weighed with its document's best) goes ahead
    only while it leaves a `max_docs` slot for each better-ranked passage not
    weighed yet; otherwise it waits for its rank.
    """

    def __init__(self, items: Sequence[PackItem]) -> None:
        self.items = items
        self.pending = document_order(items)
        self.waiting: list[int] = []
        best: dict[str, int] = {}
        for index, item in enumerate(items):
            best.setdefault(item.group, index)
        self.leaders = set(best.values())  # each document's best passage
        self.waited: set[int] = set()

    def __iter__(self) -> Iterator[int]:
        while self.pending or self.waiting:
            head = self.pending[0] if self.pending else None
            if self.waiting and (
                head is None or (head in self.leaders and self.waiting[0] < head)
            ):
                yield self.waiting.pop(0)
            else:
                yield self.pending.pop(0)

    def better(self, index: int) -> int:
        """Passages ranked above `index` not weighed yet."""
        return sum(i < index for i in (*self.pending, *self.waiting))

    def must_wait(self, index: int, slots: int) -> bool:
        """Whether `index` must wait for its rank (it then does)."""
        if index in self.leaders or index in self.waited:
            return False  # a document's best passage is never ahead of its rank
        if self.better(index) < slots:
            return False
        bisect.insort(self.waiting, index)
        self.waited.add(index)
        return True

    def take_mate(self, index: int, contents: set[str], slots: int) -> int | None:
        """The best unweighed passage of `index`'s document, moved to be weighed next.

        None if there is none (duplicates aside), or if taking it would leave fewer
        `slots` than passages ranked above it.
        """
        item = self.items[index]
        seen = {*contents, item.content_key}
        for position, later in enumerate(self.pending):
            mate = self.items[later]
            if mate.group == item.group and mate.content_key not in seen:
                if self.better(later) > slots - 2:
                    return None
                self.pending.insert(0, self.pending.pop(position))
                return later
        return None


@dataclass
class _Packing:
    items: Sequence[PackItem]
    max_tokens: int
    policy: Policy
    capped: _Caps
    kept: list[int] = field(default_factory=list)
    trimmed: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)
    joined: list[tuple[int, int]] = field(default_factory=list)
    whole: dict[str, tuple[int, ...]] = field(default_factory=dict)
    dropped: list[tuple[int, DropReason]] = field(default_factory=list)
    # a passage shortened with the one before it: sentences (() whole, None none), cost
    planned: dict[int, tuple[tuple[int, ...] | None, int]] = field(default_factory=dict)
    retitled: dict[int, int] = field(default_factory=dict)
    groups: set[str] = field(default_factory=set)
    contents: set[str] = field(default_factory=set)
    used: int = 0
    over_budget: bool = False

    def join_cost(self, index: int, joined_cost: JoinedCost | None) -> int | None:
        """What whole passage `index` adds to a kept run of its group, or None."""
        group = self.items[index].group
        if joined_cost is None or group not in self.whole:
            return None
        return joined_cost(index, self.whole[group])

    def full(self, index: int, max_docs: int, joined_cost: JoinedCost | None) -> bool:
        return self.slots >= max_docs and self.join_cost(index, joined_cost) is None

    @property
    def slots(self) -> int:
        """`max_docs` slots taken: a chunk joined to a kept run takes none."""
        return len(self.kept) - len(self.joined)

    def keep(
        self, index: int, cost: int, chosen: tuple[int, ...], added: int | None
    ) -> None:
        item = self.items[index]
        self.over_budget = self.over_budget or self.used + cost > self.max_tokens
        self.kept.append(index)
        if chosen:
            self.trimmed.append((index, chosen))
        else:
            self.whole[item.group] = (*self.whole.get(item.group, ()), index)
            if added is not None:
                self.joined.append((index, added))
        self.groups.add(item.group)
        self.capped.count(item)
        self.contents.add(item.content_key)
        self.used += cost

    def shorten(
        self,
        queue: _Queue,
        index: int,
        room: int,
        sentences_of: Callable[[int], Sentences],
        max_sentences: int | None,
        *,
        pair_slots: int,
        pays_header: bool,
    ) -> tuple[tuple[int, ...], int]:
        """The sentences of passage `index` that fit `room`, and their tokens.

        With two `pair_slots` left, no cap, and nothing of its document kept whole,
        its document's best unweighed passage is shortened with it; that one's
        share is planned and it is weighed next.
        """
        item, shape = self.items[index], sentences_of(index)
        if pays_header:
            shape = shape.paying_header()
        mate = None
        if pair_slots >= 2 and self.capped.none() and item.group not in self.whole:
            mate = queue.take_mate(index, self.contents, pair_slots)
        if mate is None:
            chosen = choose_sentences(shape, room, max_sentences)
        else:
            pair = _Pair(shape, sentences_of(mate), self.items[mate].tokens)
            chosen, rest = pair.split(choose_sentences(pair.shape(), room))
            if chosen:
                all_of_it = len(rest) == len(pair.second.relevance)
                plan = () if all_of_it else rest or None
                self.planned[mate] = (plan, pair.second_cost(rest))
        if chosen and pays_header and shape.retitled and shape.retitled(chosen):
            self.retitled[index] = shape.retitled(chosen)
        return chosen, shape.cost(chosen) if chosen else 0

    def result(self) -> PackResult:
        return PackResult(
            tuple(self.kept),
            tuple(self.dropped),
            self.used,
            self.over_budget,
            tuple(self.trimmed),
            tuple(self.joined),
            tuple(self.retitled.items()),
        )


@dataclass(frozen=True)
class _Pair:
    """Two passages of one document shortened as one (shared sentences offered once)."""

    first: Sentences
    second: Sentences
    second_tokens: int

    @cached_property
    def extra(self) -> tuple[int, ...]:
        shared = set(self.first.texts)
        return tuple(
            j
            for j in range(len(self.second.relevance))
            if not self.second.texts or self.second.texts[j] not in shared
        )

    def shape(self) -> Sentences:
        relevance = (
            *self.first.relevance,
            *(self.second.relevance[j] for j in self.extra),
        )
        one, two = self.first.estimate, self.second.estimate
        if one is None or two is None:
            return Sentences(relevance, self.cost)

        def estimate(chosen: tuple[int, ...]) -> int:
            first, second = self.split(chosen)
            return (one(first) if first else 0) + (two(second) if second else 0)

        return Sentences(relevance, self.cost, estimate=estimate)

    def split(self, chosen: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        n, extra = len(self.first.relevance), self.extra
        return (
            tuple(i for i in chosen if i < n),
            tuple(extra[i - n] for i in chosen if i >= n),
        )

    def cost(self, chosen: tuple[int, ...]) -> int:
        first, second = self.split(chosen)
        return (self.first.cost(first) if first else 0) + self.second_cost(second)

    def second_cost(self, chosen: tuple[int, ...]) -> int:
        """Tokens of `second` shortened to `chosen` (its own count if whole)."""
        if not chosen:
            return 0
        if len(chosen) == len(self.second.relevance):
            return self.second_tokens
        return self.second.cost(chosen)


def _early_drop(
    item: PackItem,
    contents: set[str],
    capped: _Caps,
    full: Callable[[], bool],
) -> DropReason | None:
    """Why `item` is dropped before it is weighed, or None."""
    if item.content_key in contents:
        return DropReason.DUPLICATE
    if over_cap := capped.reason(item):
        return over_cap
    if full():
        return DropReason.MAX_DOCS
    return None


CAP_REASONS = (DropReason.MAX_PER_SOURCE, DropReason.MAX_PER_RETRIEVER)


class _CapSettings(Protocol):
    @property
    def max_per_source(self) -> int | None: ...
    @property
    def max_per_retriever(self) -> int | None: ...


def cap_detail(reason: DropReason, settings: _CapSettings, item: PackItem) -> str:
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

    def none(self) -> bool:
        return self.per_source is None and self.per_retriever is None

    def count(self, item: PackItem) -> None:
        self.sources[item.group] = self.sources.get(item.group, 0) + 1
        if item.retriever is not None:
            self.retrievers[item.retriever] = self.retrievers.get(item.retriever, 0) + 1


ESTIMATE_SLACK = 8  # an estimate runs up to this many tokens over the exact count


def choose_sentences(
    shape: Sentences, budget: int, max_sentences: int | None = None
) -> tuple[int, ...]:
    """The most relevant sentences that fit `budget` together, in passage order.

    Greedy by relevance (ties to the earlier sentence): a sentence that would
    overflow is passed over and a shorter, less relevant one may still fit.
    Trials are weighed by `shape.estimate` when there is one, by the exact
    `cost` when the estimate is within `ESTIMATE_SLACK` of `budget`; the exact
    cost of the choice then decides, its least relevant sentences leaving until
    it fits, so the estimate never puts a block over `budget`.
    """
    if shape.least > budget:
        return ()
    weigh = shape.estimate or shape.cost
    count = len(shape.relevance)

    def fits(trial: tuple[int, ...]) -> bool:
        rough = weigh(trial)
        if rough <= budget:
            return True
        near = shape.estimate is not None and rough - ESTIMATE_SLACK <= budget
        return near and shape.cost(trial) <= budget

    if shape.estimate and not any(fits((i,)) for i in range(count)):
        return ()  # no sentence fits alone: the sentences are never scored
    order = sorted(range(count), key=lambda i: (-shape.relevance[i], i))
    chosen: tuple[int, ...] = ()
    for candidate in order:
        if max_sentences is not None and len(chosen) >= max_sentences:
            break
        trial = tuple(sorted([*chosen, candidate]))
        if fits(trial):
            chosen = trial
    while chosen and weigh is not shape.cost and shape.cost(chosen) > budget:
        weakest = max(chosen, key=order.index)
        chosen = tuple(i for i in chosen if i != weakest)
    return chosen


def omission_points(chosen: Sequence[int], total: int) -> list[int]:
    """Where markers go, as positions in `chosen`: after each gap, and at a cut end."""
    points = [
        position
        for position, sentence in enumerate(chosen)
        if sentence > (chosen[position - 1] + 1 if position else 0)
    ]
    if chosen and chosen[-1] < total - 1:
        points.append(len(chosen))
    return points


def header_costs(items: Sequence[PackItem], result: PackResult) -> list[int | None]:
    """Header tokens each passage paid (kept) or needed (dropped), as `pack` counts.

    The first kept passage of a document pays (plus `result.retitled`); later ones
    pay none; None for a passage never weighed.
    """
    kept_set: set[int] = set(result.kept)
    retitled = dict(result.retitled)
    paid: set[str] = set()
    out: list[int | None] = []
    for index, item in enumerate(items):
        tokens = item.counted_group_tokens
        if item.group in paid:
            tokens = 0
        elif tokens is not None:
            tokens += retitled.get(index, 0)
        out.append(tokens)
        if index in kept_set:
            paid.add(item.group)
    return out
