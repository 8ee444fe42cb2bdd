"""Evidence survival with the corpus indexed in chunks instead of whole documents.

A document's evidence survives when each of its evidence sentences is whole in a
kept chunk. Also per chunking: document-level nDCG@10, the ceiling, and the share
of the context spent on headers and markers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from langchain_core.documents import Document

from langchain_ragbudget.budget._render import ContextFormat
from langchain_ragbudget.config._disk import atomic_write_text, cache_root
from langchain_ragbudget.config._settings import RagBudgetConfig
from langchain_ragbudget.config._tokens import count_tokens
from langchain_ragbudget.evaluation._beir import BeirDataset, judged_id
from langchain_ragbudget.evaluation._cache import corpus_fingerprint
from langchain_ragbudget.evaluation._metrics import ndcg_at_k
from langchain_ragbudget.evaluation._survival import (
    DEFAULT_BUDGETS,
    POLICIES,
    every_policy,
    shares,
)
from langchain_ragbudget.index._hybrid_index import HybridIndex
from langchain_ragbudget.ledger._metadata_keys import NEIGHBOUR_OF
from langchain_ragbudget.progress import ProgressCallback, StageProgress, prefixed
from langchain_ragbudget.retrieval._hybrid import HybridRetriever
from langchain_ragbudget.retrieval._sparse import bm25_settings


@dataclass(frozen=True)
class ChunkedSurvival:
    """Evidence survival with the corpus indexed in chunks of `chunk_size` tokens.

    Attributes:
        chunk_size: Tokens per chunk (the index's splitter).
        k: Chunks retrieved per query (the candidate list every policy packs).
        evidence_gold: Gold documents with marked evidence among the candidates.
        split_evidence: Of those, documents with an evidence sentence no single
            retrieved chunk holds whole (no policy can keep it).
        evidence_survival: Per policy and budget, the share of `evidence_gold`
            with every evidence sentence in the prompt.
        mid_sentence_cuts: Per policy, kept texts not whole sentences (must be 0).
        chunker: The index's chunker.
        ndcg_at_10: Document-level nDCG@10 (a document ranks where its best chunk
            does).
        split_long: Of `split_evidence`, those with a sentence longer than a chunk.
        overhead: Per policy and budget, the share of context tokens spent on
            headers, quote marks and omission markers.
        joined: Whether neighbouring chunks were joined in the prompt.
        neighbours: `retrieval.neighbours`.
        neighbours_added: Neighbour chunks added per query, on average.
    """

    chunk_size: int
    k: int
    evidence_gold: int
    split_evidence: int
    evidence_survival: dict[str, list[float | None]]
    mid_sentence_cuts: dict[str, int]
    chunker: str = "recursive"
    ndcg_at_10: float | None = None
    split_long: int = 0
    overhead: dict[str, list[float | None]] = field(default_factory=dict)
    joined: bool = True
    neighbours: int = 0
    neighbours_added: float = 0.0


RANKING_DEPTH = 100
"""Chunks ranked for document nDCG@10: enough for 10 documents at any chunk size
(the `k` chunks packed may hold fewer)."""


def chunk_k(k: int, chunk_size: int, reference: int = 256) -> int:
    """Chunks to retrieve: about the tokens of `k` passages of `reference` tokens."""
    return max(k, math.ceil(k * reference / chunk_size))


def evaluate_chunked(
    dataset: BeirDataset,
    config: RagBudgetConfig,
    chunk_size: int,
    *,
    limit: int | None = None,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    progress: ProgressCallback | None = None,
    join_neighbours: bool = True,
) -> ChunkedSurvival:
    """Evidence survival by policy and budget over the corpus split into chunks.

    The chunked `HybridIndex` is cached on disk by content, model and chunking.

    Args:
        dataset: A BEIR dataset with marked evidence (SciFact).
        config: The configuration, with `chunk_size` for `index.chunk_size`.
        chunk_size: Tokens per chunk.
        limit: Measure the first `limit` queries only.
        budgets: The token budgets to compare the policies at.
        progress: Called with (stage, done, total) as work advances.
        join_neighbours: Join neighbouring kept chunks of a document in the prompt.
    """
    index = _chunk_index(dataset, config, chunk_size, progress)
    k = chunk_k(config.retrieval.k, chunk_size)
    retriever = index.as_retriever(k=k)
    ranking = _ranking(index, k)
    encoding = config.surface(next(iter(config.surfaces))).encoding_name
    tally = _Tally(dataset, budgets, encoding, chunk_size)
    fmt = ContextFormat(join_neighbours=join_neighbours)
    queries = list(dataset.queries.items())[:limit]
    answered = StageProgress(
        progress, f"queries ({chunk_size}-token chunks)", len(queries)
    ).start()
    for query_id, text in queries:
        tally.add(query_id, text, retriever.invoke(text), retriever.id_key, fmt)
        tally.ndcg += _document_ndcg(dataset, query_id, ranking.invoke(text))
        answered.advance()
    index.close()
    return ChunkedSurvival(
        chunk_size=chunk_size,
        k=k,
        evidence_gold=tally.gold,
        split_evidence=tally.split,
        evidence_survival=shares(tally.hits, tally.gold),
        mid_sentence_cuts={p: n for p, n in tally.cuts.items() if p != "naive slice"},
        chunker=index.config.index.chunker,
        ndcg_at_10=tally.ndcg / len(queries) if queries else None,
        split_long=tally.long,
        overhead={
            policy: [extra / used if used else None for extra, used in row]
            for policy, row in tally.spent.items()
        },
        joined=join_neighbours,
        neighbours=retriever.neighbours,
        neighbours_added=tally.added / len(queries) if queries else 0.0,
    )


def document_ndcg(
    dataset: BeirDataset, config: RagBudgetConfig, chunk_size: int
) -> list[float]:
    """Per query, the document nDCG@10 `evaluate_chunked` averages, for paired tests."""
    index = _chunk_index(dataset, config, chunk_size, None)
    ranking = _ranking(index, chunk_k(config.retrieval.k, chunk_size))
    queries = dataset.queries.items()
    scores = [_document_ndcg(dataset, q, ranking.invoke(text)) for q, text in queries]
    index.close()
    return scores


def _ranking(index: HybridIndex, k: int) -> HybridRetriever:
    """The chunk ranking document nDCG@10 reads: deep enough for 10 documents."""
    return index.as_retriever(k=max(k, RANKING_DEPTH), neighbours=0)


def _document_ndcg(
    dataset: BeirDataset, query_id: str, ranking: Sequence[Document]
) -> float:
    ids = [judged_id(d) for d in ranking]
    return ndcg_at_k(ids, dataset.qrels[query_id], 10)


class _Tally:
    """What the queries of one chunked run add up to."""

    def __init__(
        self,
        dataset: BeirDataset,
        budgets: Sequence[int],
        encoding: str,
        chunk_size: int,
    ) -> None:
        self.dataset, self.budgets = dataset, budgets
        self.encoding, self.chunk_size = encoding, chunk_size
        self.hits = {policy: [0] * len(budgets) for policy in POLICIES}
        self.cuts = dict.fromkeys(POLICIES, 0)
        self.spent = {policy: [[0, 0] for _ in budgets] for policy in POLICIES[1:]}
        self.gold = self.split = self.long = self.added = 0
        self.ndcg = 0.0

    def add(
        self,
        query_id: str,
        text: str,
        candidates: Sequence[Document],
        id_key: str | None,
        fmt: ContextFormat,
    ) -> None:
        """One query's retrieved chunks: ceiling, every policy's evidence."""
        qrels = self.dataset.qrels[query_id]
        relevant = {d for d, rel in qrels.items() if rel > 0}
        rationales = self.dataset.rationales.get(query_id, {})
        self.added += sum(NEIGHBOUR_OF in d.metadata for d in candidates)
        needs, split = _evidence_by_chunk(candidates, relevant, rationales)
        self.gold += len(needs) + len(split)
        self.split += len(split)
        self.long += sum(
            any(count_tokens(s, self.encoding) > self.chunk_size for s in rationales[d])
            for d in split
        )
        evidence = {i: s for chunks in needs.values() for i, s in chunks.items()}
        for policy, result in every_policy(
            candidates, self.budgets, self.encoding, text, evidence, id_key, fmt
        ):
            for position, (extra, used) in enumerate(result.overhead):
                self.spent[policy][position][0] += extra
                self.spent[policy][position][1] += used
            for position, kept in enumerate(result.evidence):
                kept_set = set(kept)
                self.hits[policy][position] += sum(
                    set(chunks) <= kept_set for chunks in needs.values()
                )
            self.cuts[policy] += sum(result.bad_cuts)


def _evidence_by_chunk(
    candidates: Sequence[Document],
    relevant: set[str],
    rationales: dict[str, list[str]],
) -> tuple[dict[str, dict[int, list[str]]], set[str]]:
    """Per gold document, the best chunk holding each evidence sentence whole.

    A document with a sentence no chunk holds whole is returned apart.
    """
    found = {judged_id(d) for d in candidates} & relevant & set(rationales)
    needs: dict[str, dict[int, list[str]]] = {}
    split: set[str] = set()
    for doc_id in found:
        chunks: dict[int, list[str]] = {}
        for sentence in rationales[doc_id]:
            holder = next(
                (
                    i
                    for i, d in enumerate(candidates)
                    if judged_id(d) == doc_id and sentence in d.page_content
                ),
                None,
            )
            if holder is None:
                split.add(doc_id)
                break
            chunks.setdefault(holder, []).append(sentence)
        else:
            needs[doc_id] = chunks
    return needs, split


def _chunk_index(
    dataset: BeirDataset,
    config: RagBudgetConfig,
    chunk_size: int,
    progress: ProgressCallback | None,
) -> HybridIndex:
    """The corpus in a HybridIndex of `chunk_size`-token chunks, built once.

    Until the build has finished, the index is opened as its writer, so a build
    killed midway is completed by the next run (a reader would ask for repair).
    """
    overlap = min(config.index.chunk_overlap, chunk_size // 4)
    settings = config.index.model_copy(
        update={"chunk_size": chunk_size, "chunk_overlap": overlap}
    )
    chunked = config.model_copy(update={"index": settings})
    # settings that change no chunk stay out of the key (`chunker` too when
    # recursive), so existing caches stay valid
    later = {"lock_timeout"} | (
        {"chunker"} if settings.chunker == "recursive" else set()
    )
    shown = settings.model_dump_json(exclude=later)
    key = corpus_fingerprint(dataset.corpus, f"{config.embedding.model} {shown}")
    name = "chunks" if settings.chunker == "recursive" else "sentences"
    folder = cache_root() / f"{dataset.name}-{name}{chunk_size}-{key}"
    complete = folder / "ragbudget_complete"
    # BM25 settings stay out of the key too (no vector depends on them): an index
    # saved with others is opened once as its writer, which saves BM25 anew
    bm25 = folder / "ragbudget_bm25.json"
    wanted = json.dumps(bm25_settings(chunked), sort_keys=True)
    saved = bm25.read_text(encoding="utf-8") if bm25.is_file() else None
    if not complete.is_file():
        with HybridIndex.open(folder / "index", chunked, write=True) as building:
            building.upsert(
                dataset.corpus,
                progress=prefixed(progress, f"{chunk_size}-token chunks: "),
            )
            atomic_write_text(complete, str(building.chunk_count))
    elif saved != wanted:
        with HybridIndex.open(folder / "index", chunked, write=True) as building:
            building.upsert([])  # nothing changes but BM25, saved as configured
    if saved != wanted:
        atomic_write_text(bm25, wanted)
    return HybridIndex.open(folder / "index", chunked)
