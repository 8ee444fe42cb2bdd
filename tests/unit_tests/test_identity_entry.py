"""Identity at every entry: whatever ids the caller's documents hold.

Every stage that can be a chain's first (the budget, the reranker, fusion) gives its
candidates distinct keys at entry. The property test drives every entry path with
hostile ids (collisions after `str()`, NFC/NFD pairs, trailing blanks, zero-width
characters, one id for two sources) and checks the one rule on the result: each
candidate that entered is kept once with its own text under its own source's
citation, shortened with a record, or dropped with a record, and the context's
tokens are exactly tiktoken's count of the rendered text.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from list_retriever import ListRetriever

from langchain_ragbudget import ContextBudget, HybridRetriever, SurfaceSettings
from langchain_ragbudget.budget._render import ContextFormat
from langchain_ragbudget.budget._report import BudgetedContext
from langchain_ragbudget.ledger._identity import document_key, document_source
from langchain_ragbudget.retrieval._rerank import FlashRankRerank

pytestmark = pytest.mark.needs_tiktoken("cl100k_base")

QUERY = "solar panels electricity"
ENCODING = "cl100k_base"

# Ids that collide, or only look alike, once they are keys.
NFC = unicodedata.normalize("NFC", "café")
NFD = unicodedata.normalize("NFD", "café")
HOSTILE_IDS: list[tuple[str, Any]] = [
    ("id", "1"),  # Document.id "1" ...
    ("id", 1),  # ... Document.id 1 ...
    ("chunk_id", 1),  # ... and metadata chunk_id 1: one key after str()
    ("chunk_id", "1"),
    ("id", NFC),
    ("id", NFD),
    ("id", "same"),
    ("id", "same "),  # trailing blank
    ("id", "same\u200b"),  # zero-width space
    ("chunk_id", "same"),
    ("none", None),  # no id: a hash of source and text
]
TEXTS = [
    "Solar panels generate electricity from sunlight.",
    "A recipe for bread. Knead the dough well. Bake it for an hour in a hot oven.",
    "Panels of experts met. They talked about solar power for a long while. "
    "Nobody agreed on anything at all. The meeting ended late.",
    "Wind turbines also generate electricity. They need steady wind.",
]
SOURCES = ["a.md", "b.md", NFD + ".md", NFC + ".md"]


@st.composite
def hostile_documents(draw: st.DrawFn) -> list[Document]:
    """Two to six passages whose ids collide in every way a key can."""
    size = draw(st.integers(2, 6))
    out = []
    for _ in range(size):
        form, value = draw(st.sampled_from(HOSTILE_IDS))
        metadata: dict[str, Any] = {"source": draw(st.sampled_from(SOURCES))}
        if draw(st.booleans()):  # one document id for two sources
            metadata["doc_id"] = "same"
        if form == "chunk_id":
            metadata["chunk_id"] = value
        out.append(
            Document(
                id=value if form == "id" else None,
                page_content=draw(st.sampled_from(TEXTS)),
                metadata=metadata,
            )
        )
    return out


class UserRetriever(BaseRetriever):
    """A retriever the package did not write: returns its list, copied."""

    documents: list[Document]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [doc.model_copy() for doc in self.documents]


def _budget(packing: str, max_tokens: int) -> ContextBudget:
    return ContextBudget(
        settings=SurfaceSettings(
            max_docs=4, max_tokens=max_tokens, encoding=ENCODING, packing=packing
        )
    )


def _rerank(cache: Path) -> FlashRankRerank:
    return FlashRankRerank(
        cache_dir=str(cache), download=False, on_unavailable="error", top_n=3
    )


Path_ = Callable[[list[Document], ContextBudget, Path], BudgetedContext]


def plain_list(docs: list[Document], budget: ContextBudget, _: Path) -> BudgetedContext:
    return budget.fit(docs, question=QUERY)


def list_rerank(docs: list[Document], budget: ContextBudget, cache: Path) -> Any:
    reranked = _rerank(cache).compress_documents(docs, QUERY)
    return budget.fit(reranked, question=QUERY)


def hybrid_rerank(docs: list[Document], budget: ContextBudget, cache: Path) -> Any:
    hybrid = HybridRetriever(
        retrievers=[
            ListRetriever(documents=docs),
            ListRetriever(documents=list(reversed(docs))),
        ],
        names=["forward", "backward"],
        k=4,
    )
    chain = {"question": lambda q: q, "documents": hybrid} | _rerank(cache)
    return budget.invoke(chain.invoke(QUERY)).get("context")


def user_retriever(docs: list[Document], budget: ContextBudget, _: Path) -> Any:
    chain = {"question": lambda q: q, "documents": UserRetriever(documents=docs)}
    return (chain | budget).invoke(QUERY)["context"]


PATHS: dict[str, Path_] = {
    "list->budget": plain_list,
    "list->rerank->budget": list_rerank,
    "hybrid->rerank->budget": hybrid_rerank,
    "user retriever->budget": user_retriever,
}


def _triple(key: str, document: Document) -> tuple[str, str, str | None]:
    """(the key a candidate entered with, its text, its source)."""
    return re.sub(r"#\d+$", "", key), document.page_content, document_source(document)


def _entered(docs: list[Document], path: str) -> Counter[tuple[str, str, str | None]]:
    """What entered: each passage (fusion merges the same passage seen twice)."""
    raw = [_triple(_raw_key(doc), doc) for doc in docs]
    return Counter(set(raw)) if path.startswith("hybrid") else Counter(raw)


def _raw_key(document: Document) -> str:
    """The caller's key, as the package reads it: the id, else `chunk_id`, else hash."""
    return document_key(document, "chunk_id")


