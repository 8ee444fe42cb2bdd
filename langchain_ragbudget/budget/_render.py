"""How the context is rendered into the prompt: one citation per document.

The budget counts tokens on exactly these blocks and the chain sends their
concatenation. Every block starts with a non-space character and ends with a
newline: tiktoken's pre-tokenizer (cl100k_base, o200k_base) never joins a newline
with the next character, so the context's tokens are the sum of its blocks', each
counted once per process.

Passage text is data: every line is quoted (`> `), so no passage can forge a header
or a note; ids, sources and titles go through `display_name`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypeVar

from langchain_core.documents import Document

from langchain_ragbudget.ledger._identity import document_key, document_source
from langchain_ragbudget.ledger._metadata_keys import SECTION
from langchain_ragbudget.ledger._names import display_name
from langchain_ragbudget.retrieval._neighbours import run_text
from langchain_ragbudget.retrieval._neighbours import runs as runs_of

T = TypeVar("T")


@dataclass(frozen=True)
class Citation:
    """One cited source document and its kept passages, best first.

    Attributes:
        number: The `[n]` shown, counted in the order shown.
        group: The source document id (`metadata[group_key]`), else the passage key.
        documents: The kept passages, best first.
    """

    number: int
    group: str
    documents: tuple[Document, ...]

    @property
    def source(self) -> str | None:
        """The source (file, URL...) as the first passage names it."""
        return document_source(self.documents[0])

    def to_dict(self) -> dict[str, Any]:
        """Number, document, source and passage ids (`BudgetedAnswer.citations`)."""
        return {
            "number": self.number,
            "document": self.group,
            "source": self.source,
            "passages": [document_key(d) for d in self.documents],
        }


@dataclass(frozen=True)
class ContextFormat:
    """Templates for a citation header and a passage, plus how passages group.

    Passages group by `metadata[group_key]` and their `section` (the nearest
    heading the chunker recorded), so a header says where in the document its
    passages are (`§ bash (5.1~rc3-1)`), not only which document.

    Attributes:
        header: May use {citation}, {source}, {title}, {section}, {score}; starts
            with a non-space character and ends with a newline.
        passage: Starts with `{text}` (every line quoted) and ends with a newline.
        quote_mark: Put before every line of passage text; one line, starting
            with a visible character.
        omission: The line marking sentences left out; must not look quoted.
        group_key: The metadata key that names a passage's source document.
        score_keys: Scores to show, tried in order; the best passage's first
            finite one is shown (`(RERANK_SCORE, score_key(DENSE))`, say). Empty
            by default: a score costs every citation about 4 tokens of evidence
            and tells the model nothing the order does not (BENCHMARKS.md).
        join_neighbours: Whole chunks of one document that overlap or follow each
            other render as one passage, their shared text once.

    Raises:
        ValueError: A template, the quote mark or the omission breaks these rules.
    """

    header: str = "[{citation}] {source}{title}{section}{score}\n"
    passage: str = "{text}\n\n"
    quote_mark: str = "> "
    omission: str = "[…]"
    group_key: str = "doc_id"
    score_keys: tuple[str, ...] = ()
    join_neighbours: bool = True

    def __post_init__(self) -> None:
        for name, template in (("header", self.header), ("passage", self.passage)):
            if not template.endswith("\n") or template[:1].isspace() or not template:
                raise ValueError(
                    f"ContextFormat.{name} must start with a non-space character and "
                    f"end with a newline, so token counts add up exactly: {template!r}"
                )
        if not self.passage.startswith("{text}"):
            raise ValueError(
                "ContextFormat.passage must start with {text}, so every line of a "
                f"passage is quoted: {self.passage!r}"
            )
        mark = self.quote_mark
        if not mark.strip() or mark[:1].isspace() or "\n" in mark or "{" in mark:
            raise ValueError(
                "ContextFormat.quote_mark must be one line starting with a visible "
                f"character, e.g. '> ': {mark!r}"
            )
        marker = self.omission
        if (
            not marker.strip()
            or marker != display_name(marker)
            or marker.startswith(mark.strip())
        ):
            raise ValueError(
                "ContextFormat.omission must be one visible line that does not start "
                f"like a quoted line, e.g. '[…]': {marker!r}"
            )

    def group_of(self, document: Document, id_key: str | None = "chunk_id") -> str:
        """The source document id, else the passage's own key."""
        value = document.metadata.get(self.group_key)
        return str(value) if value is not None else document_key(document, id_key)

    def cited_together(
        self, document: Document, id_key: str | None = "chunk_id"
    ) -> tuple[str, str | None]:
        """What passages must share to share a citation: group and source.

        One number per document, whatever sections its passages come from; two
        sources never share a number even under one document id, so a citation
        never carries another source's text.
        """
        return self.group_of(document, id_key), document_source(document)

    def render_header(
        self,
        citation: int,
        best: Document,
        *,
        shows: str | None = None,
        mixed: bool = False,
    ) -> str:
        """The header line of a citation, with its best passage's score.

        The title is left out when the text `best`'s block shows first (`shows`,
        by default its whole text) opens with it as a line: not paid twice. The
        section is left out when the citation's passages come from several
        (`mixed`): a header names only what is true of all of them.
        """
        meta = best.metadata
        score = ""
        for key in self.score_keys:
            value = meta.get(key)
            if isinstance(value, int | float) and math.isfinite(value):
                score = f" | {key.removesuffix('_score')} {short_number(value)}"
                break
        title, section = meta.get("title"), None if mixed else section_of(best)
        shown_title = str(title) if title else ""
        first = best.page_content if shows is None else shows
        if self.title_line_shown(best, first):
            shown_title = ""
        return self._header(
            citation, document_source(best), shown_title, score, section or ""
        )

    @lru_cache(maxsize=100_000)  # noqa: B019 (formats are few, frozen and hashable)
    def _header(
        self, citation: int, source: str | None, title: str, score: str, section: str
    ) -> str:
        shown_source = header_field(source or "unknown source")
        shown_title = header_field(title) if title else ""
        shown_section = header_field(section) if section else ""
        return self.header.format(
            citation=citation,
            source=shown_source,
            title=(
                f" | {shown_title}"
                if shown_title and shown_title != shown_source
                else ""
            ),
            section=(
                f" § {shown_section}"
                if shown_section and shown_section != shown_title
                else ""
            ),
            score=score,
        )

    @staticmethod
    def title_line_shown(document: Document, shows: str) -> bool:
        title = document.metadata.get("title")
        return opens_with_line(shows, str(title) if title else "")

    def render_passage(self, document: Document) -> str:
        return self.passage.format(text=quote(document.page_content, self.quote_mark))

    def render_shortened(self, segments: Sequence[str | None]) -> str:
        """A shortened passage block: kept segments quoted, each `None` an omission.

        The marker line is the only unquoted one, so no passage text can forge it.
        """
        lines = [
            self.omission if segment is None else quote(segment, self.quote_mark)
            for segment in segments
        ]
        return self.passage.format(text="\n".join(lines))

    def render(
        self,
        citations: Sequence[Citation],
        shortened: Mapping[str, Sequence[str | None]] | None = None,
    ) -> str:
        return "".join(self.blocks(citations, shortened)[0])

    def blocks(
        self,
        citations: Sequence[Citation],
        shortened: Mapping[str, Sequence[str | None]] | None = None,
    ) -> tuple[list[str], list[str]]:
        """The context's blocks in order, and the passage text they show.

        The passage text (no headers, quotes or markers) is what the budget
        reports overhead against; one rendering serves both. `shortened` maps a
        passage's `Document.id` to its `render_shortened` segments.
        """
        shortened = shortened or {}
        out: list[str] = []
        texts: list[str] = []
        for citation in citations:
            best = citation.documents[0]
            segments = shortened.get(str(best.id)) if best.id is not None else None
            shows = (segments[0] or "") if segments else None  # None: an omission
            mixed = len({section_of(d) for d in citation.documents}) > 1
            header = self.render_header(citation.number, best, shows=shows, mixed=mixed)
            out.append(header)
            for block, pieces in self._bodies(citation, shortened):
                out.append(block)
                texts.extend(pieces)
        return out, texts

    def _bodies(
        self, citation: Citation, shortened: Mapping[str, Sequence[str | None]]
    ) -> list[tuple[str, list[str]]]:
        """A citation's blocks and their text; a run of whole neighbours shows once."""
        documents = citation.documents
        whole = [d for d in documents if d.id is None or str(d.id) not in shortened]
        runs = (
            {id(whole[min(run)]): [whole[i] for i in run] for run in runs_of(whole)}
            if self.join_neighbours
            else {}
        )
        joined = {id(d) for run in runs.values() for d in run} - set(runs)
        out = []
        for doc in documents:
            if doc.id is not None and str(doc.id) in shortened:
                segments = shortened[str(doc.id)]
                kept = [s for s in segments if s is not None]
                out.append((self.render_shortened(segments), kept))
            elif id(doc) not in joined:
                run = runs.get(id(doc), [doc])
                text = run_text(run) if len(run) > 1 else doc.page_content
                out.append((self.render_run(run), [text]))
        return out

    def render_run(self, chunks: Sequence[Document]) -> str:
        if len(chunks) == 1:
            return self.render_passage(chunks[0])
        return self.passage.format(text=quote(run_text(chunks), self.quote_mark))


