"""The one rule, as a property: every candidate that entered the pipeline ends up in
the prompt or in the drop records, exactly once, and nothing kept is altered.

Retrievers are fixed lists (random per example); fusion, FlashRank (tiny test model,
real code path) and the budget are the real stages, composed as a plain LCEL chain.
"""

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableParallel, RunnablePassthrough

from langchain_ragbudget import HybridRetriever, load_config
from langchain_ragbudget.budget import ContextBudget
from langchain_ragbudget.config import SurfaceSettings
from langchain_ragbudget.embedded import build_hybrid_retriever
from langchain_ragbudget.pipeline import create_budgeted_rag_chain
from langchain_ragbudget.rerank import FlashRankRerank
from langchain_ragbudget.sample import load_sample_corpus

pytestmark = [pytest.mark.needs_embedding_model, pytest.mark.needs_tiktoken]

WORDS = ["solar", "panels", "bread", "rain", "tax", "deploy", "the", "policy"]
POOL = [
    Document(
        id=f"d{i}::{j}",
        page_content=" ".join(
            WORDS[(i * 3 + j + k) % len(WORDS)] for k in range(3 + (i * 7 + j) % 40)
        ),
        metadata={"doc_id": f"d{i}", "source": f"d{i}.md"},
    )
    for i in range(8)
    for j in range(3)
]


class ListRetriever(BaseRetriever):
    documents: list[Document]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return self.documents


def check_ledger(entered: set[str], state: dict, sources: dict[str, Document]) -> None:
    context = state["context"]
    report = context.report
    accounted = report.kept_ids + [record.key for record in report.drops]
    assert sorted(accounted) == sorted(entered)  # exactly once each; no silent drop
    for kept in context.documents:
        assert kept.page_content == sources[kept.id].page_content
    assert report.tokens_used <= report.max_tokens or report.over_budget


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(POOL), max_size=15),
    st.lists(st.sampled_from(POOL), max_size=15),
    st.integers(1, 20),
    st.integers(1, 10),
    st.one_of(st.none(), st.floats(0.4, 0.99)),
    st.integers(1, 400),
    st.integers(1, 8),
    st.sampled_from(["skip", "stop"]),
    st.sampled_from(["rank", "edges"]),
)
def test_every_candidate_is_kept_or_recorded_exactly_once(
    tiny_flashrank_dir: Path,
    sparse: list[Document],
    dense: list[Document],
    k: int,
    top_n: int,
    floor: float | None,
    max_tokens: int,
    max_docs: int,
    packing: str,
    order: str,
) -> None:
    retriever = HybridRetriever(
        retrievers=[ListRetriever(documents=sparse), ListRetriever(documents=dense)],
        k=k,
    )
    reranker = FlashRankRerank(
        cache_dir=str(tiny_flashrank_dir), top_n=top_n, score_floor=floor
    )
    surface = SurfaceSettings(
        max_docs=max_docs,
        max_tokens=max_tokens,
        model="gpt-4o",
        packing=packing,
        order=order,
    )
    chain = (
        RunnableParallel(question=RunnablePassthrough(), documents=retriever)
        | reranker
        | ContextBudget(settings=surface)
    )
    state = chain.invoke("solar panels policy")
    entered = {doc.id for doc in [*sparse, *dense] if doc.id}
    check_ledger(entered, state, {doc.id: doc for doc in POOL if doc.id})


def test_the_embedded_pipeline_on_the_sample_corpus(tiny_flashrank_dir: Path) -> None:
    config = load_config()
    corpus = load_sample_corpus()
    retriever = build_hybrid_retriever(corpus, config)
    reranker = FlashRankRerank(cache_dir=str(tiny_flashrank_dir), top_n=6)
    chain = create_budgeted_rag_chain(
        retriever, budget=ContextBudget.from_config("chat", config), reranker=reranker
    )
    state = chain.invoke(
        "How quickly must the on-call engineer acknowledge a SEV1 page?"
    )
    stages = {str(record.stage) for record in state["context"].report.drops}
    assert stages == {"fusion", "rerank", "budget"}
    check_ledger(
        {doc.id for doc in corpus if doc.id},
        state,
        {doc.id: doc for doc in corpus if doc.id},
    )
