"""The fitted weak-evidence model, as the configuration holds it.

`ragbudget eval --weak-evidence-yaml` fits a logistic model on a labelled split and
writes it under `weak_evidence.combined` (`CombinedEvidence`): plain numbers,
checked like every setting, so the runtime needs neither pickle nor the library
that fitted it. The names of the features it may read live here too, so a model
that reads a feature nothing computes is refused when the file loads, not found
out at the first question; `evidence._signals` computes them.
`langchain_ragbudget.config._settings` re-exports `CombinedEvidence`.
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
"""Every feature `signal_features` can compute; the rerank ones only after a
rerank, `LIST_FEATURES` only when the candidates lead to their run ledger."""


TREE_MODEL_GONE = (
    "a boosted-tree weak-evidence model (kind: trees), which is no longer read; fit "
    "a logistic model with `ragbudget eval DATA --weak-fit train "
    "--weak-evidence-yaml FILE` and load that file instead"
)
"""What a file holding a tree model, as earlier versions wrote, is told."""


def check_features(names: Iterable[str]) -> None:
    """Refuse a feature name the package never computes (`FEATURES`).

    A model reading such a feature would find it missing on every question, so
    the check could never say anything; better refused when the file loads.

    Raises:
        ValueError: Naming the first unknown feature, the closest known one and
            every known one.
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
    """The models (and data) a weak-evidence calibration was made with.

    A threshold or a fitted model holds only on the scores it was calibrated on:
    another embedding model puts its cosines elsewhere, another reranker its
    probabilities. `ragbudget eval --weak-evidence-yaml` records them; a budget
    run with other models says the calibration is stale (`evidence.stale_note`).

    Attributes:
        embedding: The embedding model (`embedding.model`).
        rerank: The rerank model, or None when no reranker ran.
        index: The index or dataset it was measured on, for people.
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
    """A logistic model over the candidates' weak-evidence signals.

    `ragbudget eval --weak-evidence-yaml` fits it on a labelled split and writes
    it; the probability that the candidates hold the answer is
    `sigmoid(intercept + sum(coefficients[f] * feature f))`, the features as
    `evidence._signals.signal_features` computes them.

    Attributes:
        coefficients: Feature name to its weight (on the raw feature).
        intercept: The model's intercept.
        threshold: Evidence is weak when the probability is below it.
        fitted_on: What it was fitted on (dataset, split, questions), for people.
    """

    coefficients: dict[StrictStr, StrictFloat] = Field(min_length=1)
    intercept: StrictFloat
    threshold: StrictFloat = Field(ge=0, le=1)
    fitted_on: StrictStr = ""

    @model_validator(mode="before")
    @classmethod
    def _not_a_tree_model(cls, data: Any) -> Any:
        """Refuse the boosted-tree model earlier versions could write, saying why.

        Without this a file holding one would be refused key by key (`kind`,
        `trees`, a missing `coefficients`), none of which says what to do.
        """
        if isinstance(data, dict) and (data.get("kind") == "trees" or "trees" in data):
            raise ValueError(TREE_MODEL_GONE)
        return data

    @field_validator("coefficients")
    @classmethod
    def _known_features(cls, value: dict[str, float]) -> dict[str, float]:
        check_features(value)
        return value
