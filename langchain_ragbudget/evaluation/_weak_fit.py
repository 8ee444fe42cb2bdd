"""Fitting and measuring the weak-evidence signal on labelled questions.

Each question is a pair of cases: its candidates as retrieved (answerable) and its
candidates with its judged-relevant documents removed (a corpus that lacks the
answer). A signal is good when it tells the two apart: its AUROC over the cases,
answerable positive. The combined signal is scikit-learn's logistic regression or
its gradient-boosted trees over `weak_signal` features, whichever cross-validates
better on one split's cases; the trees are exported as plain numbers, since the
package writes no pickle and its runtime needs no scikit-learn. The threshold is
chosen on that split's cross-validated probabilities for a stated precision of the
weak flag, so the split it is measured on never shapes it. The single-threshold
baseline gets its threshold the same way, so both are compared at the same
precision target.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_ragbudget.config._settings import (
    CombinedEvidence,
    Tree,
    TreeEvidence,
    TreeNode,
)
from langchain_ragbudget.errors import require
from langchain_ragbudget.evidence._signals import (
    FEATURES,
    combined_probability,
    feature_rows,
)


@dataclass(frozen=True)
class Cases:
    """The 2N cases of one split: features, the baseline's score, the label.

    Attributes:
        features: One feature mapping per case (`_weak_signal.signal_features`).
        top_scores: The single-threshold method's score per case (its first
            configured score key present), None where no key was present.
        top_keys: The score key that gave each case's top score.
        answerable: True for a question as retrieved, False with its
            judged-relevant documents removed.
    """

    features: list[dict[str, float]]
    top_scores: list[float | None]
    top_keys: list[str]
    answerable: list[bool]


@dataclass(frozen=True)
class FlagQuality:
    """How one method's weak flag did on the measured split.

    Attributes:
        method: `threshold (<score key>)` or `combined`.
        auroc: AUROC of the method's score, answerable positive.
        threshold: The threshold chosen on the fitting split.
        precision: Share of flagged cases that were unanswerable.
        recall: Share of unanswerable cases that were flagged.
        train_precision: The precision reached on the fitting split (for the
            combined model, on its cross-validated probabilities there).
    """

    method: str
    auroc: float
    threshold: float
    precision: float | None
    recall: float
    train_precision: float | None


def auroc(scores: Sequence[float], answerable: Sequence[bool]) -> float:
    """Area under the ROC curve of `scores`, answerable the positive class.

    Raises:
        ValueError: Only one class is present.
    """
    require("sklearn", "eval", "the weak-evidence AUROC")
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(list(answerable), list(scores)))


REGULARISATION = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
"""The inverse regularisation strengths `C` that cross-validation chooses from."""

TREE_GRID: dict[str, list[Any]] = {
    "n_estimators": [100, 300],
    "max_depth": [2, 3],
    "learning_rate": [0.03, 0.1],
}
"""The boosted-tree settings cross-validation chooses from: few shallow trees, so
the model written to the YAML stays small (at most 300 trees of 15 nodes)."""

FOLDS = 5
EXPORT_TOLERANCE = 1e-9


@dataclass(frozen=True)
class FittedModel:
    """The combined model chosen on the fitting split, and what chose it.

    Attributes:
        model: The kind with the better cross-validated AUROC (logistic on a tie).
        cv_auroc: Each kind (`logistic`, `trees`) to the mean AUROC over the
            grouped folds of its best setting, on the fitting split only.
        held_out: The model's probability per fitting case from the fold that
            held the case out (what its threshold was chosen on; the refitted
            trees have seen every case and would look better on them).
    """

    model: CombinedEvidence | TreeEvidence
    cv_auroc: dict[str, float]
    held_out: list[float]


@dataclass(frozen=True)
class _Search:
    """A grouped cross-validated grid search's outcome.

    Attributes:
        best: The best setting's estimator, refitted on every case.
        auroc: Its mean AUROC over the folds.
        held_out: Its probability per case from the fold that held the case out.
    """

    best: Any
    auroc: float
    held_out: list[float]


def fit_combined(
    cases: Cases, names: Sequence[str], target_precision: float, fitted_on: str
) -> FittedModel:
    """Fit the logistic model and the boosted trees; keep the one that generalises.

    Both are chosen by grouped 5-fold cross-validated AUROC on `cases` alone (a
    question's two cases always share a fold), so the split the model is measured
    on never shapes it.

    Args:
        cases: The fitting split's cases (the train split; never the test split).
        names: The features to use, all present in every case.
        target_precision: The wanted precision of the weak flag.
        fitted_on: Words for the YAML: dataset, split, number of questions (the
            chosen settings are appended).

    Returns:
        The chosen model as the configuration holds it, and both AUROCs.
    """
    logistic, logistic_search = fit_logistic(cases, names, target_precision, fitted_on)
    trees, trees_search = fit_trees(cases, names, target_precision, fitted_on)
    cv_auroc = {"logistic": logistic_search.auroc, "trees": trees_search.auroc}
    if trees_search.auroc > logistic_search.auroc:
        return FittedModel(trees, cv_auroc, trees_search.held_out)
    return FittedModel(logistic, cv_auroc, logistic_search.held_out)


def fit_logistic(
    cases: Cases, names: Sequence[str], target_precision: float, fitted_on: str
) -> tuple[CombinedEvidence, _Search]:
    """The logistic model on `cases`, and the search that chose it.

    Features are standardised for the fit and the scaling folded back into the
    coefficients, so the model applies to raw features. The regularisation
    strength is the one of `REGULARISATION` with the best cross-validated AUROC;
    the threshold comes from that model's held-out probabilities, so it is not
    chosen on probabilities the model has already seen.
    """
    require("sklearn", "eval", "fitting the combined weak-evidence signal")
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    search = _grouped_search(
        make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000)),
        {"logisticregression__C": list(REGULARISATION)},
        cases,
        names,
    )
    scaler, regression = search.best[0], search.best[1]
    weights = regression.coef_[0] / scaler.scale_
    intercept = float(regression.intercept_[0] - sum(weights * scaler.mean_))
    model = CombinedEvidence(
        coefficients={name: float(w) for name, w in zip(names, weights, strict=True)},
        intercept=intercept,
        threshold=threshold_for_precision(
            search.held_out, cases.answerable, target_precision
        ),
        fitted_on=f"{fitted_on}; C={regression.C:g} by 5-fold cross-validation",
    )
    return model, search


def fit_trees(
    cases: Cases, names: Sequence[str], target_precision: float, fitted_on: str
) -> tuple[TreeEvidence, _Search]:
    """Gradient-boosted trees on `cases`, exported as data, and their search.

    The settings are the ones of `TREE_GRID` with the best cross-validated AUROC;
    the threshold comes from their held-out probabilities.

    Raises:
        ValueError: The exported trees do not reproduce scikit-learn's
            probabilities on `cases` (a change in how it stores or applies them).
    """
    require("sklearn", "eval", "fitting the combined weak-evidence signal")
    from sklearn.ensemble import GradientBoostingClassifier

    search = _grouped_search(
        GradientBoostingClassifier(random_state=0), TREE_GRID, cases, names
    )
    booster = search.best
    model = export_trees(
        booster,
        names,
        threshold_for_precision(search.held_out, cases.answerable, target_precision),
        f"{fitted_on}; {booster.n_estimators} trees of depth {booster.max_depth}, "
        f"learning rate {booster.learning_rate:g} by 5-fold cross-validation",
    )
    expected = booster.predict_proba(list(feature_rows(cases.features, names)))[:, 1]
    worst = max(
        abs(float(p) - q)
        for p, q in zip(expected, combined_scores(cases, model), strict=True)
    )
    if worst > EXPORT_TOLERANCE:
        raise ValueError(
            f"the exported trees differ from scikit-learn's probabilities by {worst}"
        )
    return model, search


def export_trees(
    booster: Any, names: Sequence[str], threshold: float, fitted_on: str
) -> TreeEvidence:
    """A fitted binary `GradientBoostingClassifier` as plain data.

    Args:
        booster: The fitted classifier (log-loss, prior initial estimate).
        names: The feature names of its columns, in order.
        threshold: The weak flag's threshold on the probability.
        fitted_on: Words for the YAML.

    Returns:
        The trees, their learning rate, and the prior's log-odds as baseline.
    """
    prior = float(booster.init_.class_prior_[1])  # classes_ is [False, True]
    return TreeEvidence(
        kind="trees",
        baseline=math.log(prior) - math.log1p(-prior),
        learning_rate=float(booster.learning_rate),
        trees=[_tree(stage[0].tree_, names) for stage in booster.estimators_],
        threshold=threshold,
        fitted_on=fitted_on,
    )


def _tree(fitted: Any, names: Sequence[str]) -> Tree:
    """One scikit-learn tree (`tree_`) as nodes; a leaf has no left child (-1)."""
    nodes = []
    for i in range(fitted.node_count):
        left = int(fitted.children_left[i])
        if left < 0:
            nodes.append(TreeNode(value=float(fitted.value[i, 0, 0])))
        else:
            nodes.append(
                TreeNode(
                    feature=names[int(fitted.feature[i])],
                    threshold=float(fitted.threshold[i]),
                    left=left,
                    right=int(fitted.children_right[i]),
                )
            )
    return Tree(nodes=nodes)


def _grouped_search(
    estimator: Any, grid: Mapping[str, list[Any]], cases: Cases, names: Sequence[str]
) -> _Search:
    """Grid search by grouped 5-fold AUROC; the best one's held-out probabilities.

    A question's two cases always share a fold.
    """
    from sklearn.model_selection import GridSearchCV, GroupKFold, cross_val_predict

    rows = list(feature_rows(cases.features, names))
    groups = [i // 2 for i in range(len(rows))]
    search = GridSearchCV(
        estimator, dict(grid), scoring="roc_auc", cv=GroupKFold(FOLDS)
    )
    search.fit(rows, cases.answerable, groups=groups)
    held_out = cross_val_predict(
        search.best_estimator_,
        rows,
        cases.answerable,
        cv=GroupKFold(FOLDS),
        groups=groups,
        method="predict_proba",
    )[:, 1]
    return _Search(
        search.best_estimator_,
        float(search.best_score_),
        [float(p) for p in held_out],
    )


def combined_scores(
    cases: Cases, model: CombinedEvidence | TreeEvidence
) -> list[float]:
    """The model's probability per case, as the runtime check computes it."""
    scores = []
    for features in cases.features:
        probability = combined_probability(features, model)
        if probability is None:
            raise ValueError(f"a case lacks features the {model.kind} model needs")
        scores.append(probability)
    return scores


def threshold_for_precision(
    scores: Sequence[float], answerable: Sequence[bool], target: float
) -> float:
    """The threshold that flags the most cases as weak at `target` precision.

    A case is flagged when its score is below the threshold. Among the thresholds
    whose flag is right at least `target` of the time, the highest (most
    recall); if none reaches it, the most precise one.
    """
    pairs = sorted(zip(scores, answerable, strict=True))
    best, best_precision = pairs[0][0], -1.0
    flagged = unanswerable = 0
    for i, (score, is_answerable) in enumerate(pairs):
        flagged += 1
        unanswerable += not is_answerable
        if i + 1 < len(pairs) and pairs[i + 1][0] == score:
            continue  # a threshold cannot split tied scores
        cut = pairs[i + 1][0] if i + 1 < len(pairs) else score + 1e-9
        precision = unanswerable / flagged
        if precision >= target or (
            best_precision < target and precision > best_precision
        ):
            best, best_precision = cut, precision
    return best


def flag_quality(
    method: str,
    fit_scores: Sequence[float],
    fit_answerable: Sequence[bool],
    scores: Sequence[float],
    answerable: Sequence[bool],
    threshold: float,
) -> FlagQuality:
    """AUROC and the weak flag's precision and recall at `threshold`."""

    def precision(values: Sequence[float], labels: Sequence[bool]) -> float | None:
        flagged = [
            not label for v, label in zip(values, labels, strict=True) if v < threshold
        ]
        return sum(flagged) / len(flagged) if flagged else None

    flagged_right = sum(
        v < threshold and not label for v, label in zip(scores, answerable, strict=True)
    )
    return FlagQuality(
        method=method,
        auroc=auroc(scores, answerable),
        threshold=threshold,
        precision=precision(scores, answerable),
        recall=flagged_right / max(sum(not label for label in answerable), 1),
        train_precision=precision(fit_scores, fit_answerable),
    )


def common_features(samples: Sequence[Mapping[str, float]]) -> list[str]:
    """The features present in every case, in `_signal_names.FEATURES` order."""
    return [name for name in FEATURES if all(name in s for s in samples)]


def reliability(
    probabilities: Sequence[float], answerable: Sequence[bool], bins: int = 10
) -> tuple[list[float], list[float]]:
    """Mean predicted probability and observed share answerable, per bin.

    scikit-learn's `calibration_curve` (uniform bins; empty bins left out), for
    the reliability diagram.
    """
    require("sklearn", "eval", "the weak-evidence calibration curve")
    from sklearn.calibration import calibration_curve

    observed, predicted = calibration_curve(
        list(answerable), list(probabilities), n_bins=bins
    )
    return [float(p) for p in predicted], [float(o) for o in observed]
