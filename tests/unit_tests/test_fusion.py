import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.preprocessing import minmax_scale

from langchain_ragbudget.retrieval._fusion import (
    dbsf_normalise,
    first_ranks,
    fuse,
    minmax_normalise,
    validate_weights,
    weighted_rrf,
)


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


# Score-based fusion: minmax and dbsf.


def test_minmax_fusion_by_hand() -> None:
    # list 1: a=3 -> 1, b=1 -> 0, c=2 -> 0.5; list 2: c=0.9 -> 1, a=0.5 -> 0
    fused = fuse(
        "minmax",
        [["a", "c", "b"], ["c", "a"]],
        [1.0, 3.0],
        scores=[[3.0, 2.0, 1.0], [0.9, 0.5]],
    )
    assert [item.key for item in fused] == ["c", "a", "b"]
    by_key = {item.key: item for item in fused}
    assert by_key["c"].score == pytest.approx((1 * 0.5 + 3 * 1.0) / 4)
    assert by_key["a"].score == pytest.approx((1 * 1.0 + 3 * 0.0) / 4)
    assert by_key["b"].score == 0.0
    assert by_key["a"].normalised == (1.0, 0.0)
    assert by_key["b"].normalised == (0.0, None)  # absent from list 2: counts 0
    assert by_key["b"].ranks == (3, None)


def test_dbsf_by_hand() -> None:
    # mean 2, sample std 2: mean - 3 std = -4 -> 0, mean + 3 std = 8 -> 1
    assert dbsf_normalise([4.0, 2.0, 0.0]) == pytest.approx([8 / 12, 6 / 12, 4 / 12])
    fused = fuse("dbsf", [["a", "b", "c"]], [2.0], scores=[[4.0, 2.0, 0.0]])
    assert [i.key for i in fused] == ["a", "b", "c"]
    assert [i.score for i in fused] == pytest.approx([8 / 12, 6 / 12, 4 / 12])


def test_dbsf_floors_below_three_deviations_and_keeps_above() -> None:
    low = dbsf_normalise([10.0] * 10 + [0.0])  # z of the 0 is about -3.02
    assert low[-1] == 0.0 and all(0 < n < 1 for n in low[:-1])
    high = dbsf_normalise([0.0] * 10 + [10.0])  # z about +3.02
    assert high[-1] > 1.0


@pytest.mark.parametrize("normalise", [minmax_normalise, dbsf_normalise])
def test_constant_or_single_scores_sit_in_the_middle(normalise: object) -> None:
    assert callable(normalise)
    assert normalise([5.0, 5.0, 5.0]) == [0.5, 0.5, 0.5]
    assert normalise([-2.0]) == [0.5]
    assert normalise([]) == []


@pytest.mark.parametrize("method", ["minmax", "dbsf"])
def test_ties_keep_first_seen_order(method: str) -> None:
    # b and a tie (0.5 each from one list); b was seen first
    fused = fuse(
        method,  # type: ignore[arg-type]
        [["b", "x"], ["a", "y"]],
        [1.0, 1.0],
        scores=[[1.0, 1.0], [1.0, 1.0]],
    )
    assert [item.key for item in fused] == ["b", "x", "a", "y"]
    assert len({item.score for item in fused}) == 1


@pytest.mark.parametrize("method", ["minmax", "dbsf"])
def test_empty_lists(method: str) -> None:
    assert fuse(method, [[], []], [1.0, 1.0], scores=[[], []]) == []  # type: ignore[arg-type]
    (only,) = fuse(method, [[], ["a"]], [1.0, 1.0], scores=[[], [0.3]])  # type: ignore[arg-type]
    assert only.key == "a" and only.normalised == (None, 0.5)
    assert only.score == pytest.approx(0.25)


@pytest.mark.parametrize("method", ["minmax", "dbsf"])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, None])
def test_a_score_that_is_not_finite_counts_zero_and_is_not_used(
    method: str, bad: float | None
) -> None:
    fused = fuse(
        method,  # type: ignore[arg-type]
        [["a", "b", "c"]],
        [1.0],
        scores=[[bad, 2.0, 1.0]],
    )
    by_key = {item.key: item for item in fused}
    assert by_key["a"].score == 0.0 and by_key["a"].normalised == (None,)
    assert by_key["a"].ranks == (1,)  # still ranked where it was returned
    # the statistics are those of b and c alone
    expected = {"minmax": minmax_normalise, "dbsf": dbsf_normalise}[method]([2.0, 1.0])
    assert [by_key["b"].score, by_key["c"].score] == pytest.approx(expected)


