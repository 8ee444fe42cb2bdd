import json
import math
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from langchain_ragbudget.config._settings import SurfaceSettings, load_config
from langchain_ragbudget.errors import ConfigError
from langchain_ragbudget.evidence._sentence_scoring import (
    FEATURES,
    FITTED_SHARE,
    MODEL_FILE,
    SentenceModel,
    blended_relevance,
    fitted_relevance,
    sentence_features,
    shipped_model,
    terms,
)

PASSAGE = [
    "Hypertension is common in older adults.",
    "We studied salt intake in a cohort of patients.",
    "Lower salt intake reduced blood pressure by 5 mmHg.",
    "Funding came from a national agency.",
]
QUESTION = "Salt intake lowers blood pressure."
QUESTIONS = st.text(max_size=60)
PASSAGES = st.lists(st.text(min_size=1, max_size=80), min_size=1, max_size=8)


def column(rows: list[list[float]], name: str) -> list[float]:
    return [row[FEATURES.index(name)] for row in rows]


def test_features_by_hand() -> None:
    rows = sentence_features(QUESTION, PASSAGE)
    assert len(rows) == 4 and all(len(row) == len(FEATURES) for row in rows)
    # question terms: salt, intak, lower, blood, pressur; the third sentence has all
    assert column(rows, "coverage")[2] == pytest.approx(1.0)
    assert column(rows, "coverage")[0] == 0.0 and column(rows, "coverage")[3] == 0.0
    assert column(rows, "gap_to_best") == pytest.approx(
        [c - 1.0 for c in column(rows, "coverage")]
    )
    assert column(rows, "previous_coverage")[3] == pytest.approx(1.0)
    assert column(rows, "next_coverage")[1] == pytest.approx(1.0)
    assert column(rows, "previous_coverage")[0] == 0.0
    assert column(rows, "question_share") == pytest.approx([0.0, 0.4, 1.0, 0.0])
    assert column(rows, "position") == pytest.approx([0.0, 1 / 3, 2 / 3, 1.0])
    assert column(rows, "last") == [0.0, 0.0, 0.0, 1.0]
    assert column(rows, "log_sentences") == pytest.approx([math.log(4)] * 4)


def test_a_rarer_question_term_weighs_more() -> None:
    # "salt" is in two sentences, "pressure" in one: holding "pressure" covers more
    passage = ["Salt was measured.", "Salt and pressure.", "Pressure alone."]
    rows = sentence_features("salt pressure", passage)
    coverage = column(rows, "coverage")
    assert coverage[1] == pytest.approx(1.0)
    assert coverage[2] > 0 and coverage[0] > 0
    assert coverage[2] == pytest.approx(coverage[0])  # each term in two sentences


def test_one_sentence_passage() -> None:
    rows = sentence_features("salt", ["Salt."])
    assert column(rows, "position") == [0.0]
    assert column(rows, "last") == [1.0]


def test_shipped_model_ranks_the_answering_sentence_first() -> None:
    scores = fitted_relevance(QUESTION, PASSAGE)
    assert max(range(4), key=scores.__getitem__) == 2
    assert all(0.0 < s < 2.0 for s in scores)


def test_no_question_keeps_leading_sentences() -> None:
    assert fitted_relevance(None, PASSAGE) == [0.0] * 4
    assert fitted_relevance("", PASSAGE) == [0.0] * 4
    assert fitted_relevance(QUESTION, []) == []


def test_a_question_of_stopwords_only_scores_on_position_alone() -> None:
    scores = fitted_relevance("what is the", PASSAGE)
    assert len(scores) == 4 and len(set(scores)) > 1


def test_probability_is_the_logistic_function() -> None:
    model = SentenceModel(tuple(float(i) for i in range(len(FEATURES))), -1.0)
    row = [0.5] * len(FEATURES)
    z = -1.0 + 0.5 * sum(range(len(FEATURES)))
    assert model.probability(row) == pytest.approx(1 / (1 + math.exp(-z)))


@pytest.mark.parametrize("z", [-1e6, -800.0, 0.0, 800.0, 1e6])
def test_probability_does_not_overflow(z: float) -> None:
    model = SentenceModel((0.0,) * len(FEATURES), z)
    p = model.probability([0.0] * len(FEATURES))
    assert 0.0 <= p <= 1.0 and p == pytest.approx(1 / (1 + math.exp(-max(z, -700))))


def test_shipped_file_names_every_feature() -> None:
    text = resources.files("langchain_ragbudget").joinpath(MODEL_FILE).read_text()
    data = json.loads(text)
    assert list(data["coefficients"]) == list(FEATURES)
    model = shipped_model()
    assert model.coefficients == tuple(data["coefficients"][f] for f in FEATURES)
    assert model.intercept == data["intercept"]


