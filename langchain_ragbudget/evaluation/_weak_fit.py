"""Fitting and measuring the weak-evidence signal on labelled questions.

A signal is good when it tells a question's two cases (answerable, answer
removed) apart. The combined signal is a scikit-learn logistic regression written
as plain numbers, so the runtime needs neither pickle nor scikit-learn. Both it
and the single-threshold baseline get their threshold for the same precision on
the fitting split, so the measured split never shapes them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from langchain_ragbudget.config._weak_model import CombinedEvidence
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
        features: One feature mapping per case.
        top_scores: The single-threshold method's score per case, or None.
        top_keys: The score key that gave each case's top score.
        answerable: True as retrieved, False with the answer removed.
    """

    features: list[dict[str, float]]
    top_scores: list[float | None]
    top_keys: list[str]
    answerable: list[bool]


@dataclass(frozen=True)
class FlagQuality:
    """How one method's weak flag did on the measured split.

    Attributes:
        method: `threshold (<score key>)` or `combined (logistic)`.
        auroc: AUROC of the method's score, answerable positive.
        threshold: The threshold chosen on the fitting split.
        precision: Share of flagged cases that were unanswerable.
        recall: Share of unanswerable cases that were flagged.
        train_precision: The precision on the fitting split (for the combined
            model, on its cross-validated probabilities).
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

FOLDS = 5


@dataclass(frozen=True)
class FittedModel:
    """The combined model fitted on one split, and how well it generalised there.

    Attributes:
        model: The logistic model, as the configuration holds it.
        cv_auroc: The mean AUROC over the grouped folds of the chosen `C`.
        held_out: Per fitting case, the probability from the fold that held it
            out (the refitted model has seen every case, so the threshold is
            chosen on these).
    """

    model: CombinedEvidence
    cv_auroc: float
    held_out: list[float]


def fit_combined(
    cases: Cases, names: Sequence[str], target_precision: float, fitted_on: str
) -> FittedModel:
    """The logistic model on `cases`, with its cross-validated AUROC.

    The standardisation is folded back into the coefficients, so the model
    applies to raw features. `C` is chosen by grouped cross-validation (a
    question's two cases share a fold) on `cases` alone.

    Args:
        cases: The fitting split's cases (never the test split).
        names: The features to use, all present in every case.
        target_precision: The wanted precision of the weak flag.
        fitted_on: Words for the YAML (the chosen `C` is appended).
    """
    require("sklearn", "eval", "fitting the combined weak-evidence signal")
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, GroupKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rows = list(feature_rows(cases.features, names))
    groups = [i // 2 for i in range(len(rows))]
    search = GridSearchCV(
        make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000)),
        {"logisticregression__C": list(REGULARISATION)},
        scoring="roc_auc",
        cv=GroupKFold(FOLDS),
    )
    search.fit(rows, cases.answerable, groups=groups)
    held_out = [
        float(p)
        for p in cross_val_predict(
            search.best_estimator_,
            rows,
            cases.answerable,
            cv=GroupKFold(FOLDS),
            groups=groups,
            method="predict_proba",
        )[:, 1]
    ]
    scaler, regression = search.best_estimator_[0], search.best_estimator_[1]
    weights = regression.coef_[0] / scaler.scale_
    model = CombinedEvidence(
        coefficients={name: float(w) for name, w in zip(names, weights, strict=True)},
        intercept=float(regression.intercept_[0] - sum(weights * scaler.mean_)),
        threshold=threshold_for_precision(held_out, cases.answerable, target_precision),
        fitted_on=f"{fitted_on}; C={regression.C:g} by 5-fold cross-validation",
    )
    return FittedModel(model, float(search.best_score_), held_out)


def combined_scores(cases: Cases, model: CombinedEvidence) -> list[float]:
    """The model's probability per case, as the runtime check computes it."""
    scores = []
    for features in cases.features:
        probability = combined_probability(features, model)
        if probability is None:
            raise ValueError("a case lacks features the combined model needs")
        scores.append(probability)
    return scores


def threshold_for_precision(
    scores: Sequence[float], answerable: Sequence[bool], target: float
) -> float:
    """The threshold that flags the most cases (score below it) at `target` precision.

    If none reaches `target`, the most precise one.
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
    """The features present in every case, in `FEATURES` order."""
    return [name for name in FEATURES if all(name in s for s in samples)]


def reliability(
    probabilities: Sequence[float], answerable: Sequence[bool], bins: int = 10
) -> tuple[list[float], list[float]]:
    """Mean predicted probability and observed share answerable, per non-empty bin."""
    require("sklearn", "eval", "the weak-evidence calibration curve")
    from sklearn.calibration import calibration_curve

    observed, predicted = calibration_curve(
        list(answerable), list(probabilities), n_bins=bins
    )
    return [float(p) for p in predicted], [float(o) for o in observed]
