"""Notebook displays (`_repr_html_`) and short reprs of the objects people hold.

Each display is parsed with an HTML parser (bs4 on the stdlib's html.parser) and
checked for its structure and against the data it shows. Passages, ids and sources
are hostile (`<script>`, markup, an attribute break-out): they must show as text.
Real stages: fusion (`HybridRetriever` over fixed lists), the budget (tiktoken,
nupunkt), FlashRank's tiny test model where a rerank stage runs. The chat model is
a fake from langchain_core: it stands in for an LLM API, which cannot run here.
"""

import base64
import sys
from pathlib import Path

import pytest
from bs4 import BeautifulSoup, Tag
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableParallel, RunnablePassthrough
from list_retriever import ListRetriever

from langchain_ragbudget import HybridRetriever
from langchain_ragbudget.budget._context_budget import BudgetedContext, ContextBudget
from langchain_ragbudget.chain._stuff import BudgetedAnswer, create_budgeted_stuff_chain
from langchain_ragbudget.config._settings import SurfaceSettings
from langchain_ragbudget.evaluation._chunked import ChunkedSurvival
from langchain_ragbudget.evaluation._tables import (
    EvalReport,
    StageQuality,
    Survival,
    report_tables,
)
from langchain_ragbudget.ledger._html import Markup, collapsible, escape, table
from langchain_ragbudget.ledger._identity import document_key
from langchain_ragbudget.ledger._metadata_keys import CONTEXT_TOKENS, scores_of
from langchain_ragbudget.ledger._records import CandidateList, DropReason
from langchain_ragbudget.retrieval._rerank import FlashRankRerank

SCRIPT = "<script>alert(1)</script>"
SOURCE = '"><img src=x onerror=alert(1)>'
QUESTION = "When is the per diem paid?"
SENTENCES = [
    "The per diem is paid monthly.",
    "Receipts are filed by the fifth.",
    "Meals abroad are covered separately.",
    "Hotel upgrades are never reimbursed.",
]


def hostile(i: int, sentences: int) -> Document:
    """Passage `i`: markup in its id, an attribute break-out as its source."""
    said = " ".join(SENTENCES[j % 4] for j in range(sentences))
    text = f"{SCRIPT} Passage {i}. {said}"
    return Document(
        id=f"<b>x{i}</b>",
        page_content=text,
        metadata={"source": SOURCE, "doc_id": f"<i>doc{i}</i>"},
    )


# Six candidates, fused to k=4 (x3 and x5 cut at fusion); x2 is too long to fit
# whole (shortened by `trim`, which fills the budget) and x4 is one past max_docs.
DOCS = [hostile(0, 2), hostile(1, 1), hostile(2, 40), hostile(3, 2)]
DOCS += [hostile(4, 1), hostile(5, 1)]
SURFACE = SurfaceSettings(
    max_docs=3, max_tokens=160, encoding="cl100k_base", packing="trim"
)


def scored(documents: list[Document], top: float) -> list[Document]:
    """Copies with descending scores, as a retriever writes them."""
    return [
        d.model_copy(update={"metadata": {**d.metadata, "score": top - i / 10}})
        for i, d in enumerate(documents)
    ]


def retriever() -> HybridRetriever:
    sparse = [DOCS[0], DOCS[1], DOCS[2], DOCS[3], DOCS[4]]
    dense = [DOCS[0], DOCS[1], DOCS[2], DOCS[4], DOCS[5]]
    return HybridRetriever(
        retrievers=[
            ListRetriever(documents=scored(sparse, 12.0)),
            ListRetriever(documents=scored(dense, 0.9)),
        ],
        names=["bm25", "dense"],
        k=4,
    )


def fake_llm(text: str) -> GenericFakeChatModel:
    """Stands in for an LLM API (none can run here)."""
    return GenericFakeChatModel(messages=iter([AIMessage(content=text)]))


def parse(html: str) -> BeautifulSoup:
    return BeautifulSoup(html, "html.parser")


def text_at(tag: Tag, selector: str) -> str:
    """The text of the first element `selector` finds under `tag` (one must)."""
    found = tag.select_one(selector)
    assert found is not None, selector
    return found.get_text()


def tables(soup: BeautifulSoup) -> dict[str, Tag]:
    """The tables by caption; each caption names one part, once."""
    found = [t for t in soup.find_all("table") if isinstance(t, Tag)]
    captions = [t.caption.get_text() if t.caption else "" for t in found]
    assert len(set(captions)) == len(captions), captions
    return dict(zip(captions, found, strict=True))


