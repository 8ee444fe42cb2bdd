"""Fitting and measuring the weak-evidence signal. The harness parts run the real
pipeline (BM25, Chroma, fastembed) on the sample corpus; no reranker. The depth
guard also runs on two fixed lists (`ListRetriever`, a test double for "any
LangChain retriever") so a list that runs out is stated exactly."""

import random
from dataclasses import replace
from pathlib import Path

import pytest
from langchain_core.documents import Document
from list_retriever import ListRetriever
from sklearn.metrics import roc_auc_score

from langchain_ragbudget import ContextBudget
from langchain_ragbudget.config._settings import WeakEvidenceSettings, load_config
from langchain_ragbudget.evaluation._beir import BeirDataset
from langchain_ragbudget.evaluation._beir import judged_id as _doc_id
from langchain_ragbudget.evaluation._report import weak_evidence_yaml
from langchain_ragbudget.evaluation._stages import Stages
from langchain_ragbudget.evaluation._weak_evidence import (
    WeakEvidence,
    _cases,
    measure_weak_evidence,
)
from langchain_ragbudget.evaluation._weak_fit import (
    REGULARISATION,
    Cases,
    auroc,
    combined_scores,
    common_features,
    fit_combined,
    threshold_for_precision,
)
from langchain_ragbudget.evidence._assess import assess_evidence, calibrate_threshold
from langchain_ragbudget.evidence._signals import (
    LIST_FEATURES,
    fetched_scores,
    signal_features,
)
from langchain_ragbudget.retrieval._hybrid import HybridRetriever
from langchain_ragbudget.sample import load_sample_corpus, load_sample_questions


def test_auroc_agrees_with_the_pairwise_count() -> None:
    present, absent = [0.8, 0.7, 0.4, 0.4], [0.3, 0.5, 0.2, 0.4]
    labels = [True] * 4 + [False] * 4
    value = auroc(present + absent, labels)
    assert value == pytest.approx(calibrate_threshold(present, absent).auc)  # ties 1/2
    assert value == pytest.approx(roc_auc_score(labels, present + absent))
    assert value == pytest.approx((4 + 4 + 2.5 + 2.5) / 16)  # 0.4 ties one 0.4


def test_threshold_for_precision_by_hand() -> None:
    scores = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    answerable = [False, False, True, False, True, True]
    # flag below 0.3: 2 of 2 right; below 0.4: 2 of 3; below 0.5: 3 of 4
    assert threshold_for_precision(scores, answerable, 1.0) == 0.3
    assert threshold_for_precision(scores, answerable, 0.75) == 0.5
    # nothing reaches 100% when the lowest score is answerable: the most precise
    assert threshold_for_precision([0.1, 0.2], [True, False], 1.0) == 0.2 + 1e-9


def test_the_fitted_model_reproduces_its_probabilities() -> None:
    features = [
        {"dense_top": float(i % 7), "coverage": float(i % 3)} for i in range(40)
    ]
    labels = [i % 7 > 2 for i in range(40)]
    cases = Cases(features, [None] * 40, ["none"] * 40, labels)
    fitted = fit_combined(cases, ["dense_top", "coverage"], 0.8, "toy")
    model = fitted.model
    probabilities = combined_scores(cases, model)
    assert auroc(fitted.held_out, labels) > 0.9
    assert fitted.cv_auroc > 0.9
    assert auroc(probabilities, labels) > 0.9  # dense_top separates the classes
    assert model.coefficients["dense_top"] > 0 and 0 < model.threshold < 1
    chosen = float(model.fitted_on.split("C=")[1].split()[0])
    assert model.fitted_on.startswith("toy; ") and chosen in REGULARISATION


def test_the_yaml_round_trip_keeps_every_number(tmp_path: Path) -> None:
    """The model `ragbudget eval --weak-evidence-yaml` writes for two surfaces
    (the second an alias of the first) loads as the same numbers and scores."""
    rng = random.Random(4)
    features = [
        {"dense_top": rng.gauss(0, 1), "bm25_gap": rng.gauss(0, 1) / 3}
        for _ in range(300)
    ]
    labels = [f["dense_top"] + f["bm25_gap"] + rng.gauss(0, 0.5) > 0 for f in features]
    cases = Cases(features, [None] * 300, ["none"] * 300, labels)
    fitted = fit_combined(cases, ["dense_top", "bm25_gap"], 0.8, "synthetic")
    weak = WeakEvidence(
        "train", 150, 150, 0.8, [], fitted.model, fitted.cv_auroc, ([], [])
    )
    path = tmp_path / "weak.yml"
    path.write_text(weak_evidence_yaml(weak, ["chat", "search"]), encoding="utf-8")
    config = load_config(path)
    for surface in ("chat", "search"):
        loaded = config.surface(surface).weak_evidence.combined
        assert loaded == fitted.model
        assert combined_scores(cases, loaded) == combined_scores(cases, fitted.model)
    assert f"AUROC there {fitted.cv_auroc:.3f}" in path.read_text().splitlines()[0]


def listed(ids: str) -> list[Document]:
    scores = range(len(ids), 0, -1)
    return [
        Document(page_content=f"text {i}", id=i, metadata={"doc_id": i, "score": s})
        for i, s in zip(ids, scores, strict=True)
    ]