def check_the_rule(
    docs: list[Document], context: BudgetedContext, path: str, max_tokens: int
) -> None:
    """Every candidate exactly once: kept (own text, own source), shortened, dropped."""
    report = context.report
    trims = {record.key: record for record in report.trimmed}
    kept_keys = [doc.id for doc in context.documents]
    assert sorted(map(str, kept_keys)) == sorted(report.kept_ids)
    drop_keys = [record.key for record in report.drops]
    everyone = [*report.kept_ids, *drop_keys]
    assert len(everyone) == len(set(everyone)), f"a key named twice: {everyone}"
    assert set(trims) <= set(report.kept_ids)
    outcomes: Counter[tuple[str, str, str | None]] = Counter()
    for doc in context.documents:
        key = str(doc.id)
        original = trims[key].document if key in trims else doc
        outcomes[_triple(key, original)] += 1
    for record in report.drops:
        outcomes[_triple(record.key, record.document)] += 1
    assert outcomes == _entered(docs, path)
    _check_citations(context)
    counted = len(tiktoken.get_encoding(ENCODING).encode(context.text))
    assert report.tokens_used == counted
    assert report.tokens_used <= max_tokens or report.over_budget


def _check_citations(context: BudgetedContext) -> None:
    """One source per citation, and each whole passage's own text under its header."""
    fmt = ContextFormat()
    trimmed = {record.key for record in context.report.trimmed}
    text = context.text
    headers = [
        fmt.render_header(citation.number, citation.documents[0])
        for citation in context.citations
    ]
    starts = [text.index(header) for header in headers]
    assert starts == sorted(starts)
    ends = [*starts[1:], len(text)] if starts else []  # nothing fitted: no citation
    for citation, start, end in zip(context.citations, starts, ends, strict=True):
        sources = {document_source(doc) for doc in citation.documents}
        assert sources == {citation.source}, "two sources under one citation"
        section = text[start:end]
        for doc in citation.documents:
            if str(doc.id) not in trimmed:
                assert fmt.render_passage(doc) in section


