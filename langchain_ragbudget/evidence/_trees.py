"""Gradient-boosted trees evaluated from plain data, without the library that fit them.

The combined weak-evidence model may be a small ensemble of regression trees,
fitted by scikit-learn on the train split and written to the configuration as
numbers (`config.TreeEvidence`); the package promises no pickle, and the runtime
needs no scikit-learn. This walk reproduces scikit-learn's
`GradientBoostingClassifier.decision_function` exactly: a feature is compared as
a 32-bit float, as scikit-learn casts its input, and the trees are added in
their fitted order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from langchain_ragbudget.config._weak_model import Tree, TreeEvidence


def tree_value(tree: Tree, features: Mapping[str, float]) -> float:
    """The value of the leaf that `features` reach in `tree`.

    Args:
        tree: A validated tree (children after parents, so the walk ends).
        features: Feature name to value; every feature the path reads present.

    Returns:
        The leaf's value.
    """
    read = {node.split[0] for node in tree.nodes if node.split is not None}
    return _leaf_value(
        tree, _as_float32({k: features[k] for k in read & features.keys()})
    )


def _as_float32(features: Mapping[str, float]) -> dict[str, float]:
    """Each value rounded to float32, as scikit-learn's trees compare them."""
    import numpy as np  # here, not at the top: importing the budget stays light

    return {name: float(np.float32(value)) for name, value in features.items()}


def _leaf_value(tree: Tree, features: Mapping[str, float]) -> float:
    node = tree.nodes[0]
    while (split := node.split) is not None:
        feature, threshold, left, right = split
        node = tree.nodes[left if features[feature] <= threshold else right]
    return cast(float, node.value)  # a node without a split is a leaf


def boosted_score(model: TreeEvidence, features: Mapping[str, float]) -> float | None:
    """The ensemble's log-odds that the candidates hold the answer.

    `baseline + learning_rate * value` of each tree in turn.

    Returns:
        The log-odds, or None when a feature a split reads is missing (a model
        with rerank features, run without a reranker).
    """
    if any(name not in features for name in model.features):
        return None
    rounded = _as_float32({name: features[name] for name in model.features})
    score = model.baseline
    for tree in model.trees:
        score += model.learning_rate * _leaf_value(tree, rounded)
    return score
