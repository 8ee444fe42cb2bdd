from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.documents import Document

from langchain_ragbudget.budget._context_budget import ContextBudget
from langchain_ragbudget.budget._packing import PackItem, pack
from langchain_ragbudget.budget._render import edges_order
from langchain_ragbudget.ledger._records import DropReason


def item(tokens: int, group: str = "", header: int = 0, content: str = "") -> PackItem:
    return PackItem(
        tokens, group or f"g{tokens}-{content}", header, content or f"c{tokens}{group}"
    )


def test_skip_lets_a_smaller_passage_after_an_overflow_in() -> None:
    items = [item(40, content="a"), item(50, content="b"), item(10, content="c")]
    skip = pack(items, max_tokens=60, max_docs=10, policy="skip")
    assert skip.kept == (0, 2) and skip.dropped == ((1, DropReason.MAX_TOKENS),)
    assert skip.tokens_used == 50 and not skip.over_budget


def test_max_docs_and_duplicates_have_their_own_reasons() -> None:
    items = [
        item(5, content="x"),
        item(5, content="x"),
        item(5, content="y"),
        item(5, content="z"),
    ]
    result = pack(items, max_tokens=100, max_docs=2)
    assert result.kept == (0, 2)
    assert result.dropped == ((1, DropReason.DUPLICATE), (3, DropReason.MAX_DOCS))


def test_passages_never_weighed_are_never_counted() -> None:
    counted: list[str] = []

    def lazy(name: str, tokens: int) -> PackItem:
        def count() -> int:
            counted.append(name)
            return tokens

        return PackItem(count, name, lambda: 1, name)

    items = [lazy("a", 5), lazy("a-again", 5), lazy("b", 5), lazy("c", 5)]
    items[1].content_key = "a"  # a duplicate of the first
    result = pack(items, max_tokens=100, max_docs=2)
    assert result.kept == (0, 2)
    assert counted == ["a", "b"]  # the duplicate and the one past max_docs: never
    assert [i.counted_tokens for i in items] == [5, None, 5, None]


def test_min_docs_keeps_an_oversized_top_passage_and_says_so() -> None:
    result = pack([item(500), item(10)], max_tokens=100, max_docs=5, min_docs=1)
    assert result.kept == (0,) and result.over_budget and result.tokens_used == 500
    assert pack([item(500)], max_tokens=100, max_docs=5, min_docs=0).kept == ()


def test_a_group_header_is_paid_once() -> None:
    items = [
        item(10, "doc", 7, "a"),
        item(10, "doc", 7, "b"),
        item(10, "other", 7, "c"),
    ]
    assert pack(items, max_tokens=27, max_docs=5).kept == (0, 1)
    assert pack(items, max_tokens=27, max_docs=5).tokens_used == 27


def test_edges_order_puts_the_best_first_and_second_best_last() -> None:
    assert edges_order([1, 2, 3, 4, 5]) == [1, 3, 5, 4, 2]
    assert edges_order([1, 2]) == [1, 2]
    assert edges_order([]) == []


items_strategy = st.lists(
    st.builds(
        PackItem,
        tokens=st.integers(0, 300),
        group=st.sampled_from("abcde"),
        group_tokens=st.integers(0, 20),
        content_key=st.sampled_from("pqrstuvwxyz"),
    ),
    max_size=30,
)


@given(
    items_strategy,
    st.integers(1, 800),
    st.integers(1, 12),
    st.integers(0, 3),
)
def test_pack_properties(
    items: list[PackItem], max_tokens: int, max_docs: int, min_docs: int
) -> None:
    min_docs = min(min_docs, max_docs)
    results = {
        policy: pack(
            items,
            max_tokens=max_tokens,
            max_docs=max_docs,
            policy=policy,
            min_docs=min_docs,
        )
        for policy in ("skip",)
    }
    for result in results.values():
        placed = sorted([*result.kept, *(index for index, _ in result.dropped)])
        assert placed == list(range(len(items)))  # every item exactly once
        for group in {items[i].group for i in result.kept}:  # each by rank
            mine = [i for i in result.kept if items[i].group == group]
            assert mine == sorted(mine)
        assert len(result.kept) <= max_docs
        if not result.over_budget:
            assert result.tokens_used <= max_tokens
        else:
            assert len(result.kept) <= max(min_docs, 1)
        groups = {items[i].group for i in result.kept}
        expected = sum(items[i].tokens for i in result.kept) + sum(
            next(items[i].group_tokens for i in result.kept if items[i].group == g)
            for g in groups
        )
        assert result.tokens_used == expected


@pytest.mark.needs_tiktoken
def test_a_surface_that_sets_only_max_tokens_never_goes_over(tmp_path: Path) -> None:
    """Only `min_docs` may keep a passage over the budget, and only when asked."""
    path = tmp_path / "ragbudget.yml"
    path.write_text("surfaces:\n  api:\n    max_tokens: 30\n", encoding="utf-8")
    big = Document(
        page_content="One sentence far longer than thirty tokens " + "word " * 60,
        id="big",
        metadata={"doc_id": "big", "source": "big.md"},
    )
    context = ContextBudget.from_config(path, surface="api").fit([big])
    assert context.report.min_docs == 0 and not context.report.over_budget
    assert context.documents == [] and context.report.tokens_used == 0
    (drop,) = context.report.drops
    assert drop.key == "big" and drop.reason == DropReason.MAX_TOKENS
    asked = ContextBudget.from_config(path, surface="api", min_docs=1).fit([big])
    assert asked.report.over_budget and asked.report.kept_ids == ["big"]
