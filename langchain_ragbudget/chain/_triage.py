"""Which drops likely cost evidence: the pure sorting behind the one-line warning.

A pipeline narrows its candidates on every call: fusion cuts at `k`, rerank at
`top_n`, the budget at `max_docs`. Those cuts are the configuration doing what it
says, and a warning that fires on every answer teaches users to ignore it. A drop
is worth naming when it suggests the model lost evidence:

- it **out-ranked a kept passage**: in the list the dropping stage decided on
  (fused, reranked, or the budget's input), it stood above some passage that
  reached the prompt; or
- it **scored close to the top, just past the cut**: on the score the surface
  judges evidence by (the first key of its `weak_evidence` thresholds the kept
  passages carry, e.g. `rerank_score`, then `dense_score`), it is within
  `CLOSE_SHARE` of the list's own spread (the best kept score minus the median of
  every candidate's score) under the best kept passage's score, or above it; and
  it is among the first `NEAR_CUT` candidates its stage dropped.

A fixed distance is no measure of "close": MiniLM's cosines are bunched within a
few hundredths on one question and spread over half the scale on another, so the
former 0.05 named a passage on two thirds of SciFact's unanswerable questions. The
rank test keeps a high dense score that fusion ranked far below the cut (the two
retrievers disagreeing, typical of a question the corpus cannot answer) from
reading as a loss. Both were chosen by `benchmarks/bench_warnings.py`
(BENCHMARKS.md, "Warnings worth reading").

Every other drop ranked below every kept passage and scored clearly under the top:
it is counted, not named. Duplicates are never named, their text is in the prompt.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from langchain_core.documents import Document

from langchain_ragbudget.ledger._metadata_keys import FUSED_RANK, RERANK_RANK
from langchain_ragbudget.ledger._records import DropReason, DropRecord, Stage
from langchain_ragbudget.ledger._validation import finite_score

# Share of the list's spread (best kept score minus the median candidate's) under
# the best kept score that still counts as close; chosen on SciFact's gold-removed
# questions and the sample corpus by benchmarks/bench_warnings.py.
CLOSE_SHARE = 0.10
# How many of a stage's first drops (by the rank it decided on) can be named for
# their score alone.
NEAR_CUT = 2

Closeness = Callable[[float, float, Sequence[float]], bool]
"""`(score, best kept score, every candidate's score) -> close to the top?`"""


def close_to_top(
    score: float, top: float, scores: Sequence[float], share: float = CLOSE_SHARE
) -> bool:
    """Whether `score` is within `share` of the list's spread under `top`, or above.

    The spread is `top` minus the median of `scores` (the list's own scores on the
    evidence key), so "close" means the same on a bunched list and a spread one.
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
        record: The drop record.
        outranked: The worst rank a kept passage had in the list this drop was
            decided in (the drop stood above it), or None.
        score: Its score on the evidence scale when close to the top, or None.
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
) -> list[LikelyLost]:
    """The drops that out-ranked a kept passage or scored close to the top.

    Args:
        kept: The kept passages (any order), with the ranks stages wrote.
        kept_ids: Their keys (`BudgetReport.kept_ids`), for how many they are.
        drops: Every drop record of the run.
        score_key: The evidence score's metadata key; None skips the score test.
        top: The best kept passage's score on that key.
        close: What counts as close to `top` (`close_to_top`, or a benchmark's
            alternative).
        near_cut: A drop named for its score must be among its stage's first
            `near_cut` drops; None: any.

    Returns:
        Those drops, those that out-ranked a kept passage first (in pipeline and
        rank order), then those only close to the top (best score first).
    """
    lowest = _lowest_kept_ranks(kept, kept_ids, drops)
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
    """Per stage, the best rank among its drops (duplicates aside): where it cut."""
    first: dict[Stage, int] = {}
    for record in drops:
        if record.reason != DropReason.DUPLICATE and record.rank > 0:
            first[record.stage] = min(first.get(record.stage, record.rank), record.rank)
    return first


def _lowest_kept_ranks(
    kept: Sequence[Document], kept_ids: Sequence[str], drops: Sequence[DropRecord]
) -> dict[Stage, int]:
    """Per stage, the worst rank a kept passage had in the list that stage ranked.

    The budget's input holds exactly the kept passages and the budget's own drops,
    so the kept ones fill the positions the budget's drop records leave free.
    """
    lowest: dict[Stage, int] = {}
    for stage, rank_key in _STAGE_RANK.items():
        ranks = [doc.metadata.get(rank_key) for doc in kept]
        if known := [r for r in ranks if type(r) is int]:
            lowest[stage] = max(known)
    taken = {r.rank for r in drops if r.stage == Stage.BUDGET}
    free = [n for n in range(1, len(kept_ids) + len(taken) + 1) if n not in taken]
    if free:
        lowest[Stage.BUDGET] = free[-1]
    return lowest


def _score(document: Document, key: str | None) -> float | None:
    return None if key is None else finite_score(document.metadata.get(key))
