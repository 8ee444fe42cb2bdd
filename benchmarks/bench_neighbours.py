"""Neighbouring chunks (`retrieval.neighbours`), measured on two genres.

Three ways, on the same retrieved lists: no neighbours; N either side of each
retrieved chunk, weighed at their own rank after the retrieved ones (what the
package does); and the same N weighed with their document, ahead of lower-ranked
documents (not shipped: the neighbours unmarked, so the budget weighs them as it
weighs retrieved chunks; the issue asked to measure it).

SciFact (test claims, the cached chunk index of `evaluate_chunked`; built on a first
run, ~10 minutes): the gold documents whose every evidence sentence is in a kept
passage, with the `chat` surface's settings at a few budgets, with its `max_docs`
and without a cap. The sample corpus (company documents; its passages joined back
into their 16 documents and indexed in sentence chunks in a temporary folder): the
30 questions of `bench_relevance_docs.py` whose answering phrase reaches the
prompt, `chat` settings, at the same budgets as `make eval`'s second genre.

    python benchmarks/bench_neighbours.py [--neighbours N] [--chunk-size N]
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path

from _common import parser_with_data, print_machine
from bench_relevance_docs import PROBES
from langchain_core.documents import Document
from rich.console import Console

from langchain_ragbudget.budget._context_budget import ContextBudget
from langchain_ragbudget.config._settings import (
    RagBudgetConfig,
    SurfaceSettings,
    load_config,
)
from langchain_ragbudget.evaluation import load_beir
from langchain_ragbudget.evaluation._beir import BeirDataset, judged_id
from langchain_ragbudget.evaluation._chunked import _chunk_index, chunk_k
from langchain_ragbudget.index import HybridIndex
from langchain_ragbudget.ledger._metadata_keys import NEIGHBOUR_OF

out = Console(width=160)
SCIFACT_BUDGETS = (512, 1024, 1280, 2048)
SAMPLE_BUDGETS = (300, 450, 600, 1280)
Lists = Mapping[str, Sequence[Document]]


def as_retrieved(documents: Sequence[Document]) -> list[Document]:
    """The list with its neighbours unmarked: weighed as retrieved chunks are."""
    unmarked = [
        {key: value for key, value in d.metadata.items() if key != NEIGHBOUR_OF}
        for d in documents
    ]
    return [
        d.model_copy(update={"metadata": metadata})
        for d, metadata in zip(documents, unmarked, strict=True)
    ]


WAYS: tuple[tuple[str, bool, bool], ...] = (
    ("none", False, False),
    ("at their rank", True, False),
    ("with their document", True, True),
)


def scifact_kept(dataset: BeirDataset, lists: Lists, budget: ContextBudget) -> str:
    """Gold documents with all their evidence sentences kept, of those found."""
    kept = total = 0
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
            total += 1
            kept += all(any(s in t for t in texts) for s in rationales[doc_id])
    return f"{100 * kept / total:.1f}% ({kept}/{total})"


def sample_kept(lists: Lists, budget: ContextBudget) -> str:
    """Questions whose answering phrase is in the prompt (quote marks aside)."""
    phrases = {question: phrase for _, question, phrase in PROBES}
    hits = 0
    for question, candidates in lists.items():
        text = budget.fit(candidates, question=question).text
        shown = " ".join(text.replace("\n> ", " ").split()).lower()
        hits += phrases[question].lower() in shown
    return f"{hits}/{len(lists)}"


def table(
    name: str,
    index: HybridIndex,
    queries: Mapping[str, str],
    k: int,
    neighbours: int,
    kept: Callable[[Lists, ContextBudget], str],
    budgets: Sequence[int],
) -> None:
    chat = index.config.surfaces["chat"]
    out.print(f"\n{name}; chat surface, max_docs {chat.max_docs}, {chat.packing}")
    for way, added, grouped in WAYS:
        retriever = index.as_retriever(k=k, neighbours=neighbours if added else 0)
        lists = {key: retriever.invoke(text) for key, text in queries.items()}
        if grouped:
            lists = {key: as_retrieved(found) for key, found in lists.items()}
        for max_docs in (chat.max_docs, 1000):
            cells = []
            for tokens in budgets:
                settings: SurfaceSettings = chat.model_copy(
                    update={"max_tokens": tokens, "max_docs": max_docs}
                )
                result = kept(lists, ContextBudget(settings=settings))
                cells.append(f"{tokens}: {result}")
            cap = "no cap" if max_docs == 1000 else f"max_docs {max_docs}"
            out.print(f"{way:>19}, {cap:>10} | " + " | ".join(cells))


def sample_documents() -> list[Document]:
    """The sample corpus's passages joined back into their documents, in order."""
    text = resources.files("langchain_ragbudget").joinpath("sample_data/corpus.jsonl")
    parts: dict[str, list[tuple[int, str]]] = {}
    meta: dict[str, dict[str, str]] = {}
    for line in text.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        parts.setdefault(row["doc_id"], []).append(
            (int(row["id"].rsplit("::", 1)[1]), row["text"])
        )
        meta[row["doc_id"]] = {"title": row["title"], "source": row["source"]}
    return [
        Document(
            id=doc_id,
            page_content="\n\n".join(t for _, t in sorted(pieces)),
            metadata=meta[doc_id],
        )
        for doc_id, pieces in parts.items()
    ]


def with_chunks(config: RagBudgetConfig, size: int) -> RagBudgetConfig:
    overlap = min(config.index.chunk_overlap, size // 4)
    chunking = config.index.model_copy(
        update={"chunk_size": size, "chunk_overlap": overlap}
    )
    return config.model_copy(update={"index": chunking})


def main() -> None:
    parser = parser_with_data(__doc__)
    parser.add_argument("--neighbours", type=int, default=2)
    parser.add_argument("--chunk-size", type=int, default=256)
    args = parser.parse_args()
    print_machine(out, load_average=True)
    config = load_config()
    dataset = load_beir(args.data)
    index = _chunk_index(dataset, config, args.chunk_size, None)
    k = chunk_k(config.retrieval.k, args.chunk_size)

    def evidence(lists: Lists, budget: ContextBudget) -> str:
        return scifact_kept(dataset, lists, budget)

    name = f"SciFact, {args.chunk_size}-token chunks, {k} retrieved, evidence kept"
    table(name, index, dataset.queries, k, args.neighbours, evidence, SCIFACT_BUDGETS)
    index.close()
    documents = sample_documents()
    questions = {question: question for _, question, _ in PROBES}
    for size in (64, 128):
        with tempfile.TemporaryDirectory() as folder:
            sample = HybridIndex.open(Path(folder) / "ix", with_chunks(config, size))
            sample.upsert(documents)
            name = (
                f"sample corpus, {len(documents)} documents in {sample.chunk_count} "
                f"{size}-token chunks, answers in the prompt"
            )
            table(
                name,
                sample,
                questions,
                config.retrieval.k,
                args.neighbours,
                sample_kept,
                SAMPLE_BUDGETS,
            )
            sample.close()
    print_machine(out, load_average=True)


if __name__ == "__main__":
    main()
