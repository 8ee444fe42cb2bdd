import random

import pytest
import pytrec_eval

from langchain_ragbudget.metrics import hit_at_k, mrr_at_k, ndcg_at_k, recall_at_k


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
