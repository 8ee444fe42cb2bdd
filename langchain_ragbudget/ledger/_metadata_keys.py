"""The metadata keys stages write and later stages read, named once.

Fusion writes `<name>_rank` and `<name>_score` per retriever, the fused score and
rank, and for score-based methods the method and `<name>_normalised`; rerank writes
its score and rank; the budget the tokens a kept passage and its citation header
cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.documents import Document

SPARSE = "bm25"  # the package's BM25 retriever inside a HybridRetriever
DENSE = "dense"  # its vector-store retriever
FUSED_SCORE = "fused_score"
FUSED_RANK = "fused_rank"
FUSION_METHOD = "fusion_method"  # written by the score-based methods
RERANK_SCORE = "rerank_score"
RERANK_RANK = "rerank_rank"
CONTEXT_TOKENS = "context_tokens"
HEADER_TOKENS = "header_tokens"  # the citation header a passage paid for (or needed)
SECTION = "section"  # a chunk's nearest heading (index/_chunking), in its header
# A recalled memory's Document: every factor of its score, plain values.
MEMORY_ID = "memory_id"
MEMORY_SUBJECT = "memory_subject"
MEMORY_SIMILARITY = "similarity"
MEMORY_IMPORTANCE = "importance"
MEMORY_AGE_DAYS = "age_days"
MEMORY_RECENCY = "recency"
MEMORY_SCORE = "memory_score"
MEMORY_SAID_AT = "said_at"
MEMORY_TIMES_SAID = "times_said"
MEMORY_SOURCE_ID = "source_id"
MEMORY_SOURCE_HASH = "source_hash"
MEMORY_STALE = "memory_stale"  # why the memory may be out of date; absent if not
CHUNK_START = "chunk_start"  # a chunk's first character in its document's text
CHUNK_END = "chunk_end"  # one past its last character
CHUNK_GAP = "chunk_gap"  # the text between the previous chunk and a non-overlapping one
SENTENCE_SPLIT = "sentence_split"  # the chunk holds part of a sentence over a chunk
NEIGHBOUR_OF = "neighbour_of"  # a chunk added next to this retrieved one (hybrid)
_HOW_IT_CAME = (FUSION_METHOD, NEIGHBOUR_OF)
_SCORE = "_score"
_RANK = "_rank"
_NORMALISED = "_normalised"


def score_key(retriever: str) -> str:
    return f"{retriever}{_SCORE}"


def rank_key(retriever: str) -> str:
    return f"{retriever}{_RANK}"


def is_score_key(key: str) -> bool:
    return key.endswith(_SCORE)


def score_label(key: str) -> str:
    """A score key's table column: `dense_score` -> `dense`."""
    return key.removesuffix(_SCORE)


def normalised_key(retriever: str) -> str:
    """Its own suffix, so it never equals another retriever's score or rank key."""
    return f"{retriever}{_NORMALISED}"


def scores_of(document: Document) -> dict[str, Any]:
    """The rank and score fields of the metadata, and `neighbour_of`."""
    return {
        key: value
        for key, value in document.metadata.items()
        if key.endswith((_SCORE, _RANK, _NORMALISED)) or key in _HOW_IT_CAME
    }


def with_neighbour(detail: str | None, fields: Mapping[str, Any]) -> str | None:
    """`detail`, and for an added neighbour chunk, the retrieved one it is next to."""
    if NEIGHBOUR_OF not in fields:
        return detail
    beside = f"neighbour of {fields[NEIGHBOUR_OF]}"
    return f"{detail}; {beside}" if detail else beside


def best_retriever(document: Document) -> str | None:
    """The retriever that ranked `document` best, which `max_per_retriever` counts.

    Fusion's and rerank's ranks do not count; a tie goes to the one written first.
    """
    best: tuple[int, str] | None = None
    for key, value in document.metadata.items():
        if not key.endswith(_RANK) or key in (FUSED_RANK, RERANK_RANK):
            continue
        if type(value) is int and (best is None or value < best[0]):
            best = (value, key.removesuffix(_RANK))
    return None if best is None else best[1]