def test_both_cases_hand_fusion_lists_of_one_length() -> None:
    """A list that cannot be refilled (BM25 ran out of matching passages) is cut
    to the same length as retrieved, so its length cannot give the label away."""
    hybrid = HybridRetriever(
        retrievers=[
            ListRetriever(documents=listed("abc"), k=3),  # runs out: no refill for "a"
            ListRetriever(documents=listed("daefg"), k=3),  # refilled with "g"
        ],
        names=["bm25", "dense"],
        k=2,
    )
    with_gold, without = Stages(hybrid, None, {}).with_and_without("q", {"a"})
    full, removed = fetched_scores(with_gold), fetched_scores(without)
    assert full is not None and removed is not None
    assert len(full["bm25"]) == len(removed["bm25"]) == 2  # a, b | b, c
    assert len(full["dense"]) == len(removed["dense"]) == 3  # d, a, e | d, e, f
    fused = [_doc_id(d) for d in with_gold] + [r.key for r in with_gold.drops]
    assert "a" in fused and "c" not in fused
    assert "a" not in [_doc_id(d) for d in without]


@pytest.fixture(scope="module")
def northwind() -> tuple[Stages, BeirDataset]:
    questions = [q for q in load_sample_questions() if q["answer_ids"]]
    corpus = load_sample_corpus()
    source = {doc.id: doc.metadata["doc_id"] for doc in corpus}  # judged by document
    dataset = BeirDataset(
        "northwind",
        corpus,
        {f"q{i}": q["question"] for i, q in enumerate(questions)},
        {
            f"q{i}": {source[d]: 1 for d in q["answer_ids"]}
            for i, q in enumerate(questions)
        },
    )
    return Stages.build(dataset, load_config(), ["chat"], None, None), dataset


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
def test_removed_gold_is_never_seen(northwind: tuple[Stages, BeirDataset]) -> None:
    stages, dataset = northwind
    seen_before = 0
    for query_id, text in dataset.queries.items():
        gold = set(dataset.qrels[query_id])
        with_gold, without = stages.with_and_without(text, gold)
        seen_before += any(_doc_id(d) in gold for d in with_gold)
        everything = [*without, *(record.document for record in without.drops)]
        assert not any(_doc_id(d) in gold for d in everything)
        assert len(without) == len(with_gold)  # refilled to the same depth
        full, removed = fetched_scores(with_gold), fetched_scores(without)
        assert full is not None and removed is not None
        assert {n: len(s) for n, s in full.items()} == {
            n: len(s) for n, s in removed.items()
        }
    assert seen_before == len(dataset.queries)  # the removal really removed


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
def test_fitted_on_the_fitting_split_only_and_reproduced_at_run_time(
    northwind: tuple[Stages, BeirDataset], monkeypatch: pytest.MonkeyPatch
) -> None:
    import langchain_ragbudget.evaluation._weak_evidence as evaluation

    stages, dataset = northwind
    fitted: list[Cases] = []

    def spy(cases: Cases, *args: object) -> object:
        fitted.append(cases)
        return fit_combined(cases, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(evaluation, "fit_combined", spy)
    config = load_config()
    ids = list(dataset.queries)
    measured = [
        replace(dataset, queries={q: dataset.queries[q] for q in part})
        for part in (ids[:3], ids[3:])
    ]
    results = [
        measure_weak_evidence(stages, config, "chat", dataset, m) for m in measured
    ]
    assert all(len(cases.answerable) == 2 * len(ids) for cases in fitted)
    assert results[0].model == results[1].model  # the measured split changes nothing
    assert [m.method for m in results[0].methods] == [
        "threshold (dense_score)",
        "combined (logistic)",
    ]
    model = results[0].model
    settings = WeakEvidenceSettings(method="combined", combined=model)
    for query_id in ids:
        text = dataset.queries[query_id]
        for candidates in stages.with_and_without(text, set(dataset.qrels[query_id])):
            [probability] = combined_scores(
                Cases(
                    [evaluation.signal_features(candidates, text)],
                    [None],
                    ["none"],
                    [True],
                ),
                model,
            )
            evidence = assess_evidence(
                candidates[:1], settings, candidates=candidates, question=text
            )
            assert evidence.score == pytest.approx(probability)
            assert evidence.weak is (probability < model.threshold)


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
def test_the_harness_sees_what_the_budget_sees(
    northwind: tuple[Stages, BeirDataset],
) -> None:
    """The harness's answerable case and the runtime chain (the hybrid retriever
    invoked, its CandidateList handed to the budget) give the same features and
    the same combined decision, list features included."""
    stages, dataset = northwind
    cases = _cases(stages, dataset, None, {}, None)
    names = common_features(cases.features)
    assert set(LIST_FEATURES) <= set(names)
    model = fit_combined(cases, names, 0.8, "northwind").model
    budget = ContextBudget.from_config(load_config())
    combined = WeakEvidenceSettings(method="combined", combined=model)
    settings = budget.settings.model_copy(update={"weak_evidence": combined})
    budget = budget.model_copy(update={"settings": settings})
    for text in dataset.queries.values():
        harness, _ = stages.with_and_without(text, set())
        runtime = stages.hybrid.invoke(text)
        features = signal_features(harness, text)
        assert features == pytest.approx(signal_features(runtime, text))
        case = Cases([features], [None], ["none"], [True])
        [expected] = combined_scores(case, model)
        evidence = budget.fit(runtime, question=text).evidence
        assert evidence.score == pytest.approx(expected, abs=1e-12)
