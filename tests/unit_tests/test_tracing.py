"""OpenTelemetry spans per stage, read back from the SDK's in-memory exporter.

Real stages throughout: BM25 and fusion, FlashRank's code path with the tiny model
the tests build, the budget counting with tiktoken. The chat model is langchain's
fake (it stands in for an LLM API, which cannot run here). Each test passes its own
TracerProvider; the global provider is only set inside a subprocess.
"""

import asyncio
import itertools
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import (
    Runnable,
    RunnableLambda,
    RunnableParallel,
    RunnablePassthrough,
)
from list_retriever import ListRetriever
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode

from langchain_ragbudget import (
    BM25Retriever,
    BudgetedAnswer,
    ContextBudget,
    FlashRankRerank,
    HybridRetriever,
    create_budgeted_rag_chain,
    ledger_scope,
    load_config,
)
from langchain_ragbudget.chain._pipeline import explain
from langchain_ragbudget.chain._tracing import traced
from langchain_ragbudget.config._settings import SurfaceSettings, TracingSettings
from langchain_ragbudget.errors import ConfigError, MissingExtraError

pytestmark = pytest.mark.needs_tiktoken("o200k_base")

QUESTION = "how do solar panels generate electricity"
TEXTS = {
    "solar": "Solar panels generate electricity from sunlight. Photovoltaic cells "
    "turn light into current. An inverter converts it for the home. Panels last "
    "about twenty five years.",
    "wind": "Wind turbines generate electricity from moving air. The blades turn a "
    "rotor. A generator in the nacelle makes current.",
    "bread": "A recipe for bread. Mix flour, water and yeast. Bake it for forty "
    "minutes.",
    "panel": "Panels of experts met to discuss the budget. They did not agree.",
    "hydro": "Hydro plants generate electricity from falling water. Dams hold the "
    "reservoir.",
    "coal": "Coal plants burn coal to boil water. Steam drives a turbine that makes "
    "electricity.",
    "grid": "The grid carries electricity from plants to homes. Transformers change "
    "the voltage.",
    "tea": "Green tea is brewed at eighty degrees. Steep it for two minutes.",
}
DOCS = [
    Document(id=key, page_content=text, metadata={"source": f"{key}.md"})
    for key, text in TEXTS.items()
]
K, TOP_N = 6, 4  # fusion cuts len(DOCS) - K, rerank TOP_N of those left
STAGES = ["retrieval", "fusion", "rerank", "budget", "answer"]


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def fake_llm() -> GenericFakeChatModel:
    """Stands in for an LLM API; answers every call the same."""
    return GenericFakeChatModel(
        messages=itertools.repeat(AIMessage(content="From sunlight [1]."))
    )


def hybrid() -> HybridRetriever:
    return HybridRetriever(
        retrievers=[
            BM25Retriever.from_documents(DOCS, k=len(DOCS)),
            ListRetriever(documents=DOCS),  # a second ranking: the corpus order
        ],
        names=["bm25", "list"],
        k=K,
    )


def budget(**settings: Any) -> ContextBudget:
    values = {"max_docs": 3, "max_tokens": 120, "model": "gpt-4o", **settings}
    return ContextBudget(surface="chat", settings=SurfaceSettings(**values))


def rag_chain(
    cache: Path, provider: TracerProvider | None, **kwargs: Any
) -> Runnable[str, Any]:
    options: dict[str, Any] = {"structured": True, "tracing": True, **kwargs}
    return create_budgeted_rag_chain(
        hybrid(),
        fake_llm(),
        budget=options.pop("budget", None) or budget(),
        reranker=FlashRankRerank(cache_dir=str(cache), top_n=TOP_N),
        tracer_provider=provider,
        **options,
    )


