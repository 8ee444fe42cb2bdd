"""Sentences of a passage, split by nupunkt, cached per text.

A wrong boundary would hand the model a fragment, so the splitter was chosen for
precision (BENCHMARKS.md, Budget). Sentences are character spans, so a shortened
passage is made of exact slices of its own text.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=100_000)
def sentence_spans(text: str) -> tuple[tuple[int, int], ...]:
    """(start, end) of each sentence of `text`, whitespace at either end excluded."""
    import nupunkt  # on first use: importing it loads its model

    spans = []
    for start, end in nupunkt.sent_spans(text):
        piece = text[start:end]
        stripped = piece.strip()
        if stripped:
            offset = start + piece.index(stripped[0])
            spans.append((offset, offset + len(stripped)))
    return tuple(spans)


def sentences(text: str) -> list[str]:
    return [text[start:end] for start, end in sentence_spans(text)]