@pytest.mark.parametrize("packing", ["skip", "trim"])
@pytest.mark.parametrize("path", sorted(PATHS))
def test_every_entry_path_keeps_identity(
    tiny_flashrank_dir: Path, path: str, packing: str
) -> None:
    @settings(
        max_examples=40,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(docs=hostile_documents(), max_tokens=st.integers(20, 120))
    def run(docs: list[Document], max_tokens: int) -> None:
        context = PATHS[path](docs, _budget(packing, max_tokens), tiny_flashrank_dir)
        check_the_rule(docs, context, path, max_tokens)

    run()


def _doc(key: Any, text: str, source: str, **metadata: Any) -> Document:
    return Document(id=key, page_content=text, metadata={"source": source, **metadata})


LONG = " ".join(f"Sentence {n} is about solar panels." for n in range(30))
SAME = _doc("x", TEXTS[0], "a.md")
# case: (documents, packing, max_tokens, kept keys, dropped (key, reason)s, sources)
ID_CASES: dict[
    str, tuple[list[Document], str, int, list[str], list[Any], list[Any]]
] = {
    "id-int-vs-str": (
        [_doc(1, TEXTS[0], "a.md"), _doc("1", TEXTS[3], "a.md")],
        "skip",
        500,
        ["1", "1#2"],
        [],
        ["a.md", "a.md"],
    ),
    "id-vs-chunk-id-after-str": (
        [_doc("1", TEXTS[0], "a.md"), _doc(None, TEXTS[3], "b.md", chunk_id=1)],
        "skip",
        500,
        ["1", "1#2"],
        [],
        ["a.md", "b.md"],
    ),
    "id-nfc-vs-nfd": (
        [_doc(NFC, TEXTS[0], "a.md"), _doc(NFD, TEXTS[3], "a.md")],
        "skip",
        500,
        [NFC, NFD],
        [],
        ["a.md", "a.md"],
    ),
    "id-trailing-blank": (
        [_doc("same", TEXTS[0], "a.md"), _doc("same ", TEXTS[3], "b.md")],
        "skip",
        500,
        ["same", "same "],
        [],
        ["a.md", "b.md"],
    ),
    "id-zero-width": (
        [_doc("same", TEXTS[0], "a.md"), _doc("same\u200b", TEXTS[3], "b.md")],
        "skip",
        500,
        ["same", "same\u200b"],
        [],
        ["a.md", "b.md"],
    ),
    "id-two-files-two-texts": (
        [_doc("same", TEXTS[0], "a.md"), _doc("same", TEXTS[3], "b.md")],
        "skip",
        500,
        ["same", "same#2"],
        [],
        ["a.md", "b.md"],
    ),
    "id-two-files-one-text": (
        [_doc("same", TEXTS[0], "a.md"), _doc("same", TEXTS[0], "b.md")],
        "skip",
        500,
        ["same"],
        [("same#2", "duplicate")],
        ["a.md"],
    ),
    "doc-id-two-sources": (
        [
            _doc("p1", TEXTS[0], "a.md", doc_id="D"),
            _doc("p2", TEXTS[3], "b.md", doc_id="D"),
        ],
        "skip",
        500,
        ["p1", "p2"],
        [],
        ["a.md", "b.md"],
    ),
    "trim-whole-vs-chunk-id": (
        [_doc("x", TEXTS[0], "b.md"), _doc(None, LONG, "a.md", chunk_id="x")],
        "trim",
        160,
        ["x", "x#2"],
        [],
        ["b.md", "a.md"],
    ),
    "id-suffix-already-taken": (
        [
            _doc("x", TEXTS[0], "a.md"),
            _doc("x", TEXTS[3], "a.md"),
            _doc("x#2", TEXTS[1], "a.md"),
        ],
        "skip",
        500,
        ["x", "x#3", "x#2"],
        [],
        ["a.md", "a.md", "a.md"],
    ),
    "passage-repeated-in-one-list": (
        [SAME, SAME],
        "skip",
        500,
        ["x"],
        [("x#2", "duplicate")],
        ["a.md"],
    ),
    "same-id-over-max-docs": (
        [
            _doc("x", TEXTS[0], "a.md"),
            _doc("x", TEXTS[3], "a.md"),
            _doc("x", TEXTS[1], "b.md"),
            _doc("x", TEXTS[2], "b.md"),
            _doc("x", LONG, "c.md"),
        ],
        "skip",
        2000,
        ["x", "x#2", "x#3", "x#4"],
        [("x#5", "over_max_docs")],
        ["a.md", "a.md", "b.md", "b.md"],
    ),
}


def test_a_key_an_earlier_stage_dropped_is_never_kept_under_that_key(
    tiny_flashrank_dir: Path,
) -> None:
    """A user step adds a passage under the id of one fusion cut: it is renamed."""
    cut = _doc("y", TEXTS[1], "a.md")
    hybrid = HybridRetriever(
        retrievers=[ListRetriever(documents=[SAME, cut])], names=["only"], k=1
    )
    extra = _doc("y", TEXTS[3], "b.md")
    for stage in ("budget", "rerank"):
        found = [*hybrid.invoke(QUERY), extra]  # a plain list: records lost
        if stage == "rerank":
            found = _rerank(tiny_flashrank_dir).compress_documents(found, QUERY)
        context = _budget("skip", 500).fit(found, question=QUERY)
        assert context.report.kept_ids == ["x", "y#2"]
        assert [(r.key, r.document.page_content) for r in context.report.drops] == [
            ("y", TEXTS[1])
        ]


@pytest.mark.parametrize("case", sorted(ID_CASES))
def test_identity_catalogue(case: str) -> None:
    docs, packing, max_tokens, kept, dropped, sources = ID_CASES[case]
    context = _reproduced(docs, packing, max_tokens)
    report = context.report
    assert report.kept_ids == kept
    assert [(r.key, str(r.reason)) for r in report.drops] == dropped
    assert [c.source for c in context.citations] == sources
    check_the_rule(docs, context, "list->budget", max_tokens)


def test_identity_catalogue_is_listed_in_reliability_md() -> None:
    text = (Path(__file__).resolve().parents[2] / "RELIABILITY.md").read_text()
    after = text.split("### Identity at every entry", 1)[1]
    section = re.split(r"\n##+ ", after, maxsplit=1)[0]  # up to the next heading
    listed = set(re.findall(r"^\| `([a-z0-9-]+)` \|", section, re.MULTILINE))
    assert listed == set(ID_CASES)
    assert len(ID_CASES) >= 8


def _reproduced(docs: Sequence[Document], packing: str, max_tokens: int) -> Any:
    return _budget(packing, max_tokens).fit(docs, question=QUERY)


def test_one_id_from_two_files_is_two_candidates_and_two_citations() -> None:
    docs = [
        Document(id="same", page_content=TEXTS[0], metadata={"source": "a.md"}),
        Document(id="same", page_content=TEXTS[3], metadata={"source": "b.md"}),
    ]
    context = _reproduced(docs, "skip", 500)
    assert context.report.kept_ids == ["same", "same#2"]
    assert [c.source for c in context.citations] == ["a.md", "b.md"]
    assert "[2] b.md" in context.text
    check_the_rule(docs, context, "list->budget", 500)


def test_a_whole_passage_never_shows_a_shortened_namesakes_text() -> None:
    long = " ".join(f"Sentence {n} is about solar panels." for n in range(30))
    docs = [
        Document(id="x", page_content=TEXTS[0], metadata={"source": "b.md"}),
        Document(page_content=long, metadata={"source": "a.md", "chunk_id": "x"}),
    ]
    context = _reproduced(docs, "trim", 160)
    assert [r.key for r in context.report.trimmed] == ["x#2"]
    assert context.report.kept_ids == ["x", "x#2"]
    assert "> " + TEXTS[0] in context.text
    assert context.report.tokens_used <= 160
    check_the_rule(docs, context, "list->budget", 160)


def test_one_document_id_in_two_sources_gets_two_citation_numbers() -> None:
    docs = [
        Document(
            id="p1", page_content=TEXTS[0], metadata={"source": "a.md", "doc_id": "D"}
        ),
        Document(
            id="p2", page_content=TEXTS[3], metadata={"source": "b.md", "doc_id": "D"}
        ),
    ]
    context = _reproduced(docs, "skip", 500)
    assert [(c.number, c.source) for c in context.citations] == [
        (1, "a.md"),
        (2, "b.md"),
    ]
