"""`ragbudget tune` on a BEIR folder the test writes from the sample corpus.

Real BM25, Chroma and fastembed; the numbers `tune` reports are checked against
the harness (`evaluate`) on the same queries, so neither can drift from the other.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from langchain_ragbudget import load_config
from langchain_ragbudget.cli._main import main
from langchain_ragbudget.errors import InvalidInputError
from langchain_ragbudget.evaluation._beir import load_beir
from langchain_ragbudget.evaluation._harness import evaluate
from langchain_ragbudget.evaluation._tuning import (
    RRF_CS,
    FusionSetting,
    Interval,
    Scored,
    TuneReport,
    check_split,
    fusion_grid,
    held_out_scores,
    paired_bootstrap,
    tune,
    tuned_yaml,
)
from langchain_ragbudget.retrieval._fusion import FUSION_METHODS
from langchain_ragbudget.sample import load_sample_corpus, load_sample_questions

TRAIN = 6  # sample questions 0-5 tune; the rest are the test split


@pytest.fixture
def beir_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "northwind"
    (folder / "qrels").mkdir(parents=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as out:
        for doc in load_sample_corpus():
            row = {
                "_id": doc.id,
                "title": doc.metadata["title"],
                "text": doc.page_content,
            }
            out.write(json.dumps(row) + "\n")
    questions = [q for q in load_sample_questions() if q["answer_ids"]]
    with (folder / "queries.jsonl").open("w") as out:
        for i, q in enumerate(questions):
            out.write(json.dumps({"_id": f"q{i}", "text": q["question"]}) + "\n")
    for split, chosen in (
        ("train", questions[:TRAIN]),
        ("test", questions[TRAIN:]),
    ):
        first = 0 if split == "train" else TRAIN
        lines = ["query-id\tcorpus-id\tscore"] + [
            f"q{first + i}\t{doc}\t1"
            for i, q in enumerate(chosen)
            for doc in q["answer_ids"]
        ]
        (folder / "qrels" / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Caches in tmp_path; no rerank (no FlashRank model here, none fetched)."""
    monkeypatch.setenv("RAGBUDGET_CACHE_DIR", str(tmp_path / "cache"))
    config = tmp_path / "offline.yml"
    config.write_text("rerank:\n  enabled: false\n")
    return config


