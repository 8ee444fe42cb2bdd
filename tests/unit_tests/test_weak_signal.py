"""The weak-evidence signals on hand-made candidate lists, and the combined check
the budget runs: the same features and model as the harness fitted.

The list features read fusion's run ledger, so those tests fuse two fixed lists
(`ListRetriever`, a test double for "any LangChain retriever") with the real
`HybridRetriever`: each case states exactly what fusion received."""

import math
import pickle
import statistics

import pytest
from langchain_core.documents import Document
from list_retriever import ListRetriever
from pydantic import ValidationError

from langchain_ragbudget import ContextBudget
from langchain_ragbudget.chain._stuff import context_warnings
from langchain_ragbudget.config._settings import (
    CombinedEvidence,
    WeakEvidenceSettings,
    load_config,
)
from langchain_ragbudget.evidence._assess import (
    COMBINED,
    UNKNOWN_COMBINED,
    assess_evidence,
)
from langchain_ragbudget.evidence._signals import (
    FEATURES,
    LIST_FEATURES,
    combined_probability,
    fetched_scores,
    list_statistics,
    number_coverage,
    query_coverage,
    signal_features,
)
from langchain_ragbudget.ledger._records import LEDGER_KEY, CandidateList
from langchain_ragbudget.retrieval._hybrid import HybridRetriever


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


def logistic(coefficients: dict[str, float], intercept: float) -> CombinedEvidence:
    return CombinedEvidence(
        coefficients=coefficients, intercept=intercept, threshold=0.5
    )


def test_probability_is_the_logistic_of_the_linear_score() -> None:
    features = {"dense_top": 0.5, "coverage": 1.0}
    model = logistic({"dense_top": 2.0, "coverage": -1.0}, 0.5)
    p = combined_probability(features, model)
    assert p == pytest.approx(1 / (1 + math.exp(-(0.5 + 1.0 - 1.0))))
    assert combined_probability(features, logistic({"rerank_top": 1.0}, 0.0)) is None
    far = combined_probability({"bm25_top": 1e6}, logistic({"bm25_top": -1.0}, 0.0))
    assert far == 0.0  # no overflow


@pytest.mark.needs_tiktoken
def test_a_model_reading_an_unknown_signal_is_refused_by_its_key() -> None:
    with pytest.raises(ValidationError) as caught:  # refused where it is made
        logistic({"dense_top": 1.0, "secret_sauce": 2.0}, 0.0)
    assert caught.value.errors()[0]["loc"] == ("coefficients",)
    assert "unknown feature 'secret_sauce'" in str(caught.value)
    known = logistic({"dense_top": 1.0, "coverage": 2.0}, 0.0)  # known signals wire
    config = load_config()
    settings = WeakEvidenceSettings(method="combined", combined=known)
    chat = config.surfaces["chat"].model_copy(update={"weak_evidence": settings})
    config = config.model_copy(update={"surfaces": {**config.surfaces, "chat": chat}})
    assert ContextBudget.from_config(config).settings.weak_evidence.combined == known


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


def test_list_statistics_by_hand() -> None:
    f = list_statistics([5.0, 3.0, 3.0, 1.0])  # mean 3, median 3, deviation sqrt 2
    assert f["list_z"] == pytest.approx(2 / math.sqrt(2))
    assert (f["top_minus_mean"], f["top_minus_median"]) == (2.0, 2.0)
    assert (f["gap_10th"], f["gap_50th"]) == (4.0, 4.0)  # shorter: the last
    long = list_statistics([float(s) for s in range(60, 0, -1)])
    assert (long["gap_10th"], long["gap_50th"]) == (60 - 51, 60 - 11)
    assert long["top_minus_median"] == pytest.approx(60 - 30.5)
    assert list_statistics([2.0, 2.0])["list_z"] == 0.0  # no spread
    assert set(list_statistics([]).values()) == {0.0}


def scored(ids: str, scores: list[float]) -> list[Document]:
    return [
        Document(page_content=f"text {i}", id=i, metadata={"score": s})
        for i, s in zip(ids, scores, strict=True)
    ]


BM25_SCORES = [5.0, 3.0, 3.0, 1.0]
DENSE_SCORES = [0.9, 0.5, 0.4, 0.2]