def by_name(finished: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    [span] = [span for span in finished if span.name == name]
    return span


def stage_drops(answer: BudgetedAnswer, *stages: str) -> list[tuple[str, str]]:
    return [(d["id"], d["reason"]) for d in answer.dropped if d["stage"] in stages]


def span_drops(span: ReadableSpan) -> list[tuple[str, str]]:
    attributes = span.attributes or {}
    return list(
        zip(
            attributes["ragbudget.dropped_ids"],  # type: ignore[arg-type]
            attributes["ragbudget.dropped_reasons"],  # type: ignore[arg-type]
            strict=True,
        )
    )


def test_one_span_per_stage_carries_its_drops(
    tiny_flashrank_dir: Path, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    answer = rag_chain(tiny_flashrank_dir, provider).invoke(QUESTION)
    finished = exporter.get_finished_spans()
    names = Counter(span.name for span in finished)
    assert names == Counter(
        ["ragbudget.pipeline", "ragbudget.retriever", "ragbudget.retriever"]
        + [f"ragbudget.{stage}" for stage in STAGES]
    )
    fusion = by_name(finished, "ragbudget.fusion")
    rerank = by_name(finished, "ragbudget.rerank")
    budget_span = by_name(finished, "ragbudget.budget")
    # each stage's span names exactly the drops the answer attributes to it
    assert span_drops(fusion) == stage_drops(answer, "fusion")
    assert len(span_drops(fusion)) == len(DOCS) - K
    assert span_drops(rerank) == stage_drops(answer, "rerank")
    assert len(span_drops(rerank)) == K - TOP_N
    assert span_drops(budget_span) == stage_drops(answer, "budget", "external_step")
    assert span_drops(budget_span)  # max_docs=3 of TOP_N=4 candidates
    assert (budget_span.attributes or {})["ragbudget.kept_ids"] == tuple(
        kept["id"] for kept in answer.kept
    )
    for name in ("ragbudget.budget", "ragbudget.pipeline"):
        attributes = by_name(finished, name).attributes or {}
        assert attributes["ragbudget.surface"] == answer.surface == "chat"
        assert attributes["ragbudget.tokens_used"] == answer.tokens_used
        assert attributes["ragbudget.max_tokens"] == answer.max_tokens == 120
    # the call's span holds the whole ledger, stage by stage
    pipeline = by_name(finished, "ragbudget.pipeline")
    assert span_drops(pipeline) == [(d["id"], d["reason"]) for d in answer.dropped]
    assert (pipeline.attributes or {})["ragbudget.dropped_stages"] == tuple(
        d["stage"] for d in answer.dropped
    )
    assert (by_name(finished, "ragbudget.answer").attributes or {})[
        "ragbudget.warnings"
    ] == tuple(answer.warnings)
    # ids and counts only: no passage text, no question
    values = " ".join(
        str(v) for span in finished for v in (span.attributes or {}).values()
    )
    for text in [QUESTION, *(t.split(".")[0] for t in TEXTS.values())]:
        assert text not in values


def test_shortened_ids_under_trim(
    tiny_flashrank_dir: Path, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    trim = budget(max_docs=4, max_tokens=75, packing="trim")
    answer = rag_chain(tiny_flashrank_dir, provider, budget=trim).invoke(QUESTION)
    assert answer.shortened, "the budget is meant to shorten a passage here"
    for name in ("ragbudget.budget", "ragbudget.pipeline"):
        attributes = by_name(exporter.get_finished_spans(), name).attributes or {}
        assert attributes["ragbudget.shortened_ids"] == tuple(
            r["id"] for r in answer.shortened
        )
        kept = attributes["ragbudget.shortened_kept_sentences"]
        total = attributes["ragbudget.shortened_total_sentences"]
        assert kept == tuple(r["kept_sentences"] for r in answer.shortened)
        assert all(k < t for k, t in zip(kept, total, strict=True))  # type: ignore[arg-type]
        assert attributes["ragbudget.packing"] == "trim"


def nests_under(
    finished: tuple[ReadableSpan, ...], parent: ReadableSpan, root_name: str
) -> None:
    """Every span is in the parent's trace; the call's span hangs off the parent;
    stages off the call; the fused retrievers and fusion off retrieval."""
    ids = {span.context.span_id: span.name for span in finished}
    assert {span.context.trace_id for span in finished} == {parent.context.trace_id}
    parents = {
        span.name: ids[span.parent.span_id]
        for span in finished
        if span.parent is not None
    }
    assert parents[root_name] == "request"
    for stage in ("retrieval", "rerank", "budget", "answer"):
        assert parents[f"ragbudget.{stage}"] == root_name
    assert parents["ragbudget.fusion"] == "ragbudget.retrieval"
    assert parents["ragbudget.retriever"] == "ragbudget.retrieval"


async def call(chain: Runnable[str, Any], how: str) -> Any:
    if how == "invoke":
        return chain.invoke(QUESTION)
    if how == "ainvoke":
        return await chain.ainvoke(QUESTION)
    if how == "stream":
        return "".join(chain.stream(QUESTION))
    return "".join([piece async for piece in chain.astream(QUESTION)])


@pytest.mark.parametrize("how", ["invoke", "ainvoke", "stream", "astream"])
async def test_spans_nest_under_the_callers_span(
    how: str,
    tiny_flashrank_dir: Path,
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    chain = rag_chain(tiny_flashrank_dir, provider, structured=False)
    with provider.get_tracer("service").start_as_current_span("request"):
        text = await call(chain, how)
    assert "From sunlight [1]." in text
    finished = exporter.get_finished_spans()
    nests_under(finished, by_name(finished, "request"), "ragbudget.pipeline")
    fusion = by_name(finished, "ragbudget.fusion")
    assert len(span_drops(fusion)) == len(DOCS) - K


def test_concurrent_calls_keep_their_own_spans(
    tiny_flashrank_dir: Path, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    questions = [QUESTION, "what makes wind turbines turn", "how is tea brewed"]
    answers = rag_chain(tiny_flashrank_dir, provider).batch(questions)
    traces: dict[int, list[ReadableSpan]] = {}
    for span in exporter.get_finished_spans():
        traces.setdefault(span.context.trace_id, []).append(span)
    assert len(traces) == len(questions)
    kept = set()
    for trace in traces.values():
        assert Counter(span.name for span in trace)["ragbudget.budget"] == 1
        pipeline = by_name(tuple(trace), "ragbudget.pipeline")
        kept.add((pipeline.attributes or {})["ragbudget.kept_ids"])
    assert kept == {tuple(k["id"] for k in answer.kept) for answer in answers}


def test_disabled_gives_no_spans(
    tiny_flashrank_dir: Path, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    for off in (False, TracingSettings(), load_config().tracing):
        rag_chain(tiny_flashrank_dir, provider, tracing=off).invoke(QUESTION)
    assert exporter.get_finished_spans() == ()


def test_the_yaml_switch_turns_tracing_on(
    tmp_path: Path,
    tiny_flashrank_dir: Path,
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    path = tmp_path / "ragbudget.yml"
    path.write_text("tracing:\n  otel: true\n")
    config = load_config(path)
    reranker = FlashRankRerank(cache_dir=str(tiny_flashrank_dir), top_n=TOP_N)
    with provider.get_tracer("service").start_as_current_span("request"):
        explained = explain(
            QUESTION,
            hybrid(),
            budget(),
            reranker=reranker,
            llm=fake_llm(),
            tracing=config.tracing,
            tracer_provider=provider,
        )
    assert explained.answer is not None
    finished = exporter.get_finished_spans()
    nests_under(finished, by_name(finished, "request"), "ragbudget.pipeline")
    assert span_drops(by_name(finished, "ragbudget.budget")) == stage_drops(
        explained.answer, "budget", "external_step"
    )


def test_a_bad_yaml_value_is_named(tmp_path: Path) -> None:
    path = tmp_path / "ragbudget.yml"
    path.write_text("tracing:\n  otel: 1\n")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert error.value.key == "tracing.otel"


def test_a_vanished_candidate_is_on_the_budget_span(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    retriever = hybrid()
    chain = ledger_scope(
        RunnableParallel(question=RunnablePassthrough(), documents=retriever)
        | RunnableLambda(lambda state: {**state, "documents": state["documents"][:2]})
        | budget(max_docs=10, max_tokens=4000)
    )
    state = traced(chain, tracer_provider=provider).invoke(QUESTION)
    report = state["context"].report
    vanished = [(r.key, str(r.reason)) for r in report.unaccounted]
    assert len(vanished) == K - 2
    budget_span = by_name(exporter.get_finished_spans(), "ragbudget.budget")
    assert span_drops(budget_span) == vanished
    assert set((budget_span.attributes or {})["ragbudget.dropped_stages"]) == {  # type: ignore[arg-type]
        "external_step"
    }


class FailingRetriever(BaseRetriever):
    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        raise TimeoutError("the vector store did not answer")


def test_a_failing_stage_ends_its_span_with_the_error(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    chain = create_budgeted_rag_chain(
        FailingRetriever(), budget=budget(), tracing=True, tracer_provider=provider
    )
    with pytest.raises(TimeoutError):
        chain.invoke(QUESTION)
    finished = exporter.get_finished_spans()
    assert [span.name for span in finished] == [
        "ragbudget.retrieval",
        "ragbudget.pipeline",
    ]
    for span in finished:
        assert span.status.status_code == StatusCode.ERROR
        assert "did not answer" in str(span.status.description)


class BrokenProcessor(SpanProcessor):
    def on_start(self, span: Any, parent_context: Any = None) -> None:
        raise RuntimeError("the collector is down")


def test_a_broken_tracer_does_not_break_the_call(tiny_flashrank_dir: Path) -> None:
    provider = TracerProvider()
    provider.add_span_processor(BrokenProcessor())
    traced_answer = rag_chain(tiny_flashrank_dir, provider).invoke(QUESTION)
    plain = rag_chain(tiny_flashrank_dir, None, tracing=False).invoke(QUESTION)
    assert traced_answer == plain


def test_tracing_without_opentelemetry_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for module in ("opentelemetry", "opentelemetry.trace"):
        monkeypatch.setitem(sys.modules, module, None)  # import now raises
    create_budgeted_rag_chain(hybrid(), budget=budget())  # off: nothing imported
    with pytest.raises(MissingExtraError, match=r"langchain-ragbudget\[otel\]"):
        create_budgeted_rag_chain(hybrid(), budget=budget(), tracing=True)


# Run in a fresh interpreter: a pipeline without chromadb (BM25 twice, fused, the
# budget, a fake chat model), with tracing off, then on; then the same under a
# global tracer provider, as a service that uses OpenTelemetry has one.
# langsmith (behind every langchain_core run) imports opentelemetry.sdk at module
# level when it is installed, so it is loaded first with opentelemetry hidden;
# what remains is whether anything else imports it.
OFF_THEN_ON = """
import itertools, json, sys

sys.modules["opentelemetry"] = None
import langsmith.client
del sys.modules["opentelemetry"]

from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_ragbudget import (
    BM25Retriever, ContextBudget, HybridRetriever, create_budgeted_rag_chain
)
from langchain_ragbudget.config._settings import SurfaceSettings

docs = [Document(id=str(i), page_content=f"passage {i} about solar power")
        for i in range(6)]
retriever = HybridRetriever(
    retrievers=[BM25Retriever.from_documents(docs), BM25Retriever.from_documents(docs)],
    names=["a", "b"], k=4,
)
budget = ContextBudget(settings=SurfaceSettings(max_docs=2, max_tokens=60))
llm = GenericFakeChatModel(messages=itertools.repeat(AIMessage(content="ok")))

def run(tracing):
    chain = create_budgeted_rag_chain(retriever, llm, budget=budget, tracing=tracing)
    chain.invoke("solar power")

def modules():
    return sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")

run(False)
result = {"chromadb": "chromadb" in sys.modules, "off_modules": modules()}
run(True)
result["on_modules"] = modules()

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
run(False)
result["off_spans"] = [span.name for span in exporter.get_finished_spans()]
run(True)
result["on_spans"] = [span.name for span in exporter.get_finished_spans()]
print(json.dumps(result))
"""


def test_opentelemetry_only_when_tracing_is_on() -> None:
    done = subprocess.run(
        [sys.executable, "-c", OFF_THEN_ON],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert not result["chromadb"]  # chromadb would import opentelemetry itself
    assert result["off_modules"] == []
    assert "opentelemetry.trace" in result["on_modules"]
    assert result["off_spans"] == []
    assert sorted(set(result["on_spans"])) == [
        "ragbudget.answer",
        "ragbudget.budget",
        "ragbudget.fusion",
        "ragbudget.pipeline",
        "ragbudget.retrieval",
        "ragbudget.retriever",
    ]


def test_async_calls_in_parallel_nest_under_their_own_parents(
    tiny_flashrank_dir: Path, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    chain = rag_chain(tiny_flashrank_dir, provider)
    tracer = provider.get_tracer("service")

    async def request(n: int) -> None:
        with tracer.start_as_current_span(f"request-{n}"):
            await chain.ainvoke(QUESTION)

    async def main() -> None:
        await asyncio.gather(*(request(n) for n in range(3)))

    asyncio.run(main())
    finished = exporter.get_finished_spans()
    for n in range(3):
        parent = by_name(finished, f"request-{n}")
        [pipeline] = [
            span
            for span in finished
            if span.name == "ragbudget.pipeline"
            and span.parent is not None
            and span.parent.span_id == parent.context.span_id
        ]
        in_trace = [
            s for s in finished if s.context.trace_id == parent.context.trace_id
        ]
        assert Counter(s.name for s in in_trace)["ragbudget.budget"] == 1
        assert pipeline.context.trace_id == parent.context.trace_id


@pytest.mark.needs_tiktoken
def test_memory_drops_are_on_the_memory_span(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    memories = [Document(id=f"m{i}", page_content=f"Memory {i}.") for i in range(5)]
    chain = create_budgeted_rag_chain(
        ListRetriever(documents=DOCS),
        fake_llm(),
        budget=budget(max_memories=2),
        memory=ListRetriever(documents=memories),
        structured=True,
        tracing=True,
        tracer_provider=provider,
    )
    answer = chain.invoke("where does the power come from?")
    span = by_name(exporter.get_finished_spans(), "ragbudget.memory")
    assert span_drops(span) == stage_drops(answer, "memory")
    assert span_drops(span) == [(f"m{i}", "over_max_memories") for i in (2, 3, 4)]
    assert list(span.attributes["ragbudget.kept_ids"]) == ["m0", "m1"]  # type: ignore[arg-type, index]
