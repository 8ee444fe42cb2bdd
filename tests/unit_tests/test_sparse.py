import json
from pathlib import Path

import bm25s
import numpy as np
import pytest
import Stemmer
from hypothesis import example, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from langchain_ragbudget import BM25Retriever
from langchain_ragbudget.retrieval._sparse import (
    TOKEN_PATTERN,
    indexed_text,
    top_positive,
)

TEXTS = [
    "Runners were running in the marathon on Sunday.",
    "The marathon route closes several streets.",
    "Quantum computers use qubits instead of bits.",
    "A recipe for bread needs flour, water and salt.",
    "The run was cancelled because of rain.",
]


@pytest.fixture
def documents() -> list[Document]:
    return [
        Document(page_content=text, metadata={"source": f"doc{i}.txt"}, id=f"d{i}")
        for i, text in enumerate(TEXTS)
    ]


def test_k_scores_and_copies(documents: list[Document]) -> None:
    retriever = BM25Retriever.from_documents(documents, k=2)
    results = retriever.invoke("marathon")
    assert [d.id for d in results] == ["d1", "d0"] or [d.id for d in results] == [
        "d0",
        "d1",
    ]
    assert all(
        type(d.metadata["score"]) is float and d.metadata["score"] > 0 for d in results
    )
    assert "score" not in documents[0].metadata  # the indexed documents are untouched
    assert len(retriever.invoke("marathon", k=1)) == 1


def test_stemming_matches_word_forms(documents: list[Document]) -> None:
    stemmed = BM25Retriever.from_documents(documents, k=5)
    plain = BM25Retriever.from_documents(documents, k=5, stemmer_language=None)
    assert {d.id for d in stemmed.invoke("run")} == {"d0", "d4"}
    assert {d.id for d in plain.invoke("run")} == {"d4"}


def test_stopwords_are_configurable(documents: list[Document]) -> None:
    with_stop = BM25Retriever.from_documents(documents, k=5)
    without = BM25Retriever.from_documents(documents, k=5, stopwords=None)
    assert with_stop.invoke("the") == []
    assert len(without.invoke("the")) >= 2


def test_no_shared_term_returns_nothing(documents: list[Document]) -> None:
    assert BM25Retriever.from_documents(documents).invoke("zebra") == []


def test_scores_equal_plain_bm25s(documents: list[Document]) -> None:
    stemmer = Stemmer.Stemmer("english")
    reference = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    reference.index(
        bm25s.tokenize(TEXTS, stopwords="en", stemmer=stemmer, show_progress=False)
    )
    query = bm25s.tokenize(
        ["marathon runners"], stopwords="en", stemmer=stemmer, show_progress=False
    )
    ids, scores = reference.retrieve(query, k=2, show_progress=False)
    ours = BM25Retriever.from_documents(documents, k=2, k1=1.2).invoke(
        "marathon runners"
    )
    assert [d.id for d in ours] == [f"d{i}" for i in ids[0]]
    assert [d.metadata["score"] for d in ours] == pytest.approx(scores[0].tolist())


def test_save_and_load_round_trip_without_pickle(
    documents: list[Document], tmp_path: Path
) -> None:
    retriever = BM25Retriever.from_documents(documents, k=3, k1=1.2)
    retriever.save(tmp_path / "bm25")
    saved = sorted(p.name for p in (tmp_path / "bm25").iterdir())
    assert not [name for name in saved if name.endswith((".pkl", ".pickle"))]
    loaded = BM25Retriever.load(tmp_path / "bm25")
    assert loaded.k == 3 and loaded.k1 == 1.2
    for query in ("marathon", "qubits bits", "bread"):
        assert loaded.invoke(query) == retriever.invoke(query)
    assert BM25Retriever.load(tmp_path / "bm25", k=1).k == 1


