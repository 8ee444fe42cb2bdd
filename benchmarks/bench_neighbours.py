"""Neighbouring chunks on a surface with a passage cap: SciFact, chunked index.

`make eval`'s chunked tables leave `max_docs` out (only the token budget decides).
This runs each test query through the index's retriever with
`retrieval.neighbours` 0 and as configured, then through `ContextBudget` with the
`chat` surface's settings (`max_docs`, `packing`, encoding) at a few budgets, with
its `max_docs` and without a cap, and counts the gold documents whose every evidence
sentence is in a kept passage of that document. The index is the cached one of
`evaluate_chunked` (built on a first run, ~10 minutes).

    python benchmarks/bench_neighbours.py [--chunk-size N] [--chunker C]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from _common import parser_with_data, print_machine
from langchain_core.documents import Document
from rich.console import Console

from langchain_ragbudget.budget import ContextBudget
from langchain_ragbudget.config import load_config
from langchain_ragbudget.evaluation import load_beir
from langchain_ragbudget.evaluation._beir import BeirDataset, judged_id
from langchain_ragbudget.evaluation._chunked import _chunk_index, chunk_k

BUDGETS = (512, 1024, 1280, 2048)


def evidence_kept(
    dataset: BeirDataset,
    lists: Mapping[str, Sequence[Document]],
    budget: ContextBudget,
) -> tuple[int, int]:
    """(gold documents with all their evidence kept, gold documents found)."""
    kept = found_total = 0
    for query_id, candidates in lists.items():
        relevant = {d for d, rel in dataset.qrels[query_id].items() if rel > 0}
        rationales = dataset.rationales.get(query_id, {})
        found = {judged_id(d) for d in candidates} & relevant & set(rationales)
        if not found:
            continue
        context = budget.fit(candidates, question=dataset.queries[query_id])
        for doc_id in found:
            texts = [
                d.page_content for d in context.documents if judged_id(d) == doc_id
            ]
            found_total += 1
            kept += all(any(s in t for t in texts) for s in rationales[doc_id])
    return kept, found_total


def main() -> None:
    parser = parser_with_data(__doc__)
    parser.add_argument("--chunk-size", type=int, default=256)
    parser.add_argument("--chunker", choices=["recursive", "sentences"])
    args = parser.parse_args()
    print_machine(Console(), load_average=True)
    dataset = load_beir(args.data)
    config = load_config()
    if args.chunker:
        chunking = config.index.model_copy(update={"chunker": args.chunker})
        config = config.model_copy(update={"index": chunking})
    index = _chunk_index(dataset, config, args.chunk_size, None)
    k = chunk_k(config.retrieval.k, args.chunk_size)
    chat = config.surfaces["chat"]
    print(
        f"{args.chunk_size}-token chunks ({index.config.index.chunker}), {k} "
        f"retrieved; chat surface: max_docs {chat.max_docs}, packing {chat.packing}"
    )
    for neighbours in sorted({0, config.retrieval.neighbours}):
        retriever = index.as_retriever(k=k, neighbours=neighbours)
        lists = {q: retriever.invoke(text) for q, text in dataset.queries.items()}
        for max_docs in (chat.max_docs, 1000):
            cells = []
            for tokens in BUDGETS:
                settings = chat.model_copy(
                    update={"max_tokens": tokens, "max_docs": max_docs}
                )
                kept, total = evidence_kept(
                    dataset, lists, ContextBudget(settings=settings)
                )
                cells.append(f"{tokens}: {100 * kept / total:.1f}% ({kept}/{total})")
            cap = "no cap" if max_docs == 1000 else f"max_docs {max_docs}"
            print(f"neighbours {neighbours}, {cap:>10} | " + " | ".join(cells))
    index.close()


if __name__ == "__main__":
    main()