def fusion_ndcg(folder: Path, config: Path, split: str) -> float:
    """The harness's fusion nDCG@10 on `split`, for comparison with tune's."""
    report = evaluate(
        load_beir(folder, split), load_config(config), surfaces=["chat"], budgets=()
    )
    (row,) = [row for row in report.quality if row.stage == "fusion"]
    assert row.ndcg is not None
    return row.ndcg


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
def test_tune_writes_a_config_whose_harness_score_is_the_one_reported(
    beir_folder: Path,
    offline: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "tuned" / "fusion.yml"
    code = main(
        [
            "tune",
            str(beir_folder),
            "--config",
            str(offline),
            "--split",
            "train",
            "--out",
            str(out),
            "--json",
        ]
    )
    assert code == 0
    result = json.loads(capsys.readouterr().out)  # stdout is JSON only
    assert (result["tuned_split"], result["measured_split"]) == ("train", "train")
    assert result["n_queries"] == TRAIN and result["out"] == str(out)
    assert {row["setting"]["method"] for row in result["by_method"]} == set(
        FUSION_METHODS
    )
    current, best = result["current"], result["best"]
    assert current["setting"] == {
        "method": "rrf",
        "weights": [1.0, 1.0],
        "rrf_c": 60.0,
    }
    assert best["ndcg"] >= current["ndcg"]
    assert result["gain"]["mean"] == pytest.approx(best["ndcg"] - current["ndcg"])
    assert result["gain"]["low"] <= result["gain"]["mean"] <= result["gain"]["high"]

    # the harness agrees with tune on both settings, on the same train queries
    assert fusion_ndcg(beir_folder, offline, "train") == pytest.approx(current["ndcg"])
    merged = tmp_path / "merged.yml"
    merged.write_text(offline.read_text() + out.read_text())
    tuned = load_config(merged)
    assert tuned.retrieval.fusion == best["setting"]["method"]
    assert [tuned.retrieval.sparse.weight, tuned.retrieval.dense.weight] == best[
        "setting"
    ]["weights"]
    assert fusion_ndcg(beir_folder, merged, "train") == pytest.approx(best["ndcg"])
    assert out.read_text() == result["yaml"]
    assert load_config(out).retrieval == tuned.retrieval  # loads on its own too


def test_tune_refuses_the_test_split(beir_folder: Path) -> None:
    with pytest.raises(InvalidInputError, match="refusing to tune on the test split"):
        tune(beir_folder, load_config(), split="test")
    with pytest.raises(InvalidInputError, match="--allow-test-split"):
        check_split(beir_folder, "../qrels/test")  # the same file by another path
    check_split(beir_folder, "test", allow_test=True)  # the explicit override


def test_a_split_that_links_to_or_shares_test_queries_is_refused(
    beir_folder: Path,
) -> None:
    qrels = beir_folder / "qrels"
    (qrels / "dev.tsv").symlink_to(qrels / "test.tsv")
    with pytest.raises(InvalidInputError, match="test split"):
        check_split(beir_folder, "dev")
    leaked = (qrels / "train.tsv").read_text() + f"q{TRAIN}\tsomething\t1\n"
    (qrels / "mixed.tsv").write_text(leaked)
    with pytest.raises(
        InvalidInputError, match=f"1 of its queries are test .*q{TRAIN}"
    ):
        check_split(beir_folder, "mixed")
    check_split(beir_folder, "train")


def test_cli_refuses_the_test_split_before_any_work(
    beir_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tune", str(beir_folder), "--split", "test"]) == 2
    assert "refusing to tune on the test split" in capsys.readouterr().err


def test_grid_starts_with_current_and_covers_every_method() -> None:
    current = FusionSetting("rrf", (1.0, 1.0), 60.0)
    grid = fusion_grid(current, shares=(0.0, 0.25, 1.0))
    assert grid[0] == current and len(grid) == len(set(grid))
    rrf = [s for s in grid[1:] if s.method == "rrf"]
    assert {s.rrf_c for s in rrf} == set(RRF_CS) and len(rrf) == 3 * len(RRF_CS)
    for method in ("minmax", "dbsf"):
        weights = [s.weights for s in grid if s.method == method]
        assert weights == [(0.0, 1.0), (0.25, 0.75), (1.0, 0.0)]


def test_paired_bootstrap() -> None:
    constant = paired_bootstrap(np.full(50, 0.02))
    assert constant.mean == pytest.approx(0.02)
    assert constant.low == pytest.approx(0.02) and constant.high == pytest.approx(0.02)
    symmetric = paired_bootstrap(np.array([0.1, -0.1] * 40))
    assert symmetric.mean == pytest.approx(0.0)
    assert symmetric.low < 0 < symmetric.high
    wide = paired_bootstrap(np.array([0.3, -0.1] * 5))
    narrow = paired_bootstrap(np.array([0.3, -0.1] * 500))
    assert narrow.high - narrow.low < wide.high - wide.low
    with pytest.raises(ValueError, match="at least one query"):
        paired_bootstrap(np.array([]))


def test_held_out_scores_use_the_setting_chosen_on_the_other_folds() -> None:
    # setting 1 is best on every query: every fold picks it
    matrix = np.array([[0.5, 0.4, 0.3, 0.2, 0.1, 0.0], [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]])
    assert held_out_scores(matrix).tolist() == matrix[1].tolist()  # type: ignore[union-attr]
    # each query favours a setting the others do not: held out, it gets the worse
    split = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 1.0, 1.0]])
    held = held_out_scores(split, folds=4)
    assert held is not None and held.tolist() == [0.0, 1.0, 1.0, 1.0]
    assert held_out_scores(np.array([[1.0]])) is None


def test_tuned_yaml_keeps_a_hostile_dataset_name_in_its_comment(
    tmp_path: Path,
) -> None:
    setting = FusionSetting("minmax", (0.3, 0.7), 60.0)
    report = TuneReport(
        dataset="evil\nretrieval:\n  k: 1\n#",
        tuned_split="train",
        measured_split="train",
        n_queries=3,
        grid_size=2,
        current=Scored(FusionSetting("rrf", (1.0, 1.0), 60.0), 0.5),
        best=Scored(setting, 0.6),
        by_method=[],
        gain=Interval(0.1, 0.0, 0.2),
        held_out=None,
        held_out_gain=None,
    )
    path = tmp_path / "tuned.yml"
    path.write_text(tuned_yaml(report))
    loaded = load_config(path).retrieval
    assert loaded.k == 10  # the name did not become a key
    assert (loaded.fusion, loaded.sparse.weight, loaded.dense.weight) == (
        "minmax",
        0.3,
        0.7,
    )
    assert loaded.rrf_c == 60.0  # not tuned for minmax: the default stays