CHAPTERS = [
    Document(
        page_content="Rates rose by a tenth in the second quarter.",
        metadata={"title": "Cobalt pricing"},
        id="later-chunk",
    ),
    Document(
        page_content="Cobalt pricing\nA survey of what cobalt costs.",
        metadata={"title": "Cobalt pricing"},
        id="first-chunk",
    ),
    Document(page_content="Nickel is cheaper this year.", id="untitled"),
]


def test_a_chunk_matches_its_documents_title_it_does_not_repeat() -> None:
    titled = BM25Retriever.from_documents(CHAPTERS, k=5)
    plain = BM25Retriever.from_documents(CHAPTERS, k=5, index_title=False)
    assert {d.id for d in titled.invoke("cobalt pricing")} == {
        "later-chunk",
        "first-chunk",
    }
    assert [d.id for d in plain.invoke("cobalt pricing")] == ["first-chunk"]
    returned = next(d for d in titled.invoke("pricing") if d.id == "later-chunk")
    assert returned.page_content == CHAPTERS[0].page_content  # shown as stored


def test_a_title_already_in_the_text_is_not_counted_twice() -> None:
    """Only the untitled text changes what BM25 counts: here none does."""
    in_text = CHAPTERS[1:]
    titled = BM25Retriever.from_documents(in_text, k=5)
    plain = BM25Retriever.from_documents(in_text, k=5, index_title=False)
    query = "cobalt pricing survey nickel"
    assert [(d.id, d.metadata["score"]) for d in titled.invoke(query)] == [
        (d.id, d.metadata["score"]) for d in plain.invoke(query)
    ]


@pytest.mark.parametrize("title", [None, "", "   ", 7, ["a"]])
def test_a_missing_blank_or_odd_title_adds_nothing(title: object) -> None:
    document = Document(page_content="Some text.", metadata={"title": title})
    assert indexed_text(document, with_title=True) == "Some text."


def test_index_title_survives_save_and_an_older_save_read_without_it(
    tmp_path: Path,
) -> None:
    BM25Retriever.from_documents(CHAPTERS, index_title=False).save(tmp_path / "a")
    assert BM25Retriever.load(tmp_path / "a").index_title is False
    BM25Retriever.from_documents(CHAPTERS).save(tmp_path / "b")
    assert BM25Retriever.load(tmp_path / "b").index_title is True
    settings = tmp_path / "b" / "ragbudget_bm25.json"
    saved = json.loads(settings.read_text())
    del saved["index_title"]  # as a save from before the setting existed
    settings.write_text(json.dumps(saved))
    assert BM25Retriever.load(tmp_path / "b").index_title is False


def test_unsaveable_metadata_is_named(tmp_path: Path) -> None:
    retriever = BM25Retriever.from_documents(
        [Document(page_content="alpha beta", metadata={"o": object()}, id="bad")]
    )
    with pytest.raises(ValueError, match=r"'bad'.*JSON"):
        retriever.save(tmp_path)


@pytest.mark.parametrize("saved", ["[]", "7", '"k1"', "null", '{"k1": "x"}'])
def test_settings_that_are_not_an_object_of_fields_are_named(
    documents: list[Document], tmp_path: Path, saved: str
) -> None:
    from langchain_ragbudget import IndexLoadError

    BM25Retriever.from_documents(documents).save(tmp_path)
    (tmp_path / "ragbudget_bm25.json").write_text(saved)
    with pytest.raises(IndexLoadError, match="damaged or incomplete"):
        BM25Retriever.load(tmp_path)


def test_load_from_an_empty_folder_is_a_clear_error(tmp_path: Path) -> None:
    from langchain_ragbudget import IndexLoadError

    with pytest.raises(IndexLoadError, match="no saved BM25Retriever"):
        BM25Retriever.load(tmp_path)


def test_unknown_stemmer_language_is_named() -> None:
    with pytest.raises(ValueError, match="klingon"):
        BM25Retriever(stemmer_language="klingon")


def test_empty_corpus_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one document"):
        BM25Retriever.from_documents([])


