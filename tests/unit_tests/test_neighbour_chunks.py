"""The neighbours of retrieved chunks, added from the index's chunk store.

`around` is pure; the retriever tests use a list retriever (fusion's input as
given) and a plain dict as the store; the last test runs the real index (bm25s,
Chroma, fastembed) and the budget (tiktoken).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from list_retriever import ListRetriever
from pydantic import ValidationError

from langchain_ragbudget import (
    CandidateList,
    ConfigError,
    DropReason,
    HybridRetriever,
    InvalidInputError,
    load_config,
)
from langchain_ragbudget.budget._context_budget import ContextBudget
from langchain_ragbudget.config._settings import IndexSettings, SurfaceSettings
from langchain_ragbudget.index._chunking import SentenceChunker
from langchain_ragbudget.index._hybrid_index import HybridIndex
from langchain_ragbudget.ledger._records import LEDGER_KEY, ledgers_of
from langchain_ragbudget.retrieval._neighbours import around


def chunk(doc_id: str, position: int, **metadata: object) -> Document:
    key = f"{doc_id}::{position}"
    return Document(
        id=key,
        page_content=f"Sentence {position} of {doc_id}.",
        metadata={"doc_id": doc_id, "position": position, "chunk_id": key, **metadata},
    )


STORE = {str(c.id): c for d in ("a", "b") for c in (chunk(d, p) for p in range(6))}


def found(pairs: list[tuple[str, Document, str]]) -> list[tuple[str, str]]:
    return [(key, of) for key, _, of in pairs]


def test_nearer_first_the_next_before_the_previous_best_ranked_first() -> None:
    hits = [STORE["a::3"], STORE["b::0"]]
    assert found(around(hits, STORE, 2)) == [
        ("a::4", "a::3"),
        ("a::2", "a::3"),
        ("a::5", "a::3"),
        ("a::1", "a::3"),
        ("b::1", "b::0"),
        ("b::2", "b::0"),
    ]
    assert around(hits, STORE, 0) == []


def test_a_chunk_already_listed_or_shared_by_two_hits_comes_once() -> None:
    hits = [STORE["a::1"], STORE["a::3"]]
    assert found(around(hits, STORE, 1)) == [
        ("a::2", "a::1"),
        ("a::0", "a::1"),
        ("a::4", "a::3"),
    ]


@pytest.mark.parametrize(
    "metadata",
    [
        {"doc_id": "a", "position": True},  # a bool is not a place
        {"doc_id": "a", "position": "3"},
        {"doc_id": "a", "position": None},
        {"doc_id": 7, "position": 3},
        {"position": 3},
        {"doc_id": "a", "position": 3.0},
    ],
)
def test_a_hit_without_a_place_has_no_neighbours(metadata: dict[str, object]) -> None:
    hit = Document(id="a::3", page_content="x", metadata=metadata)
    assert around([hit], STORE, 3) == []


def test_a_store_entry_that_says_another_place_is_not_taken() -> None:
    liar = chunk("a", 9)  # stored under a::4 but says it is chunk 9
    other = chunk("b", 2)  # stored under a::2 but belongs to b
    flag = Document(
        id="a::5", page_content="x", metadata={"doc_id": "a", "position": True}
    )
    store = {**STORE, "a::4": liar, "a::2": other, "a::5": flag}
    assert found(around([STORE["a::3"]], store, 2)) == [("a::1", "a::3")]


def test_no_negative_place_is_looked_up() -> None:
    store = {**STORE, "a::-1": chunk("a", -1)}
    assert found(around([STORE["a::0"]], store, 1)) == [("a::1", "a::0")]


def hybrid(listed: list[Document], **kwargs: object) -> HybridRetriever:
    settings: dict[str, object] = {"chunk_store": STORE, **kwargs}
    return HybridRetriever(
        retrievers=[ListRetriever(documents=listed)],
        names=["list"],
        **settings,
    )


HITS = [STORE[k] for k in ("a::2", "b::5", "a::3", "b::1", "a::5")]


def test_neighbours_follow_the_k_fused_candidates_unscored() -> None:
    result = hybrid(HITS, k=2, neighbours=1).invoke("q")
    assert isinstance(result, CandidateList)
    assert [d.id for d in result] == ["a::2", "b::5", "a::3", "a::1", "b::4"]
    added = result[2:]
    assert [d.metadata["neighbour_of"] for d in added] == ["a::2", "a::2", "b::5"]
    assert [d.metadata["fused_rank"] for d in added] == [3, 4, 5]
    assert all("fused_score" not in d.metadata for d in added)
    assert all("list_rank" not in d.metadata for d in added)
    (ledger,) = ledgers_of(result)
    assert all(d.metadata[LEDGER_KEY] == ledger.run_id for d in result)
    assert set(ledger.entered) == {d.id for d in result}
    assert STORE["a::3"].metadata.keys() == {"doc_id", "position", "chunk_id"}


def test_a_neighbour_fusion_cut_is_in_the_list_not_recorded_as_cut() -> None:
    result = hybrid(HITS, k=2, neighbours=1).invoke("q")
    assert isinstance(result, CandidateList)
    # a::3 was fused 3rd, past k, and came back as a neighbour of a::2
    assert "a::3" in [d.id for d in result]
    assert [(r.key, r.rank, r.reason) for r in result.drops] == [
        ("b::1", 4, DropReason.FUSION_CUT),
        ("a::5", 5, DropReason.FUSION_CUT),
    ]


def test_neighbours_of_the_k_asked_for_and_none_without_a_store_or_reach() -> None:
    assert [d.id for d in hybrid(HITS, neighbours=1).invoke("q", k=1)] == [
        "a::2",
        "a::3",
        "a::1",
    ]
    assert len(hybrid(HITS, k=2, neighbours=0).invoke("q")) == 2
    plain = HybridRetriever(retrievers=[ListRetriever(documents=HITS)], k=2)
    assert len(plain.invoke("q")) == 2


class Listening(BaseCallbackHandler):
    """Any handler makes fusion run its child runs (the traced path)."""


def test_the_traced_and_async_paths_add_the_same_neighbours() -> None:
    retriever = hybrid(HITS, k=2, neighbours=2)
    direct = [(d.id, d.metadata.get("neighbour_of")) for d in retriever.invoke("q")]
    traced = retriever.invoke("q", config={"callbacks": [Listening()]})
    awaited = asyncio.run(retriever.ainvoke("q"))
    assert [(d.id, d.metadata.get("neighbour_of")) for d in traced] == direct
    assert [(d.id, d.metadata.get("neighbour_of")) for d in awaited] == direct
    assert [key for key, _ in direct[2:]] == [
        *("a::3", "a::1", "a::4", "a::0"),
        *("b::4", "b::3"),
    ]


@pytest.mark.parametrize("value", [-1, 101, True, "2"])
def test_a_bad_reach_is_refused_by_name(tmp_path: Path, value: object) -> None:
    yml = tmp_path / "c.yml"
    yml.write_text(f"retrieval:\n  neighbours: {value!r}\n".replace("'", '"'))
    with pytest.raises(ConfigError, match="neighbours"):
        load_config(yml)
    if not isinstance(value, str | bool):
        with pytest.raises(ValidationError, match="neighbours"):
            hybrid(HITS, neighbours=value)


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
def test_an_index_adds_neighbours_the_budget_joins_or_drops_on_the_record(
    tmp_path: Path,
) -> None:
    config = load_config()
    assert config.retrieval.neighbours == 0  # opt-in
    config = config.model_copy(
        update={
            "index": config.index.model_copy(update={"chunk_size": 24}),
            "retrieval": config.retrieval.model_copy(update={"neighbours": 2}),
        }
    )
    text = " ".join(
        f"Finding {i} concerns the {word} of the enzyme in mice."
        for i, word in enumerate(
            ["structure", "kinetics", "half-life", "dose", "toxicity", "storage"]
        )
    )
    with HybridIndex.open(tmp_path / "ix", config) as index:
        index.upsert([Document(id="paper", page_content=text, metadata={})])
        assert index.chunk_count >= 4
        found = index.as_retriever(k=1).invoke("enzyme half-life")
    assert isinstance(found, CandidateList)
    (hit, *added) = found
    assert "half-life" in hit.page_content
    assert len(added) >= 2 and {d.metadata["neighbour_of"] for d in added} == {hit.id}
    for max_tokens, expect_dropped in ((4000, False), (60, True)):
        settings = SurfaceSettings(
            max_tokens=max_tokens, max_docs=10, min_docs=0, packing="skip"
        )
        context = ContextBudget(settings=settings).fit(found, question="half-life")
        report = context.report
        kept, dropped = set(report.kept_ids), {r.key for r in report.drops}
        assert kept | dropped == {d.id for d in found} and not kept & dropped
        assert report.unaccounted == []
        assert bool(dropped) is expect_dropped
        assert context.text.count("[1]") == 1  # one citation for the document
        if not expect_dropped:  # all of it, joined: the document's text once
            assert text in context.text.replace("\n> ", " ").replace("> ", "")


@pytest.mark.needs_tiktoken
@pytest.mark.parametrize(("max_docs", "outcome"), [(10, "kept"), (2, "dropped")])
def test_the_evidence_table_says_which_chunk_a_neighbour_is_next_to(
    max_docs: int, outcome: str
) -> None:
    from langchain_ragbudget.cli._views import candidate_rows

    found = hybrid(HITS, k=2, neighbours=1).invoke("q")
    settings = SurfaceSettings(
        max_tokens=10_000, max_docs=max_docs, min_docs=0, packing="skip"
    )
    context = ContextBudget(settings=settings).fit(found, question="q")
    rows = {row.key: row for row in candidate_rows(context, retrievers=["list"])[0]}
    assert rows["a::3"].outcome == outcome
    assert rows["a::3"].detail.endswith("neighbour of a::2")
    assert rows["b::4"].detail.endswith("neighbour of b::5")
    assert "neighbour" not in rows["a::2"].detail


def sentence_chunks(doc_id: str, text: str) -> list[Document]:
    settings = IndexSettings(chunk_size=32, chunk_overlap=0)
    return SentenceChunker(settings).split(
        Document(page_content=text, metadata={"source": f"{doc_id}.md"}), doc_id
    )


ALPHA = " ".join(  # two sentences a chunk
    f"Alpha {n} lies in the wide river valley near the old town."
    for n in ("one", "two", "three", "four", "five", "six")
)


@pytest.mark.needs_tiktoken
def test_a_neighbour_joined_to_a_kept_run_takes_no_max_docs_slot() -> None:
    a = sentence_chunks("a", ALPHA)
    b = sentence_chunks("b", " ".join(ALPHA.replace("Alpha", "Beta").split(" ")[:44]))
    assert len(a) == 3 and len(b) == 2
    # retrieved a::1 and b::0; the rest came as neighbours, after them
    found = [a[1], b[0], a[2], a[0], b[1]]
    settings = SurfaceSettings(max_tokens=4000, max_docs=2, min_docs=0, packing="trim")
    context = ContextBudget(settings=settings).fit(found, question="alpha")
    assert sorted(context.report.kept_ids) == sorted(str(c.id) for c in found)
    assert ALPHA in context.text.replace("\n> ", " ")
    # with one slot, b's chunks have none: a's run fills it, b is dropped on the record
    settings = settings.model_copy(update={"max_docs": 1})
    context = ContextBudget(settings=settings).fit(found, question="alpha")
    assert sorted(context.report.kept_ids) == ["a::0", "a::1", "a::2"]
    reasons = {r.key: r.reason for r in context.report.drops}
    assert reasons == {"b::0": DropReason.MAX_DOCS, "b::1": DropReason.MAX_DOCS}


@pytest.mark.needs_tiktoken
def test_a_neighbour_that_must_be_shortened_needs_a_slot() -> None:
    a = sentence_chunks("a", ALPHA)
    found = [a[1], a[2], a[0]]
    whole = ContextBudget(
        settings=SurfaceSettings(max_tokens=4000, max_docs=1, min_docs=0)
    ).fit([a[1]], question="alpha")
    room = whole.report.tokens_used + 18  # a::1 and its header, and one sentence
    settings = SurfaceSettings(max_tokens=room, max_docs=1, min_docs=0, packing="trim")
    context = ContextBudget(settings=settings).fit(found, question="alpha")
    assert context.report.kept_ids == ["a::1"] and context.report.trimmed == []
    assert {r.key: r.reason for r in context.report.drops} == {
        "a::2": DropReason.MAX_TOKENS,
        "a::0": DropReason.MAX_TOKENS,
    }


@pytest.mark.needs_tiktoken
def test_a_neighbour_only_takes_room_the_retrieved_passages_leave() -> None:
    a = sentence_chunks("a", ALPHA)
    b = sentence_chunks("b", ALPHA.replace("Alpha", "Beta"))
    added = a[2].model_copy(
        update={"metadata": {**a[2].metadata, "neighbour_of": str(a[1].id)}}
    )
    alone = SurfaceSettings(max_tokens=4000, max_docs=9, min_docs=0, packing="skip")
    room = ContextBudget(settings=alone).fit([a[1], b[0]]).report.tokens_used + 5
    settings = alone.model_copy(update={"max_tokens": room})
    # retrieved, a::2 would be weighed with its document, ahead of b::0
    retrieved = ContextBudget(settings=settings).fit([a[1], b[0], a[2]])
    assert retrieved.report.kept_ids == ["a::1", "a::2"]
    # added next to a::1, it waits for the retrieved b::0, and there is no room left
    context = ContextBudget(settings=settings).fit([a[1], b[0], added])
    assert context.report.kept_ids == ["a::1", "b::0"]
    assert [(r.key, r.reason) for r in context.report.drops] == [
        ("a::2", DropReason.MAX_TOKENS)
    ]
    # with room, it joins a::1's run, shown under a's citation, before b
    settings = alone.model_copy(update={"max_docs": 2})
    context = ContextBudget(settings=settings).fit([a[1], b[0], added])
    assert context.report.kept_ids == ["a::1", "b::0", "a::2"]
    assert context.text.index("Alpha four") < context.text.index("Alpha five")
    assert context.text.index("Alpha six") < context.text.index("Beta")


def test_a_store_holding_something_else_is_named() -> None:
    store = {**STORE, "a::4": "Sentence 4 of a."}
    with pytest.raises(InvalidInputError, match=r"chunk_store\['a::4'\] is a str"):
        hybrid(HITS, k=2, neighbours=2, chunk_store=store).invoke("q")


@pytest.mark.needs_tiktoken
def test_the_notebook_table_says_which_chunk_a_neighbour_is_next_to() -> None:
    from langchain_ragbudget.ledger._evidence_rows import document_entry, evidence_rows

    found = hybrid(HITS, k=2, neighbours=1).invoke("q")
    settings = SurfaceSettings(max_tokens=10_000, max_docs=2, min_docs=0)
    context = ContextBudget(settings=settings).fit(found, question="q")
    kept = [document_entry(d) for d in context.documents]
    dropped = [r.to_entry() for r in context.report.drops]
    rows = evidence_rows(kept, dropped)
    detail = rows.headers.index("detail")
    by_id = {str(row[2]): str(row[detail]) for row in rows.rows}
    assert by_id["a::3"].endswith("neighbour of a::2")  # dropped, max_docs
    assert by_id["b::4"].endswith("neighbour of b::5")
    assert "neighbour" not in by_id["a::2"]


def test_a_store_that_is_no_mapping_is_refused_by_name() -> None:
    with pytest.raises(ValidationError, match="chunk_store must map chunk ids"):
        hybrid(HITS, neighbours=1, chunk_store=list(STORE.values()))