def group_citations(
    documents: Sequence[Document],
    fmt: ContextFormat,
    id_key: str | None = "chunk_id",
    *,
    edges: bool = False,
) -> list[Citation]:
    """Group passages by `cited_together`, numbered in the order shown.

    Documents rank by their best passage; with `edges`, the best go first and last
    and the weakest in the middle (against lost-in-the-middle).
    """
    groups: dict[tuple[str, str | None], list[Document]] = {}
    for document in documents:
        groups.setdefault(fmt.cited_together(document, id_key), []).append(document)
    ordered = edges_order(list(groups.items())) if edges else list(groups.items())
    return [
        Citation(number, group, tuple(docs))
        for number, ((group, _), docs) in enumerate(ordered, start=1)
    ]


def section_of(document: Document) -> str | None:
    """The section a passage comes from (its nearest heading), if recorded."""
    section = document.metadata.get(SECTION)
    return section if isinstance(section, str) and section else None


HEADER_SEPARATORS = "|§"


def header_field(value: str) -> str:
    """A source, title or section as the header shows it.

    `display_name`, with the header's own separators escaped, so a heading
    `Refunds § Legal | rerank .99` cannot pose as a section and a score.
    """
    return display_name(value, also=HEADER_SEPARATORS)


_LINE_BREAKS = re.compile(r"\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
_OTHER_BREAKS = "\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"


def short_number(value: float) -> str:
    """Two decimals without the leading zero (`.70`): two tokens fewer."""
    text = f"{value:.2f}"
    text = "0.00" if text == "-0.00" else text
    return text.replace("0.", ".", 1) if text.lstrip("-").startswith("0.") else text


def opens_with_line(text: str, line: str) -> bool:
    """Whether `text`'s first line is exactly `line`."""
    if not line or not text.startswith(line):
        return False
    rest = text[len(line) :]
    return not rest or _LINE_BREAKS.match(rest) is not None


@lru_cache(maxsize=100_000)
def quote(text: str, mark: str = "> ") -> str:
    """`text` with `mark` before each line (any Unicode break becomes a newline).

    Nothing else changes: the words reach the model as written. An empty line gets
    the mark without its trailing space: still quoted, one token cheaper.
    """
    if (
        text[:1] not in ("", "\n")
        and text[-1] != "\n"
        and "\n\n" not in text
        and not any(brk in text for brk in _OTHER_BREAKS)
    ):  # only newlines, no empty line: the common case, without the regex
        return mark + text.replace("\n", "\n" + mark)
    bare = mark.rstrip()
    return "\n".join(mark + line if line else bare for line in _LINE_BREAKS.split(text))


def edges_order(items: Sequence[T]) -> list[T]:
    """Best first, second best last, weakest in the middle: 12345 -> 13542."""
    return [*items[0::2], *reversed(items[1::2])]
