import pytest
from langchain_core.documents import Document

from langchain_ragbudget.evidence import assess_evidence, calibrate_threshold


def doc(**metadata: float) -> Document:
    return Document(page_content="x", metadata=metadata)


def test_first_score_key_present_decides() -> None:
    thresholds = {"rerank_score": 0.5, "dense_score": 0.4}
    evidence = assess_evidence(
        [doc(rerank_score=0.2, dense_score=0.9), doc(rerank_score=0.3)], thresholds
    )
    assert (evidence.weak, evidence.score_key, evidence.score) == (
        True,
        "rerank_score",
        0.3,
    )
    fallback = assess_evidence([doc(dense_score=0.45)], thresholds)
    assert (fallback.weak, fallback.score_key) == (False, "dense_score")


def test_no_documents_is_weak_and_no_score_is_unknown() -> None:
    assert assess_evidence([], {"dense_score": 0.4}).weak is True
    assert assess_evidence([doc(bm25_score=3.0)], {"dense_score": 0.4}).weak is None
    assert assess_evidence([doc(dense_score=0.1)], {"dense_score": None}).weak is None


def test_calibration_by_hand() -> None:
    calibration = calibrate_threshold(present=[0.8, 0.7, 0.4], absent=[0.3, 0.5, 0.2])
    assert calibration.threshold == pytest.approx(0.35)  # ties with 0.45; lowest wins
    assert calibration.present_above == 1.0
    assert calibration.absent_below == pytest.approx(2 / 3)
    assert calibration.auc == pytest.approx(8 / 9)
    assert "threshold 0.350" in calibration.summary()


def test_perfect_separation() -> None:
    calibration = calibrate_threshold(present=[0.9, 0.8], absent=[0.1, 0.2])
    assert calibration.balanced_accuracy == 1.0 and calibration.auc == 1.0
    assert 0.2 < calibration.threshold <= 0.8


def test_calibration_needs_both_sets() -> None:
    with pytest.raises(ValueError, match="each set"):
        calibrate_threshold([0.5], [])
