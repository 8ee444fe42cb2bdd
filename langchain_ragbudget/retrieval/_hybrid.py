"""Hybrid retrieval: any number of LangChain retrievers fused by rank or by score.

Unlike the stock EnsembleRetriever it keeps every retriever's metadata, rank and
score, counts a document once per list, never merges two texts behind one id, and
records the candidates cut below `k`.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from operator import itemgetter
from typing import TYPE_CHECKING, Annotated, Any, Protocol, cast, runtime_checkable

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import run_in_executor
from pydantic import ConfigDict, Field, SkipValidation, model_validator

from langchain_ragbudget.config._fields import import_provider
from langchain_ragbudget.config._overrides import (
    field_names,
    known_keywords,
    refuse_unknown,
)
from langchain_ragbudget.config._settings import (
    ConfigLike,
    FusionMethod,
    RagBudgetConfig,
    RetrievalSettings,
    as_config,
    default_of,
)
from langchain_ragbudget.errors import ConfigError, InvalidInputError
from langchain_ragbudget.ledger._identity import distinct_keys, document_key
from langchain_ragbudget.ledger._metadata_keys import (
    DENSE,
    FUSED_RANK,
    FUSED_SCORE,
    FUSION_METHOD,
    NEIGHBOUR_OF,
    SPARSE,
    normalised_key,
    rank_key,
    score_key,
)
from langchain_ragbudget.ledger._records import (
    LEDGER_KEY,
    CandidateList,
    DeferredDropRecord,
    DeferredRecords,
    DropReason,
    DropRecord,
    RunLedger,
    ScoreIssue,
    Stage,
    file_in_scope,
    records_of,
)
from langchain_ragbudget.ledger._validation import (
    check_documents,
    check_passages,
    check_query,
    finite_score,
)
from langchain_ragbudget.retrieval._fusion import (
    SCORE_METHODS,
    Fused,
    fuse,
    validate_weights,
)
from langchain_ragbudget.retrieval._neighbours import around

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings
    from langchain_core.vectorstores import VectorStore

FUSION_RUN = "ragbudget_fusion"  # the child run fusion makes when callbacks listen
_Labels = tuple[str, str, str]  # a retriever's rank, score and normalised keys


class HybridRetriever(BaseRetriever):
    """Fuse sparse, dense (or any) retrievers by weighted RRF or normalised scores.

    Each returned document carries, as plain numbers, `<name>_rank` and
    `<name>_score` for every retriever that returned it, `fused_score` and
    `fused_rank` (with `minmax` or `dbsf`, also `fusion_method` and
    `<name>_normalised`). The result is a `CandidateList` whose `drops` name the
    candidates fused below `k`. With a callback handler attached, each retriever
    and the fusion (`ragbudget_fusion`) run as child runs; without one,
    `ScoredSearch` retrievers hand over their hits directly, to the same result.

    Every call opens a `RunLedger` of every fused candidate, carried in
    `metadata["ragbudget_run"]`, so the budget can report a candidate a later
    step removed without a record.

    Attributes:
        retrievers: The retrievers to fuse (at least one).
        weights: One non-negative weight per retriever, not all zero; equal if None.
        names: Distinct metadata prefixes, one per retriever; derived from the
            class names if None (`BM25Retriever` -> `bm25`).
        fetch_k: Per retriever, the `k` to invoke it with (None: its own `k`).
        k: Fused candidates returned; the rest become drop records.
        fusion: `rrf` (by rank), `minmax` or `dbsf` (by score normalised per
            query; a missing or non-finite score counts 0, and is reported).
        rrf_c: The RRF constant c (`score = sum w / (c + rank)`); `rrf` only.
        id_key: The metadata key that identifies a passage without `Document.id`.
        score_key: The metadata key each retriever writes its score to.
        chunk_store: Chunks by id (`<doc_id>::<position>`), to add neighbours from.
        neighbours: With a `chunk_store`, the chunks either side of each of the
            top `k` to add after them (0: none), with `neighbour_of` and a
            `fused_rank` but no score.

    Example:
        .. code-block:: python

            store = InMemoryVectorStore.from_documents(documents, FastEmbedEmbeddings())
            hybrid = HybridRetriever(
                retrievers=[
                    BM25Retriever.from_documents(documents, k=50),
                    DenseRetriever(vectorstore=store, k=50),
                ],
                names=["bm25", "dense"],
                k=10,
            )
            candidates = hybrid.invoke("what lowers blood pressure?")
            for record in candidates.drops:
                print(record.key, record.reason, record.detail)
    """

    retrievers: Sequence[BaseRetriever] = Field(min_length=1)
    weights: list[float] | None = None
    names: list[str] | None = None
    fetch_k: list[int | None] | None = None
    k: int = Field(default_of(RetrievalSettings, "k"), ge=1)
    fusion: FusionMethod = default_of(RetrievalSettings, "fusion")
    rrf_c: float = Field(
        default_of(RetrievalSettings, "rrf_c"), gt=0, allow_inf_nan=False
    )
    id_key: str | None = default_of(RetrievalSettings, "id_key")
    score_key: str = "score"
    # not validated: an index's store holds every chunk, and would be copied
    chunk_store: Annotated[Mapping[str, Document] | None, SkipValidation] = None
    neighbours: int = Field(default_of(RetrievalSettings, "neighbours"), ge=0, le=100)

    model_config = ConfigDict(arbitrary_types_allowed=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keywords(cls, data: Any) -> Any:
        """Refuse a keyword that is no field (`c=` for `rrf_c`), naming the choices."""
        return known_keywords(cls, data)

    @model_validator(mode="after")
    def _check_lengths(self) -> HybridRetriever:
        if self.chunk_store is not None and not isinstance(self.chunk_store, Mapping):
            raise ValueError(
                "chunk_store must map chunk ids to Documents, got a "
                f"{type(self.chunk_store).__name__}"
            )
        n = len(self.retrievers)
        validate_weights(self.resolved_weights, n)
        if self.names is not None and (
            len(self.names) != n or len(set(self.names)) != n
        ):
            raise ValueError(f"names must be {n} distinct names, got {self.names}")
        if self.fetch_k is not None:
            if len(self.fetch_k) != n:
                raise ValueError(f"fetch_k has {len(self.fetch_k)} entries for {n}")
            if any(size is not None and size < 1 for size in self.fetch_k):
                raise ValueError(f"fetch_k entries must be >= 1, got {self.fetch_k}")
        return self

    @classmethod
    def from_config(
        cls,
        config: ConfigLike = None,
        *,
        documents: Sequence[Document] | None = None,
        vectorstore: VectorStore | None = None,
        embeddings: Embeddings | None = None,
        sparse: BaseRetriever | None = None,
        chunk_store: Mapping[str, Document] | None = None,
        **overrides: Any,
    ) -> HybridRetriever:
        """The pipeline's retriever: sparse and dense search, fused as configured.

        The sides are named `bm25` and `dense`, so they write the scores a
        weak-evidence threshold can name.

        Args:
            config: A configuration, a YAML file, or None for the defaults.
            documents: The passages to search; each side not given is built over
                them. Without `documents`, give both sides.
            vectorstore: A store already holding the passages.
            embeddings: The embedding model of a new store (else the configured
                one).
            sparse: A sparse retriever already over the passages.
            chunk_store: Passages by id, for the dense side's texts and for
                neighbours; made from `documents` when each has an id and the
                store is Chroma.
            **overrides: HybridRetriever fields to set instead (e.g. `k`).

        Raises:
            ConfigError: The file is invalid (before anything is built), or the
                `sparse.provider` class refuses its `options`.
            TypeError: Neither `documents` nor both sides, or a keyword that is
                no field to override.
            InvalidInputError: A document is not a Document or has no text.
            ValueError: `documents` is empty, or no document has a word BM25
                can index (when `sparse` is not given).
            ModelUnavailableError: The embedding model cannot be loaded (when
                the documents are embedded into a new store).
            VectorStoreUnavailableError: The configured Chroma server cannot be
                reached.
        """
        config = as_config(config)
        fixed = {"retrievers", "names", "chunk_store"}
        refuse_unknown(
            "HybridRetriever.from_config()", overrides, field_names(cls) - fixed
        )
        if documents is None:
            if sparse is None or vectorstore is None:
                raise TypeError(
                    "HybridRetriever.from_config() takes documents, or both "
                    "sparse and vectorstore"
                )
        else:
            documents = check_passages(documents)
            vectorstore, chunk_store = _dense_side(
                config, documents, vectorstore, embeddings, chunk_store
            )
            sparse = sparse or _configured_sparse(config, documents)
        return cls._fused(config.retrieval, sparse, vectorstore, chunk_store, overrides)

    @classmethod
    def _fused(
        cls,
        retrieval: RetrievalSettings,
        sparse: BaseRetriever,
        vectorstore: VectorStore,
        chunk_store: Mapping[str, Document] | None,
        overrides: dict[str, Any],
    ) -> HybridRetriever:
        """The two sides fused as `retrieval` says, `overrides` set instead."""
        from langchain_ragbudget.retrieval._dense import DenseRetriever

        dense = DenseRetriever(
            vectorstore=vectorstore, k=retrieval.dense.fetch_k, docstore=chunk_store
        )
        settings: dict[str, Any] = {
            "retrievers": [sparse, dense],
            "names": [SPARSE, DENSE],
            "weights": [retrieval.sparse.weight, retrieval.dense.weight],
            "k": retrieval.k,
            "fusion": retrieval.fusion,
            "rrf_c": retrieval.rrf_c,
            "id_key": retrieval.id_key,
            "chunk_store": chunk_store,
            "neighbours": retrieval.neighbours,
        }
        return cls(**{**settings, **overrides})

    @property
    def resolved_weights(self) -> list[float]:
        """The weights in use: as given, or equal."""
        return self.weights or [1.0] * len(self.retrievers)

    @property
    def resolved_names(self) -> list[str]:
        """Metadata prefixes: as given, or derived from the retriever classes."""
        return self.names or _default_names(self.retrievers)

    def _fetch_size(self, index: int) -> int | None:
        return self.fetch_k[index] if self.fetch_k is not None else None

    def _child_kwargs(self, index: int) -> dict[str, Any]:
        size = self._fetch_size(index)
        return {} if size is None else {"k": size}

    def _top(self, query: str, k: int | None) -> int:
        """How many fused candidates a call keeps, once its query is checked."""
        check_query(query)
        return self.k if k is None else k

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
    ) -> CandidateList:
        top = self._top(query, k)
        if self._direct(run_manager):
            return self._fuse_direct(query, top)
        results = [
            retriever.invoke(
                query,
                RunnableConfig(callbacks=run_manager.get_child(tag=f"retriever_{i}")),
                **self._child_kwargs(i),
            )
            for i, retriever in enumerate(self.retrievers)
        ]
        run = run_manager.get_child().on_chain_start(
            None, {"results": results}, name=FUSION_RUN
        )
        try:
            fused = self.fuse(results, top)
        except Exception as exc:
            run.on_chain_error(exc)
            raise
        run.on_chain_end(fused)
        return fused

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
    ) -> CandidateList:
        direct = self._direct(run_manager)
        top = self._top(query, k)
        if direct:
            # One hop off the event loop for the whole query: embedding, BM25 and
            # fusion are CPU work that would stall every other coroutine.
            return await run_in_executor(None, self._fuse_direct, query, top)
        results = await asyncio.gather(
            *(
                retriever.ainvoke(
                    query,
                    RunnableConfig(
                        callbacks=run_manager.get_child(tag=f"retriever_{i}")
                    ),
                    **self._child_kwargs(i),
                )
                for i, retriever in enumerate(self.retrievers)
            )
        )
        run = await run_manager.get_child().on_chain_start(
            None, {"results": results}, name=FUSION_RUN
        )
        try:
            fused = self.fuse(results, top)
        except Exception as exc:
            await run.on_chain_error(exc)
            raise
        await run.on_chain_end(fused)
        return fused

    def _direct(
        self,
        run_manager: CallbackManagerForRetrieverRun
        | AsyncCallbackManagerForRetrieverRun,
    ) -> bool:
        """Whether the hits can skip the child runs: nobody listens, all can."""
        return not run_manager.handlers and all(
            isinstance(retriever, ScoredSearch) for retriever in self.retrievers
        )

    def _fuse_direct(self, query: str, k: int) -> CandidateList:
        """Fuse the retrievers' hits without child runs or per-retriever copies."""
        hits = [
            cast(ScoredSearch, retriever).scored_hits(query, self._fetch_size(i))
            for i, retriever in enumerate(self.retrievers)
        ]
        return self._fuse_hits(hits, CandidateList(), k)

    def fuse(self, results: Sequence[Sequence[Document]], k: int) -> CandidateList:
        """Fuse one result list per retriever; keep the top `k`, record the rest.

        For lists you retrieved yourself; scores come from `metadata[score_key]`
        and the lists' own records are passed on.

        Args:
            results: One ranked document list per retriever, in their order.
            k: How many fused candidates to keep.

        Raises:
            InvalidInputError: Not one list per retriever, or a list holds
                something other than Documents.
            ValueError: `k` is below 1.
        """
        if len(results) != len(self.retrievers):
            raise InvalidInputError(
                f"fuse takes one result list per retriever ({len(self.retrievers)}), "
                f"got {len(results)}"
            )
        checked = [
            check_documents(docs, f"results[{i}]") for i, docs in enumerate(results)
        ]
        hits = [
            [(doc, doc.metadata.get(self.score_key)) for doc in docs]
            for docs in checked
        ]
        drops, skipped, issues = [], [], []
        for docs in checked:
            found = records_of(docs)
            drops += found[0]
            skipped += found[1]
            issues += found[2]
        return self._fuse_hits(hits, CandidateList([], drops, skipped, issues), k)

    def _fuse_hits(
        self,
        hits: Sequence[Sequence[tuple[Document, Any]]],
        upstream: CandidateList,
        k: int,
    ) -> CandidateList:
        """Fuse, keep the top `k`, record the rest; open the run's ledger.

        Two texts (or sources) under one id are two candidates; each fused copy
        carries its key as `Document.id`, so every later stage names it the same.
        """
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        keys = hit_keys(hits, self.id_key)
        by_score = self.fusion in SCORE_METHODS
        fused = fuse(
            self.fusion,
            keys,
            self.resolved_weights,
            scores=hit_scores(hits) if by_score else None,
            c=self.rrf_c,
        )
        # reversed: the first occurrence of a key in each list wins
        firsts = [
            dict(zip(reversed(list_keys), reversed(pairs), strict=True))
            for list_keys, pairs in zip(keys, hits, strict=True)
        ]
        names = self.resolved_names
        issues = list(upstream.issues)
        for name, by_key in zip(names, firsts, strict=True):
            issues += _score_issues(name, by_key, missing_too=by_score)
        entered: dict[str, Document] = {}
        ledger = RunLedger(entered)
        reference = ledger.reference()
        labels = [
            (rank_key(name), score_key(name), normalised_key(name)) for name in names
        ]
        kept: list[Document] = []
        for rank, item in enumerate(fused[:k], 1):
            document = self._merge(item, rank, firsts, labels, reference)
            entered[item.key] = document
            kept.append(document)
        added = self._neighbours_of(kept, reference)
        kept += added
        entered.update((str(document.id), document) for document in added)
        # Cut candidates are recorded when first read, their documents later still.
        cut_off = _FusionCut(
            self, fused, firsts, labels, reference, k, frozenset(entered)
        )
        drops = DeferredRecords(partial(cut_off.records, upstream.drops))
        ledger.add(drops, upstream.skipped, issues)
        file_in_scope(ledger)
        return CandidateList(kept, drops, upstream.skipped, issues)

    def _neighbours_of(self, kept: list[Document], reference: str) -> list[Document]:
        """The neighbours of the `kept` candidates, ranked after them (`neighbours`)."""
        if not self.neighbours or self.chunk_store is None:
            return []
        found = around(kept, self.chunk_store, self.neighbours)
        return [
            chunk.model_copy(
                update={
                    "id": key,
                    "metadata": {
                        **chunk.metadata,
                        NEIGHBOUR_OF: of,
                        FUSED_RANK: rank,
                        LEDGER_KEY: reference,
                    },
                }
            )
            for rank, (key, chunk, of) in enumerate(found, len(kept) + 1)
        ]

    def _merge(
        self,
        item: Fused,
        fused_rank: int,
        firsts: list[dict[str, tuple[Document, Any]]],
        labels: list[_Labels],
        reference: str,
    ) -> Document:
        """One document for `item`: metadata of every retriever that returned it."""
        normalised = item.normalised or (None,) * len(labels)
        present = [
            (by_key[item.key], rank, label, norm)
            for by_key, rank, label, norm in zip(
                firsts, item.ranks, labels, normalised, strict=True
            )
            if rank is not None
        ]
        metadata: dict[str, Any] = {}
        for (doc, _), _, _, _ in reversed(present):  # the first retriever's win
            metadata.update(doc.metadata)
        metadata.pop(self.score_key, None)
        for (_, score), rank, (rank_label, score_label, norm_label), norm in present:
            metadata[rank_label] = rank
            value = finite_score(score)
            if value is not None:
                metadata[score_label] = value
            else:
                metadata.pop(score_label, None)
            if norm is not None:
                metadata[norm_label] = norm
            else:
                metadata.pop(norm_label, None)
        if item.normalised:
            metadata[FUSION_METHOD] = self.fusion
        else:  # RRF: the ranks above are all it used
            metadata.pop(FUSION_METHOD, None)
        metadata[FUSED_SCORE] = float(item.score)
        metadata[FUSED_RANK] = fused_rank
        metadata[LEDGER_KEY] = reference
        return present[0][0][0].model_copy(
            update={"id": item.key, "metadata": metadata}
        )


