"""How the context is rendered into the prompt, grouped into one citation per document.

The budget counts tokens on exactly these blocks, and the chain sends exactly their
concatenation. Every block starts with a non-space character and ends with a newline:
tiktoken's pre-tokenizer (cl100k_base, o200k_base) never joins a newline with the
character after it, so the tokens of the whole context are the sum of its blocks' and
each block is counted once per process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.documents import Document

from langchain_ragbudget.identity import document_key, document_source


@dataclass(frozen=True)
class Citation:
    """One cited source document and its passages, best first."""

    number: int
    group: str
    documents: tuple[Document, ...]

    @property
    def source(self) -> str | None:
        """The document's source (file, URL...) as its first passage names it."""
        return document_source(self.documents[0])


@dataclass(frozen=True)
class ContextFormat:
    """Templates for a citation header and a passage, plus how passages group.

    `header` may use {citation}, {source}, {title}, {score}; `passage` uses {text}
    (inserted verbatim). Passages group by `metadata[group_key]` (the source
    document id), so chunks of one document share one citation number (seed 001).
    """

    header: str = "[{citation}] {source}{title}{score}\n"
    passage: str = "> {text}\n\n"
    group_key: str = "doc_id"
    score_keys: tuple[str, ...] = ("rerank_score", "dense_score")

    def __post_init__(self) -> None:
        for name, template in (("header", self.header), ("passage", self.passage)):
            if not template.endswith("\n") or template[:1].isspace() or not template:
                raise ValueError(
                    f"ContextFormat.{name} must start with a non-space character and "
                    f"end with a newline, so token counts add up exactly: {template!r}"
                )

    def group_of(self, document: Document, id_key: str | None = "chunk_id") -> str:
        """The citation group: the source document id, else the passage's own key."""
        value = document.metadata.get(self.group_key)
        return str(value) if value is not None else document_key(document, id_key)

    def render_header(self, citation: int, best: Document) -> str:
        """The header line of a citation, showing its best passage's score."""
        meta = best.metadata
        title = meta.get("title")
        score = ""
        for key in self.score_keys:
            value = meta.get(key)
            if isinstance(value, int | float):
                score = f" | {key.removesuffix('_score')} {value:.2f}"
                break
        return self.header.format(
            citation=citation,
            source=document_source(best) or "unknown source",
            title=f" | {title}" if title and title != meta.get("source") else "",
            score=score,
        )

    def render_passage(self, document: Document) -> str:
        """One passage block, its text verbatim."""
        return self.passage.format(text=document.page_content)

    def render(self, citations: Sequence[Citation]) -> str:
        """The whole context: each citation's header, then its passages."""
        return "".join(self.blocks(citations))

    def blocks(self, citations: Sequence[Citation]) -> list[str]:
        """The context as its blocks, in order (headers and passages)."""
        out: list[str] = []
        for citation in citations:
            out.append(self.render_header(citation.number, citation.documents[0]))
            out.extend(self.render_passage(doc) for doc in citation.documents)
        return out


def group_citations(
    documents: Sequence[Document], fmt: ContextFormat, id_key: str | None = "chunk_id"
) -> list[Citation]:
    """Group passages by source document, documents ranked by their best passage."""
    groups: dict[str, list[Document]] = {}
    for document in documents:
        groups.setdefault(fmt.group_of(document, id_key), []).append(document)
    return [
        Citation(number, group, tuple(docs))
        for number, (group, docs) in enumerate(groups.items(), start=1)
    ]


def scores_of(document: Document) -> dict[str, Any]:
    """The rank and score fields of a document's metadata, for tables and reports."""
    return {
        key: value
        for key, value in document.metadata.items()
        if key.endswith(("_score", "_rank"))
    }
