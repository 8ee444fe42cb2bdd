"""HybridRetriever fusion logic.

The retrievers here are fixed lists (a test double for "any LangChain retriever"),
so each case states exactly what fusion receives; the real BM25 + Chroma pair is
exercised in test_standard.py and test_dense.py.
"""

import asyncio
import json
import pickle
import threading

import pytest
from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from list_retriever import ListRetriever
from pydantic import Field, ValidationError

from langchain_ragbudget import CandidateList, DropReason, HybridRetriever, Stage
from langchain_ragbudget.ledger._records import LEDGER_KEY, drops_of
from langchain_ragbudget.retrieval._hybrid import ScoredSearch


class GatedRetriever(BaseRetriever):
    """Async retriever that waits for the other one to have started."""

    name_: str
    started: dict[str, asyncio.Event]
    documents: list[Document]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        raise AssertionError("sync path not expected")

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        self.started[self.name_].set()
        other = next(name for name in self.started if name != self.name_)
        await asyncio.wait_for(self.started[other].wait(), timeout=5)
        return self.documents


def doc(doc_id: str | None, text: str = "", **metadata: object) -> Document:
    return Document(
        page_content=text or f"text of {doc_id}", metadata=metadata, id=doc_id
    )


def test_metadata_of_both_retrievers_survives() -> None:
    sparse = ListRetriever(documents=[doc("a", page=3, score=7.5), doc("b", score=2.0)])
    dense = ListRetriever(
        documents=[doc("b", section="intro", score=0.9), doc("a", score=0.8)]
    )
    hybrid = HybridRetriever(retrievers=[sparse, dense], names=["bm25", "dense"])
    results = hybrid.invoke("q")
    assert all(
        d.metadata[LEDGER_KEY] == results[0].metadata[LEDGER_KEY] for d in results
    )
    by_id = {
        d.id: {k: v for k, v in d.metadata.items() if k != LEDGER_KEY} for d in results
    }
    assert by_id["a"] == {
        "page": 3,
        "bm25_rank": 1,
        "bm25_score": 7.5,
        "dense_rank": 2,
        "dense_score": 0.8,
        "fused_score": pytest.approx(1 / 61 + 1 / 62),
        "fused_rank": 1,
    }
    assert by_id["b"]["section"] == "intro" and by_id["b"]["bm25_rank"] == 2
    json.dumps(by_id)


def test_absent_retriever_leaves_no_rank_or_score() -> None:
    hybrid = HybridRetriever(
        retrievers=[
            ListRetriever(documents=[doc("a")]),
            ListRetriever(documents=[doc("b", score=0.5)]),
        ],
        names=["s", "d"],
    )
    by_id = {d.id: d.metadata for d in hybrid.invoke("q")}
    assert "d_rank" not in by_id["a"] and "s_rank" not in by_id["b"]
    assert "s_score" not in by_id["a"]  # the retriever gave no score
    assert by_id["b"]["d_score"] == 0.5


def test_numpy_scores_become_plain_floats() -> None:
    np = pytest.importorskip("numpy")
    hybrid = HybridRetriever(
        retrievers=[ListRetriever(documents=[doc("a", score=np.float32(1.5))])]
    )
    metadata = hybrid.invoke("q")[0].metadata
    assert type(metadata["list_score"]) is float
    json.dumps(metadata)


def test_repeat_inside_one_list_does_not_inflate() -> None:
    sparse = ListRetriever(documents=[doc("a"), doc("a"), doc("b")])
    dense = ListRetriever(documents=[doc("b"), doc("a")])
    results = HybridRetriever(retrievers=[sparse, dense]).invoke("q")
    assert [d.id for d in results] == ["a", "b"]
    assert results[0].metadata["fused_score"] == pytest.approx(
        results[1].metadata["fused_score"]
    )


def test_identity_uses_id_then_metadata_key_then_content_hash() -> None:
    left = ListRetriever(
        documents=[doc(None, "same words", chunk_id="c1"), doc(None, "no key at all")]
    )
    right = ListRetriever(
        documents=[
            doc(None, "different words", chunk_id="c1"),
            doc(None, "no key at all"),
        ]
    )
    results = HybridRetriever(retrievers=[left, right]).invoke("q")
    # c1 names two texts: kept apart, never merged; equal id-less texts are one
    by_text = {d.page_content: str(d.id) for d in results}
    assert len(results) == 3 and by_text["same words"] == "c1"
    assert by_text["different words"] == "c1#2"
    assert by_text["no key at all"].startswith("sha256:")