@dataclass(frozen=True)
class _FusionCut:
    """The candidates one fusion ranked past `k`: what their drop records show."""

    retriever: HybridRetriever
    fused: list[Fused]
    firsts: list[dict[str, tuple[Document, Any]]]
    labels: list[_Labels]
    reference: str
    k: int
    listed: frozenset[str]  # keys in the list after all, as neighbours

    def document(self, rank: int) -> Document:
        """The merged document of the candidate fused at `rank`."""
        return self.retriever._merge(
            self.fused[rank - 1], rank, self.firsts, self.labels, self.reference
        )

    def records(self, upstream: list[DropRecord]) -> list[DropRecord]:
        """The records upstream made, then one per cut candidate."""
        build = self.document
        cut: list[DropRecord] = [
            DeferredDropRecord(
                item.key,
                Stage.FUSION,
                DropReason.FUSION_CUT,
                rank,
                f"fused rank {rank} is past k={self.k}",
                build,
            )
            for rank, item in enumerate(self.fused[self.k :], self.k + 1)
            if item.key not in self.listed
        ]
        return upstream + cut


def _dense_side(
    config: RagBudgetConfig,
    documents: Sequence[Document],
    vectorstore: VectorStore | None,
    embeddings: Embeddings | None,
    chunk_store: Mapping[str, Document] | None,
) -> tuple[VectorStore, Mapping[str, Document] | None]:
    """The vector store over `documents` (built if None), and the passages by id."""
    from langchain_ragbudget.retrieval._dense import (
        add_documents,
        build_vector_store,
        is_chroma,
    )
    from langchain_ragbudget.retrieval._embeddings import build_embeddings

    if vectorstore is None:
        vectorstore = build_vector_store(config, embeddings or build_embeddings(config))
        add_documents(vectorstore, documents)
    if chunk_store is None and is_chroma(vectorstore):
        by_id = {doc.id: doc for doc in documents if doc.id is not None}
        chunk_store = by_id if len(by_id) == len(documents) else None
    return vectorstore, chunk_store