def good() -> dict[str, object]:
    return {"coefficients": dict.fromkeys(FEATURES, 0.5), "intercept": -1.0}


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (lambda d: d["coefficients"].pop("position"), "coefficients"),
        (lambda d: d["coefficients"].update(extra=1.0), "coefficients"),
        (lambda d: d.update(coefficients=[1.0, 2.0]), "coefficients"),
        (lambda d: d["coefficients"].update(last=float("nan")), "coefficients.last"),
        (lambda d: d["coefficients"].update(last=float("inf")), "coefficients.last"),
        (lambda d: d["coefficients"].update(coverage="1"), "coefficients.coverage"),
        (lambda d: d["coefficients"].update(coverage=True), "coefficients.coverage"),
        (lambda d: d.pop("intercept"), "intercept"),
    ],
)
def test_a_bad_model_file_names_the_key(change: object, key: str) -> None:
    data = good()
    change(data)  # type: ignore[operator]
    with pytest.raises(ConfigError) as raised:
        SentenceModel.from_mapping(data, "model.json")
    assert raised.value.file == "model.json" and raised.value.key == key


@given(QUESTIONS, PASSAGES)
def test_scores_are_one_per_sentence_and_question_terms_come_first(
    question: str, passage: list[str]
) -> None:
    scores = fitted_relevance(question, passage)
    assert len(scores) == len(passage)
    holds = [bool(terms(question) & terms(s)) for s in passage]
    for score, has_term in zip(scores, holds, strict=True):
        assert (1.0 <= score < 2.0) if has_term else (0.0 <= score < 1.0)


def test_blend_is_the_overlap_scaled_plus_a_share_of_the_model() -> None:
    # the overlap by hand: question terms salt, intak (each in two of the four
    # sentences: IDF log 3) and lower, blood, pressur (in one: log 5)
    second, third = 2 * math.log(3), 2 * math.log(3) + 3 * math.log(5)
    own = [0.0, second / third, 1.0, 0.0]
    model = fitted_relevance(QUESTION, PASSAGE)
    expected = [
        (1 - FITTED_SHARE) * x + FITTED_SHARE * f
        for x, f in zip(own, model, strict=True)
    ]
    assert blended_relevance(QUESTION, PASSAGE) == pytest.approx(expected)
    assert 0 < FITTED_SHARE < 0.5  # the overlap leads


def test_blend_without_a_question_keeps_leading_sentences() -> None:
    assert blended_relevance(None, PASSAGE) == [0.0] * 4
    assert blended_relevance("", PASSAGE) == [0.0] * 4
    assert blended_relevance(QUESTION, []) == []


def test_blend_of_a_passage_without_question_terms_keeps_leading_sentences() -> None:
    # the model alone orders such a passage by position (late first); the
    # default keeps the leading sentences there (all score 0)
    assert len(set(fitted_relevance("what is the", PASSAGE))) > 1
    assert blended_relevance("what is the", PASSAGE) == [0.0] * 4
    assert blended_relevance("volcanoes erupt", PASSAGE) == [0.0] * 4


def test_blend_keeps_an_answer_stated_first_where_the_model_alone_does_not() -> None:
    # the case the default must get right on documentation (test_trim.py pins the
    # budget's behaviour; this pins the scores): the overlap's clear lead stands
    question = "How long are application logs kept?"
    passage = [
        "Application logs are kept for 90 days.",
        "Metrics live longer.",
        "Audit logs are kept for a year.",
    ]
    model = fitted_relevance(question, passage)
    assert model[2] > model[0]  # the position bias the blend must not inherit
    scores = blended_relevance(question, passage)
    assert max(range(3), key=scores.__getitem__) == 0


@given(QUESTIONS, PASSAGES)
def test_blend_never_puts_a_sentence_without_question_terms_first(
    question: str, passage: list[str]
) -> None:
    scores = blended_relevance(question, passage)
    assert len(scores) == len(passage)
    holds = [bool(terms(question) & terms(s)) for s in passage]
    with_terms = [s for s, has in zip(scores, holds, strict=True) if has]
    without = [s for s, has in zip(scores, holds, strict=True) if not has]
    assert all(s > FITTED_SHARE for s in with_terms)
    if with_terms:
        assert all(0.0 <= s < FITTED_SHARE for s in without)
    else:
        assert scores == [0.0] * len(passage)


def test_blend_is_the_default_and_an_unknown_scorer_is_refused_by_key(
    tmp_path: Path,
) -> None:
    assert SurfaceSettings(max_docs=1, max_tokens=10).relevance == "blend"
    assert {s.relevance for s in load_config().surfaces.values()} == {"blend"}
    path = tmp_path / "ragbudget.yml"
    path.write_text("surfaces:\n  chat:\n    relevance: overlap\n")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    error = raised.value
    assert (error.file, error.key) == (str(path), "surfaces.chat.relevance")
    assert "'blend' or 'fitted'" in str(error)
