"""The fitted weak-evidence model, as the configuration holds it.

Plain numbers checked like every setting, so the runtime needs neither pickle nor
the library that fitted it. The feature names live here so that a model reading
a feature nothing computes is refused when the file loads.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from pydantic import Field, StrictFloat, StrictStr, field_validator, model_validator

from langchain_ragbudget.config._fields import StrictModel
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
"""Every feature `signal_features` computes (rerank ones only after a rerank)."""


TREE_MODEL_GONE = (
    "a boosted-tree weak-evidence model (kind: trees), which is no longer read; fit "
    "a logistic model with `ragbudget eval DATA --weak-fit train "
    "--weak-evidence-yaml FILE` and load that file instead"
)


def check_features(names: Iterable[str]) -> None:
    """Refuse a feature name the package never computes: it would never fire.

    Raises:
        ValueError: Naming the first unknown feature and every known one.
    """
    for name in names:
        if name not in FEATURES:
            close = difflib.get_close_matches(name, FEATURES, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(
                f"unknown feature {name!r}{hint} (the package computes: "
                f"{', '.join(FEATURES)})"
            )


class CalibratedWith(StrictModel):
    """The models a weak-evidence calibration was made with.

    A calibration holds only for the scores of those models; a budget run with
    others says it is stale.

    Attributes:
        embedding: The embedding model (`embedding.model`).
        rerank: The rerank model, or None when no reranker ran.
        index: The index or dataset it was calibrated on, for people.
    """

    embedding: StrictStr | None = None
    rerank: StrictStr | None = None
    index: StrictStr | None = None

    def differences(self, in_use: CalibratedWith) -> list[str]:
        """`embedding A, in use B` for each model that differs from `in_use`."""
        return [
            f"{name} {mine or 'none'}, in use {theirs or 'none'}"
            for name in ("embedding", "rerank")
            if (mine := getattr(self, name)) != (theirs := getattr(in_use, name))
        ]


class CombinedEvidence(StrictModel):
    """A logistic model over the weak-evidence signals, as `ragbudget eval` fits it.

    The probability that the candidates hold the answer is
    `sigmoid(intercept + sum(coefficients[f] * feature f))`.

    Attributes:
        coefficients: Feature name to its weight (on the raw feature).
        intercept: The model's intercept.
        threshold: Evidence is weak when the probability is below it.
        fitted_on: What it was fitted on, for people.
    """

    coefficients: dict[StrictStr, StrictFloat] = Field(min_length=1)
    intercept: StrictFloat
    threshold: StrictFloat = Field(ge=0, le=1)
    fitted_on: StrictStr = ""

    @model_validator(mode="before")
    @classmethod
    def _not_a_tree_model(cls, data: Any) -> Any:
        """Refuse a boosted-tree model with what to do, not key by key."""
        if isinstance(data, dict) and (data.get("kind") == "trees" or "trees" in data):
            raise ValueError(TREE_MODEL_GONE)
        return data

    @field_validator("coefficients")
    @classmethod
    def _known_features(cls, value: dict[str, float]) -> dict[str, float]:
        check_features(value)
        return value
