"""Chunking: source documents into chunks with ids, positions and sections.

`SentenceChunker` (the default) makes chunks of whole sentences: `Chunker`'s
recursive splitter cuts inside sentences, so some evidence is whole in no chunk
and no packing can keep it. Its chunks are exact slices of the document, which
lets the renderer join neighbours; a sentence longer than a chunk is cut alone,
at whitespace, and flagged `sentence_split`.

No chunk of either chunker is over `chunk_size` tokens, counted on its own text
(the tokenizer does not add up over pieces), and none loses or invents a word:
only blank runs lie outside the chunks. Chunk ids are `<doc_id>::<position>`, so
an update replaces exactly one document's chunks on both sides. Every chunk
carries the `section` it mostly holds (a Markdown or HTML heading, a changelog
entry), so a citation says where in the document it is.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable, Iterator, Sequence

from langchain_core.documents import Document
from langchain_text_splitters import RecursiveCharacterTextSplitter

from langchain_ragbudget.config._settings import IndexSettings
from langchain_ragbudget.config._tokens import count_tokens, get_encoding
from langchain_ragbudget.evidence._sentences import sentence_spans
from langchain_ragbudget.index._loaders import (
    CHANGELOG_ENTRY,
    is_blank,
    markdown_headings,
)
from langchain_ragbudget.ledger._metadata_keys import (
    CHUNK_END,
    CHUNK_GAP,
    CHUNK_START,
    SECTION,
    SENTENCE_SPLIT,
)

HEADINGS = "headings"  # document metadata (HTML): its h1-h6 texts, in order
SECTION_CHARS = 120  # a heading longer than this is cut at a word boundary

_LINE_END = re.compile(r"\r\n|\r|\n")  # as the Markdown parser counts lines
_BLANK_LINE = re.compile(r"\n[ \t]*\n")

Span = tuple[int, int]


def section_starts(text: str, headings: Sequence[str] = ()) -> list[tuple[int, str]]:
    """Where each section of `text` starts, and its heading, in order.

    An HTML page's text has its `headings` (h1-h6) as paragraphs of their own;
    any other text is read as Markdown (a CommonMark parser, so `#` comments in
    code are no headings) and Debian changelog entries start sections too.
    """
    lines = [0] + [match.end() for match in _LINE_END.finditer(text)]
    if headings:
        wanted = {" ".join(h.split()) for h in headings if h.strip()}
        found = [
            (number, line)
            for number, line in enumerate(_LINE_END.split(text))
            if " ".join(line.split()) in wanted
        ]
    else:
        found = markdown_headings(text) + [
            (number, match.group("entry"))
            for number, line in enumerate(_LINE_END.split(text))
            if (match := CHANGELOG_ENTRY.match(line))
        ]
    return [(lines[number], _short(heading)) for number, heading in sorted(found)]


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


def fit_spans(text: str, span: Span, size: int, encoding: str) -> list[Span]:
    """`text[span]` in exact slices of at most `size` tokens, cut where it breaks.

    Whole lines where they fit, else whole words, else characters (a word over
    `size`). Only blank runs (whitespace, invisible characters) lie between two
    pieces, so no word is lost and no piece is blank. Every piece is counted as
    it is, so none is over `size` whatever the tokenizer does at its seams.
    """
    return _fit(text, span, size, encoding, 0)


_BREAKS = (re.compile(r"[^\r\n]+"), re.compile(r"\S+"))  # lines, then words


def _fit(text: str, span: Span, size: int, encoding: str, level: int) -> list[Span]:
    """Greedy runs of `_BREAKS[level]` parts; a part over `size` is cut finer."""
    if level == len(_BREAKS):
        return list(_cut_word(text, span, size, encoding))
    parts = [m.span() for m in _BREAKS[level].finditer(text, *span)]
    parts = [part for part in parts if not is_blank(text[slice(*part)])]
    pieces: list[Span] = []
    first = 0
    while first < len(parts):
        start = parts[first][0]

        def fits(last: int, start: int = start) -> bool:
            return count_tokens(text[start : parts[last][1]], encoding) <= size

        if not fits(first):
            pieces.extend(_fit(text, parts[first], size, encoding, level + 1))
            first += 1
            continue
        last = _last_true(fits, first, len(parts) - 1)
        pieces.append((start, parts[last][1]))
        first = last + 1
    return pieces


def _cut_word(text: str, word: Span, size: int, encoding: str) -> Iterator[Span]:
    """A word over `size` tokens in pieces of at most `size` (a character or more)."""
    start, end = word
    while start < end:

        def fits(stop: int, start: int = start) -> bool:
            return count_tokens(text[start:stop], encoding) <= size

        stop = _last_true(fits, start + 1, end)
        yield start, stop
        start = stop


def _last_true(holds: Callable[[int], bool], low: int, high: int) -> int:
    """The last of `low..high` for which `holds` (it holds for `low`), by bisection.

    Token counts grow with the text but not strictly by one rule, so the answer
    is a value known to hold, not necessarily the largest.
    """
    if holds(high):
        return high
    while high - low > 1:
        middle = (low + high) // 2
        if holds(middle):
            low = middle
        else:
            high = middle
    return low


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
        spans = self._spans(content)
        kept = [(s, e) for s, e in spans if not is_blank(content[s:e])]
        metadata = {k: v for k, v in document.metadata.items() if k != HEADINGS}
        starts = section_starts(content, document.metadata.get(HEADINGS) or ())
        chunks = []
        for position, (start, end) in enumerate(kept):
            chunk_id = f"{doc_id}::{position}"
            text = content[start:end]
            section = section_of(starts, start, end)
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
        return chunks, len(spans) - len(kept)

    def _spans(self, content: str) -> list[Span]:
        """Where the splitter's pieces are in `content`, each at most `chunk_size`.

        The splitter sums the tokens of the parts it joins, and the joined text
        can count more: a piece over the size is cut again where it breaks, and
        a cut-off end that the next piece holds (the overlap) is left to it.
        """
        size, encoding = self.settings.chunk_size, self.settings.encoding
        found: list[Span] = []
        for piece in self._splitter.split_text(content):
            start = content.find(piece, found[-1][0] + 1 if found else 0)
            if start < 0 and found and content.startswith(piece, found[-1][0]):
                found[-1] = (found[-1][0], found[-1][0] + len(piece))  # it grew
                continue
            if start < 0:
                raise ValueError(f"the splitter changed a piece: {piece[:40]!r}")
            found.append((start, start + len(piece)))
        out: list[Span] = []
        for span, after in itertools.zip_longest(found, found[1:]):
            if count_tokens(content[slice(*span)], encoding) <= size:
                out.append(span)
                continue
            held = after if after and _only(content, after, span[0]) else (0, 0)
            out.extend(
                (start, end)
                for start, end in fit_spans(content, span, size, encoding)
                if not held[0] <= start < end <= held[1]
            )
        return out


def _only(text: str, span: Span, after: int) -> bool:
    """Whether `text[span]` occurs once in `text` past `after`: where it is, is sure."""
    piece = text[slice(*span)]
    return text.find(piece, after + 1) == span[0] and text.find(piece, span[0] + 1) < 0


class SentenceChunker:
    """Split documents into runs of whole sentences of at most `chunk_size` tokens."""

    def __init__(self, settings: IndexSettings) -> None:
        self.settings = settings
        get_encoding(settings.encoding)

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
        starts = section_starts(text, document.metadata.get(HEADINGS) or ())
        metadata = {k: v for k, v in document.metadata.items() if k != HEADINGS}
        chunks = []
        previous_end = 0
        for position, (start, end, split) in enumerate(self.spans(text, starts)):
            chunk_id = f"{doc_id}::{position}"
            piece = text[start:end]
            section = section_of(starts, start, end)
            meta = {
                **metadata,
                "doc_id": doc_id,
                "chunk_id": chunk_id,
                "position": position,
                "tokens": self._tokens(piece),
                CHUNK_START: start,
                CHUNK_END: end,
                **({SECTION: section} if section else {}),
            }
            if position and start > previous_end:  # what joins it to the one before
                meta[CHUNK_GAP] = text[previous_end:start]
            previous_end = end
            if split:
                meta[SENTENCE_SPLIT] = True
            chunks.append(Document(id=chunk_id, page_content=piece, metadata=meta))
        return chunks, 0

    def spans(
        self, text: str, starts: Sequence[tuple[int, str]] = ()
    ) -> list[tuple[int, int, bool]]:
        """(start, end, holds part of a long sentence) of each chunk of `text`.

        A section (from `starts`, as `section_starts` finds them) starts a chunk.
        """
        bounds = [0, *(offset for offset, _ in starts if offset > 0), len(text)]
        out: list[tuple[int, int, bool]] = []
        for section in itertools.pairwise(bounds):
            out.extend(self._pack(text, self._units(text, section)))
        return out

    def _units(self, text: str, section: Span) -> list[tuple[int, int, bool]]:
        """The sentences of a section, a long one cut in pieces (flagged True)."""
        size, encoding = self.settings.chunk_size, self.settings.encoding
        units = []
        for block_start, block_end in _blocks(text, section):
            block = text[block_start:block_end]
            for start, end in sentence_spans(block):
                start, end = start + block_start, end + block_start
                if self._tokens(text[start:end]) <= size:
                    units.append((start, end, False))
                else:
                    pieces = fit_spans(text, (start, end), size, encoding)
                    units.extend((s, e, True) for s, e in pieces)
        return units

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