def header(table_tag: Tag) -> list[str]:
    return [th.get_text() for th in table_tag.select("thead th")]


def rows(table_tag: Tag) -> list[dict[str, str]]:
    names = header(table_tag)
    return [
        dict(zip(names, [td.get_text() for td in tr.find_all("td")], strict=True))
        | {"class": " ".join(tr.get("class") or [])}
        for tr in table_tag.select("tbody tr")
    ]


def evidence_rows(soup: BeautifulSoup) -> list[dict[str, str]]:
    """Rows of the evidence table and of the folded table of fusion cuts."""
    found = tables(soup)
    main = [c for c in found if c.startswith("evidence") or c.startswith("candidates")]
    early = [c for c in found if c.endswith("dropped at fusion")]
    assert len(main) == 1 and len(early) <= 1, list(found)
    return [row for caption in main + early for row in rows(found[caption])]


def assert_inert(soup: BeautifulSoup) -> None:
    """Nothing from the data became markup; it all shows as text."""
    assert soup.find_all(["script", "img", "b", "i"]) == []
    assert not any(
        name.startswith("on") for tag in soup.find_all(True) for name in tag.attrs
    )
    text = soup.get_text()
    assert SCRIPT in text and SOURCE in text and "<b>x0</b>" in text


def run_budget() -> tuple[CandidateList, BudgetedContext]:
    candidates = retriever().invoke(QUESTION)
    assert isinstance(candidates, CandidateList)
    context = ContextBudget(settings=SURFACE).fit(candidates, question=QUESTION)
    report = context.report
    # the scenario holds every kind of row, or the checks below prove little
    assert report.trimmed and len(report.kept_ids) > len(report.trimmed)
    assert {(r.key, r.reason) for r in report.drops} == {
        ("<b>x3</b>", DropReason.FUSION_CUT),
        ("<b>x5</b>", DropReason.FUSION_CUT),
        ("<b>x4</b>", DropReason.MAX_DOCS),
    }
    return candidates, context


@pytest.mark.needs_tiktoken("cl100k_base")
def test_candidate_list_shows_candidates_and_drops() -> None:
    candidates, _ = run_budget()
    assert repr(candidates) == (
        "CandidateList(4 documents, 2 drops: fusion/below_fusion_cut=2)"
    )
    soup = parse(candidates._repr_html_())
    assert_inert(soup)
    found = tables(soup)
    assert list(found) == [
        "candidates, and the drops behind them",
        "2 candidate(s) dropped at fusion",
    ]
    main = rows(found["candidates, and the drops behind them"])
    assert [r["id"] for r in main] == [str(d.id) for d in candidates]
    assert {r["status"] for r in main} == {"candidate"}
    cut = rows(found["2 candidate(s) dropped at fusion"])
    assert sorted(r["id"] for r in cut) == sorted(r.key for r in candidates.drops)
    assert {(r["stage"], r["reason"]) for r in cut} == {("fusion", "below_fusion_cut")}
    assert "text" not in header(found["2 candidate(s) dropped at fusion"])
    # the folded table sits inside <details>; passage texts fold behind a preview
    assert found["2 candidate(s) dropped at fusion"].find_parent("details")
    table_tag = found["candidates, and the drops behind them"]
    for document, tr in zip(candidates, table_tag.select("tbody tr"), strict=True):
        text = document.page_content
        cell = tr.find_all("td")[-1]
        if len(text) > 80:  # folded: a one-line preview, the whole text inside
            assert text_at(cell, "details > summary") == text[:80].rstrip() + "…"
            assert text_at(cell, "details > div") == text
        else:
            assert cell.details is None and cell.get_text() == text


@pytest.mark.needs_tiktoken("cl100k_base")
def test_candidate_list_after_rerank(tiny_flashrank_dir: Path) -> None:
    reranker = FlashRankRerank(cache_dir=str(tiny_flashrank_dir), top_n=2)
    reranked = reranker.compress_documents(retriever().invoke(QUESTION), QUESTION)
    assert isinstance(reranked, CandidateList)
    assert repr(reranked) == (
        "CandidateList(2 documents, 4 drops: fusion/below_fusion_cut=2, "
        "rerank/reranked_out=2)"
    )
    soup = parse(reranked._repr_html_())
    main = rows(tables(soup)["candidates, and the drops behind them"])
    rerank_scores = sorted(float(r["rerank"]) for r in main if r["status"] == "dropped")
    assert len(rerank_scores) == 2 and all(r["rerank"] != "-" for r in main)
    assert [r["status"] for r in main].count("candidate") == 2


