"""BeirDataset.subset: a small corpus that still holds every judged document."""

import pytest
from langchain_core.documents import Document

from langchain_ragbudget.beir import BeirDataset


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
