"""BeirDataset: a subset that still holds every judged document; judged documents
the corpus lacks are reported."""

from pathlib import Path

import pytest
from langchain_core.documents import Document

from langchain_ragbudget.cli import _main as cli
from langchain_ragbudget.evaluation import _harness as evaluation
from langchain_ragbudget.evaluation._beir import BeirDataset


def _dataset() -> BeirDataset:
    corpus = [Document(id=f"d{i}", page_content=f"text {i}") for i in range(10)]
    return BeirDataset(
        "toy",
        corpus,
        {"q1": "first", "q2": "second", "q3": "third"},
        {"q1": {"d7": 1}, "q2": {"d2": 1, "d9": 0}, "q3": {"d0": 1}},
        {"q1": {"d7": ["evidence"]}, "q3": {"d0": ["other"]}},
    )


def test_subset_keeps_every_judged_document_and_the_first_distractors() -> None:
    small = _dataset().subset(max_queries=2, distractors=3)
    assert list(small.queries) == ["q1", "q2"]
    assert small.qrels == {"q1": {"d7": 1}, "q2": {"d2": 1, "d9": 0}}
    assert small.rationales == {"q1": {"d7": ["evidence"]}}
    # judged d2, d7, d9; distractors d0, d1, d3 (the first unjudged); corpus order
    assert [d.id for d in small.corpus] == ["d0", "d1", "d2", "d3", "d7", "d9"]
    assert small.name == "toy"


def test_subset_keeps_judged_documents_even_with_no_distractors() -> None:
    small = _dataset().subset(max_queries=3, distractors=0)
    assert [d.id for d in small.corpus] == ["d0", "d2", "d7", "d9"]


def test_subset_larger_than_the_dataset_is_the_dataset() -> None:
    dataset = _dataset()
    assert dataset.subset(max_queries=50, distractors=50) == dataset


@pytest.mark.parametrize(("queries", "distractors"), [(0, 5), (-1, 5), (2, -1)])
def test_subset_refuses_sizes_that_make_no_sense(
    queries: int, distractors: int
) -> None:
    with pytest.raises(ValueError, match="max_queries >= 1 and distractors >= 0"):
        _dataset().subset(max_queries=queries, distractors=distractors)


def test_judged_documents_missing_from_the_corpus_are_listed() -> None:
    dataset = _dataset()
    assert dataset.judged_missing() == []
    dataset.qrels["q2"].update({"gone": 2, "also-gone": 1, "not-relevant": 0})
    assert dataset.judged_missing() == ["also-gone", "gone"]


def test_eval_says_when_the_qrels_judge_documents_the_corpus_lacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "text": "Cats sleep."}\n')
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "cats"}\n')
    (tmp_path / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\tgone\t1\n"
    )
    # stop after the note: the run itself is tested elsewhere
    monkeypatch.setattr(evaluation, "evaluate", _stop)
    monkeypatch.setenv("RAGBUDGET_CACHE_DIR", str(tmp_path / "cache"))  # not the user's
    assert cli.main(["eval", str(tmp_path)]) == 3
    out = capsys.readouterr().out
    assert "judge 1 document(s) relevant that the corpus does not hold" in out
    assert "(e.g. gone)" in out


def _stop(*args: object, **kwargs: object) -> None:
    raise RuntimeError("stopped after loading")
