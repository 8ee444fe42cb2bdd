"""Boosted trees as plain data: the pure walk equals scikit-learn, the export
survives the YAML, and a model naming an unknown signal is refused.

scikit-learn fits real models here (synthetic data, so the test is fast); the
runtime side never imports it."""

import math
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError
from sklearn.ensemble import GradientBoostingClassifier

from langchain_ragbudget import ContextBudget
from langchain_ragbudget.config._settings import (
    RagBudgetConfig,
    TreeEvidence,
    WeakEvidenceSettings,
    load_config,
)
from langchain_ragbudget.evaluation import _weak_fit as weak_fit
from langchain_ragbudget.evaluation._report import weak_evidence_yaml
from langchain_ragbudget.evaluation._weak_evidence import WeakEvidence
from langchain_ragbudget.evaluation._weak_fit import (
    Cases,
    combined_scores,
    export_trees,
    fit_combined,
)
from langchain_ragbudget.evidence._signals import combined_probability
from langchain_ragbudget.evidence._trees import boosted_score, tree_value

NAMES = ["dense_top", "bm25_gap", "coverage"]


def hand_tree(split: float = 0.5, feature: str = "coverage") -> TreeEvidence:
    """dense_top <= split ? (feature <= 0.25 ? -2 : 1) : 3; then 2 for every case."""
    return TreeEvidence.model_validate(
        {
            "kind": "trees",
            "baseline": -0.25,
            "learning_rate": 0.5,
            "threshold": 0.5,
            "trees": [
                {
                    "nodes": [
                        {
                            "feature": "dense_top",
                            "threshold": split,
                            "left": 1,
                            "right": 4,
                        },
                        {"feature": feature, "threshold": 0.25, "left": 2, "right": 3},
                        {"value": -2.0},
                        {"value": 1.0},
                        {"value": 3.0},
                    ]
                },
                {"nodes": [{"value": 2.0}]},
            ],
        }
    )


def test_the_walk_by_hand() -> None:
    model = hand_tree()
    tree = model.trees[0]
    assert tree_value(tree, {"dense_top": 0.5, "coverage": 0.25}) == -2.0  # <= left
    assert tree_value(tree, {"dense_top": 0.4, "coverage": 0.3}) == 1.0
    assert tree_value(tree, {"dense_top": 0.6}) == 3.0  # coverage never read
    score = boosted_score(model, {"dense_top": 0.6, "coverage": 0.0})
    assert score == -0.25 + 0.5 * 3.0 + 0.5 * 2.0
    probability = combined_probability({"dense_top": 0.6, "coverage": 0.0}, model)
    assert probability == pytest.approx(1 / (1 + math.exp(-2.25)))
    assert model.features == ["dense_top", "coverage"]


def test_a_missing_feature_is_unknown_not_zero() -> None:
    model = hand_tree()
    assert boosted_score(model, {"dense_top": 0.6}) is None  # coverage: some paths
    assert combined_probability({"coverage": 1.0, "rerank_top": 1.0}, model) is None


def test_a_feature_is_compared_as_scikit_learn_compares_it() -> None:
    """A float64 just above a threshold that rounds to a float32 at or below it
    goes left, as in scikit-learn (which casts its input to float32)."""
    threshold = float(np.float32(0.1))  # 0.10000000149...
    above = threshold + 1e-12
    assert above > threshold and float(np.float32(above)) <= threshold
    tree = hand_tree(split=threshold).trees[0]
    assert tree_value(tree, {"dense_top": above, "coverage": 0.0}) == -2.0