def _configured_sparse(
    config: RagBudgetConfig, documents: Sequence[Document]
) -> BaseRetriever:
    """The configured sparse retriever over `documents`: bm25s, or the class.

    A class without `from_documents` is made from `options` alone (a server that
    already holds the passages).

    Raises:
        ConfigError: The class refuses `options` (named with the file and key).
    """
    settings = config.sparse
    if settings.provider == "bm25s":
        from langchain_ragbudget.retrieval._sparse import BM25Retriever

        return BM25Retriever.from_config(config, documents=documents)
    provider = import_provider(settings.provider)
    options = dict(settings.options)
    if "k" in getattr(provider, "model_fields", {}):
        options.setdefault("k", config.retrieval.sparse.fetch_k)
    try:
        if hasattr(provider, "from_documents"):
            retriever: BaseRetriever = provider.from_documents(documents, **options)
        else:
            retriever = provider(**options)
    except (TypeError, ValueError) as exc:  # pydantic's ValidationError included
        raise ConfigError(
            config.source,
            "sparse.options",
            settings.options,
            f"{settings.provider} refused them: {type(exc).__name__}: {exc}",
        ) from exc
    return retriever


def hit_keys(
    hits: Sequence[Sequence[tuple[Document, Any]]], id_key: str | None
) -> list[list[str]]:
    """Each retriever's hits as the keys fusion ranks (`distinct_keys`)."""
    return distinct_keys(
        [[(document_key(doc, id_key), doc) for doc, _ in pairs] for pairs in hits]
    )