def test_same_text_different_ids_stay_distinct() -> None:
    left = ListRetriever(documents=[doc("x", "shared text")])
    right = ListRetriever(documents=[doc("y", "shared text")])
    assert len(HybridRetriever(retrievers=[left, right]).invoke("q")) == 2


def test_k_cut_is_recorded_not_silent() -> None:
    docs = [doc(f"d{i}") for i in range(6)]
    results = HybridRetriever(retrievers=[ListRetriever(documents=docs)], k=4).invoke(
        "q"
    )
    assert isinstance(results, CandidateList)
    assert [d.id for d in results] == ["d0", "d1", "d2", "d3"]
    assert [(r.key, r.rank, r.stage, r.reason) for r in results.drops] == [
        ("d4", 5, Stage.FUSION, DropReason.FUSION_CUT),
        ("d5", 6, Stage.FUSION, DropReason.FUSION_CUT),
    ]
    assert (
        len(
            HybridRetriever(retrievers=[ListRetriever(documents=docs)]).invoke("q", k=2)
        )
        == 2
    )


def test_fetch_k_is_passed_to_each_retriever() -> None:
    first = ListRetriever(documents=[doc("a"), doc("b"), doc("c")], calls=[])
    second = ListRetriever(documents=[doc("c")], k=100, calls=[])
    HybridRetriever(retrievers=[first, second], fetch_k=[2, None]).invoke("q")
    assert first.calls == [2] and second.calls == [100]


def test_weights_shift_the_order() -> None:
    left = ListRetriever(documents=[doc("a"), doc("b")])
    right = ListRetriever(documents=[doc("b"), doc("a")])
    assert (
        HybridRetriever(retrievers=[left, right], weights=[2, 1]).invoke("q")[0].id
        == "a"
    )
    assert (
        HybridRetriever(retrievers=[left, right], weights=[1, 2]).invoke("q")[0].id
        == "b"
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"weights": [1.0]}, "one weight per retriever"),
        ({"weights": [1.0, -1.0]}, "non-negative"),
        ({"weights": [0.0, 0.0]}, "all zero"),
        ({"names": ["x", "x"]}, "distinct names"),
        ({"fetch_k": [0, 1]}, ">= 1"),
    ],
)
def test_bad_settings_are_named(kwargs: dict[str, object], message: str) -> None:
    pair = [ListRetriever(documents=[]), ListRetriever(documents=[])]
    with pytest.raises(ValidationError, match=message):
        HybridRetriever(retrievers=pair, **kwargs)


def test_default_names_come_from_the_classes() -> None:
    pair = [ListRetriever(documents=[]), ListRetriever(documents=[])]
    assert HybridRetriever(retrievers=pair).resolved_names == ["list", "list_2"]


async def test_async_path_runs_retrievers_concurrently() -> None:
    started = {"one": asyncio.Event(), "two": asyncio.Event()}
    one = GatedRetriever(name_="one", started=started, documents=[doc("a")])
    two = GatedRetriever(name_="two", started=started, documents=[doc("b")])
    # Each waits for the other to start: sequential execution would time out.
    results = await HybridRetriever(retrievers=[one, two]).ainvoke("q")
    assert {d.id for d in results} == {"a", "b"}


def test_input_documents_are_not_mutated() -> None:
    source = doc("a", score=1.0)
    HybridRetriever(retrievers=[ListRetriever(documents=[source])]).invoke("q")
    assert source.metadata == {"score": 1.0}


def test_a_cut_candidate_is_built_only_when_read_and_then_in_full() -> None:
    from langchain_ragbudget.ledger._records import DeferredDropRecord

    docs = [doc(f"d{i}", score=float(10 - i)) for i in range(5)]
    results = HybridRetriever(retrievers=[ListRetriever(documents=docs)], k=2).invoke(
        "q"
    )
    assert isinstance(results, CandidateList)
    record = results.drops[0]
    assert isinstance(record, DeferredDropRecord) and record._built is None
    built = record.document
    assert built.id == "d2" and built.metadata["fused_rank"] == 3
    assert built.metadata["list_rank"] == 3 and built.metadata["list_score"] == 8.0
    assert record.document is built  # built once
    assert record.to_dict()["id"] == "d2" and record.source is None


