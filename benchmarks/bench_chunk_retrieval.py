"""Document nDCG@10 of the chunkers, query by query, on SciFact test and train.

Issue 24 asks that the document ranking of the chunked index be no lower than
before it (recursive chunks, no title in BM25) at each chunk size. `make eval`
measures it on the 300 test claims, too few to tell a difference of 0.005 from
noise; the 809 train claims judge the same corpus. For each split and size: the
mean of each variant (before; recursive and sentence chunks with the title in BM25,
`sparse.index_title`), and the sentence chunker's difference to the two others with
its paired 95% bootstrap interval and how many queries it wins and loses.
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

from langchain_ragbudget.config._settings import RagBudgetConfig, load_config
from langchain_ragbudget.evaluation import load_beir, paired_bootstrap
from langchain_ragbudget.evaluation._chunked import document_ndcg

out = Console(width=170)
# (name, index.chunker, sparse.index_title); the first is the "today"
VARIANTS = (
    ("before", "recursive", False),
    ("recursive", "recursive", True),
    ("sentences", "sentences", True),
)
COMPARED = (("sentences", "before"), ("sentences", "recursive"))


def main() -> None:
    parser = parser_with_data(__doc__)
    parser.add_argument("--split", action="append", choices=("test", "train"))
    parser.add_argument("--chunk-size", type=int, action="append")
    args = parser.parse_args()
    print_machine(out, load_average=True)
    table = Table(
        "split", "chunks", "queries", *(name for name, _, _ in VARIANTS),
        *(f"{a} - {b} (95% interval; queries better / worse)" for a, b in COMPARED),
        title="Document nDCG@10 (before: recursive chunks, no title in BM25)",
    )  # fmt: skip
    pooled: dict[int, dict[tuple[str, str], list[np.ndarray]]] = {}
    for split in args.split or ["test", "train"]:
        dataset = load_beir(args.data, split=split)
        for size in args.chunk_size or [256, 128, 64]:
            scores = {
                name: np.array(document_ndcg(dataset, _config(chunker, title), size))
                for name, chunker, title in VARIANTS
            }
            gains = {pair: scores[pair[0]] - scores[pair[1]] for pair in COMPARED}
            for pair, gain in gains.items():
                pooled.setdefault(size, {}).setdefault(pair, []).append(gain)
            table.add_row(
                split,
                str(size),
                str(len(dataset.queries)),
                *(f"{scores[name].mean():.4f}" for name, _, _ in VARIANTS),
                *(_compared(gain) for gain in gains.values()),
            )
    for size, by_pair in pooled.items():
        gains = {pair: np.concatenate(parts) for pair, parts in by_pair.items()}
        if len(by_pair[COMPARED[0]]) > 1:
            queries = str(len(gains[COMPARED[0]]))
            blanks = [""] * len(VARIANTS)
            compared = [_compared(gain) for gain in gains.values()]
            table.add_row("both", str(size), queries, *blanks, *compared)
    out.print(table)


def _config(chunker: str, index_title: bool) -> RagBudgetConfig:
    config = load_config()
    return config.model_copy(
        update={
            "index": config.index.model_copy(update={"chunker": chunker}),
            "sparse": config.sparse.model_copy(update={"index_title": index_title}),
        }
    )


def _compared(gain: np.ndarray) -> str:
    interval = paired_bootstrap(gain)
    return (
        f"{interval.mean:+.4f} ({interval.low:+.4f} to {interval.high:+.4f}; "
        f"{(gain > 1e-12).sum()} / {(gain < -1e-12).sum()})"
    )


if __name__ == "__main__":
    main()