def hit_scores(
    hits: Sequence[Sequence[tuple[Document, Any]]],
) -> list[list[float | None]]:
    """Each retriever's hit scores as score fusion reads them: finite, else None."""
    return [[finite_score(score) for _, score in pairs] for pairs in hits]


def _score_issues(
    name: str, by_key: dict[str, tuple[Document, Any]], *, missing_too: bool
) -> list[ScoreIssue]:
    """Issues for scores that are not finite (with `missing_too`, absent ones too)."""
    scores = list(map(itemgetter(1), by_key.values()))
    if set(map(type, scores)) <= {float} and math.isfinite(sum(scores)):
        return []  # all finite floats, checked in C: a NaN or inf makes the sum one
    return [
        ScoreIssue(Stage.FUSION, key, score_key(name), repr(score))
        for key, (_, score) in by_key.items()
        if (score is not None or missing_too) and finite_score(score) is None
    ]


@runtime_checkable
class ScoredSearch(Protocol):
    """A retriever that hands over its ranked hits directly, without a run or copies.

    `BM25Retriever` and `DenseRetriever` implement it; other retrievers are
    invoked as usual.
    """

    def scored_hits(
        self, query: str, k: int | None = None
    ) -> list[tuple[Document, float]]:
        """The top `k` (the retriever's own if None) `(document, score)`, best first."""
        ...


def _default_names(retrievers: Sequence[BaseRetriever]) -> list[str]:
    """`BM25Retriever` -> `bm25`, `DenseRetriever` -> `dense`; repeats get `_2`..."""
    names: list[str] = []
    for retriever in retrievers:
        base = re.sub(r"retriever$", "", type(retriever).__name__.lower()) or "r"
        name, n = base, 1
        while name in names:
            n += 1
            name = f"{base}_{n}"
        names.append(name)
    return names
