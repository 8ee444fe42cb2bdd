"""Sparse retrieval: BM25 on `bm25s`, as a LangChain retriever.

bm25s, with a stemmer and stopwords, is faster and better than the stock
rank_bm25 retriever (BENCHMARKS.md, Retrieval). Saved as JSON and `.npy`, never
pickle.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import bm25s
import numpy as np
import numpy.typing as npt
import Stemmer
from langchain_core.documents import Document
from pydantic import ConfigDict, Field, PrivateAttr

from langchain_ragbudget.config._settings import (
    BM25Method,
    ConfigLike,
    RagBudgetConfig,
    SparseSettings,
    as_config,
    default_of,
)
from langchain_ragbudget.errors import ConfigError, IndexLoadError
from langchain_ragbudget.ledger._validation import check_passages, check_query
from langchain_ragbudget.retrieval._scored import ScoredRetriever

# bm25s's default split, written out so indexing and the query path share it.
TOKEN_PATTERN = r"(?u)\b\w\w+\b"
_SETTINGS_FILE = "ragbudget_bm25.json"
_DOCUMENTS_FILE = "documents.jsonl"


_split = re.compile(TOKEN_PATTERN).findall


def indexed_text(document: Document, *, with_title: bool) -> str:
    """The text BM25 indexes for `document`: its title ahead of it, if not in it.

    A chunk deep in a document rarely repeats the document's name, which a
    question may use (BENCHMARKS.md, Chunking). The chunk returned is unchanged.
    """
    title = document.metadata.get("title") if with_title else None
    text = document.page_content
    if isinstance(title, str) and title.strip() and title not in text:
        return f"{title}\n{text}"
    return text


def top_positive(
    scores: npt.NDArray[np.floating], k: int
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.floating]]:
    """The positions and scores of the `k` highest positive scores, best first.

    Over the positive scores only: a document sharing no term is never a hit,
    and partitioning a large corpus's run of tied zeros (as `bm25s.selection.topk`
    does) is slow (BENCHMARKS.md, Scale). Equal scores keep index order.
    """
    positions = np.flatnonzero(scores > 0)
    positive = scores[positions]
    if len(positions) > k:
        # Everything above the k-th best score, then its ties in index order.
        cut = -np.partition(-positive, k - 1)[k - 1]
        above = positive > cut
        tied = np.flatnonzero(positive == cut)[: k - int(above.sum())]
        above[tied] = True
        positions, positive = positions[above], positive[above]
    order = np.lexsort((positions, -positive))
    return positions[order], positive[order]


def bm25_settings(config: RagBudgetConfig) -> dict[str, Any]:
    """The `BM25Retriever` fields the `sparse` section sets (a saved index compares)."""
    sparse = config.sparse
    return {
        "k1": sparse.k1,
        "b": sparse.b,
        "method": sparse.method,
        "stemmer_language": sparse.stemmer,
        "stopwords": sparse.stopwords,
        "index_title": sparse.index_title,
    }


class BM25Retriever(ScoredRetriever):
    """BM25 over a fixed set of Documents, scored by bm25s.

    Returns at most `k` copies, best first, each with its BM25 score in
    `metadata[score_key]`; a document sharing no term with the query is not
    returned. Persist with `save` and `load`.

    Attributes:
        k: Documents returned at most (a call's `k` overrides it).
        k1: BM25 term-frequency saturation.
        b: BM25 length normalisation, 0 to 1.
        method: The bm25s scoring variant.
        stemmer_language: A PyStemmer language, or None for no stemming.
        stopwords: A bm25s stopword language, a list of words, or None.
        index_title: Index `metadata["title"]` ahead of the text (`indexed_text`).
        score_key: The metadata key the BM25 score is written to.
    """

    k: int = Field(4, ge=1)
    k1: float = Field(default_of(SparseSettings, "k1"), gt=0)
    b: float = Field(default_of(SparseSettings, "b"), ge=0, le=1)
    method: BM25Method = default_of(SparseSettings, "method")
    stemmer_language: str | None = default_of(SparseSettings, "stemmer")
    stopwords: str | list[str] | None = default_of(SparseSettings, "stopwords")
    index_title: bool = default_of(SparseSettings, "index_title")
    score_key: str = "score"

    model_config = ConfigDict(arbitrary_types_allowed=True)

    _index: bm25s.BM25 | None = PrivateAttr(default=None)
    _documents: list[Document] = PrivateAttr(default_factory=list)
    _stemmer: Stemmer.Stemmer | None = PrivateAttr(default=None)
    _stopword_set: frozenset[str] = PrivateAttr(default=frozenset())

    def model_post_init(self, context: Any, /) -> None:
        """Create the stemmer and stopword set once; an unknown language fails here."""
        if self.stopwords is not None:  # resolved by bm25s, as at indexing time
            words = bm25s.tokenization.Tokenizer(stopwords=self.stopwords).stopwords
            self._stopword_set = frozenset(words)
        if self.stemmer_language is None:
            return
        try:
            self._stemmer = Stemmer.Stemmer(self.stemmer_language)
        except KeyError:
            known = ", ".join(Stemmer.algorithms())
            raise ValueError(
                f"stemmer_language {self.stemmer_language!r} is not a PyStemmer "
                f"language; use one of: {known}, or None"
            ) from None

    @classmethod
    def from_documents(
        cls, documents: Iterable[Document], **kwargs: Any
    ) -> BM25Retriever:
        """Index `documents` (kept as given; results are copies).

        Args:
            documents: The passages to index; each needs text.
            **kwargs: Retriever fields (`k`, `k1`, `b`, `method`...).

        Raises:
            InvalidInputError: An item is not a Document, or has no text.
            ValueError: `documents` is empty, no document has a word BM25 can
                index, or `stemmer_language` is unknown.
        """
        retriever = cls(**kwargs)
        retriever._build(list(documents))
        return retriever

    @classmethod
    def from_config(
        cls, config: ConfigLike = None, *, documents: Iterable[Document]
    ) -> BM25Retriever:
        """BM25 over `documents`, with `sparse` and `retrieval.sparse.fetch_k` as `k`.

        Raises:
            ConfigError: The file is invalid, or `sparse.provider` names another
                class (`HybridRetriever.from_config` builds that one).
            InvalidInputError: An item is not a Document, or has no text.
            ValueError: `documents` is empty, or no document has a word BM25
                can index.
        """
        config = as_config(config)
        if config.sparse.provider != "bm25s":
            raise ConfigError(
                config.source,
                "sparse.provider",
                config.sparse.provider,
                "BM25Retriever.from_config builds bm25s only (so do the on-disk "
                "index and the corpus caches); HybridRetriever.from_config builds "
                "this class",
            )
        return cls.from_documents(
            documents, k=config.retrieval.sparse.fetch_k, **bm25_settings(config)
        )

    @classmethod
    def from_texts(
        cls,
        texts: Iterable[str],
        metadatas: Iterable[dict[str, Any]] | None = None,
        ids: Iterable[str] | None = None,
        **kwargs: Any,
    ) -> BM25Retriever:
        """Index plain texts, with optional metadata and ids."""
        texts = list(texts)
        metas = list(metadatas) if metadatas is not None else [{} for _ in texts]
        id_list = list(ids) if ids is not None else [None] * len(texts)
        documents = [
            Document(page_content=text, metadata=meta, id=doc_id)
            for text, meta, doc_id in zip(texts, metas, id_list, strict=True)
        ]
        return cls.from_documents(documents, **kwargs)

    @property
    def documents(self) -> Sequence[Document]:
        """The indexed documents, in index order."""
        return tuple(self._documents)

    def _query_tokens(self, query: str) -> list[str]:
        """One query's tokens, as `bm25s.tokenize` makes them, without its overhead.

        bm25s's batch tokenizer builds a vocabulary even for one query, which
        costs more than the search.
        """
        stopwords = self._stopword_set  # a private attribute: read once, not per word
        words = [word for word in _split(query.lower()) if word not in stopwords]
        stemmer = self._stemmer
        if stemmer is None:
            return words
        stems: list[str] = stemmer.stemWords(words)
        return stems

    def _tokenize(self, texts: list[str], *, return_ids: bool) -> Any:
        return bm25s.tokenize(
            texts,
            token_pattern=TOKEN_PATTERN,
            stopwords=self.stopwords,
            stemmer=self._stemmer,
            return_ids=return_ids,
            show_progress=False,
        )

    def _build(self, documents: list[Document]) -> None:
        if not documents:
            raise ValueError("BM25Retriever needs at least one document to index")
        check_passages(documents)
        index = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
        texts = [indexed_text(d, with_title=self.index_title) for d in documents]
        tokens = self._tokenize(texts, return_ids=True)
        if not tokens.vocab:
            raise ValueError(
                f"none of the {len(documents)} documents has a word BM25 can index "
                "(all empty, stopwords or single characters)"
            )
        index.index(tokens, show_progress=False)
        self._index = index
        self._documents = documents

    def scored_hits(
        self, query: str, k: int | None = None
    ) -> list[tuple[Document, float]]:
        """The top `k` indexed documents (shared, not copies) and their BM25 scores."""
        if self._index is None:
            raise RuntimeError("BM25Retriever has no index: use from_documents or load")
        check_query(query)
        size = self.k if k is None else k
        if size < 1:
            raise ValueError(f"k must be at least 1, got {size}")
        query_tokens = self._query_tokens(query)
        if not query_tokens:
            return []
        documents = self._documents
        positions, scores = top_positive(self._index.get_scores(query_tokens), size)
        return [
            (documents[position], score)
            for position, score in zip(positions.tolist(), scores.tolist(), strict=True)
        ]

    def save(self, directory: str | Path) -> None:
        """Write the index, documents and settings to `directory`, in place.

        Raises:
            RuntimeError: The retriever has no index.
            ValueError: A document's metadata is not JSON-serialisable.
        """
        if self._index is None:
            raise RuntimeError("nothing to save: the retriever has no index")
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        self._index.save(str(path), show_progress=False)
        settings = self.model_dump(exclude={"tags", "metadata"})
        (path / _SETTINGS_FILE).write_text(json.dumps(settings), encoding="utf-8")
        with (path / _DOCUMENTS_FILE).open("w", encoding="utf-8") as out:
            for document in self._documents:
                record = {
                    "id": document.id,
                    "page_content": document.page_content,
                    "metadata": document.metadata,
                }
                try:
                    out.write(json.dumps(record, ensure_ascii=False) + "\n")
                except TypeError as exc:
                    raise ValueError(
                        f"document {document.id!r} has metadata that is not "
                        f"JSON-serialisable, so it cannot be saved: {exc}"
                    ) from exc

    @classmethod
    def load(
        cls, directory: str | Path, *, mmap: bool = False, **overrides: Any
    ) -> BM25Retriever:
        """Read a retriever written by `save`; `overrides` may change e.g. `k`.

        Args:
            directory: A folder written by `save`.
            mmap: Memory-map the score arrays (a large index opens at once and
                processes share its pages).
            **overrides: Fields to set instead of the saved ones.

        Raises:
            IndexLoadError: `directory` holds no saved index, or a damaged one.
        """
        path = Path(directory)
        settings_file = path / _SETTINGS_FILE
        if not settings_file.is_file():
            raise IndexLoadError(
                f"{path} holds no saved BM25Retriever ({_SETTINGS_FILE} is missing)"
            )
        try:
            settings = json.loads(settings_file.read_text(encoding="utf-8"))
            if not isinstance(settings, dict):
                raise TypeError(f"{_SETTINGS_FILE} does not hold a JSON object")
            settings.setdefault("index_title", False)  # saved before it existed
            retriever = cls(**{**settings, **overrides})
            retriever._index = bm25s.BM25.load(
                str(path), mmap=mmap, show_progress=False
            )
            with (path / _DOCUMENTS_FILE).open(encoding="utf-8") as lines:
                retriever._documents = [
                    Document(
                        page_content=row["page_content"],
                        metadata=row["metadata"],
                        id=row["id"],
                    )
                    for row in map(json.loads, lines)
                ]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise IndexLoadError(
                f"{path}: the saved BM25 index is damaged or incomplete "
                f"({type(exc).__name__}: {exc}); rebuild it"
            ) from exc
        return retriever
