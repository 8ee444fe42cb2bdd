"""The whole pipeline on SciFact (../shared/data/scifact): slower, real data."""

import os
from pathlib import Path

import pytest

from langchain_ragbudget import load_config
from langchain_ragbudget.evaluation._beir import load_beir
from langchain_ragbudget.evaluation._harness import evaluate

SCIFACT = Path(
    os.environ.get(
        "RAGBUDGET_SCIFACT_DIR",
        Path(__file__).resolve().parents[2].parent / "shared" / "data" / "scifact",
    )
)


@pytest.mark.skipif(not SCIFACT.is_dir(), reason="SciFact is not beside the checkout")
def test_first_50_queries_no_silent_drops_and_sane_quality() -> None:
    report = evaluate(load_beir(SCIFACT), load_config(), limit=50)
    rows = {row.stage: row for row in report.quality}
    assert rows["fusion"].ndcg is not None and rows["fusion"].ndcg > 0.6
    assert rows["bm25"].ndcg is not None and rows["dense"].ndcg is not None
    for item in report.survival:
        assert item.silent_drops == 0
        assert item.gold_kept + sum(item.gold_dropped.values()) == item.gold_retrieved