def test_cut_records_are_made_on_first_read_once_for_list_and_ledger(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from langchain_ragbudget.ledger._records import DeferredDropRecord, ledgers_of

    made: list[str] = []
    original = DeferredDropRecord.__init__

    def counting(self: DeferredDropRecord, key: str, *args: object) -> None:
        made.append(key)
        original(self, key, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(DeferredDropRecord, "__init__", counting)
    docs = [doc(f"d{i}", score=float(10 - i)) for i in range(6)]
    results = HybridRetriever(retrievers=[ListRetriever(documents=docs)], k=2).invoke(
        "q"
    )
    assert isinstance(results, CandidateList)
    assert made == []  # nobody has read the records yet
    (ledger,) = ledgers_of(results)
    from_ledger = ledger.drops
    assert made == ["d2", "d3", "d4", "d5"]
    assert [id(r) for r in results.drops] == [id(r) for r in from_ledger]
    assert made == ["d2", "d3", "d4", "d5"]  # the list read the same records
    assert results.drops[0].detail == "fused rank 3 is past k=2"


def test_a_pickled_result_carries_its_records_not_the_retriever() -> None:
    docs = [doc(f"d{i}", score=float(10 - i)) for i in range(6)]
    results = HybridRetriever(retrievers=[ListRetriever(documents=docs)], k=2).invoke(
        "q"
    )
    data = pickle.dumps(results)
    assert b"HybridRetriever" not in data and b"ListRetriever" not in data
    back = pickle.loads(data)
    assert isinstance(back, CandidateList) and isinstance(results, CandidateList)
    assert [d.id for d in back] == [d.id for d in results]
    assert [r.to_entry() for r in back.drops] == [r.to_entry() for r in results.drops]


class HandOverRetriever(BaseRetriever):
    """Hands over its hits directly (`ScoredSearch`) once `released` is set.

    It records the thread each search runs in, and waits for an event that only a
    coroutine on the event loop sets: a search run on the loop's own thread could
    never see it set, so a blocked loop fails the test instead of passing slowly.
    """

    documents: list[Document]
    released: threading.Event
    threads: list[int] = Field(default_factory=list)

    def scored_hits(
        self, query: str, k: int | None = None
    ) -> list[tuple[Document, float]]:
        self.threads.append(threading.get_ident())
        if not self.released.wait(timeout=10):
            raise AssertionError("the event loop was blocked while searching")
        return [
            (d, float(len(self.documents) - i)) for i, d in enumerate(self.documents)
        ]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        raise AssertionError("a child run was not expected: nobody listens")


async def test_async_direct_path_leaves_the_event_loop_free() -> None:
    released = threading.Event()
    one = HandOverRetriever(documents=[doc("a"), doc("b")], released=released)
    two = HandOverRetriever(documents=[doc("b"), doc("c")], released=released)
    hybrid = HybridRetriever(retrievers=[one, two], k=2)
    assert all(isinstance(r, ScoredSearch) for r in hybrid.retrievers)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        await asyncio.sleep(0)  # runs only if the query left the loop free
        ticks += 1
        released.set()

    results, _ = await asyncio.gather(hybrid.ainvoke("q"), tick())
    assert ticks == 1 and [d.id for d in results] == ["b", "a"]
    assert [r.key for r in drops_of(results)] == ["c"]
    # one hop off the loop for the whole query, not one per retriever
    loop_thread = threading.get_ident()
    assert len(set(one.threads + two.threads)) == 1
    assert one.threads[0] != loop_thread


async def test_async_direct_path_equals_the_sync_path() -> None:
    released = threading.Event()
    released.set()
    docs = [doc(f"d{i}", source=f"s{i % 3}") for i in range(8)]
    hybrid = HybridRetriever(
        retrievers=[
            HandOverRetriever(documents=docs, released=released),
            HandOverRetriever(documents=docs[::-1], released=released),
        ],
        k=3,
    )
    sync, not_sync = hybrid.invoke("q"), await hybrid.ainvoke("q")
    assert [d.id for d in sync] == [d.id for d in not_sync] == ["d0", "d7", "d1"]
    assert [without_run(d.metadata) for d in sync] == [
        without_run(d.metadata) for d in not_sync
    ]
    assert [r.to_dict() for r in drops_of(sync)] == [
        r.to_dict() for r in drops_of(not_sync)
    ]
    assert len(drops_of(not_sync)) == 5


def without_run(metadata: dict[str, object]) -> dict[str, object]:
    """Metadata minus the run id, which differs from run to run by design."""
    return {key: value for key, value in metadata.items() if key != LEDGER_KEY}
