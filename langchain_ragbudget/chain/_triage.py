"""Which drops likely cost evidence: the pure sorting behind the one-line warning.

Fusion's `k`, rerank's `top_n` and the budget's `max_docs` cut on every call; a
warning that fires on every answer teaches users to ignore it. Only drops after
fusion's cut are weighed (the callers pass no other), and one is named when:

- it **out-ranked a passage kept on its own rank** in the list its stage decided
  on. A passage kept beside a better-ranked one of its source document (the
  budget packs a document's passages together) or added as a neighbour chunk
  was kept for its document, not its rank: a drop above it is ordinary packing;
- it **scored close to the top, just past the cut**: on the surface's evidence
  score it is within `CLOSE_SHARE` of the list's own spread (best kept score minus
  the median candidate's) under the best kept score, or above it, and among the
  first `NEAR_CUT` candidates its stage dropped.

"Close" is relative to the spread because cosines are bunched on one question and
spread on another; the rank test keeps a high dense score that fusion ranked far
below the cut (retrievers disagreeing, typical of an unanswerable question) from
reading as a loss. All three measured in BENCHMARKS.md, Warnings. Every other drop is
counted, not named; duplicates never are (their text is in the prompt).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from langchain_core.documents import Document

from langchain_ragbudget.ledger._metadata_keys import (
    FUSED_RANK,
    NEIGHBOUR_OF,
    RERANK_RANK,
)
from langchain_ragbudget.ledger._records import DropReason, DropRecord, Stage
from langchain_ragbudget.ledger._validation import finite_score

CLOSE_SHARE = 0.10
NEAR_CUT = 2  # a stage's first drops (by its rank) that can be named for their score
Closeness = Callable[[float, float, Sequence[float]], bool]  # (score, top, scores)


def close_to_top(
    score: float, top: float, scores: Sequence[float], share: float = CLOSE_SHARE
) -> bool:
    """Whether `score` is within `share` of the spread under `top`, or above.

    The spread is `top` minus the median of `scores`, so "close" means the same
    on a bunched list and a spread one.
    """
    spread = max(top - statistics.median(scores), 0.0) if scores else 0.0
    return score >= top - share * spread


# The rank key of the list each stage decided on; the budget's is its input order.
_STAGE_RANK = {
    Stage.FUSION: FUSED_RANK,
    Stage.RERANK: RERANK_RANK,
}


@dataclass(frozen=True)
class LikelyLost:
    """A drop that likely cost evidence, and why.

    Attributes:
        outranked: The worst rank a kept passage had in the list this drop was
            decided in (the drop stood above it), or None.
        score: Its evidence score when close to the top, or None.
    """

    record: DropRecord
    outranked: int | None = None
    score: float | None = None


def likely_lost(
    kept: Sequence[Document],
    kept_ids: Sequence[str],
    drops: Sequence[DropRecord],
    score_key: str | None = None,
    top: float | None = None,
    close: Closeness = close_to_top,
    near_cut: int | None = NEAR_CUT,
    groups: Mapping[str, str] | None = None,
) -> list[LikelyLost]:
    """The drops that out-ranked a kept passage or scored close to the top.

    `score_key` None skips the score test; `top` is the best kept score on it;
    `near_cut` None names a close drop at any rank; `groups` maps a kept key to
    its source document (None: every passage its own). Those that out-ranked a
    kept passage come first (pipeline and rank order), then the close ones (best
    first).
    """
    lowest = _lowest_kept_ranks(kept, kept_ids, drops, groups or {})
    everyone = [*kept, *(record.document for record in drops)]
    scores = [s for doc in everyone if (s := _score(doc, score_key)) is not None]
    first_cut = _first_cuts(drops)
    outranking: list[LikelyLost] = []
    near: list[LikelyLost] = []
    for record in drops:
        if record.reason == DropReason.DUPLICATE:
            continue
        above = lowest.get(record.stage)
        if above is not None and 0 < record.rank < above:
            outranking.append(LikelyLost(record, outranked=above))
            continue
        first = first_cut.get(record.stage, record.rank)
        at_cut = near_cut is None or record.rank < first + near_cut
        score = _score(record.document, score_key)
        if (
            at_cut
            and score is not None
            and top is not None
            and close(score, top, scores)
        ):
            near.append(LikelyLost(record, score=score))
    order = list(Stage)
    outranking.sort(key=lambda lost: (order.index(lost.record.stage), lost.record.rank))
    near.sort(key=lambda lost: -(lost.score or 0.0))
    return outranking + near


def _first_cuts(drops: Sequence[DropRecord]) -> dict[Stage, int]:
    """Per stage, where it cut: the best rank among its drops (duplicates aside)."""
    first: dict[Stage, int] = {}
    for record in drops:
        if record.reason != DropReason.DUPLICATE and record.rank > 0:
            first[record.stage] = min(first.get(record.stage, record.rank), record.rank)
    return first


def _lowest_kept_ranks(
    kept: Sequence[Document],
    kept_ids: Sequence[str],
    drops: Sequence[DropRecord],
    groups: Mapping[str, str],
) -> dict[Stage, int]:
    """Per stage, the worst rank a passage kept on its own rank had in its list.

    At the budget, a passage behind a better-ranked kept one of its document was
    kept with that document; a neighbour chunk everywhere was added, not ranked.
    """
    own = [doc for doc in kept if NEIGHBOUR_OF not in doc.metadata]
    lowest: dict[Stage, int] = {}
    for stage, rank_key in _STAGE_RANK.items():
        ranks = [doc.metadata.get(rank_key) for doc in own]
        if known := [r for r in ranks if type(r) is int]:
            lowest[stage] = max(known)
    retrieved = {str(doc.id) for doc in own}
    seen: set[str] = set()
    for key, rank in sorted(
        _budget_ranks(kept, kept_ids, drops, groups).items(), key=_rank
    ):
        group = groups.get(key, key)
        if key in retrieved and group not in seen:
            lowest[Stage.BUDGET] = rank
        seen.add(group)
    return lowest


def _rank(item: tuple[str, int]) -> int:
    return item[1]


def _budget_ranks(
    kept: Sequence[Document],
    kept_ids: Sequence[str],
    drops: Sequence[DropRecord],
    groups: Mapping[str, str],
) -> dict[str, int]:
    """Each kept passage's rank in the budget's input.

    The input is exactly the kept passages and the budget's own drops, so the kept
    ones fill the positions the drop records leave free. `kept_ids` is the order
    the budget weighed them: the input order unless it packed several passages of
    one document together; then the order of the last rank they carry (rerank's,
    else fusion's), when every one carries it.
    """
    taken = {r.rank for r in drops if r.stage == Stage.BUDGET}
    free = [n for n in range(1, len(kept_ids) + len(taken) + 1) if n not in taken]
    order = list(kept_ids)
    if len({groups.get(key, key) for key in order}) < len(order):
        for rank_key in (RERANK_RANK, FUSED_RANK):
            ranks = {str(doc.id): doc.metadata.get(rank_key) for doc in kept}
            known = {key: r for key, r in ranks.items() if type(r) is int}
            if set(known) == set(order):
                order.sort(key=known.__getitem__)
                break
    return dict(zip(order, free, strict=False))


def _score(document: Document, key: str | None) -> float | None:
    return None if key is None else finite_score(document.metadata.get(key))
