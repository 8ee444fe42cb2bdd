"""HybridRetriever with score-based fusion (minmax, dbsf): metadata, issues, cuts.

The retrievers are fixed lists (a test double for "any LangChain retriever"), so
each case states exactly which scores fusion receives.
"""

import json
import math

import pytest
from langchain_core.documents import Document
from list_retriever import ListRetriever
from pydantic import ValidationError

from langchain_ragbudget import CandidateList, DropReason, HybridRetriever, Stage
from langchain_ragbudget.ledger._records import LEDGER_KEY, DeferredDropRecord
from langchain_ragbudget.retrieval._fusion import weighted_rrf


def doc(doc_id: str, score: float | None = None, text: str = "") -> Document:
    metadata = {} if score is None else {"score": score}
    return Document(
        id=doc_id, page_content=text or f"text of {doc_id}", metadata=metadata
    )


def pair(
    sparse: list[Document], dense: list[Document], **kwargs: object
) -> HybridRetriever:
    return HybridRetriever(
        retrievers=[ListRetriever(documents=sparse), ListRetriever(documents=dense)],
        names=["bm25", "dense"],
        **kwargs,
    )


def test_minmax_writes_method_and_normalised_scores() -> None:
    hybrid = pair(
        [doc("a", 3.0), doc("c", 2.0), doc("b", 1.0)],
        [doc("c", 0.9), doc("a", 0.5)],
        fusion="minmax",
        weights=[1.0, 3.0],
    )
    results = hybrid.invoke("q")
    assert [d.id for d in results] == ["c", "a", "b"]
    meta = {
        d.id: {k: v for k, v in d.metadata.items() if k != LEDGER_KEY} for d in results
    }
    assert meta["c"] == {
        "bm25_rank": 2,
        "bm25_score": 2.0,
        "bm25_normalised": 0.5,
        "dense_rank": 1,
        "dense_score": 0.9,
        "dense_normalised": 1.0,
        "fusion_method": "minmax",
        "fused_score": pytest.approx((0.5 + 3 * 1.0) / 4),
        "fused_rank": 1,
    }
    assert "dense_normalised" not in meta["b"]  # absent from dense: counted 0
    assert meta["b"]["fused_score"] == 0.0
    json.dumps(meta)


def test_the_default_stays_rrf_with_the_same_metadata_as_before() -> None:
    sparse = [doc("a", 3.0), doc("b", 1.0)]
    dense = [doc("b", 0.9), doc("c", 0.5)]
    results = pair(sparse, dense).invoke("q")
    expected = weighted_rrf([["a", "b"], ["b", "c"]], [1.0, 1.0], 60.0)
    assert [(d.id, d.metadata["fused_score"]) for d in results] == [
        (item.key, item.score) for item in expected
    ]
    assert not any(
        key == "fusion_method" or key.endswith("_normalised")
        for d in results
        for key in d.metadata
    )


@pytest.mark.parametrize("method", ["minmax", "dbsf"])
@pytest.mark.parametrize("bad", [math.nan, math.inf, "0.9", None])
def test_a_score_that_cannot_be_used_is_reported_and_counts_zero(
    method: str, bad: object
) -> None:
    broken = Document(
        id="a",
        page_content="text of a",
        metadata={} if bad is None else {"score": bad},
    )
    hybrid = pair([doc("b", 2.0), doc("c", 1.0)], [broken, doc("c", 0.4)])
    results = hybrid.model_copy(update={"fusion": method}).invoke("q")
    assert isinstance(results, CandidateList)
    by_id = {d.id: d.metadata for d in results}
    assert by_id["a"]["dense_rank"] == 1  # still a candidate, ranked where it was
    assert "dense_score" not in by_id["a"] and "dense_normalised" not in by_id["a"]
    assert all(math.isfinite(d.metadata["fused_score"]) for d in results)
    assert [(i.stage, i.key, i.field) for i in results.issues] == [
        (Stage.FUSION, "a", "dense_score")
    ]


def test_a_missing_score_is_no_issue_under_rrf() -> None:
    results = pair([doc("a", 1.0)], [doc("b")]).invoke("q")
    assert isinstance(results, CandidateList) and results.issues == []


@pytest.mark.parametrize("method", ["minmax", "dbsf"])
def test_candidates_below_k_are_recorded_with_their_normalised_scores(
    method: str,
) -> None:
    sparse = [doc(f"d{i}", float(10 - i)) for i in range(5)]
    dense = [doc(f"d{i}", 1.0 - i / 10) for i in reversed(range(5))]
    results = pair(sparse, dense, fusion=method, k=2).invoke("q")
    assert isinstance(results, CandidateList) and len(results) == 2
    assert sorted(r.key for r in results.drops) == sorted(
        {f"d{i}" for i in range(5)} - {d.id for d in results}
    )
    for record in results.drops:
        assert isinstance(record, DeferredDropRecord)
        assert (record.stage, record.reason) == (Stage.FUSION, DropReason.FUSION_CUT)
        assert record.document.metadata["fusion_method"] == method
        assert "bm25_normalised" in record.document.metadata


@pytest.mark.parametrize("method", ["minmax", "dbsf"])
def test_two_texts_under_one_id_stay_two_candidates(method: str) -> None:
    results = pair(
        [doc("a", 2.0, "first text"), doc("b", 1.0)],
        [doc("a", 0.9, "other text")],
        fusion=method,
    ).invoke("q")
    assert sorted(str(d.id) for d in results) == ["a", "a#2", "b"]
    by_id = {d.id: d for d in results}
    assert by_id["a#2"].page_content == "other text"
    assert "bm25_normalised" not in by_id["a#2"].metadata


def test_an_unknown_method_is_refused() -> None:
    with pytest.raises(ValidationError, match="fusion"):
        pair([doc("a", 1.0)], [doc("a", 1.0)], fusion="borda")