def synthetic(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """An interaction no line separates, with ties and float64 noise near splits."""
    rng = np.random.default_rng(seed)
    rows = rng.normal(size=(n, len(NAMES)))
    rows[: n // 4, 0] = np.round(rows[: n // 4, 0], 1)  # many ties on a feature
    labels = (rows[:, 0] > 0) ^ (rows[:, 1] > 0.3)
    flip = rng.random(n) < 0.1
    return rows, labels ^ flip


def test_the_exported_trees_equal_scikit_learns_probabilities() -> None:
    rows, labels = synthetic(600, 0)
    booster = GradientBoostingClassifier(
        n_estimators=60, max_depth=3, learning_rate=0.1, random_state=0
    ).fit(rows, labels)
    model = export_trees(booster, NAMES, 0.5, "synthetic")
    test_rows, _ = synthetic(400, 1)
    # the split thresholds themselves and a hair either side, in float64
    thresholds = [n.threshold for t in model.trees for n in t.nodes if n.threshold]
    edges = np.array(
        [[t + d, t + d, t + d] for t in thresholds[:100] for d in (-1e-9, 0, 1e-9)]
    )
    inputs = np.vstack([test_rows, edges])
    expected = booster.predict_proba(inputs)[:, 1]
    features = [dict(zip(NAMES, map(float, row), strict=True)) for row in inputs]
    got = [combined_probability(f, model) for f in features]
    assert got == pytest.approx(expected, abs=1e-9, rel=0)
    raw = booster.decision_function(inputs)
    scores = [boosted_score(model, f) for f in features]
    assert scores == pytest.approx(raw, abs=1e-9, rel=0)
    assert len(model.trees) == 60 and all(len(t.nodes) <= 15 for t in model.trees)


def cases_of(rows: np.ndarray, labels: np.ndarray) -> Cases:
    features = [dict(zip(NAMES, map(float, row), strict=True)) for row in rows]
    n = len(features)
    return Cases(features, [None] * n, ["none"] * n, [bool(v) for v in labels])


def test_the_harness_keeps_the_kind_that_cross_validates_better(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    grid = {"n_estimators": [50], "max_depth": [2, 3], "learning_rate": [0.1]}
    monkeypatch.setattr(weak_fit, "TREE_GRID", grid)  # the choice, not the grid
    rows, labels = synthetic(400, 2)
    interaction = fit_combined(cases_of(rows, labels), NAMES, 0.8, "xor")
    assert interaction.model.kind == "trees"  # a line cannot fit an xor
    assert interaction.cv_auroc["trees"] > interaction.cv_auroc["logistic"] + 0.2
    assert "trees of depth" in interaction.model.fitted_on
    linear = rows[:, 0] + 0.3 * np.random.default_rng(3).normal(size=len(rows)) > 0
    additive = fit_combined(cases_of(rows, linear), NAMES, 0.8, "line")
    best = max(additive.cv_auroc, key=additive.cv_auroc.__getitem__)
    assert additive.model.kind == best
    assert additive.cv_auroc.keys() == {"logistic", "trees"}


def test_the_yaml_round_trip_keeps_every_number(tmp_path: Path) -> None:
    rows, labels = synthetic(300, 4)
    cases = cases_of(rows, labels)
    booster = GradientBoostingClassifier(
        n_estimators=300, max_depth=3, random_state=0
    ).fit(rows, labels)
    model = export_trees(booster, NAMES, 0.42, "synthetic")
    weak = WeakEvidence("train", 150, 150, 0.8, [], model, {"trees": 0.9}, ([], []))
    path = tmp_path / "weak.yml"
    path.write_text(weak_evidence_yaml(weak, ["chat", "search"]), encoding="utf-8")
    assert path.stat().st_size < 600_000  # the largest grid setting, two surfaces
    loaded = load_config(path).surface("search").weak_evidence.combined
    assert loaded == model
    assert combined_scores(cases, loaded) == combined_scores(cases, model)
    assert "- {feature: " in path.read_text()  # one node per line


def with_model(model: TreeEvidence) -> RagBudgetConfig:
    """The shipped configuration with `model` as the chat surface's check."""
    config = load_config()
    settings = WeakEvidenceSettings(method="combined", combined=model)
    chat = config.surfaces["chat"].model_copy(update={"weak_evidence": settings})
    return config.model_copy(update={"surfaces": {**config.surfaces, "chat": chat}})


@pytest.mark.needs_tiktoken
def test_a_tree_reading_an_unknown_signal_is_refused_by_its_key() -> None:
    with pytest.raises(ValidationError) as caught:  # refused where it is made
        hand_tree(feature="secret_sauce")
    assert caught.value.errors()[0]["loc"] == ("trees", 0, "nodes", 1, "feature")
    assert "unknown feature 'secret_sauce'" in str(caught.value)
    budget = ContextBudget.from_config(with_model(hand_tree()))  # known signals wire
    assert budget.settings.weak_evidence.combined == hand_tree()
