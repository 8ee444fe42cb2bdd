"""Weak-evidence signalling and the calibration of its threshold.

When the best score of the context is under a calibrated threshold, or a model
fitted over the candidates' signals says the answer is probably not among them,
the prompt and the user-facing output both say the evidence is weak.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace

from langchain_core.documents import Document

from langchain_ragbudget.config._settings import RagBudgetConfig, WeakEvidenceSettings
from langchain_ragbudget.config._weak_model import CalibratedWith, CombinedEvidence
from langchain_ragbudget.evidence._signals import combined_probability, signal_features
from langchain_ragbudget.ledger._names import display_name
from langchain_ragbudget.ledger._validation import finite_score

COMBINED = "combined signal"  # the Evidence.score_key of the combined method
UNKNOWN_COMBINED = (
    "the combined signal lacks a feature its model needs (the question, a rerank "
    "score, or the run ledger holding the candidates fusion cut)"
)


@dataclass(frozen=True)
class Evidence:
    """How strong the context is: `weak` is None when no score could tell.

    Attributes:
        weak: True under the threshold (or when nothing reached the context),
            None when no kept passage carries a score with a threshold.
        score_key: The metadata key that decided (e.g. `rerank_score`).
        score: The best finite value of that key among the kept passages.
        threshold: The surface's threshold for that key.
        stale: How the calibration's models differ from those in use, or None.
    """

    weak: bool | None
    score_key: str | None = None
    score: float | None = None
    threshold: float | None = None
    stale: str | None = None

    @property
    def measure(self) -> str:
        """What was compared, for a warning: `top dense_score`, `combined signal`."""
        key = str(self.score_key)
        return key if self.score_key == COMBINED else f"top {key}"

    def to_dict(self) -> dict[str, object]:
        """A JSON-serialisable view."""
        return asdict(self)

    @property
    def stale_clause(self) -> str:
        """`calibration stale (calibrated with ...)`, or "" when it fits."""
        if not self.stale:
            return ""
        return f"calibration stale (calibrated with {display_name(self.stale, 300)})"

    def describe(self) -> str:
        """The check in words, e.g. `weak: top rerank_score 0.12 < threshold 0.30`."""
        stale = f"; {self.stale_clause}" if self.stale else ""
        if self.weak is None and self.score_key == COMBINED:
            return f"unknown: {UNKNOWN_COMBINED}{stale}"
        if self.weak is None:
            return f"unknown: no kept passage has a score with a threshold{stale}"
        if self.score is None or self.threshold is None:
            return f"weak: no passage reached the context{stale}"
        verdict, sign = ("weak", "<") if self.weak else ("strong", ">=")
        return (
            f"{verdict}: top {self.score_key} {self.score:.2f} {sign} "
            f"threshold {self.threshold:.2f}{stale}"
        )


def models_in_use(config: RagBudgetConfig) -> CalibratedWith:
    """The embedding and rerank models whose scores a budget of `config` judges."""
    rerank = config.rerank.model if config.rerank.enabled else None
    return CalibratedWith(embedding=config.embedding.model, rerank=rerank)


def stale_note(
    settings: WeakEvidenceSettings, in_use: CalibratedWith | None
) -> str | None:
    """How the calibration's models differ from those in use; None if they match.

    Unknown on either side is never stale: there is nothing to compare.
    """
    calibrated = settings.calibrated_with
    if calibrated is None or in_use is None:
        return None
    return "; ".join(calibrated.differences(in_use)) or None


def assess_evidence(
    kept: Sequence[Document],
    settings: WeakEvidenceSettings,
    *,
    candidates: Sequence[Document] = (),
    question: str | None = None,
    in_use: CalibratedWith | None = None,
) -> Evidence:
    """Decide whether the evidence is weak, by the surface's configured method.

    Nothing kept is weak evidence either way.

    Args:
        kept: The passages that reached the context.
        settings: The surface's `weak_evidence` settings.
        candidates: The candidates the budget received, where the combined
            method reads its signals (as `ragbudget eval` fitted it).
        question: The question; without it the combined method cannot tell.
        in_use: The models the scores come from, to mark a calibration stale.
    """
    stale = stale_note(settings, in_use)
    if not kept:
        evidence = Evidence(weak=True)
    elif settings.method == "combined" and settings.combined is not None:
        evidence = (
            Evidence(weak=None, score_key=COMBINED)
            if question is None
            else assess_combined(candidates or kept, question, settings.combined)
        )
    else:
        evidence = assess_thresholds(kept, settings.thresholds)
    return replace(evidence, stale=stale) if stale else evidence


def assess_combined(
    candidates: Sequence[Document],
    question: str,
    model: CombinedEvidence,
) -> Evidence:
    """Apply the fitted model to the candidates' signals; unknown if one is missing."""
    probability = combined_probability(signal_features(candidates, question), model)
    if probability is None:
        return Evidence(weak=None, score_key=COMBINED)
    return Evidence(
        probability < model.threshold, COMBINED, probability, model.threshold
    )


