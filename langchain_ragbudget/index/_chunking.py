"""Chunking: source documents into chunks with ids, positions and sections.

`SentenceChunker` (the default) makes chunks of whole sentences: `Chunker`'s
recursive splitter cuts inside sentences, so some evidence is whole in no chunk
and no packing can keep it. Its chunks are exact slices of the document, which
lets the renderer join neighbours; a sentence longer than a chunk is cut alone
and flagged `sentence_split`.

Chunk ids are `<doc_id>::<position>`, so an update replaces exactly one
document's chunks on both sides. `Chunker`'s chunks carry the `section` they
mostly hold, so a citation says where in the document it is.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Sequence

from langchain_core.documents import Document
from langchain_text_splitters import RecursiveCharacterTextSplitter

from langchain_ragbudget.config._settings import IndexSettings
from langchain_ragbudget.config._tokens import count_tokens, get_encoding
from langchain_ragbudget.evidence._sentences import sentence_spans
from langchain_ragbudget.index._loaders import is_blank
from langchain_ragbudget.ledger._metadata_keys import (
    CHUNK_END,
    CHUNK_GAP,
    CHUNK_START,
    SECTION,
    SENTENCE_SPLIT,
)

HEADINGS = "headings"  # document metadata (HTML): its h1-h6 texts, in order
SECTION_CHARS = 120  # a heading longer than this is cut at a word boundary

# A Markdown ATX heading, a Debian changelog entry (`bash (5.1~rc3-1) unstable;`),
# and a code fence (headings inside fenced code are not headings).
_ATX = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_CHANGELOG = re.compile(r"^([a-z0-9][a-z0-9+.-]+ \([^()\s]+\))(?: [^;\n]+;.*)?$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
# What ends a run of sentences: a heading line (Markdown or HTML), a blank line.
_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+\S|^[ \t]*<h[1-6][\s>]", re.I | re.M)
_BLANK_LINE = re.compile(r"\n[ \t]*\n")

Span = tuple[int, int]


def section_starts(text: str, headings: Sequence[str] = ()) -> list[tuple[int, str]]:
    """Where each section of `text` starts, and its heading, in order.

    Markdown ATX headings outside code fences, Debian changelog entries, and a
    paragraph that is exactly one of the page's `headings` (HTML h1-h6).
    """
    wanted = {" ".join(h.split()) for h in headings if h.strip()}
    starts: list[tuple[int, str]] = []
    offset, fenced = 0, False
    for line in text.splitlines(keepends=True):
        stripped = line.rstrip("\r\n")
        if _FENCE.match(stripped):
            fenced = not fenced
        elif not fenced and (
            match := _ATX.match(stripped) or _CHANGELOG.match(stripped)
        ):
            starts.append((offset, _short(match.group(1))))
        elif wanted and " ".join(stripped.split()) in wanted:
            starts.append((offset, _short(stripped)))
        offset += len(line)
    return starts


def section_of(starts: Sequence[tuple[int, str]], start: int, end: int) -> str | None:
    """The heading of the section holding most of `[start, end)` (ties: the earlier)."""
    offsets = [offset for offset, _ in starts]
    first = bisect.bisect_right(offsets, start) - 1
    last = bisect.bisect_left(offsets, end)
    best, held = None, 0
    for index in range(first, last):
        low = offsets[index] if index >= 0 else 0
        high = offsets[index + 1] if index + 1 < len(offsets) else end
        inside = min(end, high) - max(start, low)
        if inside > held:
            best, held = (starts[index][1] if index >= 0 else None), inside
    return best


def _short(heading: str) -> str:
    heading = " ".join(heading.split())
    if len(heading) <= SECTION_CHARS:
        return heading
    return heading[:SECTION_CHARS].rsplit(" ", 1)[0] + " …"


class Chunker:
    """Split source documents into chunks of at most `chunk_size` tokens."""

    def __init__(self, settings: IndexSettings) -> None:
        self.settings = settings
        get_encoding(settings.encoding)  # load (offline-aware, with timeout) first
        encoding = settings.encoding
        self._splitter = RecursiveCharacterTextSplitter(
            chunk_size=settings.chunk_size,
            chunk_overlap=settings.chunk_overlap,
            length_function=lambda text: count_tokens(text, encoding),
        )

    def split(self, document: Document, doc_id: str) -> list[Document]:
        """The chunks of one source document, in order (blank pieces left out)."""
        return self.split_counted(document, doc_id)[0]

    def split_counted(
        self, document: Document, doc_id: str
    ) -> tuple[list[Document], int]:
        """The chunks of one document, and how many blank pieces were left out.

        Positions (and so chunk ids) count the kept chunks only.
        """
        encoding = self.settings.encoding
        content = document.page_content
        pieces = self._splitter.split_text(content)
        texts = [text for text in pieces if not is_blank(text)]
        metadata = {k: v for k, v in document.metadata.items() if k != HEADINGS}
        starts = section_starts(content, document.metadata.get(HEADINGS) or ())
        chunks, cursor = [], 0
        for position, text in enumerate(texts):
            chunk_id = f"{doc_id}::{position}"
            found = content.find(text, cursor)
            cursor = found + 1 if found >= 0 else cursor
            end = found + len(text)
            section = section_of(starts, found, end) if found >= 0 else None
            chunks.append(
                Document(
                    id=chunk_id,
                    page_content=text,
                    metadata={
                        **metadata,
                        "doc_id": doc_id,
                        "chunk_id": chunk_id,
                        "position": position,
                        "tokens": count_tokens(text, encoding),
                        **({SECTION: section} if section else {}),
                    },
                )
            )
        return chunks, len(pieces) - len(texts)


class SentenceChunker:
    """Split documents into runs of whole sentences of at most `chunk_size` tokens."""

    def __init__(self, settings: IndexSettings) -> None:
        self.settings = settings
        get_encoding(settings.encoding)
        encoding = settings.encoding
        self._long = RecursiveCharacterTextSplitter(
            chunk_size=settings.chunk_size,
            chunk_overlap=0,
            length_function=lambda text: count_tokens(text, encoding),
        )

    def _tokens(self, text: str) -> int:
        return count_tokens(text, self.settings.encoding)

    def split(self, document: Document, doc_id: str) -> list[Document]:
        """The chunks of one source document, in order."""
        return self.split_counted(document, doc_id)[0]

    def split_counted(
        self, document: Document, doc_id: str
    ) -> tuple[list[Document], int]:
        """The chunks of one document, and 0 (`Chunker`'s interface; no blank run)."""
        text = document.page_content
        chunks = []
        previous_end = 0
        for position, (start, end, split) in enumerate(self.spans(text)):
            chunk_id = f"{doc_id}::{position}"
            piece = text[start:end]
            metadata = {
                **document.metadata,
                "doc_id": doc_id,
                "chunk_id": chunk_id,
                "position": position,
                "tokens": self._tokens(piece),
                CHUNK_START: start,
                CHUNK_END: end,
            }
            if position and start > previous_end:  # what joins it to the one before
                metadata[CHUNK_GAP] = text[previous_end:start]
            previous_end = end
            if split:
                metadata[SENTENCE_SPLIT] = True
            chunks.append(Document(id=chunk_id, page_content=piece, metadata=metadata))
        return chunks, 0

    def spans(self, text: str) -> list[tuple[int, int, bool]]:
        """(start, end, holds part of a long sentence) of each chunk of `text`."""
        out: list[tuple[int, int, bool]] = []
        for section in _sections(text):
            out.extend(self._pack(text, self._units(text, section)))
        return out

    def _units(self, text: str, section: Span) -> list[tuple[int, int, bool]]:
        """The sentences of a section, a long one cut in pieces (flagged True)."""
        units = []
        for block_start, block_end in _blocks(text, section):
            block = text[block_start:block_end]
            for start, end in sentence_spans(block):
                start, end = start + block_start, end + block_start
                if self._tokens(text[start:end]) <= self.settings.chunk_size:
                    units.append((start, end, False))
                else:
                    units.extend((s, e, True) for s, e in self._cut(text, start, end))
        return units

    def _cut(self, text: str, start: int, end: int) -> Iterator[Span]:
        """Pieces of one long sentence, each at most a chunk, as spans of `text`.

        A piece that shows nothing joins a neighbour, so every character of the
        sentence stays in a chunk.
        """
        spans: list[Span] = []
        cursor = start
        for piece in self._long.split_text(text[start:end]):
            found = text.find(piece, cursor, end)
            if found < 0:  # not found as it is (the splitter changed it): skipped
                continue
            cursor = found + len(piece)
            joins = (
                is_blank(piece) or is_blank(text[slice(*spans[-1])]) if spans else False
            )
            if joins:
                spans[-1] = (spans[-1][0], cursor)
            else:
                spans.append((found, cursor))
        if spans:  # the sentence's ends belong to its first and last pieces
            spans[0] = (start, spans[0][1])
            spans[-1] = (spans[-1][0], end)
        yield from spans

    def _pack(
        self, text: str, units: list[tuple[int, int, bool]]
    ) -> Iterator[tuple[int, int, bool]]:
        """Greedy runs of units up to `chunk_size`, sharing whole units as overlap."""
        size = self.settings.chunk_size
        first = 0
        while first < len(units):
            last = first
            while (
                last + 1 < len(units)
                and self._tokens(text[units[first][0] : units[last + 1][1]]) <= size
            ):
                last += 1
            run = units[first : last + 1]
            yield run[0][0], run[-1][1], any(split for _, _, split in run)
            if last + 1 >= len(units):
                return
            first = self._overlap_start(text, units, first, last)

    def _overlap_start(
        self, text: str, units: list[tuple[int, int, bool]], first: int, last: int
    ) -> int:
        """Where the next chunk starts: the overlap, leaving room for the next unit."""
        nxt, following = last + 1, units[last + 1][1]
        while (
            nxt - 1 > first
            and not units[nxt - 1][2]
            and self._tokens(text[units[nxt - 1][0] : units[last][1]])
            <= self.settings.chunk_overlap
            and self._tokens(text[units[nxt - 1][0] : following])
            <= self.settings.chunk_size
        ):
            nxt -= 1
        return nxt


def _sections(text: str) -> list[Span]:
    """Spans of `text` each starting at a heading line (the first at 0)."""
    starts = [0] + [m.start() for m in _HEADING.finditer(text) if m.start() > 0]
    ends = [*starts[1:], len(text)]
    return list(zip(starts, ends, strict=True))


def _blocks(text: str, section: Span) -> Iterator[Span]:
    """Paragraphs of a section (split at blank lines): no sentence crosses one."""
    start, end = section
    for match in _BLANK_LINE.finditer(text, start, end):
        yield start, match.start()
        start = match.end()
    yield start, end


def make_chunker(settings: IndexSettings) -> Chunker | SentenceChunker:
    """The chunker `index.chunker` names."""
    if settings.chunker == "sentences":
        return SentenceChunker(settings)
    return Chunker(settings)
