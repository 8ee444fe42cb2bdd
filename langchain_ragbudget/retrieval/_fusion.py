"""Fusion of ranked lists of document keys: by rank (RRF) or by normalised score.

`rrf`: weighted reciprocal rank fusion, Cormack, Clarke and Buettcher,
"Reciprocal Rank Fusion outperforms Condorcet and individual Rank Learning Methods",
SIGIR 2009, with one weight per list:

    score(d) = sum_i  w_i / (c + rank_i(d)),   ranks counted from 1.

`minmax` and `dbsf`: each list's scores are normalised per query, then combined
convexly (weights scaled to sum to 1), as Qdrant's score fusion does:

    score(d) = sum_i  w_i * n_i(d) / sum_i w_i

    minmax: n_i(d) = (s - min_i) / (max_i - min_i)                  (in [0, 1])
    dbsf:   n_i(d) = max(0, (s - (mean_i - 3 std_i)) / (6 std_i))   (sample std)

DBSF is Mazzeschi's distribution-based score fusion (2023) as Qdrant implements it,
except that a score more than three deviations below the mean is floored at 0, so a
retrieved candidate never scores below one its list did not return (one above keeps
its value over 1: the list's strongest signal). All-equal or single scores get 0.5
each, as in Qdrant. A candidate a list did not return, or returned without a finite
score, gets 0 from it; statistics use each distinct key's first score, so a repeat
counts once, as in RRF.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, get_args

from langchain_ragbudget.config._settings import FusionMethod
from langchain_ragbudget.ledger._validation import finite_score

FUSION_METHODS: tuple[FusionMethod, ...] = get_args(FusionMethod)
SCORE_METHODS: tuple[FusionMethod, ...] = ("minmax", "dbsf")


class Fused(NamedTuple):
    """One fused key: fused score, rank in each list, and per list `normalised` score.

    `normalised` is empty for RRF, None where the key had no finite score. A
    NamedTuple, not a dataclass: fusion makes hundreds per query, and a tuple is
    built in half the time.
    """

    key: str
    score: float
    ranks: tuple[int | None, ...]
    normalised: tuple[float | None, ...] = ()  # score methods: n_i(d) per list


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
    distinct = dict.fromkeys(keys)  # first occurrences, in order
    return dict(zip(distinct, range(1, len(distinct) + 1), strict=True))


def check_rrf_c(c: Any) -> None:
    """Raise ValueError unless `c` is a finite number above 0 (not a bool).

    At infinity every score is 0 and the order falls back to first seen; a
    negative one can divide by zero at rank `-c`.
    """
    if not (
        isinstance(c, int | float)
        and not isinstance(c, bool)
        and math.isfinite(c)
        and c > 0
    ):
        raise ValueError(f"c must be a finite number > 0, got {c!r}")


def weighted_rrf(
    rankings: Sequence[Sequence[str]], weights: Sequence[float], c: float = 60.0
) -> list[Fused]:
    """Fuse ranked key lists, best first; ties keep first-seen order.

    A key repeated inside one list is scored at its first (best) rank only, so a
    retriever that returns a document twice does not inflate its score.

    Args:
        rankings: One ranked list of document keys per retriever, best first.
        weights: One finite, non-negative weight per list, not all zero.
        c: The RRF constant, finite and above 0; larger values flatten the
            advantage of top ranks.

    Returns:
        Every key once, as `Fused(key, score, ranks)`, best first; `ranks` holds
        the key's rank in each input list (None where it is absent).

    Raises:
        ValueError: The weights do not match the lists or are not valid.
    """
    validate_weights(weights, len(rankings))
    check_rrf_c(c)
    per_list = [first_ranks(keys) for keys in rankings]
    scores: dict[str, float] = {}  # insertion order is first-seen order
    for weight, ranks in zip(weights, per_list, strict=True):
        for key, rank in ranks.items():
            scores[key] = scores.get(key, 0.0) + weight / (c + rank)
    order = sorted(scores, key=scores.__getitem__, reverse=True)  # stable
    # Column by column: `map` runs in C, a generator per key does not (a hot path).
    columns = [map(ranks.get, order) for ranks in per_list]
    return list(
        map(Fused, order, map(scores.__getitem__, order), zip(*columns, strict=True))
    )


def _tamed(scores: Sequence[float]) -> Sequence[float]:
    """Scores scaled so differences and squares cannot overflow.

    Both normalisations are invariant under a positive scale: only rounding
    changes, and only for magnitudes no real retriever writes.
    """
    largest = max((abs(s) for s in scores), default=0.0)
    return [s / largest for s in scores] if largest > _HUGE else scores


_HUGE = 1e100


def minmax_normalise(scores: Sequence[float]) -> list[float]:
    """Min-max: the lowest finite score maps to 0, the highest to 1; all equal: 0.5."""
    if not scores:
        return []
    values = _tamed(scores)
    low, high = min(values), max(values)
    if high == low:
        return [0.5] * len(values)
    span = high - low
    return [(s - low) / span for s in values]


def dbsf_normalise(scores: Sequence[float]) -> list[float]:
    """Distribution-based: mean - 3 std maps to 0, mean + 3 std to 1 (sample std).

    Floored at 0, not capped at 1. Fewer than two scores, or all equal: 0.5 each.
    """
    if len(scores) < 2:
        return [0.5] * len(scores)
    values = _tamed(scores)
    mean = math.fsum(values) / len(values)
    std = math.sqrt(math.fsum((s - mean) ** 2 for s in values) / (len(values) - 1))
    if std == 0:
        return [0.5] * len(values)
    low = mean - 3 * std
    return [max(0.0, (s - low) / (6 * std)) for s in values]


Normaliser = Callable[[Sequence[float]], list[float]]
NORMALISERS: dict[FusionMethod, Normaliser] = {
    "minmax": minmax_normalise,
    "dbsf": dbsf_normalise,
}


def score_fusion(
    rankings: Sequence[Sequence[str]],
    scores: Sequence[Sequence[float | None]],
    weights: Sequence[float],
    normalise: Normaliser,
) -> list[Fused]:
    """Fuse ranked key lists by normalised score, best first; ties keep first order.

    `scores` is aligned with `rankings` (None: no score). A key without a finite
    score in a list gets 0 from it; its rank there is still recorded.

    Raises:
        ValueError: The weights are not valid, or a score list does not match
            its ranking.
    """
    validate_weights(weights, len(rankings))
    if len(scores) != len(rankings) or any(
        len(keys) != len(values) for keys, values in zip(rankings, scores, strict=False)
    ):
        raise ValueError("scores must give one score per key of each ranking")
    total = math.fsum(weights)
    per_list = [first_ranks(keys) for keys in rankings]
    normalised: list[dict[str, float]] = []
    for keys, values in zip(rankings, scores, strict=True):
        first: dict[str, float | None] = {}
        for key, value in zip(keys, values, strict=True):
            first.setdefault(key, finite_score(value))
        usable = {key: value for key, value in first.items() if value is not None}
        normalised.append(
            dict(zip(usable, normalise(list(usable.values())), strict=True))
        )
    fused: dict[str, float] = {}  # insertion order is first-seen order
    for ranks in per_list:
        for key in ranks:
            fused.setdefault(key, 0.0)
    for weight, by_key in zip(weights, normalised, strict=True):
        share = weight / total
        for key, value in by_key.items():
            fused[key] += share * value
    order = sorted(fused, key=fused.__getitem__, reverse=True)  # stable
    return [
        Fused(
            key,
            fused[key],
            tuple(ranks.get(key) for ranks in per_list),
            tuple(by_key.get(key) for by_key in normalised),
        )
        for key in order
    ]


def fuse(
    method: FusionMethod,
    rankings: Sequence[Sequence[str]],
    weights: Sequence[float],
    *,
    scores: Sequence[Sequence[float | None]] | None = None,
    c: float = 60.0,
) -> list[Fused]:
    """Fuse with the named method: `rrf` by rank, `minmax` or `dbsf` by `scores`.

    Raises:
        ValueError: An unknown method, a score method without scores, or invalid
            weights or `c`.
    """
    check_rrf_c(c)  # even for a score method: a bad constant is a bug either way
    if method == "rrf":
        return weighted_rrf(rankings, weights, c)
    normalise = NORMALISERS.get(method)
    if normalise is None:
        known = ", ".join(FUSION_METHODS)
        raise ValueError(f"unknown fusion method {method!r}; known: {known}")
    if scores is None:
        raise ValueError(f"fusion method {method!r} needs the lists' scores")
    return score_fusion(rankings, scores, weights, normalise)
