"""Token-aware chunking with LangChain's recursive splitter.

Each chunk carries its source document id, source, position and token count, and a
deterministic id `<doc_id>::<position>`, so an update can replace exactly the chunks
of one document on both sides of the index. A chunk that shows no text (only
whitespace, control or zero-width characters) is never made: `split_counted` says
how many were left out, so the caller can report them.

A chunk also carries `section`: the nearest heading at or before its start
(`section_of`: the section holding most of it), so its citation header says where
in the document it is, not only the document's first line (a Debian changelog's
every chunk was titled with its newest version). Any chunker calls
`section_starts` once per document, then `section_of` (or `section_at`, for one
offset) per chunk.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence

from langchain_core.documents import Document
from langchain_text_splitters import RecursiveCharacterTextSplitter

from langchain_ragbudget.config._settings import IndexSettings
from langchain_ragbudget.config._tokens import count_tokens, get_encoding
from langchain_ragbudget.index._loaders import is_blank
from langchain_ragbudget.ledger._metadata_keys import SECTION

HEADINGS = "headings"  # document metadata (HTML): its h1-h6 texts, in order
SECTION_CHARS = 120  # a heading longer than this is cut at a word boundary

# A Markdown ATX heading, a Debian changelog entry (`bash (5.1~rc3-1) unstable;`),
# and a code fence (headings inside fenced code are not headings).
_ATX = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_CHANGELOG = re.compile(r"^([a-z0-9][a-z0-9+.-]+ \([^()\s]+\))(?: [^;\n]+;.*)?$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


def section_starts(text: str, headings: Sequence[str] = ()) -> list[tuple[int, str]]:
    """Where each section of `text` starts, and its heading, in order.

    Markdown ATX headings (`#` to `######`, not inside a fenced code block),
    Debian changelog entries (`pkg (version) dist; urgency=...`, named by
    `pkg (version)`), and, for a page whose `headings` are given (HTML h1-h6, as
    the loader read them), a paragraph that is exactly one of them.
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


def section_at(starts: Sequence[tuple[int, str]], offset: int) -> str | None:
    """The heading of the section holding `offset` (`section_starts`), or None."""
    index = bisect.bisect_right([start for start, _ in starts], offset) - 1
    return starts[index][1] if index >= 0 else None


def section_of(starts: Sequence[tuple[int, str]], start: int, end: int) -> str | None:
    """The heading of the section holding most of `[start, end)`, or None.

    A chunk that begins with the last lines of one section and goes on into the
    next is named by the one it mostly holds (text before the first heading
    belongs to none); a tie goes to the earlier.
    """
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
        """The chunks of one source document, and how many blank pieces were left out.

        Positions (and so chunk ids) count the kept chunks only: 0, 1, 2, ...
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