def assess_thresholds(
    documents: Sequence[Document], thresholds: Mapping[str, float | None]
) -> Evidence:
    """Compare the best score to its threshold; the first key a passage has decides."""
    if not documents:
        return Evidence(weak=True)
    for key, threshold in thresholds.items():
        best = None if threshold is None else top_score(documents, key)
        if best is not None and threshold is not None:
            return Evidence(best < threshold, key, best, threshold)
    return Evidence(weak=None)


@dataclass(frozen=True)
class Calibration:
    """A threshold and how well it separates answerable from unanswerable questions.

    Attributes:
        threshold: The chosen threshold (a score at or above it is strong).
        present_above: Share of answerable questions at or above it.
        absent_below: Share of unanswerable questions below it.
        balanced_accuracy: The mean of the two shares.
        auc: Probability that an answerable question outscores an unanswerable
            one (ties count half).
        n_present: Number of answerable questions.
        n_absent: Number of unanswerable questions.
    """

    threshold: float
    present_above: float
    absent_below: float
    balanced_accuracy: float
    auc: float
    n_present: int
    n_absent: int

    def summary(self) -> str:
        """One line for logs and notebooks."""
        return (
            f"threshold {self.threshold:.3f}: {self.present_above:.0%} of "
            f"{self.n_present} answerable questions above it, {self.absent_below:.0%} "
            f"of {self.n_absent} unanswerable below; balanced accuracy "
            f"{self.balanced_accuracy:.3f}, AUC {self.auc:.3f}"
        )


def calibrate_threshold(
    present: Sequence[float], absent: Sequence[float]
) -> Calibration:
    """Choose the threshold that best separates the two sets of top scores.

    Maximises balanced accuracy (Youden's J) over the midpoints between
    neighbouring scores; among equally good thresholds the lowest wins. Put the
    result under the same score key in a surface's `weak_evidence.thresholds`.

    Args:
        present: Top scores of questions whose answer is in the corpus.
        absent: Top scores of questions whose answer is not.

    Raises:
        ValueError: `present` or `absent` is empty, or holds NaN or infinity.
    """
    if not all(map(math.isfinite, [*present, *absent])):
        raise ValueError("calibration scores must be finite numbers (no NaN or inf)")
    if not present or not absent:
        raise ValueError("calibration needs at least one score in each set")
    values = sorted(set(present) | set(absent))
    candidates = [values[0]] + [
        (low + high) / 2 for low, high in itertools.pairwise(values)
    ]
    candidates.append(values[-1] + 1e-9)

    def rates(threshold: float) -> tuple[float, float]:
        above = sum(score >= threshold for score in present) / len(present)
        below = sum(score < threshold for score in absent) / len(absent)
        return above, below

    best = max(candidates, key=lambda t: sum(rates(t)))
    above, below = rates(best)
    wins = sum((p > a) + 0.5 * (p == a) for p in present for a in absent)
    return Calibration(
        threshold=best,
        present_above=above,
        absent_below=below,
        balanced_accuracy=(above + below) / 2,
        auc=wins / (len(present) * len(absent)),
        n_present=len(present),
        n_absent=len(absent),
    )


def top_score(documents: Sequence[Document], score_key: str) -> float | None:
    """The best finite `score_key` among `documents`, or None if none carries one.

    NaN, infinity and non-numbers can never read as strong evidence.
    """
    scores = [
        score
        for doc in documents
        if (score := finite_score(doc.metadata.get(score_key))) is not None
    ]
    return max(scores) if scores else None