def test_a_repeat_in_one_list_counts_once_at_its_first_score() -> None:
    fused = fuse("minmax", [["a", "b", "a"]], [1.0], scores=[[1.0, 3.0, 9.0]])
    assert {i.key: i.score for i in fused} == {"b": 1.0, "a": 0.0}


def test_huge_scores_do_not_overflow() -> None:
    assert minmax_normalise([1e308, -1e308, 0.0]) == pytest.approx([1.0, 0.0, 0.5])
    assert all(math.isfinite(n) for n in dbsf_normalise([1e308, -1e308, 0.0]))


def test_method_and_score_errors_are_named() -> None:
    with pytest.raises(ValueError, match=r"unknown fusion method 'borda'.*rrf"):
        fuse("borda", [["a"]], [1.0], scores=[[1.0]])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'dbsf' needs the lists' scores"):
        fuse("dbsf", [["a"]], [1.0])
    with pytest.raises(ValueError, match="one score per key"):
        fuse("minmax", [["a", "b"]], [1.0], scores=[[1.0]])
    with pytest.raises(ValueError, match="all zero"):
        fuse("minmax", [["a"]], [0.0], scores=[[1.0]])


def test_rrf_through_fuse_is_weighted_rrf() -> None:
    lists = [["a", "b", "c"], ["c", "a"]]
    assert fuse("rrf", lists, [1.0, 2.0], c=10) == weighted_rrf(lists, [1.0, 2.0], 10)


finite = st.floats(min_value=-1e6, max_value=1e6)


@given(st.lists(finite, min_size=2, max_size=30))
def test_normalisers_match_reference_formulas(scores: list[float]) -> None:
    # sklearn treats a range near rounding error as constant (scales it to 0)
    tiny = 1e-9 * max(1.0, max(abs(s) for s in scores))
    if max(scores) - min(scores) > tiny:
        assert minmax_normalise(scores) == pytest.approx(
            minmax_scale(scores).tolist(), abs=1e-9
        )
    std = float(np.std(scores, ddof=1))
    if std > tiny:
        low = float(np.mean(scores)) - 3 * std
        reference = np.maximum(0.0, (np.array(scores) - low) / (6 * std))
        assert dbsf_normalise(scores) == pytest.approx(reference.tolist(), abs=1e-9)


scored_lists = st.lists(
    st.lists(
        st.tuples(
            st.sampled_from("abcdefghij"),
            st.one_of(st.none(), st.just(math.nan), finite),
        ),
        max_size=12,
    ),
    min_size=1,
    max_size=3,
)


@given(scored_lists, st.sampled_from(["minmax", "dbsf"]), st.data())
def test_score_fusion_properties(
    lists: list[list[tuple[str, float | None]]], method: str, data: st.DataObject
) -> None:
    weights = data.draw(
        st.lists(
            st.floats(min_value=0.01, max_value=5),
            min_size=len(lists),
            max_size=len(lists),
        )
    )
    fused = fuse(
        method,  # type: ignore[arg-type]
        [[key for key, _ in pairs] for pairs in lists],
        weights,
        scores=[[score for _, score in pairs] for pairs in lists],
    )
    keys = [item.key for item in fused]
    assert sorted(keys) == sorted({key for pairs in lists for key, _ in pairs})
    scores = [item.score for item in fused]
    assert all(math.isfinite(score) and score >= 0 for score in scores)
    assert scores == sorted(scores, reverse=True)
    for item in fused:
        for pairs, rank, norm in zip(lists, item.ranks, item.normalised, strict=True):
            first = next((score for key, score in pairs if key == item.key), None)
            usable = first is not None and math.isfinite(first)
            assert (rank is None) == all(key != item.key for key, _ in pairs)
            assert (norm is not None) == usable
            if method == "minmax" and norm is not None:
                assert 0.0 <= norm <= 1.0