def test_metadata_is_json_serialisable(documents: list[Document]) -> None:
    results = BM25Retriever.from_documents(documents).invoke("marathon")
    assert {d.id for d in results} == {"d0", "d1"}  # not vacuous on an empty result
    for doc in results:
        json.dumps(doc.metadata)


def test_corpus_without_indexable_words_is_refused() -> None:
    with pytest.raises(ValueError, match="none of the 2 documents"):
        BM25Retriever.from_documents(
            [Document(page_content="a b"), Document(page_content="the")]
        )


def test_from_texts_keeps_metadata_and_ids() -> None:
    retriever = BM25Retriever.from_texts(
        ["solar panels", "bread flour"],
        metadatas=[{"s": 1}, {"s": 2}],
        ids=["x", "y"],
        k=1,
    )
    (top,) = retriever.invoke("bread")
    assert (top.id, top.metadata["s"]) == ("y", 2)


@pytest.mark.parametrize(
    ("stemmer", "stopwords"),
    [("english", "en"), (None, None), ("english", ["marathon", "the"]), (None, "en")],
)
@settings(max_examples=150, deadline=None)
@given(text=st.text(min_size=1, max_size=80) | st.sampled_from(TEXTS))
def test_query_tokens_are_bm25s_tokens(
    stemmer: str | None, stopwords: str | list[str] | None, text: str
) -> None:
    # The query path tokenizes without bm25s's batch machinery; bm25s stays the
    # reference, on arbitrary Unicode, case and punctuation.
    retriever = BM25Retriever(stemmer_language=stemmer, stopwords=stopwords)
    reference = bm25s.tokenize(
        [text],
        token_pattern=TOKEN_PATTERN,
        stopwords=stopwords,
        stemmer=Stemmer.Stemmer(stemmer) if stemmer else None,
        return_ids=False,
        show_progress=False,
    )[0]
    assert retriever._query_tokens(text) == reference


@pytest.mark.parametrize("method", ["lucene", "bm25+", "robertson"])
def test_hits_equal_bm25s_retrieve(documents: list[Document], method: str) -> None:
    retriever = BM25Retriever.from_documents(documents, k=5, method=method)
    assert retriever._index is not None
    for query in ("marathon running", "bread and salt", "rain run", "zzz unknown"):
        tokens = bm25s.tokenize(
            [query],
            stopwords="en",
            stemmer=Stemmer.Stemmer("english"),
            return_ids=False,
            show_progress=False,
        )
        positions, scores = retriever._index.retrieve(tokens, k=5, show_progress=False)
        # bm25s orders equal scores arbitrarily; ours keep index order.
        expected = [
            (f"d{p}", s)
            for s, p in sorted(
                (-s, p)
                for p, s in zip(positions[0].tolist(), scores[0].tolist(), strict=True)
                if s > 0
            )
        ]
        expected = [(d, -s) for d, s in expected]
        hits = [(d.id, s) for d, s in retriever.scored_hits(query)]
        assert hits == expected
        assert query.startswith("zzz") or hits


@settings(max_examples=200, deadline=None)
@given(
    scores=st.lists(
        st.sampled_from([0.0, 0.0, 0.0, -1.0, 0.5, 1.25, 3.0])
        | st.floats(min_value=-5, max_value=50, width=32),
        min_size=1,
        max_size=300,
    ),
    k=st.integers(min_value=1, max_value=40),
)
@example(scores=[0.5, 0.5, 1.25, 1.0], k=3)  # a tie at the cut: the lower index
def test_top_positive_is_the_k_best_scores(scores: list[float], k: int) -> None:
    # Mostly zeros and ties, as on a large corpus: the selection must equal a full
    # sort of the positive scores, ties in index order.
    array = np.asarray(scores, dtype=np.float32)
    positions, values = top_positive(array, k)
    expected = sorted((-float(s), i) for i, s in enumerate(array.tolist()) if s > 0)
    assert positions.tolist() == [i for _, i in expected[:k]]
    assert values.tolist() == [-s for s, _ in expected[:k]]
