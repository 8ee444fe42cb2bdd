import random

import pytest
import pytrec_eval

from langchain_ragbudget.evaluation._metrics import (
    hit_at_k,
    mrr_at_k,
    ndcg_at_k,
    recall_at_k,
    without_query_itself,
)


def test_hand_computed_example() -> None:
    ranked = ["x", "a", "y", "b", "a"]
    relevant = {"a": 1, "b": 2, "c": 1}
    assert hit_at_k(ranked, relevant, 1) == 0.0 and hit_at_k(ranked, relevant, 2) == 1.0
    assert (
        mrr_at_k(ranked, relevant, 10) == 0.5 and mrr_at_k(ranked, relevant, 1) == 0.0
    )
    assert recall_at_k(ranked, relevant, 4) == pytest.approx(2 / 3)
    dcg = 1 / 1.584962500721156 + 2 / 2.321928094887362  # ranks 2 and 4
    ideal = 2 / 1 + 1 / 1.584962500721156 + 1 / 2.0
    assert ndcg_at_k(ranked, relevant, 10) == pytest.approx(dcg / ideal)
    assert ndcg_at_k(["x"], {}, 10) == 0.0 and recall_at_k(["x"], {}, 10) == 0.0


def test_repeated_ids_count_once() -> None:
    assert recall_at_k(["a", "a", "a"], {"a": 1, "b": 1}, 3) == 0.5
    assert ndcg_at_k(["a", "a", "b"], {"a": 1, "b": 1}, 10) == pytest.approx(1.0)


def test_agrees_with_trec_eval() -> None:
    rng = random.Random(7)
    docs = [f"d{i}" for i in range(40)]
    run: dict[str, dict[str, float]] = {}
    qrels: dict[str, dict[str, int]] = {}
    ours: dict[str, list[str]] = {}
    for q in range(60):
        ranked = rng.sample(docs, rng.randint(1, 30))
        ours[f"q{q}"] = ranked
        run[f"q{q}"] = {doc: float(len(ranked) - i) for i, doc in enumerate(ranked)}
        qrels[f"q{q}"] = {
            doc: rng.choice([1, 1, 2]) for doc in rng.sample(docs, rng.randint(1, 6))
        }
    measures = {"ndcg_cut_10", "recall_10", "recip_rank", "success_10"}
    reference = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    for qid, ranked in ours.items():
        rel = qrels[qid]
        expected = reference[qid]
        assert ndcg_at_k(ranked, rel, 10) == pytest.approx(
            expected["ndcg_cut_10"], abs=1e-6
        )
        assert recall_at_k(ranked, rel, 10) == pytest.approx(
            expected["recall_10"], abs=1e-6
        )
        assert mrr_at_k(ranked, rel, len(ranked)) == pytest.approx(
            expected["recip_rank"], abs=1e-6
        )
        assert hit_at_k(ranked, rel, 10) == pytest.approx(
            expected["success_10"], abs=1e-6
        )


def test_queries_in_the_corpus_are_ignored_as_beir_does() -> None:
    # BEIR's EvaluateRetrieval.evaluate(..., ignore_identical_ids=True) pops the hit
    # whose id is the query id from each run, then scores with pytrec_eval.
    rng = random.Random(11)
    docs = [f"d{i}" for i in range(40)]
    run: dict[str, dict[str, float]] = {}
    qrels: dict[str, dict[str, int]] = {}
    ours: dict[str, list[str]] = {}
    identical = 0
    for _ in range(60):
        query_id = rng.choice(docs)  # every query is also a corpus document
        ranked = rng.sample(docs, rng.randint(2, 30))
        if query_id not in ranked and rng.random() < 0.7:
            ranked.insert(rng.randint(0, 3), query_id)  # retrieved near the top
        identical += query_id in ranked
        ours[query_id] = ranked
        run[query_id] = {
            doc: float(len(ranked) - i)
            for i, doc in enumerate(ranked)
            if doc != query_id  # BEIR's rule
        }
        pool = [doc for doc in docs if doc != query_id]
        qrels[query_id] = {doc: 1 for doc in rng.sample(pool, rng.randint(1, 5))}
    assert identical > 20  # the case is really exercised
    measures = {"ndcg_cut_10", "recall_10", "recip_rank"}
    reference = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    differs = 0
    for query_id, ranked in ours.items():
        rel, expected = qrels[query_id], reference[query_id]
        kept = without_query_itself(ranked, query_id)
        assert ndcg_at_k(kept, rel, 10) == pytest.approx(
            expected["ndcg_cut_10"], abs=1e-6
        )
        assert recall_at_k(kept, rel, 10) == pytest.approx(
            expected["recall_10"], abs=1e-6
        )
        assert mrr_at_k(kept, rel, len(kept)) == pytest.approx(
            expected["recip_rank"], abs=1e-6
        )
        differs += ndcg_at_k(ranked, rel, 10) != pytest.approx(ndcg_at_k(kept, rel, 10))
    assert differs > 0  # keeping the query's own hit would change the numbers
