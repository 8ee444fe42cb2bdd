"""Document nDCG@10 of the two chunkers, query by query, on SciFact test and train.

The issue asks that the sentence chunker's document ranking be no lower than the
recursive splitter's at each chunk size. `make eval` measures it on the 300 test
claims, too few to tell a difference of 0.005 from noise; the 809 train claims
judge the same corpus. For each split and size: both chunkers' mean, their
difference with its paired 95% bootstrap interval, and how many queries each wins.
A document ranks where its best chunk does, over 100 chunks (10 documents ranked
at every size). Indexes are the cached ones of `make eval` and `bench_chunkers.py`
(~10 min each to build on a quiet 2-core machine).

    python benchmarks/bench_chunk_retrieval.py [--split S ...] [--chunk-size N ...]
"""

from __future__ import annotations

import numpy as np
from _common import parser_with_data, print_machine
from rich.console import Console
from rich.table import Table

from langchain_ragbudget.config import load_config
from langchain_ragbudget.evaluation import load_beir, paired_bootstrap
from langchain_ragbudget.evaluation._chunked import document_ndcg

out = Console(width=140)
CHUNKERS = ("recursive", "sentences")


def main() -> None:
    parser = parser_with_data(__doc__)
    parser.add_argument("--split", action="append", choices=("test", "train"))
    parser.add_argument("--chunk-size", type=int, action="append")
    args = parser.parse_args()
    print_machine(out, load_average=True)
    table = Table(
        "split", "chunks", "queries", *CHUNKERS, "difference", "95% interval",
        "better / worse",
        title="Document nDCG@10, sentences against recursive",
    )  # fmt: skip
    pooled: dict[int, list[np.ndarray]] = {}
    for split in args.split or ["test", "train"]:
        dataset = load_beir(args.data, split=split)
        for size in args.chunk_size or [256, 128, 64]:
            scores = {}
            for chunker in CHUNKERS:
                config = load_config()
                index = config.index.model_copy(update={"chunker": chunker})
                config = config.model_copy(update={"index": index})
                scores[chunker] = np.array(document_ndcg(dataset, config, size))
            gain = scores["sentences"] - scores["recursive"]
            pooled.setdefault(size, []).append(gain)
            table.add_row(split, str(size), *_compared(scores, gain))
    for size, gains in pooled.items():
        if len(gains) > 1:
            table.add_row("both", str(size), *_compared({}, np.concatenate(gains)))
    out.print(table)


def _compared(scores: dict[str, np.ndarray], gain: np.ndarray) -> list[str]:
    interval = paired_bootstrap(gain)
    means = [f"{scores[c].mean():.4f}" if c in scores else "" for c in CHUNKERS]
    return [
        str(len(gain)),
        *means,
        f"{interval.mean:+.4f}",
        f"{interval.low:+.4f} to {interval.high:+.4f}",
        f"{(gain > 1e-12).sum()} / {(gain < -1e-12).sum()}",
    ]


if __name__ == "__main__":
    main()
