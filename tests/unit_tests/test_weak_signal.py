"""The weak-evidence signals on hand-made candidate lists, and the combined check
the budget runs: the same features and model as the harness fitted."""

import math

import pytest
from langchain_core.documents import Document

from langchain_ragbudget.config import CombinedEvidence, WeakEvidenceSettings
from langchain_ragbudget.evidence import COMBINED, assess_evidence
from langchain_ragbudget.weak_signal import (
    FEATURES,
    answerable_probability,
    number_coverage,
    query_coverage,
    signal_features,
)


def cand(text: str, **metadata: float) -> Document:
    return Document(page_content=text, metadata=metadata)


QUESTION = "Aspirin lowers blood pressure by 10 percent"
CANDIDATES = [  # best first, as fusion hands them over
    cand(
        "Aspirin lowers pressure. The blood study saw 10 percent.",
        bm25_score=9.0,
        bm25_rank=1,
        dense_score=0.8,
        dense_rank=2,
        fused_score=0.032,
    ),
    cand(
        "Blood tests in mice.",
        bm25_score=5.0,
        bm25_rank=2,
        dense_score=0.9,
        dense_rank=1,
        fused_score=0.031,
    ),
    cand("Pressure cookers.", bm25_score=4.0, bm25_rank=3, fused_score=0.016),
    cand("Heart health.", dense_score=0.4, dense_rank=3, fused_score=0.015),
]


def test_features_by_hand() -> None:
    f = signal_features(CANDIDATES, QUESTION)
    # terms: aspirin, lower, blood, pressur, 10, percent (stemmed, no stopwords)
    assert f["fused_top"] == 0.032
    assert (f["bm25_top"], f["bm25_gap"]) == (9.0, 4.0)
    assert f["bm25_per_term"] == pytest.approx(9.0 / 6)
    assert f["dense_top"] == 0.9 and f["dense_gap"] == pytest.approx(0.1)
    assert f["dense_margin"] == pytest.approx(0.9 - (0.9 + 0.8 + 0.4) / 3)
    assert f["overlap"] == pytest.approx(2 / 10)  # two candidates in both top-10s
    assert f["rank_correlation"] == 0.0  # fewer than three shared candidates
    assert f["coverage"] == 1.0  # every question term is in the top passage
    assert f["sentence_coverage"] == pytest.approx(3 / 6)  # "aspirin lower pressur"
    assert f["number_coverage"] == 1.0
    # every question term is in the top passage: weighted coverage is 1 too
    assert f["weighted_coverage"] == pytest.approx(1.0)
    assert "rerank_top" not in f  # no reranker ran
    assert set(f) <= set(FEATURES)


def test_rank_correlation_and_rerank_features() -> None:
    docs = [
        cand("a", bm25_rank=1, dense_rank=3, rerank_score=0.9),
        cand("b", bm25_rank=2, dense_rank=2, rerank_score=0.5),
        cand("c", bm25_rank=3, dense_rank=1, rerank_score=0.4),
    ]
    f = signal_features(docs, "a")
    assert f["rank_correlation"] == pytest.approx(-1.0)  # reversed orders
    assert f["overlap"] == pytest.approx(0.3)
    assert f["rerank_top"] == 0.9 and f["rerank_gap"] == pytest.approx(0.4)
    assert f["bm25_top"] == 0.0 and f["dense_top"] == 0.0  # no scores: zero


def test_coverages_by_hand() -> None:
    assert query_coverage("red apples fall", "An apple is red") == pytest.approx(2 / 3)
    assert query_coverage("the of", "anything") == 0.0  # stopwords only: no terms
    assert number_coverage("dose 5 mg and 12.5 mg", "5 mg given") == 0.5
    assert number_coverage("no figures", "42") == 1.0
    assert signal_features([], "q") == {}


def test_probability_is_the_logistic_of_the_linear_score() -> None:
    features = {"dense_top": 0.5, "coverage": 1.0}
    p = answerable_probability(features, {"dense_top": 2.0, "coverage": -1.0}, 0.5)
    assert p == pytest.approx(1 / (1 + math.exp(-(0.5 + 1.0 - 1.0))))
    assert answerable_probability(features, {"rerank_top": 1.0}, 0.0) is None
    assert answerable_probability({"x": 1e6}, {"x": -1.0}, 0.0) == 0.0  # no overflow


def combined(threshold: float) -> WeakEvidenceSettings:
    return WeakEvidenceSettings(
        method="combined",
        combined=CombinedEvidence(
            coefficients={"coverage": 4.0, "dense_top": 2.0},
            intercept=-4.0,
            threshold=threshold,
        ),
    )


def test_the_budget_check_applies_the_model_to_the_candidates() -> None:
    kept = CANDIDATES[:1]
    expected = 1 / (1 + math.exp(-(-4.0 + 4.0 * 1.0 + 2.0 * 0.9)))  # dense 0.9: #2
    strong = assess_evidence(
        kept, combined(0.5), candidates=CANDIDATES, question=QUESTION
    )
    assert (strong.weak, strong.score_key) == (False, COMBINED)
    assert strong.score == pytest.approx(expected)
    weak = assess_evidence(
        kept, combined(0.99), candidates=CANDIDATES, question=QUESTION
    )
    assert weak.weak is True and weak.measure == COMBINED
    assert assess_evidence(kept, combined(0.5), candidates=CANDIDATES).weak is None
    assert assess_evidence([], combined(0.5), question=QUESTION).weak is True