@pytest.mark.needs_tiktoken("cl100k_base")
def test_budgeted_context_rows_match_its_report() -> None:
    _, context = run_budget()
    report = context.report
    soup = parse(context._repr_html_())
    assert_inert(soup)
    found = tables(soup)
    assert set(found) == {
        "budget",
        "evidence: every candidate, kept or dropped, and why",
        "2 candidate(s) dropped at fusion",
        "citations (one per source document)",
    }
    evidence = evidence_rows(soup)
    shown = [r["id"] for r in evidence]
    expected = report.kept_ids + [r.key for r in report.drops]
    assert sorted(shown) == sorted(expected) and len(set(shown)) == len(shown)
    status = {r["id"]: (r["status"], r["class"]) for r in evidence}
    trimmed = {r.key for r in report.trimmed}
    for key in report.kept_ids:
        word = "shortened" if key in trimmed else "kept"
        assert status[key] == (word, f"rb-{word}")
    for record in report.drops:
        assert status[record.key] == ("dropped", "rb-dropped")
    caption = "evidence: every candidate, kept or dropped, and why"
    by_id = {r["id"]: r for r in rows(found[caption])}
    for record in report.budget_drops:
        assert by_id[record.key]["detail"] == record.detail
        # a passage the packer never weighed (past max_docs) was never counted
        tokens = "-" if record.tokens is None else str(record.tokens)
        assert by_id[record.key]["tokens"] == tokens
    for trim in report.trimmed:
        assert by_id[trim.key]["detail"].startswith(trim.detail)
    right = [th.get_text() for th in found[caption]("th")]
    for tr in found[caption].select("tbody tr"):
        aligned = [td.get("class") == ["rb-num"] for td in tr("td")]
        assert [h for h, a in zip(right, aligned, strict=True) if a] == [
            "#",
            "bm25",
            "dense",
            "fused",
            "tokens",
        ]
    for document in context.documents:
        row = by_id[document_key(document)]
        assert row["tokens"] == str(document.metadata[CONTEXT_TOKENS])
        assert row["fused"] == f"{document.metadata['fused_score']:.3f}"
    citations = rows(found["citations (one per source document)"])
    assert [r["[n]"] for r in citations] == [f"[{c.number}]" for c in context.citations]
    # the text sent, folded, and escaped like the rest
    sent = [d for d in soup.select("details") if "as sent" in text_at(d, "summary")]
    assert len(sent) == 1 and text_at(sent[0], "div") == context.text
    summary = {text_at(tr, "th"): text_at(tr, "td") for tr in found["budget"]("tr")}
    assert summary["tokens"] == f"{report.tokens_used} of 160 (cl100k_base)"


@pytest.mark.needs_tiktoken("cl100k_base")
def test_budget_report_display_and_repr() -> None:
    _, context = run_budget()
    report = context.report
    assert repr(report) == (
        f"BudgetReport(surface 'chat', {report.tokens_used} of 160 tokens, "
        "3 kept (1 shortened), 3 drops: fusion/below_fusion_cut=2, "
        "budget/over_max_docs=1)"
    )
    assert repr(context).startswith(
        f"BudgetedContext({len(context.documents)} passages in "
        f"{len(context.citations)} citations, surface 'chat'"
    )
    soup = parse(report._repr_html_())
    assert_inert(soup)
    shown = [r["id"] for r in evidence_rows(soup)]
    assert sorted(shown) == sorted(report.kept_ids + [r.key for r in report.drops])


