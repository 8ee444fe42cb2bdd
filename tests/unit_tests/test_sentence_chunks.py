"""The sentence-aligned chunker: chunks partition the text and end at sentence ends.

Real nupunkt and tiktoken. The property tests build documents from sentences known
by construction (plain words, one full stop), so a chunk end can be checked against
the true boundaries rather than the splitter's own answer.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from langchain_ragbudget.config._settings import (
    IndexSettings,
    RagBudgetConfig,
    load_config,
)
from langchain_ragbudget.config._tokens import count_tokens
from langchain_ragbudget.errors import IndexLoadError
from langchain_ragbudget.index._chunking import Chunker, SentenceChunker, make_chunker
from langchain_ragbudget.index._loaders import is_blank
from langchain_ragbudget.ledger._metadata_keys import (
    CHUNK_END,
    CHUNK_START,
    SENTENCE_SPLIT,
)

pytestmark = pytest.mark.needs_tiktoken

WORDS = ["alpha", "beta", "gamma", "delta", "river", "stone", "light", "cloud"]


def chunker(size: int, overlap: int = 0) -> SentenceChunker:
    return SentenceChunker(
        IndexSettings(chunk_size=size, chunk_overlap=overlap, chunker="sentences")
    )


@st.composite
def documents(draw: st.DrawFn) -> tuple[str, list[tuple[int, int]]]:
    """A text of known sentences (some long), headings and paragraphs; their spans."""
    parts: list[str] = []
    spans: list[tuple[int, int]] = []
    cursor = 0
    for _ in range(draw(st.integers(1, 14))):
        kind = draw(st.sampled_from(["sentence", "sentence", "heading", "paragraph"]))
        if kind == "heading" and parts:
            piece = f"\n\n## {draw(st.sampled_from(WORDS)).title()}\n\n"
        elif kind == "paragraph" and parts:
            piece = "\n\n"
        else:
            words = draw(st.lists(st.sampled_from(WORDS), min_size=2, max_size=60))
            sentence = " ".join(words).capitalize() + "."
            gap = " " if parts and not parts[-1].endswith("\n") else ""
            piece = gap + sentence
            spans.append((cursor + len(gap), cursor + len(piece)))
        parts.append(piece)
        cursor += len(piece)
    return "".join(parts), spans


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents(), st.sampled_from([16, 24, 48, 96]), st.sampled_from([0, 8, 15]))
def test_chunks_partition_the_text_and_end_at_sentence_ends(
    doc: tuple[str, list[tuple[int, int]]], size: int, overlap: int
) -> None:
    text, sentence_spans = doc
    chunks = chunker(size, overlap).split(Document(page_content=text), "d")
    covered = [0] * len(text)
    previous_start = previous_end = -1
    for position, chunk in enumerate(chunks):
        start, end = chunk.metadata[CHUNK_START], chunk.metadata[CHUNK_END]
        assert chunk.page_content == text[start:end]  # an exact slice
        assert chunk.metadata["position"] == position
        assert start > previous_start and end > previous_end  # in order
        assert count_tokens(chunk.page_content, "cl100k_base") <= size
        for i in range(max(start, previous_end), end):
            covered[i] += 1
        previous_start, previous_end = start, end
        inside = [s for s in sentence_spans if s[0] < end < s[1]]
        if inside:  # only a sentence longer than the chunk may be cut
            (s_start, s_end) = inside[0]
            assert count_tokens(text[s_start:s_end], "cl100k_base") > size
            assert chunk.metadata[SENTENCE_SPLIT] is True
    # every visible character is in a chunk (overlaps counted once)
    assert all(covered[i] == 1 for i, ch in enumerate(text) if not ch.isspace())


@settings(max_examples=40, deadline=None)
@given(st.text(min_size=0, max_size=400), st.sampled_from([16, 64]))
@example("0:0:0Ø𐀀𐀀\x81", 16)  # a long sentence's last piece a control character
def test_any_text_gives_exact_slices_covering_it(text: str, size: int) -> None:
    chunks = chunker(size, 8).split(Document(page_content=text), "d")
    covered = [False] * len(text)
    for chunk in chunks:
        start, end = chunk.metadata[CHUNK_START], chunk.metadata[CHUNK_END]
        assert chunk.page_content == text[start:end]
        covered[start:end] = [True] * (end - start)
    assert all(covered[i] for i, ch in enumerate(text) if not is_blank(ch))  # visible


def test_a_heading_starts_a_chunk() -> None:
    text = (
        "# Refunds\n\nA refund takes five days. It is paid to the card.\n"
        "## Shipping\nParcels leave on Monday. They arrive by Friday.\n"
        "<h2>Returns</h2>\nReturns are free."
    )
    chunks = chunker(200).split(Document(page_content=text), "d")
    starts = [c.page_content.split()[0] for c in chunks]
    assert starts == ["#", "##", "<h2>Returns</h2>"]


def test_overlap_is_whole_sentences_within_the_limit() -> None:
    text = " ".join(f"Sentence number {w} is here." for w in WORDS)
    chunks = chunker(24, 8).split(Document(page_content=text), "d")
    assert len(chunks) > 2
    for first, second in itertools.pairwise(chunks):
        shared = first.metadata[CHUNK_END] - second.metadata[CHUNK_START]
        assert shared > 0  # each sentence is 6 tokens: one fits the overlap
        assert second.page_content.startswith(first.page_content[-shared:])
        assert first.page_content[-shared:].startswith("Sentence")


def test_a_long_sentence_is_cut_on_its_own_and_recorded() -> None:
    long = " ".join(WORDS * 10) + "."
    text = f"Short one. {long} Short two."
    chunks = chunker(32).split(Document(page_content=text), "d")
    flagged = [c for c in chunks if c.metadata.get(SENTENCE_SPLIT)]
    assert len(flagged) >= 3
    assert chunks[0].page_content.startswith("Short one.")
    assert chunks[-1].page_content.endswith("Short two.")
    assert (
        not chunks[0].metadata.get(SENTENCE_SPLIT) or "alpha" in chunks[0].page_content
    )


def test_the_setting_chooses_the_chunker() -> None:
    assert isinstance(make_chunker(IndexSettings()), SentenceChunker)  # the default
    assert isinstance(make_chunker(IndexSettings(chunker="recursive")), Chunker)
    with pytest.raises(ValueError, match="chunker"):
        IndexSettings(chunker="paragraphs")


@pytest.mark.needs_embedding_model
def test_an_index_records_its_chunker_and_refuses_another(tmp_path: Path) -> None:
    from langchain_ragbudget.index import HybridIndex

    base = load_config()

    def config(chunker: str) -> RagBudgetConfig:
        index = base.index.model_copy(update={"chunker": chunker, "chunk_size": 64})
        return base.model_copy(update={"index": index})

    with HybridIndex.open(tmp_path / "ix", config("sentences"), write=True) as index:
        index.upsert([Document(id="a", page_content="One. Two.", metadata={})])
        chunk = next(iter(index.as_retriever(k=1).invoke("one")))
        assert chunk.metadata[CHUNK_START] == 0
    manifest = (tmp_path / "ix" / "manifest.json").read_text(encoding="utf-8")
    assert '"chunker": "sentences"' in manifest
    with pytest.raises(IndexLoadError, match="recursive") as refused:
        HybridIndex.open(tmp_path / "ix", config("recursive"))
    # only the chunker differs: the message says which setting opens it
    assert "set `index.chunker: sentences`" in str(refused.value)
    with HybridIndex.open(tmp_path / "old", config("recursive"), write=True) as index:
        index.upsert([Document(id="a", page_content="One. Two.", metadata={})])
    with pytest.raises(IndexLoadError) as refused:  # built before the default changed
        HybridIndex.open(tmp_path / "old", config("sentences"))
    assert "set `index.chunker: recursive`" in str(refused.value)
    other = base.model_copy(  # the size differs too: no one setting to name
        update={"index": base.index.model_copy(update={"chunk_size": 128})}
    )
    with pytest.raises(IndexLoadError, match="restore the settings"):
        HybridIndex.open(tmp_path / "old", other)


def either_chunker(name: str, size: int, overlap: int) -> Chunker | SentenceChunker:
    return make_chunker(
        IndexSettings(chunk_size=size, chunk_overlap=overlap, chunker=name)
    )


def spans_in(text: str, chunks: list[Document]) -> list[tuple[int, int]]:
    """Where each chunk is in `text`: its offsets, else found after the last one."""
    spans: list[tuple[int, int]] = []
    for chunk in chunks:
        start = chunk.metadata.get(CHUNK_START)
        if start is None:
            start = text.find(chunk.page_content, spans[-1][0] + 1 if spans else 0)
        assert text[start:].startswith(chunk.page_content), "not a slice of the text"
        spans.append((start, start + len(chunk.page_content)))
    return spans


@st.composite
def prose(draw: st.DrawFn) -> str:
    """Words and any characters at all (each numbered, so a chunk is found where
    it is), breaks, headings, abbreviations and numbers."""
    pieces = draw(
        st.lists(
            st.sampled_from([*WORDS, "e.g.", "3.14", "(x)", "\n", "\n\n", "## Head"])
            | st.text(min_size=1, max_size=30),
            max_size=300,
        )
    )
    return " ".join(
        f"{piece}{number}" if piece.strip() and piece != "## Head" else piece
        for number, piece in enumerate(pieces)
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    prose(),
    st.sampled_from(["sentences", "recursive"]),
    st.sampled_from([16, 24, 64]),
    st.sampled_from([0, 8]),
)
@example("Aa " * 200 + ".", "sentences", 16, 0)
def test_the_chunks_of_any_text_partition_it_none_over_chunk_size(
    text: str, name: str, size: int, overlap: int
) -> None:
    chunks = either_chunker(name, size, overlap).split(Document(page_content=text), "d")
    spans = spans_in(text, chunks)
    for chunk in chunks:
        assert count_tokens(chunk.page_content, "cl100k_base") <= size
        assert chunk.metadata["tokens"] <= size
    # Concatenated, each overlap once, they give back the text: only blank runs
    # lie before, between and after them (the words are all in chunks).
    covered = 0
    for start, end in spans:
        assert is_blank(text[covered:start])
        covered = max(covered, end)
    assert is_blank(text[covered:])


# SciFact texts (shortened) on which the chunkers gave 65 tokens at 64: the old
# sentence cutter stretched a piece to the sentence's ends, and the recursive
# splitter adds up the tokens of parts that count more once joined.
LONG_SENTENCE = (
    "On the basis that the subsequent evolution of a more sophisticated regulatory "
    "architecture to provide higher levels of epigenetic control and accurate "
    "spatiotemporal expression in developmentally complex organisms is a "
    "complicated task, we hypothesize: (i) that mRNAs have been and remain subject "
    "to secondary selection to provide trans-acting regulatory possibly as a "
    "consequence of gene duplication, have lost protein-coding functions en route "
    "to acquiring more sophisticated trans-regulatory functions; (iii) that many "
    "transcripts have become subject to secondary processing to release different "
    "products; and (iv) that novel proteins have emerged within loci that "
    "previously evolved functionality as regulatory RNAs."
)
JOINED_PARTS = (
    "proteins are at the heart of posttranscriptional gene regulation, coordinating "
    "the processing, storage, and handling of cellular RNAs. We show here that "
    "GRSF1, previously implicated in the binding and selective translation of "
    "influenza mRNAs, is targeted to mitochondria where it forms granules that "
    "colocalize with foci of of mtDNA, the ND6 mRNA, and noncoding RNAs for cytb "
    "normal amounts of the oxidative phosphorylation complexes. These data "
    "implicate GRSF1 as a key regulator of"
)

# A piece cut again whose next piece starts inside it (the overlap).
CUT_AND_OVERLAPPED = (
    "cerebral matter in the developing human brain can affect cortical to delineate "
    "three-dimensional fiber architecture in cerebral white matter in preterm "
    "(n = 17) and full-term infants (n = 7). To assess effects of preterm infants "
    "(n second time at term. In the central white matter the mean apparent "
    "diffusion coefficient at 28 In the posterior limb full-term infants (white "
    "matter, 10.9 +/- 0.6 versus 22.9 +/- 3.0%, p that quantitative assessment of "
    "water diffusion by diffusion tensor MRI provides insight"
)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("sentences", LONG_SENTENCE),
        ("recursive", JOINED_PARTS),
        ("recursive", CUT_AND_OVERLAPPED),
    ],
)
def test_no_chunk_is_over_chunk_size_and_no_word_is_lost(name: str, text: str) -> None:
    chunks = either_chunker(name, 64, 16).split(Document(page_content=text), "d")
    assert max(count_tokens(c.page_content, "cl100k_base") for c in chunks) <= 64
    words = [w for c in chunks for w in c.page_content.split()]
    assert all(word in words for word in text.split())  # none lost
    assert set(words) <= set(text.split())  # none invented, none cut
    for chunk, following in itertools.pairwise(chunks):  # no end cut off for nothing
        assert chunk.page_content not in following.page_content


def test_a_long_sentence_is_cut_at_word_boundaries_and_flagged() -> None:
    chunks = chunker(64).split(Document(page_content=LONG_SENTENCE), "d")
    assert " ".join(c.page_content for c in chunks) == LONG_SENTENCE
    assert all(c.metadata[SENTENCE_SPLIT] for c in chunks)


FENCED = """# Setup

Install the tool first. Then configure it.

```bash
# install the dependencies
apt-get install foo
# configure
foo --init
```

## Usage

Run it daily. It reports once.
"""


@pytest.mark.parametrize("name", ["sentences", "recursive"])
def test_comments_in_fenced_code_are_no_headings(name: str) -> None:
    chunks = either_chunker(name, 20, 0).split(Document(page_content=FENCED), "d")
    comments = [c for c in chunks if c.page_content.startswith("# install")]
    assert comments == []  # no chunk starts at a comment
    sections = {c.page_content.split()[-1]: c.metadata["section"] for c in chunks}
    assert set(sections.values()) <= {"Setup", "Usage"}
    assert chunks[-1].metadata["section"] == "Usage"
    assert all(
        c.metadata["section"] == "Setup" for c in chunks if "apt-get" in c.page_content
    )
