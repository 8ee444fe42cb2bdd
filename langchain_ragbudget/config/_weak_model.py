"""The fitted weak-evidence model, as the configuration holds it.

`ragbudget eval --weak-evidence-yaml` fits a model on a labelled split and writes it
under `weak_evidence.combined`: a logistic model (`CombinedEvidence`) or gradient-
boosted regression trees (`TreeEvidence`). Both are plain numbers, checked like
every setting, so the runtime needs neither pickle nor the library that fitted them.
`langchain_ragbudget.config._settings` re-exports these names.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Annotated, Any, Literal, cast

from pydantic import (
    Discriminator,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    Tag,
    field_validator,
    model_validator,
)

from langchain_ragbudget.config._fields import StrictModel
from langchain_ragbudget.config._signal_names import FEATURES


def check_features(names: Iterable[str]) -> None:
    """Refuse a feature name the package never computes (`_signal_names.FEATURES`).

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
    `_weak_signal.signal_features` computes them.

    Attributes:
        kind: `logistic` (the default, so a model written without it loads).
        coefficients: Feature name to its weight (on the raw feature).
        intercept: The model's intercept.
        threshold: Evidence is weak when the probability is below it.
        fitted_on: What it was fitted on (dataset, split, questions), for people.
    """

    kind: Literal["logistic"] = "logistic"
    coefficients: dict[StrictStr, StrictFloat] = Field(min_length=1)
    intercept: StrictFloat
    threshold: StrictFloat = Field(ge=0, le=1)
    fitted_on: StrictStr = ""

    @field_validator("coefficients")
    @classmethod
    def _known_features(cls, value: dict[str, float]) -> dict[str, float]:
        check_features(value)
        return value


MAX_TREES = 500
MAX_TREE_NODES = 127  # a full binary tree of depth 6
# The YAML reader's bounds (`_yaml.MAX_YAML_NODES`, `MAX_CONFIG_BYTES`) bound a tree
# model first: 300 trees of depth 3 take about 26,000 YAML nodes and 280 KB, and
# more than 50,000 nodes are refused before these limits are reached.


class TreeNode(StrictModel):
    """One node of a regression tree: a split or a leaf.

    A split sends a case to `left` when its feature, as a 32-bit float (the
    precision the fitting library compares in), is at most `threshold`, else to
    `right`; a leaf adds `value`.

    Attributes:
        feature: The split's feature name.
        threshold: The split's threshold.
        left: Index of the node for values at most the threshold.
        right: Index of the node for values above it.
        value: The leaf's value (log-odds, before the learning rate).
    """

    feature: StrictStr | None = None
    threshold: StrictFloat | None = None
    left: StrictInt | None = None
    right: StrictInt | None = None
    value: StrictFloat | None = None

    @field_validator("feature")
    @classmethod
    def _known_feature(cls, value: str | None) -> str | None:
        check_features([] if value is None else [value])
        return value

    @model_validator(mode="after")
    def _split_or_leaf(self) -> TreeNode:
        given = [
            part is not None
            for part in (self.feature, self.threshold, self.left, self.right)
        ]
        leaf = self.value is not None and not any(given)
        if not leaf and not (self.value is None and all(given)):
            raise ValueError(
                "a node is either a leaf {value} or a split {feature, threshold, "
                "left, right}"
            )
        return self

    @property
    def split(self) -> tuple[str, float, int, int] | None:
        """`(feature, threshold, left, right)` of a split, None for a leaf."""
        if self.value is not None:
            return None
        return cast(
            tuple[str, float, int, int],
            (self.feature, self.threshold, self.left, self.right),
        )


class Tree(StrictModel):
    """A regression tree as a list of nodes, the root first.

    Every child comes after its parent and every node but the root is the child
    of exactly one split, so the nodes form one tree: evaluation cannot loop and
    no node is left over.

    Attributes:
        nodes: The nodes; a split's `left` and `right` index into this list.
    """

    nodes: list[TreeNode] = Field(min_length=1, max_length=MAX_TREE_NODES)

    @model_validator(mode="after")
    def _one_tree(self) -> Tree:
        reached: set[int] = set()
        for index, node in enumerate(self.nodes):
            split = node.split
            children = {} if split is None else {"left": split[2], "right": split[3]}
            for side, child in children.items():
                where = f"nodes.{index}.{side} = {child}"
                if not index < child < len(self.nodes):
                    raise ValueError(
                        f"{where}: a child must come after its parent and within "
                        f"the {len(self.nodes)} nodes (a child at or before its "
                        "parent could make a cycle)"
                    )
                if child in reached:
                    raise ValueError(f"{where}: node {child} has two parents")
                reached.add(child)
        orphans = sorted(set(range(1, len(self.nodes))) - reached)
        if orphans:
            raise ValueError(f"nodes {orphans} are the child of no split")
        return self


class TreeEvidence(StrictModel):
    """Gradient-boosted regression trees over the weak-evidence signals.

    Plain data, evaluated by `_trees.boosted_score` without the library that
    fitted them: the probability that the candidates hold the answer is
    `sigmoid(baseline + learning_rate * sum(tree values))`.

    Attributes:
        kind: `trees`.
        baseline: The log-odds before any tree (the fitting split's prior).
        learning_rate: The weight of each tree's value.
        trees: The trees, in the order they were fitted.
        threshold: Evidence is weak when the probability is below it.
        fitted_on: What it was fitted on (dataset, split, questions), for people.
    """

    kind: Literal["trees"]
    baseline: StrictFloat
    learning_rate: StrictFloat = Field(gt=0, le=1)
    trees: list[Tree] = Field(min_length=1, max_length=MAX_TREES)
    threshold: StrictFloat = Field(ge=0, le=1)
    fitted_on: StrictStr = ""

    @property
    def features(self) -> list[str]:
        """The features the splits read, each once, in order of first use."""
        return list(
            dict.fromkeys(
                node.feature
                for tree in self.trees
                for node in tree.nodes
                if node.feature is not None
            )
        )


_MODEL_TAGS = {"logistic": "logistic model", "trees": "tree model"}


def _model_tag(data: Any) -> str | None:
    """The union member for a model's `kind` (logistic when it has none).

    The tags differ from every field name, so an error's key path in the file
    is not confused by them (`_config_data.key_parts`).
    """
    kind = data.get("kind", "logistic") if isinstance(data, dict) else data.kind
    return _MODEL_TAGS.get(kind) if isinstance(kind, str) else None


CombinedModel = Annotated[
    Annotated[CombinedEvidence, Tag("logistic model")]
    | Annotated[TreeEvidence, Tag("tree model")],
    Discriminator(
        _model_tag,
        custom_error_type="unknown_kind",
        custom_error_message="kind must be logistic (the default) or trees",
    ),
]
"""A fitted combined model: logistic, or boosted trees."""
