import pytest
from hypothesis import given
from hypothesis import strategies as st

from langchain_ragbudget.fusion import first_ranks, validate_weights, weighted_rrf


def test_scores_match_the_formula_by_hand() -> None:
    fused = weighted_rrf([["a", "b", "c"], ["c", "a"]], weights=[1.0, 2.0], c=60)
    scores = {item.key: item.score for item in fused}
    assert scores["a"] == pytest.approx(1 / 61 + 2 / 62)
    assert scores["b"] == pytest.approx(1 / 62)
    assert scores["c"] == pytest.approx(1 / 63 + 2 / 61)
    assert [item.key for item in fused] == ["c", "a", "b"]
    assert {item.key: item.ranks for item in fused} == {
        "a": (1, 2),
        "b": (2, None),
        "c": (3, 1),
    }


def test_a_repeat_inside_one_list_does_not_inflate_the_score() -> None:
    with_repeat = weighted_rrf([["a", "a", "b"], ["b"]], [1.0, 1.0], c=60)
    without = weighted_rrf([["a", "b"], ["b"]], [1.0, 1.0], c=60)
    assert [(f.key, f.score) for f in with_repeat] == [
        (f.key, f.score) for f in without
    ]


def test_first_ranks_count_distinct_keys_from_one() -> None:
    assert first_ranks(["x", "y", "x", "z"]) == {"x": 1, "y": 2, "z": 3}


def test_zero_weight_list_contributes_nothing() -> None:
    fused = weighted_rrf([["a"], ["b"]], weights=[1.0, 0.0])
    assert [(f.key, f.score) for f in fused] == [
        ("a", pytest.approx(1 / 61)),
        ("b", 0.0),
    ]


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ([1.0], "1 entries for 2 retrievers"),
        ([1.0, -0.5], "non-negative"),
        ([0.0, 0.0], "all zero"),
    ],
)
def test_bad_weights_are_named(weights: list[float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_weights(weights, 2)


rankings = st.lists(
    st.lists(st.sampled_from("abcdefghij"), max_size=12), min_size=1, max_size=4
)


@given(rankings, st.data())
def test_fusion_properties(lists: list[list[str]], data: st.DataObject) -> None:
    weights = data.draw(
        st.lists(
            st.floats(min_value=0.01, max_value=5),
            min_size=len(lists),
            max_size=len(lists),
        )
    )
    fused = weighted_rrf(lists, weights)
    keys = [item.key for item in fused]
    assert sorted(keys) == sorted({key for ranking in lists for key in ranking})
    scores = [item.score for item in fused]
    assert scores == sorted(scores, reverse=True)
    for item in fused:
        for ranking, rank in zip(lists, item.ranks, strict=True):
            assert (rank is None) == (item.key not in ranking)
