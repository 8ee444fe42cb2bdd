"""Chunkers compared on SciFact: ceiling, document nDCG@10, evidence kept, overhead.

First, without retrieval: of the gold documents with marked evidence, how many have
every evidence sentence whole in some chunk of the document (and, of the others,
how many because a sentence is longer than a chunk). Then, for each chunker and
size, the chunked evaluation (`evaluate_chunked`, the same as `make eval`'s chunked
tables; indexes cached, ~10 min each to build on a quiet 2-core machine): document
nDCG@10, evidence kept by each policy at each budget, and `trim`'s overhead share.

With `--neighbours N` (repeatable), each run once per setting of
`retrieval.neighbours` (the chunks either side of each retrieved one that the
index's retriever adds; 0: none).

    python benchmarks/bench_chunkers.py [--chunk-size N ...] [--chunker C ...]
        [--neighbours N ...] [--no-join] [--ceiling-only] [--limit N]
"""

from __future__ import annotations

import itertools
import time

from _common import parser_with_data, print_machine
from rich.console import Console

from langchain_ragbudget.config._settings import IndexSettings, load_config
from langchain_ragbudget.config._tokens import count_tokens
from langchain_ragbudget.evaluation import load_beir
from langchain_ragbudget.evaluation._beir import BeirDataset
from langchain_ragbudget.evaluation._chunked import evaluate_chunked
from langchain_ragbudget.evaluation._tables import (
    budget_rows,
    chunked_caption,
    overhead_rows,
)
from langchain_ragbudget.index._chunking import make_chunker

out = Console(width=160)


def ceiling(dataset: BeirDataset, chunker: str, size: int) -> str:
    """Gold documents whose evidence sentences are each whole in one of its chunks."""
    overlap = min(load_config().index.chunk_overlap, size // 4)
    split = make_chunker(
        IndexSettings(chunk_size=size, chunk_overlap=overlap, chunker=chunker)
    )
    corpus = {doc.id: doc for doc in dataset.corpus}
    pairs = {(d, tuple(s)) for q in dataset.rationales.values() for d, s in q.items()}
    whole = longer = 0
    for doc_id, sentences in pairs:
        texts = [c.page_content for c in split.split(corpus[doc_id], str(doc_id))]
        if all(any(s in text for text in texts) for s in sentences):
            whole += 1
        elif any(count_tokens(s, "cl100k_base") > size for s in sentences):
            longer += 1
    return (
        f"{size:>4}-token chunks, {chunker:<10} evidence whole in a chunk: "
        f"{whole}/{len(pairs)} ({whole / len(pairs):.1%}); of the rest, "
        f"{longer} with a sentence longer than a chunk"
    )


def main() -> None:
    parser = parser_with_data(__doc__)
    parser.add_argument("--chunk-size", type=int, action="append")
    parser.add_argument(
        "--chunker", choices=["recursive", "sentences"], action="append"
    )
    parser.add_argument("--neighbours", type=int, action="append")
    parser.add_argument("--no-join", action="store_true")
    parser.add_argument("--ceiling-only", action="store_true")
    parser.add_argument("--limit", type=int)
    args = parser.parse_args()
    sizes = args.chunk_size or [64, 128, 256]
    chunkers = args.chunker or ["recursive", "sentences"]
    print_machine(out, load_average=True)
    dataset = load_beir(args.data)
    for size in sizes:
        for chunker in chunkers:
            out.print(ceiling(dataset, chunker, size))
    if args.ceiling_only:
        return
    config = load_config()
    for size, chunker, neighbours in itertools.product(
        sizes, chunkers, args.neighbours or [config.retrieval.neighbours]
    ):
        index = config.index.model_copy(update={"chunker": chunker})
        retrieval = config.retrieval.model_copy(update={"neighbours": neighbours})
        started = time.perf_counter()
        result = evaluate_chunked(
            dataset,
            config.model_copy(update={"index": index, "retrieval": retrieval}),
            size,
            limit=args.limit,
            join_neighbours=not args.no_join,
        )
        seconds = time.perf_counter() - started
        out.print(f"\n{chunked_caption(result)} ({seconds:.0f} s)")
        for row in budget_rows(result.evidence_survival) + overhead_rows(result):
            out.print(" | ".join(row))
    print_machine(out, load_average=True)


if __name__ == "__main__":
    main()