@pytest.mark.needs_tiktoken("cl100k_base")
def test_budgeted_answer_display() -> None:
    chain = (
        RunnableParallel(question=RunnablePassthrough(), documents=retriever())
        | ContextBudget(settings=SURFACE)
        | create_budgeted_stuff_chain(
            fake_llm(f"Monthly [1]. {SCRIPT}\nSecond line."), structured=True
        )
    )
    answer = chain.invoke(QUESTION)
    assert isinstance(answer, BudgetedAnswer)
    soup = parse(answer._repr_html_())
    assert_inert(soup)
    assert text_at(soup, "div.rb-text") == answer.answer
    warnings = [div.get_text() for div in soup.select("div.rb-warning")]
    assert warnings == answer.warnings and len(warnings) >= 2
    found = tables(soup)
    assert set(found) == {
        "answer",
        "citations (one per source document)",
        "evidence: every candidate, kept or dropped, and why",
        "2 candidate(s) dropped at fusion",
    }
    evidence = evidence_rows(soup)
    shown = [r["id"] for r in evidence]
    expected = [k["id"] for k in answer.kept] + [d["id"] for d in answer.dropped]
    assert sorted(shown) == sorted(expected) and len(set(shown)) == len(shown)
    (shortened,) = answer.shortened
    statuses = {r["id"]: r["status"] for r in evidence}
    assert statuses[shortened["id"]] == "shortened"
    assert [r["status"] for r in evidence].count("kept") == len(answer.kept) - 1
    assert header(found["evidence: every candidate, kept or dropped, and why"]) == [
        "status",
        "#",
        "id",
        "source",
        "stage",
        "reason",
        "bm25",
        "dense",
        "fused",
        "tokens",
        "detail",
    ]
    citations = rows(found["citations (one per source document)"])
    assert [r["document"] for r in citations] == [
        c["document"] for c in answer.citations
    ]
    assert repr(answer) == (
        "BudgetedAnswer('Monthly [1]. <script>alert(1)</script>\\\\nSecond line.', "
        f"{len(answer.warnings)} warning(s), {len(answer.citations)} citation(s), "
        f"{len(answer.kept)} kept (1 shortened), {len(answer.dropped)} drops: "
        "fusion/below_fusion_cut=2, budget/over_max_docs=1, "
        f"{answer.tokens_used} of 160 tokens ('chat'))"
    )


@pytest.mark.needs_tiktoken("cl100k_base")
def test_answer_data_is_unchanged_by_the_display_methods() -> None:
    candidates, context = run_budget()
    chain = ContextBudget(settings=SURFACE) | create_budgeted_stuff_chain(
        fake_llm("Monthly [1]."), structured=True
    )
    answer = chain.invoke({"question": QUESTION, "documents": candidates})
    dumped = answer.model_dump()
    assert set(dumped) == set(BudgetedAnswer.model_fields)
    assert BudgetedAnswer.model_validate(dumped) == answer
    assert BudgetedAnswer.model_validate(dumped | {"answer": "other"}) != answer
    # the plain-data shapes the answer has always had
    assert dumped["kept"] == [
        {
            "id": document_key(d),
            "source": d.metadata.get("source"),
            "tokens": d.metadata.get(CONTEXT_TOKENS),
            **scores_of(d),
        }
        for d in context.documents
    ]
    assert dumped["dropped"] == [
        {**r.to_dict(), **scores_of(r.document)} for r in context.report.drops
    ]
    assert dumped["citations"] == [
        {
            "number": c.number,
            "document": c.group,
            "source": c.source,
            "passages": [document_key(d) for d in c.documents],
        }
        for c in context.citations
    ]


def test_reprs_stay_one_short_line() -> None:
    many = CandidateList(
        [Document(id=f"d{i}\n<b>", page_content="x" * 5000) for i in range(50)]
    )
    assert repr(many) == "CandidateList(50 documents, no drops)"
    assert repr(CandidateList()) == "CandidateList(0 documents, no drops)"


TOKENS = (400.0, 410.0, 590, 0)  # mean, p50, max, contexts over budget


def eval_report(dataset: str = "scifact", evidence: bool = True) -> EvalReport:
    """An evaluation report as the harness fills it (the harness has its own tests)."""
    return EvalReport(
        dataset=dataset,
        n_queries=3,
        n_documents=10,
        k=10,
        quality=[
            StageQuality("bm25", "ran", 0.5, 0.4, 0.3, 0.2),
            StageQuality("fusion", "ran", 0.6, 0.5, 0.4, 0.3),
            StageQuality("rerank", "skipped", note="model unavailable"),
        ],
        survival=[
            Survival("chat", 600, 4, 5, 3, {"budget/over_max_tokens": 2}, 0, *TOKENS),
            Survival("search", 4000, 12, 5, 5, {}, 0, 900.0, 880.0, 1200, 0),
        ],
        policy_budgets=[256, 512, 1024],
        policy_survival={"naive slice": [0.5, None, 0.9], "trim": [0.6, 0.7, 1.0]},
        policy_encoding="cl100k_base",
        settings={"fusion_k": 10},
        evidence_gold=4 if evidence else 0,
        evidence_survival={"naive slice": [0.2, 0.5, 1.0], "trim": [0.5, 0.7, 1.0]},
        mid_sentence_cuts={"trim": 0},
        chunked=[
            ChunkedSurvival(128, 20, 4, 1, {"trim": [0.3, 0.4, 0.5]}, {"trim": 0})
        ],
    )