@pytest.fixture
def fused() -> CandidateList:
    """Seven candidates fused, two kept: five are only in fusion's records."""
    hybrid = HybridRetriever(
        retrievers=[
            ListRetriever(documents=scored("abcd", BM25_SCORES)),
            ListRetriever(documents=scored("eafg", DENSE_SCORES)),
        ],
        names=["bm25", "dense"],
        k=2,
    )
    result = hybrid.invoke("question")
    assert isinstance(result, CandidateList)
    assert len(result) == 2 and len(result.drops) == 5
    return result


def test_list_features_come_from_the_whole_fetched_lists(
    fused: CandidateList,
) -> None:
    assert fetched_scores(fused) == {"bm25": BM25_SCORES, "dense": DENSE_SCORES}
    f = signal_features(fused, "question")
    assert f["bm25_list_z"] == pytest.approx(math.sqrt(2))
    dense_mean = statistics.fmean(DENSE_SCORES)  # 0.5
    assert f["dense_top_minus_mean"] == pytest.approx(0.4)
    assert f["dense_top_minus_median"] == pytest.approx(0.9 - 0.45)
    assert f["dense_list_z"] == pytest.approx(
        0.4 / statistics.pstdev(DENSE_SCORES, dense_mean)
    )
    assert f["dense_gap_10th"] == f["dense_gap_50th"] == pytest.approx(0.7)
    assert set(LIST_FEATURES) <= set(f)
    # a later stage or a user's slice keeps the ledger: the same statistics
    sliced = signal_features(list(fused)[:1], "question")
    assert {n: sliced[n] for n in LIST_FEATURES} == {n: f[n] for n in LIST_FEATURES}


def test_list_features_missing_without_the_run_ledger(fused: CandidateList) -> None:
    stripped = [
        d.model_copy(
            update={
                "metadata": {k: v for k, v in d.metadata.items() if k != LEDGER_KEY}
            }
        )
        for d in fused
    ]
    unpickled = pickle.loads(pickle.dumps(list(fused)))  # the run id, no ledger
    for documents in (stripped, unpickled):
        assert fetched_scores(documents) is None
        f = signal_features(documents, "question")
        assert not set(LIST_FEATURES) & set(f)
        assert "bm25_top" in f  # the other features stay


def test_list_features_missing_for_candidates_of_two_runs(
    fused: CandidateList,
) -> None:
    other = HybridRetriever(
        retrievers=[ListRetriever(documents=scored("xy", [2.0, 1.0]))],
        names=["bm25"],
        k=1,
    ).invoke("question")
    assert fetched_scores([*fused, *other]) is None


def test_a_model_needing_list_features_is_unknown_without_the_ledger(
    fused: CandidateList,
) -> None:
    settings = WeakEvidenceSettings(
        method="combined",
        combined=CombinedEvidence(
            coefficients={"bm25_list_z": 1.0}, intercept=-1.0, threshold=0.5
        ),
    )
    known = assess_evidence(fused, settings, candidates=fused, question="question")
    assert known.score == pytest.approx(1 / (1 + math.exp(-(math.sqrt(2) - 1.0))))
    plain = pickle.loads(pickle.dumps(list(fused)))
    unknown = assess_evidence(plain, settings, candidates=plain, question="question")
    assert (unknown.weak, unknown.score) == (None, None)
    assert unknown.describe() == f"unknown: {UNKNOWN_COMBINED}"


@pytest.mark.needs_tiktoken
def test_the_user_is_told_why_the_combined_check_is_unknown(
    fused: CandidateList,
) -> None:
    model = CombinedEvidence(
        coefficients={"dense_list_z": 1.0}, intercept=0.0, threshold=0.5
    )
    budget = ContextBudget.from_config(load_config())
    settings = budget.settings.model_copy(
        update={
            "weak_evidence": WeakEvidenceSettings(method="combined", combined=model)
        }
    )
    budget = budget.model_copy(update={"settings": settings})
    plain = pickle.loads(pickle.dumps(list(fused)))
    warnings = context_warnings(budget.fit(plain, question="question"))
    assert f"[warning: evidence strength unknown: {UNKNOWN_COMBINED}]" in warnings
    assert not any(
        "unknown" in w for w in context_warnings(budget.fit(fused, question="question"))
    )
