"""The names of the weak-evidence features, apart from the code computing them.

`_weak_signal` computes them; `weak_model` checks a fitted model against them when a
configuration loads, so a model that reads a feature nothing computes is refused
there, not found out at the first question. Kept here, importing nothing heavy,
because `_weak_signal` itself imports `weak_model`.
"""

from __future__ import annotations

from langchain_ragbudget.ledger._metadata_keys import DENSE, SPARSE

LIST_STATISTICS = (
    "list_z",
    "top_minus_mean",
    "top_minus_median",
    "gap_10th",
    "gap_50th",
)

LIST_FEATURES = tuple(
    f"{name}_{statistic}" for name in (SPARSE, DENSE) for statistic in LIST_STATISTICS
)
"""The features over each retriever's whole fetched list (`list_statistics`)."""

FEATURES = (
    "fused_top",
    "bm25_top",
    "bm25_gap",
    "bm25_per_term",
    "dense_top",
    "dense_gap",
    "dense_margin",
    "overlap",
    "rank_correlation",
    "coverage",
    "weighted_coverage",
    "sentence_coverage",
    "number_coverage",
    *LIST_FEATURES,
    "rerank_top",
    "rerank_gap",
)
"""Every feature `signal_features` can compute; the rerank ones only after a
rerank, `LIST_FEATURES` only when the candidates lead to their run ledger."""
