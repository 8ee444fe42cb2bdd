"""How well the weak-evidence signals tell answerable questions from unanswerable ones.

Every question counts twice: as retrieved (answerable), and with its judged-relevant
documents removed (unanswerable). Fitted on one split, measured on another.
"""

from __future__ import annotations

from dataclasses import dataclass

from langchain_ragbudget.config._settings import RagBudgetConfig
from langchain_ragbudget.config._weak_model import CalibratedWith, CombinedEvidence
from langchain_ragbudget.evaluation._beir import BeirDataset
from langchain_ragbudget.evaluation._stages import Stages
from langchain_ragbudget.evaluation._weak_fit import (
    Cases,
    FlagQuality,
    combined_scores,
    common_features,
    fit_combined,
    flag_quality,
    reliability,
    threshold_for_precision,
)
from langchain_ragbudget.evidence._assess import top_score
from langchain_ragbudget.evidence._signals import signal_features
from langchain_ragbudget.progress import ProgressCallback


@dataclass(frozen=True)
class WeakEvidence:
    """The weak-evidence signals measured: each question answerable and not.

    Attributes:
        fit_split: What the combined signal and both thresholds were fitted on.
        n_fit: Questions of the fitting split (each gives two cases).
        n_measured: Questions measured (each gives two cases).
        target_precision: The weak flag's precision the thresholds aim at.
        methods: The single threshold and the combined signal, side by side.
        model: The fitted combined model (as the YAML holds it).
        cv_auroc: Its grouped cross-validated AUROC on the fitting split.
        reliability: Mean predicted and observed share answerable per bin.
        calibrated_with: The models (and dataset) the scores came from.
    """

    fit_split: str
    n_fit: int
    n_measured: int
    target_precision: float
    methods: list[FlagQuality]
    model: CombinedEvidence
    cv_auroc: float
    reliability: tuple[list[float], list[float]]
    calibrated_with: CalibratedWith | None = None


def measure_weak_evidence(
    stages: Stages,
    config: RagBudgetConfig,
    surface: str,
    fit_on: BeirDataset,
    measured: BeirDataset,
    limit: int | None = None,
    progress: ProgressCallback | None = None,
) -> WeakEvidence:
    """Fit the combined signal on `fit_on`, measure both methods on `measured`."""
    settings = config.surface(surface).weak_evidence
    fit_cases = _cases(stages, fit_on, None, settings.thresholds, progress)
    cases = _cases(stages, measured, limit, settings.thresholds, progress)
    names = common_features([*fit_cases.features, *cases.features])
    fitted = fit_combined(
        fit_cases,
        names,
        settings.precision,
        f"{measured.name}, {fit_on.name} ({len(fit_on.queries)} questions)",
    )
    model = fitted.model
    key = ", ".join(sorted(set(fit_cases.top_keys) | set(cases.top_keys)))
    fit_top = _present(fit_cases.top_scores, key)
    top = _present(cases.top_scores, key)
    probs = combined_scores(cases, model)
    return WeakEvidence(
        fit_split=fit_on.name,
        n_fit=len(fit_cases.answerable) // 2,
        n_measured=len(cases.answerable) // 2,
        target_precision=settings.precision,
        methods=[
            flag_quality(
                f"threshold ({key})",
                fit_top,
                fit_cases.answerable,
                top,
                cases.answerable,
                threshold_for_precision(
                    fit_top, fit_cases.answerable, settings.precision
                ),
            ),
            flag_quality(
                "combined (logistic)",
                fitted.held_out,
                fit_cases.answerable,
                probs,
                cases.answerable,
                model.threshold,
            ),
        ],
        model=model,
        cv_auroc=fitted.cv_auroc,
        reliability=reliability(probs, cases.answerable),
        calibrated_with=CalibratedWith(
            embedding=config.embedding.model,
            rerank=config.rerank.model if stages.reranks else None,
            index=measured.name,
        ),
    )


def _present(scores: list[float | None], key: str) -> list[float]:
    """Top scores, every case having one (else the baseline would lose cases)."""
    if any(score is None for score in scores):
        raise ValueError(f"some candidate lists carry no {key!r}")
    return [score for score in scores if score is not None]


def _cases(
    stages: Stages,
    dataset: BeirDataset,
    limit: int | None,
    thresholds: dict[str, float | None],
    progress: ProgressCallback | None,
) -> Cases:
    features: list[dict[str, float]] = []
    tops: list[float | None] = []
    top_keys: list[str] = []
    labels: list[bool] = []
    queries = list(dataset.queries.items())[:limit]
    keys = [key for key, threshold in thresholds.items() if threshold is not None]
    for done, (query_id, text) in enumerate(queries, start=1):
        relevant = {d for d, rel in dataset.qrels[query_id].items() if rel > 0}
        for answerable, candidates in zip(
            (True, False), stages.with_and_without(text, relevant), strict=True
        ):
            features.append(signal_features(candidates, text))
            key, top = next(
                ((k, s) for k in keys if (s := top_score(candidates, k)) is not None),
                ("none", None),
            )
            tops.append(top)
            top_keys.append(key)
            labels.append(answerable)
        if progress:
            progress(f"weak evidence ({dataset.name})", done, len(queries))
    return Cases(features, tops, top_keys, labels)
