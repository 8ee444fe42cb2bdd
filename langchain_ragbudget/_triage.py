"""Which drops likely cost evidence: the pure sorting behind the one-line warning.

A pipeline narrows its candidates on every call: fusion cuts at `k`, rerank at
`top_n`, the budget at `max_docs`. Those cuts are the configuration doing what it
says, and a warning that fires on every answer teaches users to ignore it. A drop
is worth naming when it suggests the model lost evidence:

- it **out-ranked a kept passage**: in the list the dropping stage decided on
  (fused, reranked, or the budget's input), it stood above some passage that
  reached the prompt; or
- it **scored close to the top**: on the score the surface judges evidence by (the
  first key of its `weak_evidence` thresholds the kept passages carry, e.g.
  `rerank_score`, then `dense_score`), it is within `CLOSE_TO_TOP` of the best kept
  passage's score, or above it.

Every other drop ranked below every kept passage and scored clearly under the top:
it is counted, not named. Duplicates are never named, their text is in the prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.documents import Document

from langchain_ragbudget._metadata_keys import FUSED_RANK, RERANK_RANK
from langchain_ragbudget._validation import finite_score
from langchain_ragbudget.ledger import DropReason, DropRecord, Stage

# Absolute distance on the evidence score's own scale. Both scales it is used on are
# bounded and comparable across queries: FlashRank's cross-encoder score is a
# probability in [0, 1] and the dense score a cosine similarity, so 0.05 is five
# points of relevance: the passage was judged about as relevant as the best one.
CLOSE_TO_TOP = 0.05

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
    margin: float = CLOSE_TO_TOP,
) -> list[LikelyLost]:
    """The drops that out-ranked a kept passage or scored close to the top.

    Args:
        kept: The kept passages (any order), with the ranks stages wrote.
        kept_ids: Their keys (`BudgetReport.kept_ids`), for how many they are.
        drops: Every drop record of the run.
        score_key: The evidence score's metadata key; None skips the score test.
        top: The best kept passage's score on that key.
        margin: How far under `top` still counts as close.

    Returns:
        Those drops, those that out-ranked a kept passage first (in pipeline and
        rank order), then those only close to the top (best score first).
    """
    lowest = _lowest_kept_ranks(kept, kept_ids, drops)
    outranking: list[LikelyLost] = []
    close: list[LikelyLost] = []
    for record in drops:
        if record.reason == DropReason.DUPLICATE:
            continue
        above = lowest.get(record.stage)
        if above is not None and 0 < record.rank < above:
            outranking.append(LikelyLost(record, outranked=above))
            continue
        score = _score(record.document, score_key)
        if score is not None and top is not None and score >= top - margin:
            close.append(LikelyLost(record, score=score))
    order = list(Stage)
    outranking.sort(key=lambda lost: (order.index(lost.record.stage), lost.record.rank))
    close.sort(key=lambda lost: -(lost.score or 0.0))
    return outranking + close


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
