"""Fusion methods on SciFact: each method's best chosen on train, measured on test.

`ragbudget tune`'s grid runs over the train queries; the best setting of each method
(the overall best is what `tune` writes) and the configured default are then
measured on the test queries. Nothing is chosen on test: its column is read after
the choice. Also times one pure fusion per method over the test queries' lists
(p50, in an order rotated per query, so machine noise hits all methods alike).

    python benchmarks/bench_fusion.py [--limit N]
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import console, machine, parser_with_data, rotated
from rich.table import Table

from langchain_ragbudget.config._settings import load_config
from langchain_ragbudget.evaluation import (
    FusionSetting,
    QueryLists,
    cached_hybrid_retriever,
    current_setting,
    load_beir,
    paired_bootstrap,
    query_ndcg,
    retrieve_lists,
    search,
)
from langchain_ragbudget.retrieval._fusion import FUSION_METHODS, fuse

out = console(120)


def test_scores(runs: list[QueryLists], setting: FusionSetting, k: int) -> np.ndarray:
    return np.array([query_ndcg(run, setting, k, True) for run in runs])


def fusion_p50_us(runs: list[QueryLists]) -> dict[str, float]:
    """Median time of one `fuse` call per method, rotated per query."""
    times: dict[str, list[float]] = {method: [] for method in FUSION_METHODS}
    for i, run in enumerate(runs):
        for method in rotated(FUSION_METHODS, i):
            start = time.perf_counter()
            fuse(method, run.keys, [1.0, 1.0], scores=run.scores, c=60.0)
            times[method].append(time.perf_counter() - start)
    return {m: statistics.median(t) * 1e6 for m, t in times.items()}


def main() -> None:
    parser = parser_with_data(__doc__)
    parser.add_argument("--limit", type=int, help="first N queries of each split")
    parser.add_argument(
        "--json", type=Path, default=Path("benchmarks/results/fusion.json")
    )
    args = parser.parse_args()
    config = load_config()
    train, test = load_beir(args.data, "train"), load_beir(args.data, "test")
    hybrid = cached_hybrid_retriever(train.corpus, config, name=train.name)
    with out.status("retrieving train and test queries"):
        train_runs = retrieve_lists(train, hybrid, limit=args.limit)
        test_runs = retrieve_lists(test, hybrid, limit=args.limit)
    with out.status("searching the grid on train"):
        report = search(
            train_runs,
            current_setting(config),
            hybrid.k,
            dataset=train.name,
            split="train",
        )
    default = test_scores(test_runs, report.current.setting, hybrid.k)
    rows: list[dict[str, Any]] = []
    for label, scored in [
        ("default", report.current),
        *((f"best {s.setting.method}", s) for s in report.by_method),
    ]:
        scores = test_scores(test_runs, scored.setting, hybrid.k)
        gain = paired_bootstrap(scores - default)
        rows.append(
            {
                "label": label + (" (tune writes it)" if scored == report.best else ""),
                "setting": scored.setting.describe(),
                "train_ndcg": scored.ndcg,
                "test_ndcg": float(scores.mean()),
                "test_gain": [gain.mean, gain.low, gain.high],
            }
        )
    timing = fusion_p50_us(test_runs)
    table = Table(
        title=f"SciFact: fusion chosen on train ({len(train_runs)} queries, "
        f"{report.grid_size} settings), measured on test ({len(test_runs)} queries)"
    )
    for column in (
        "",
        "setting",
        "nDCG@10 train",
        "nDCG@10 test",
        "test gain (95% CI)",
    ):
        table.add_column(column)
    for row in rows:
        mean, low, high = row["test_gain"]
        table.add_row(
            row["label"],
            row["setting"],
            f"{row['train_ndcg']:.4f}",
            f"{row['test_ndcg']:.4f}",
            f"{mean:+.4f} ({low:+.4f} .. {high:+.4f})",
        )
    out.print(table)
    out.print(
        "one fuse() call, p50 over the test queries (two lists of 100 hits): "
        + ", ".join(f"{m} {t:.0f} us" for m, t in timing.items())
    )
    where = machine()
    out.print(where)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps({"rows": rows, "fuse_p50_us": timing, "machine": where}, indent=2)
    )


if __name__ == "__main__":
    main()
