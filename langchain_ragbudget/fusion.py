"""Weighted reciprocal rank fusion over ranked lists of document keys.

Cormack, Clarke and Buettcher, "Reciprocal Rank Fusion outperforms Condorcet and
individual Rank Learning Methods", SIGIR 2009, with one weight per list:

    score(d) = sum_i  w_i / (c + rank_i(d)),   ranks counted from 1.

Pure functions over plain keys; the retriever that calls them is a thin shell.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple


class Fused(NamedTuple):
    """One fused document: its key, fused score and rank in each input list.

    A NamedTuple, not a frozen dataclass: fusion makes a few hundred per query and
    a tuple is built in half the time (160 vs 350 ns here).
    """

    key: str
    score: float
    ranks: tuple[int | None, ...]


def validate_weights(weights: Sequence[float], n_lists: int) -> None:
    """Raise ValueError unless there is one finite, non-negative weight per list.

    NaN would compare false with everything and silently switch a list off.
    """
    if len(weights) != n_lists:
        raise ValueError(
            f"weights has {len(weights)} entries for {n_lists} retrievers; "
            "give one weight per retriever"
        )
    if not all(
        isinstance(w, int | float) and not isinstance(w, bool) and math.isfinite(w)
        for w in weights
    ):
        raise ValueError(f"weights must be finite numbers, got {list(weights)}")
    negative = [w for w in weights if w < 0]
    if negative:
        raise ValueError(f"weights must be non-negative, got {list(weights)}")
    if not any(w > 0 for w in weights):
        raise ValueError(f"weights are all zero: {list(weights)}")


def first_ranks(keys: Sequence[str]) -> dict[str, int]:
    """Rank (from 1) of each distinct key; a repeat neither counts nor takes a place."""
    ranks: dict[str, int] = {}
    for key in keys:
        ranks.setdefault(key, len(ranks) + 1)
    return ranks


def weighted_rrf(
    rankings: Sequence[Sequence[str]], weights: Sequence[float], c: float = 60.0
) -> list[Fused]:
    """Fuse ranked key lists, best first; ties keep first-seen order.

    A key repeated inside one list is scored at its first (best) rank only, so a
    retriever that returns a document twice does not inflate its score.

    Args:
        rankings: One ranked list of document keys per retriever, best first.
        weights: One finite, non-negative weight per list, not all zero.
        c: The RRF constant; larger values flatten the advantage of top ranks.

    Returns:
        Every key once, as `Fused(key, score, ranks)`, best first; `ranks` holds
        the key's rank in each input list (None where it is absent).

    Raises:
        ValueError: The weights do not match the lists or are not valid.
    """
    validate_weights(weights, len(rankings))
    if not (isinstance(c, int | float) and math.isfinite(c) and c >= 0):
        raise ValueError(f"c must be a finite number >= 0, got {c!r}")
    per_list = [first_ranks(keys) for keys in rankings]
    scores: dict[str, float] = {}  # insertion order is first-seen order
    for weight, ranks in zip(weights, per_list, strict=True):
        for key, rank in ranks.items():
            scores[key] = scores.get(key, 0.0) + weight / (c + rank)
    order = sorted(scores, key=scores.__getitem__, reverse=True)  # stable
    return [
        Fused(key, scores[key], tuple(ranks.get(key) for ranks in per_list))
        for key in order
    ]
