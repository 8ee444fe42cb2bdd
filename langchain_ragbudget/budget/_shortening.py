"""Shortening with `packing: trim`: a passage cut to whole sentences, on demand."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from langchain_core.documents import Document

from langchain_ragbudget.budget._packing import (
    PackItem,
    Scores,
    Sentences,
    omission_points,
)
from langchain_ragbudget.budget._render import ContextFormat
from langchain_ragbudget.config._tokens import count_tokens
from langchain_ragbudget.evidence._sentences import sentence_spans
from langchain_ragbudget.ledger._metadata_keys import CONTEXT_TOKENS
from langchain_ragbudget.ledger._records import Stage, TrimRecord

# Encodings whose pre-tokenizer pieces never hold two words (`Shortener._least`).
_WORD_PIECES = frozenset(
    {"gpt2", "r50k_base", "p50k_base", "p50k_edit", "cl100k_base", "o200k_base"}
)
_JOINING = ("\n/", "\r/", "\x1c", "\x1d", "\x1e", "\x1f")


@dataclass
class Shortener:
    """Sentences of the passages that do not fit whole, made on demand.

    Only a passage the packer asks about is split and scored; splits and token
    counts are cached per text, so a warm call is lookups. Without a `question`
    the leading sentences are kept.
    """

    format: ContextFormat
    encoding: str
    documents: Sequence[Document]
    question: str | None
    relevance: Callable[[str | None, Sequence[str]], list[float]]
    spans: dict[int, tuple[tuple[int, int], ...]] = field(default_factory=dict)

    def shape(self, index: int) -> Sentences:
        text = self.documents[index].page_content
        spans = sentence_spans(text)
        self.spans[index] = spans
        texts = tuple(text[start:end] for start, end in spans)

        def cost(chosen: tuple[int, ...]) -> int:
            block = self.format.render_shortened(self.segments(index, chosen))
            return count_tokens(block, self.encoding)

        relevance = Scores(len(texts), partial(self.relevance, self.question, texts))
        gain, retitled = self._retitled(index)
        least = max(0, self._least(text, texts) + min(gain, 0))
        estimate = self._estimate(text, spans, texts)
        return Sentences(relevance, cost, texts, retitled, estimate, least)

    def _estimate(
        self, text: str, spans: tuple[tuple[int, int], ...], texts: tuple[str, ...]
    ) -> Callable[[tuple[int, ...]], int]:
        """A cost without the tokenizer: each sentence counted once, plus the marks.

        A sentence's own tokens, 2 per line break in or between kept sentences
        (the newline and the next line's quote mark), 1 per run of kept
        sentences (its quote mark), the marker line per gap. Choosing among a
        passage's sentences then encodes each sentence once, when first weighed,
        not every trial's block; `choose_sentences` checks the exact `cost` of
        its choice. On SciFact abstracts it runs 0 to 3 tokens over the exact
        count, rarely more (BENCHMARKS.md).
        """
        own: dict[int, int] = {}
        gaps = [
            text[spans[i - 1][1] : spans[i][0]].count("\n") * 2
            for i in range(len(spans))
        ]
        gaps[0] = 0
        marker = count_tokens(self.format.omission + "\n", self.encoding)

        def tokens(i: int) -> int:
            if i not in own:
                piece = texts[i]
                own[i] = count_tokens(piece, self.encoding) + piece.count("\n") * 2
            return own[i]

        def estimate(chosen: tuple[int, ...]) -> int:
            points = omission_points(chosen, len(spans))
            joined = sum(
                gaps[sentence]
                for position, sentence in enumerate(chosen)
                if position and position not in points
            )
            runs = len(points) + (0 if points and points[0] == 0 else 1)
            return sum(map(tokens, chosen)) + joined + runs + marker * len(points)

        return estimate

    def _least(self, text: str, texts: tuple[str, ...]) -> int:
        """Tokens any choice of these sentences costs at least, uncounted.

        The fewest words of one sentence: in the encodings of `_WORD_PIECES` no
        pre-tokenizer piece holds two words (runs between Unicode whitespace)
        but where o200k joins a line break to a following `/`, and a piece is a
        token or more. `str.split` splits at Unicode whitespace and at U+001C to
        U+001F; 0 (no bound) when the text or the quote mark could break those
        rules.
        """
        if (
            self.encoding not in _WORD_PIECES
            or self.format.quote_mark[:1] == "/"
            or any(joining in text for joining in _JOINING)
        ):
            return 0
        return min((len(piece.split()) for piece in texts), default=0)

    def _retitled(
        self, index: int
    ) -> tuple[int, Callable[[tuple[int, ...]], int] | None]:
        """Tokens the header gains by showing the title the passage opened with.

        And what a choice of sentences adds for it (None: nothing, ever).
        """
        document = self.documents[index]
        if not self.format.title_line_shown(document, document.page_content):
            return 0, None  # the header shows the title whatever is kept
        titled = self.format.render_header(1, document, shows="")
        untitled = self.format.render_header(1, document)
        gain = count_tokens(titled, self.encoding) - count_tokens(
            untitled, self.encoding
        )
        if not gain:
            return 0, None
        text, spans = document.page_content, self.spans[index]

        def retitled(chosen: tuple[int, ...]) -> int:
            if chosen and chosen[0] == 0:  # the title stays if the first run holds it
                last = 0
                while last + 1 < len(chosen) and chosen[last + 1] == chosen[last] + 1:
                    last += 1
                first = text[spans[0][0] : spans[chosen[last]][1]]
                if self.format.title_line_shown(document, first):
                    return 0
            return gain

        return gain, retitled

    def segments(self, index: int, chosen: tuple[int, ...]) -> list[str | None]:
        """Runs of adjacent kept sentences (the passage's text), `None` for a gap."""
        text = self.documents[index].page_content
        spans = self.spans[index]
        points = omission_points(chosen, len(spans))
        out: list[str | None] = []
        for position, sentence in enumerate(chosen):
            starts_run = position == 0 or position in points
            if position in points:
                out.append(None)
            if starts_run:
                out.append(text[spans[sentence][0] : spans[sentence][1]])
            else:
                run = out.pop()
                assert run is not None
                start = spans[chosen[position - 1]][1]
                out.append(run + text[start : spans[sentence][1]])
        if len(chosen) in points:
            out.append(None)
        return out

    def apply(
        self, index: int, key: str, chosen: tuple[int, ...], item: PackItem
    ) -> tuple[Document, list[str | None], TrimRecord]:
        segments = self.segments(index, chosen)
        total = len(self.spans[index])
        tokens = count_tokens(self.format.render_shortened(segments), self.encoding)
        original = self.documents[index]
        document = original.model_copy(
            update={
                "id": key,
                "page_content": " ".join(run for run in segments if run is not None),
                "metadata": {**original.metadata, CONTEXT_TOKENS: tokens},
            }
        )
        how = (
            "the most relevant to the question"
            if self.question
            else "from the start (no question reached the budget)"
        )
        record = TrimRecord(
            key=key,
            stage=Stage.BUDGET,
            rank=index + 1,
            document=original,
            kept_sentences=len(chosen),
            total_sentences=total,
            omitted_tokens=max(item.tokens - tokens, 0),
            detail=f"kept {len(chosen)} of {total} sentences, {how}",
        )
        return document, segments, record