def test_eval_report_shows_every_table_and_the_plot() -> None:
    report = eval_report(dataset=f"{SCRIPT}$\\notacommand$")
    soup = parse(report._repr_html_())
    assert soup.find_all("script") == [] and SCRIPT in soup.get_text()
    found = tables(soup)
    expected = report_tables(report)
    assert list(found) == ["evaluation", *(item.title for item in expected)]
    assert len(expected) == 5  # quality, survival, policies, evidence, one chunking
    for item in expected:  # the same rows as the terminal and Markdown tables
        shown = found[item.title]
        assert header(shown) == item.header
        cells = [[td.get_text() for td in tr.find_all("td")] for tr in shown("tr")]
        assert [c for c in cells if c] == item.rows
    (image,) = soup.find_all("img")
    prefix = "data:image/png;base64,"
    source = str(image["src"])
    assert source.startswith(prefix)
    assert base64.b64decode(source[len(prefix) :]).startswith(b"\x89PNG")
    assert repr(report) == (
        f"EvalReport({report.dataset!r}, 3 queries, 10 documents, k=10, 3 stages, "
        "surfaces: chat, search)"
    )


def test_eval_report_without_matplotlib_says_how_to_get_the_plot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    soup = parse(eval_report(evidence=False)._repr_html_())
    assert soup.find_all("img") == []
    note = text_at(soup, "p")
    assert "No survival plot" in note and "langchain-ragbudget[eval]" in note
    assert len(tables(soup)) == 1 + 4  # no evidence table without marked evidence


def test_html_pieces_escape_everything_but_their_own_markup() -> None:
    assert escape('<a href="x">') == "&lt;a href=&quot;x&quot;&gt;"
    assert escape(Markup("<br>")) == "<br>"
    assert escape("lone \ud800 surrogate") == "lone \ufffd surrogate"
    assert collapsible("short text") == "short text"
    folded = parse(collapsible("line one\n" + "word " * 40))
    assert text_at(folded, "summary").startswith("line one word")
    assert text_at(folded, "div") == "line one\n" + "word " * 40
    html = table(["a"], [[Markup("<em>kept</em>")], [SCRIPT]], row_classes=["x", "y"])
    soup = parse(html)
    assert [em.get_text() for em in soup.find_all("em")] == ["kept"]
    assert soup.find_all("script") == []
    with pytest.raises(ValueError, match="row 0 has 2 cells for 1 columns"):
        table(["a"], [["1", "2"]])
    with pytest.raises(ValueError, match="1 row classes for 2 rows"):
        table(["a"], [["1"], ["2"]], row_classes=["x"])


def test_index_inspection_display_escapes_and_shows_damage() -> None:
    from langchain_ragbudget.index._reports import IndexInspection, SyncReport

    inspection = IndexInspection(
        directory=Path(f"/tmp/{SCRIPT}"),
        documents=3,
        bm25_chunks=5,
        vector_chunks=4,
        manifest={"embedding_model": "<b>x0</b>", "chunking": {"size": 256}},
        sync=SyncReport(only_sparse=[SOURCE]),
        sizes={"bm25": 10, "chroma": 2000},
        problems=[f"CURRENT names {SCRIPT}; run `ragbudget repair`"],
    )
    soup = parse(inspection._repr_html_())
    assert_inert(soup)
    found = tables(soup)
    assert set(found) == {"index", "out of sync", "problems", "sizes"}
    assert rows(found["out of sync"]) == [
        {"where": "only in BM25", "chunk id": SOURCE, "class": ""}
    ]
    assert [r["bytes"] for r in rows(found["sizes"])] == ["10", "2,000"]
    summary = {th.get_text(): td.get_text() for th, td in _pairs(found["index"])}
    assert summary["healthy"] == "no" and summary["chunks (BM25 / vector store)"] == (
        "5 / 4"
    )
    assert repr(inspection) == (
        f"IndexInspection({str(inspection.directory)!r}, 3 documents, 5 chunks, "
        "1 problem(s))"
    )


def _pairs(table_tag: Tag) -> list[tuple[Tag, Tag]]:
    pairs = []
    for tr in table_tag.select("tbody tr"):
        name, value = tr.find("th"), tr.find("td")
        assert isinstance(name, Tag) and isinstance(value, Tag)
        pairs.append((name, value))
    return pairs
