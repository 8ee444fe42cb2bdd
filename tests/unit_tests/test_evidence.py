from collections.abc import Callable, Sequence

import pytest
from langchain_core.documents import Document

from langchain_ragbudget.evidence._assess import (
    Calibration,
    assess_thresholds,
    calibrate_threshold,
    top_score,
)


def doc(**metadata: float) -> Document:
    return Document(page_content="x", metadata=metadata)


def test_first_score_key_present_decides() -> None:
    thresholds = {"rerank_score": 0.5, "dense_score": 0.4}
    evidence = assess_thresholds(
        [doc(rerank_score=0.2, dense_score=0.9), doc(rerank_score=0.3)], thresholds
    )
    assert (evidence.weak, evidence.score_key, evidence.score) == (
        True,
        "rerank_score",
        0.3,
    )
    fallback = assess_thresholds([doc(dense_score=0.45)], thresholds)
    assert (fallback.weak, fallback.score_key) == (False, "dense_score")


def test_no_documents_is_weak_and_no_score_is_unknown() -> None:
    assert assess_thresholds([], {"dense_score": 0.4}).weak is True
    assert assess_thresholds([doc(bm25_score=3.0)], {"dense_score": 0.4}).weak is None
    assert assess_thresholds([doc(dense_score=0.1)], {"dense_score": None}).weak is None


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


def calibrate_from_questions(
    retrieve: Callable[[str], Sequence[Document]],
    present: Sequence[str],
    absent: Sequence[str],
    score_key: str,
) -> Calibration:
    """Calibrate on both question sets' top scores; a missing score is an error."""

    def scores(questions: Sequence[str]) -> list[float]:
        out = []
        for question in questions:
            score = top_score(retrieve(question), score_key)
            if score is None:
                raise ValueError(f"no result for {question!r} carries {score_key!r}")
            out.append(score)
        return out

    return calibrate_threshold(scores(present), scores(absent))


@pytest.mark.needs_embedding_model
def test_calibrate_from_questions_on_the_sample_corpus() -> None:
    from langchain_ragbudget import HybridRetriever, load_config
    from langchain_ragbudget.sample import load_sample_corpus, load_sample_questions

    config = load_config()
    retriever = HybridRetriever.from_config(config, documents=load_sample_corpus())
    questions = load_sample_questions()
    present = [q["question"] for q in questions if q["answer_ids"]]
    absent = [q["question"] for q in questions if not q["answer_ids"]] + [
        "What is the boiling point of tungsten?",
        "Who won the 1998 football world cup?",
        "How many moons does Neptune have?",
    ]
    calibration = calibrate_from_questions(
        retriever.invoke, present, absent, "dense_score"
    )
    assert (calibration.n_present, calibration.n_absent) == (7, 4)
    assert calibration.auc > 0.9  # the sample questions are easy to tell apart
    assert calibration.balanced_accuracy >= 0.85
    with pytest.raises(ValueError, match="carries 'rerank_score'"):
        calibrate_from_questions(retriever.invoke, present, absent, "rerank_score")
