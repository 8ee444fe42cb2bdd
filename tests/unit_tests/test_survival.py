"""Naive slicing against packing: which passages, and which evidence, survive."""

import pytest
from langchain_core.documents import Document

from langchain_ragbudget.budget._render import ContextFormat, group_citations
from langchain_ragbudget.config._settings import SurfaceSettings, load_config
from langchain_ragbudget.config._tokens import get_encoding
from langchain_ragbudget.evaluation._survival import (
    _BUDGET_POLICIES,
    POLICIES,
    is_whole_sentences,
    naive_slice,
    policy_survival,
)

pytestmark = pytest.mark.needs_tiktoken("cl100k_base")
ENCODING = "cl100k_base"
HEAD = "The refund window is ninety days from delivery."
TAIL = "Store credit never expires."
DOCS = [
    Document(id="a", page_content="Shipping takes five days. " * 8),
    Document(id="b", page_content="Returns need a receipt. " * 8),
    Document(id="c", page_content=f"{HEAD} {'Some filler words here. ' * 12}{TAIL}"),
]


def budget_covering(position: int) -> int:
    """The smallest token budget whose slice keeps `position` characters."""
    text = ContextFormat().render(group_citations(DOCS, ContextFormat()))
    encoding = get_encoding(ENCODING)
    tokens = encoding.encode(text)
    return next(
        b
        for b in range(1, len(tokens) + 1)
        if len(encoding.decode(tokens[:b])) >= position
    )


def test_a_cut_passage_keeps_the_evidence_in_its_head() -> None:
    text = ContextFormat().render(group_citations(DOCS, ContextFormat()))
    cut = budget_covering(text.index(HEAD) + len(HEAD))
    everything = budget_covering(len(text))
    evidence = {2: [HEAD], 1: ["Returns need a receipt."]}
    result = naive_slice(DOCS, [cut, everything], ENCODING, evidence)
    assert result.passages == [[0, 1], [0, 1, 2]]  # c is cut mid-text at `cut`
    assert sorted(result.evidence[0]) == [1, 2]  # but its head, the evidence, is in
    assert sorted(result.evidence[1]) == [1, 2]
    tail_only = naive_slice(DOCS, [cut], ENCODING, {2: [HEAD, TAIL]})
    assert tail_only.evidence == [[]]  # every evidence sentence must be in


def test_packing_keeps_whole_passages_only() -> None:
    text = ContextFormat().render(group_citations(DOCS, ContextFormat()))
    cut = budget_covering(text.index(HEAD) + len(HEAD))
    for policy in ("skip", "trim"):
        (kept,) = policy_survival(DOCS, policy, [cut], ENCODING).passages
        assert 2 not in kept  # c does not fit whole, so it is not kept whole


def test_a_cut_inside_a_multibyte_character_is_handled() -> None:
    docs = [
        Document(id=str(i), page_content="Crème brûlée 🍮🍮 " * 5) for i in range(3)
    ]
    text = ContextFormat().render(group_citations(docs, ContextFormat()))
    encoding = get_encoding(ENCODING)
    tokens = encoding.encode(text)
    budgets = list(range(1, len(tokens) + 1))
    # the case exists: some budgets end inside a character
    assert any(encoding.decode(tokens[:b]).endswith("\ufffd") for b in budgets)
    result = naive_slice(docs, budgets, ENCODING)
    counts = [len(kept) for kept in result.passages]
    assert counts == sorted(counts) and counts[0] == 0 and counts[-1] == 3


def test_evidence_that_is_not_in_the_passage_is_an_error() -> None:
    with pytest.raises(ValueError, match="not in passage 0"):
        naive_slice(DOCS, [10], ENCODING, {0: ["A sentence from elsewhere."]})


def test_trim_keeps_evidence_of_a_passage_it_shortens() -> None:
    text = ContextFormat().render(group_citations(DOCS, ContextFormat()))
    cut = budget_covering(text.index(HEAD) + len(HEAD))
    result = policy_survival(
        DOCS, "trim", [cut + 20], ENCODING, question=HEAD, evidence={2: [HEAD]}
    )
    assert result.evidence == [[2]] and result.bad_cuts == [0]
    assert 2 not in result.passages[0]  # shortened, so not whole


def test_whole_sentences_check() -> None:
    original = "First one. Second one.\nThird one."
    assert is_whole_sentences("First one. Third one.", original)
    assert is_whole_sentences("Second one.\nThird one.", original)
    assert not is_whole_sentences("First one. Second", original)
    assert not is_whole_sentences("Third one. First one.", original)  # order


def test_the_trim_row_is_the_shipped_default_and_fitted_stays_beside_it() -> None:
    # make eval's "trim" row must measure what users get; the alternative scorer
    # is measured beside it, so the case for keeping it shows in the same table
    default = SurfaceSettings.model_fields["relevance"].default
    assert _BUDGET_POLICIES["trim"] == ("trim", default)
    assert load_config().surfaces["chat"].relevance == default
    assert _BUDGET_POLICIES["trim, fitted"] == ("trim", "fitted")
    assert set(POLICIES) == {"naive slice", *_BUDGET_POLICIES}
