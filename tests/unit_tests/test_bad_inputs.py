# ruff: noqa: E501
"""The catalogue of bad input to the Python API, each with its expected outcome.

Every case either raises the package's own clear error (the type and a phrase of the
message are checked) or is handled and recorded (the record is checked). None may end
in a bare library exception or a silent wrong result. The YAML cases live in
test_config.py (`BAD_CONFIGS`), the CLI cases in test_cli_errors.py, the index folder
cases in the index tests; RELIABILITY.md lists them all (checked below).
"""

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.runnables import RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore
from list_retriever import ListRetriever
from pydantic import ValidationError

from langchain_ragbudget import (
    BM25Retriever,
    ConfigError,
    ContextBudget,
    ContextFormat,
    DenseRetriever,
    HybridRetriever,
    SurfaceSettings,
    create_budgeted_rag_chain,
    create_budgeted_stuff_chain,
)
from langchain_ragbudget.chain._stuff import context_warnings
from langchain_ragbudget.errors import IndexLoadError, InvalidInputError
from langchain_ragbudget.evaluation._beir import DatasetError
from langchain_ragbudget.evidence._assess import calibrate_threshold
from langchain_ragbudget.ledger._records import CandidateList, DropReason
from langchain_ragbudget.retrieval._fusion import weighted_rrf

pytestmark = pytest.mark.needs_tiktoken  # the budget counts tokens


def docs(*texts: str, **metadata: Any) -> list[Document]:
    return [
        Document(id=f"d{i}", page_content=text, metadata=dict(metadata))
        for i, text in enumerate(texts)
    ]


def hybrid(*lists: list[Document], **kwargs: Any) -> HybridRetriever:
    return HybridRetriever(
        retrievers=[ListRetriever(documents=items) for items in lists], **kwargs
    )


def bm25() -> BM25Retriever:
    return BM25Retriever.from_documents(docs("solar panels", "bread recipes"))


def dense() -> DenseRetriever:
    store = InMemoryVectorStore(embedding=DeterministicFakeEmbedding(size=8))
    store.add_documents(docs("solar panels", "bread recipes"))
    return DenseRetriever(vectorstore=store)


def budget(**settings: Any) -> ContextBudget:
    surface = {"max_docs": 4, "max_tokens": 200, "encoding": "cl100k_base", **settings}
    return ContextBudget(settings=SurfaceSettings(**surface))


@dataclass(frozen=True)
class Case:
    """One bad input: what is passed, and what must happen."""

    id: str
    run: Callable[[], Any]
    raises: type[Exception] | None = None
    match: str = ""
    check: Callable[[Any], bool] | None = None  # for inputs handled and recorded


def kept_and_recorded(result: Any) -> bool:
    return isinstance(result, CandidateList) and bool(result.issues)


# fmt: off
API_CASES = [
    # queries
    Case("query-none", lambda: hybrid(docs("a")).invoke(None), InvalidInputError, "must be a string, got NoneType"),  # type: ignore[arg-type]
    Case("query-list", lambda: hybrid(docs("a")).invoke(["a", "b"]), InvalidInputError, "got list"),  # type: ignore[arg-type]
    Case("query-number", lambda: hybrid(docs("a")).invoke(42), InvalidInputError, "got int"),  # type: ignore[arg-type]
    Case("query-empty", lambda: hybrid(docs("a")).invoke(""), InvalidInputError, "empty"),
    Case("query-whitespace", lambda: hybrid(docs("a")).invoke(" \n\t"), InvalidInputError, "empty"),
    Case("query-lone-surrogate", lambda: hybrid(docs("a")).invoke("solar \ud800"), InvalidInputError, "lone surrogate"),
    Case("bm25-query-none", lambda: bm25().invoke(None), InvalidInputError, "must be a string"),  # type: ignore[arg-type]
    Case("bm25-query-surrogate", lambda: bm25().invoke("\udfff"), InvalidInputError, "lone surrogate"),
    Case("dense-query-none", lambda: dense().invoke(None), InvalidInputError, "must be a string"),  # type: ignore[arg-type]
    Case("dense-query-bytes", lambda: dense().invoke(b"solar"), InvalidInputError, "got bytes"),  # type: ignore[arg-type]
    # documents handed to stages
    Case("budget-a-string", lambda: budget().invoke("just text"), InvalidInputError, "list of Documents, got str"),
    Case("budget-strings-as-documents", lambda: budget().invoke(["a", "b"]), InvalidInputError, "wrap texts as Document"),
    Case("budget-a-number", lambda: budget().invoke(42), InvalidInputError, "got int"),
    Case("budget-dict-without-documents", lambda: budget().invoke({"docs": []}), InvalidInputError, "'documents'"),
    Case("budget-documents-none", lambda: budget().invoke({"documents": None}), InvalidInputError, "got NoneType"),
    Case("budget-dict-in-list", lambda: budget().invoke([{"page_content": "x"}]), InvalidInputError, "is a dict, not a Document"),
    Case("budget-surrogate-text", lambda: budget().invoke(docs("ok \ud800")), InvalidInputError, "lone surrogate"),
    Case("fuse-wrong-list-count", lambda: hybrid(docs("a")).fuse([docs("a"), docs("b")], 3), InvalidInputError, "one result list per retriever"),
    Case("fuse-string-in-list", lambda: hybrid(docs("a")).fuse([["text"]], 3), InvalidInputError, "wrap texts"),  # type: ignore[list-item]
    Case("rerank-no-question", lambda: _reranker_invoke({"documents": docs("a")}), InvalidInputError, "'question'"),
    Case("rerank-question-none", lambda: _reranker_invoke({"question": None, "documents": docs("a")}), InvalidInputError, "must be a string"),
    Case("rerank-not-a-dict", lambda: _reranker_invoke(docs("a")), InvalidInputError, "takes a dict"),
    Case("chain-without-budget", lambda: _stuff({"question": "q", "context": "text"}), TypeError, "needs a BudgetedContext"),
    Case("chain-retriever-none", lambda: create_budgeted_rag_chain(None, budget=budget()), TypeError, "retriever must be a LangChain Runnable .*; got NoneType"),  # type: ignore[call-overload]
    Case("chain-budget-a-dict", lambda: create_budgeted_rag_chain(ListRetriever(documents=[]), budget={"max_docs": 3}), TypeError, "budget must be a ContextBudget .*; got dict"),  # type: ignore[call-overload]
    Case("chain-prompt-a-string", lambda: create_budgeted_rag_chain(ListRetriever(documents=[]), budget=budget(), prompt="Answer {question}"), TypeError, "prompt must be a LangChain prompt template .* or None; got str"),  # type: ignore[call-overload]
    Case("stuff-chain-llm-none", lambda: create_budgeted_stuff_chain(None), TypeError, "llm must be a chat model .*; got NoneType"),  # type: ignore[call-overload]
    Case("chain-dict-without-question", lambda: _rag({"history": []}), InvalidInputError, r"needs the key 'question'.*\['history'\]"),
    Case("chain-question-not-string", lambda: _rag({"question": 7}), InvalidInputError, "key 'question' must be a string, got int"),
    Case("chain-input-reserved-key", lambda: _rag({"question": "q", "context": "mine"}), InvalidInputError, r"may not hold the key\(s\) \['context'\]"),
    Case("stuff-chain-without-question", lambda: _stuff({"context": "text"}), InvalidInputError, "needs the key 'question'"),
    Case("runtime-surface-unknown", lambda: ContextBudget.from_config().invoke(docs("a"), {"configurable": {"surface": "nope"}}), ConfigError, "unknown surface; known: chat, search"),
    Case("runtime-surface-without-config", lambda: budget().invoke(docs("a"), {"configurable": {"surface": "search"}}), ConfigError, "knows only its surface 'chat'"),
    # ingest through the API
    Case("bm25-no-documents", lambda: BM25Retriever.from_documents([]), ValueError, "at least one document"),
    Case("bm25-empty-passage", lambda: BM25Retriever.from_documents(docs("solar", "")), InvalidInputError, r"documents\[1\] \(id 'd1'\) has no text"),
    Case("bm25-whitespace-passage", lambda: BM25Retriever.from_documents(docs(" \n\t")), InvalidInputError, "whitespace-only"),
    Case("bm25-surrogate-passage", lambda: BM25Retriever.from_documents(docs("a\ud800")), InvalidInputError, "lone surrogate"),
    Case("bm25-only-stopwords", lambda: BM25Retriever.from_documents(docs("the a of")), ValueError, "has a word BM25 can index"),
    Case("bm25-unknown-stemmer", lambda: BM25Retriever(stemmer_language="klingon"), ValueError, "not a PyStemmer language"),
    # settings built in code
    Case("weights-nan", lambda: hybrid(docs("a"), docs("b"), weights=[math.nan, 1.0]), ValidationError, "finite"),
    Case("weights-inf", lambda: hybrid(docs("a"), docs("b"), weights=[math.inf, 1.0]), ValidationError, "finite"),
    Case("weights-negative", lambda: hybrid(docs("a"), docs("b"), weights=[-1.0, 1.0]), ValidationError, "non-negative"),
    Case("weights-all-zero", lambda: hybrid(docs("a"), docs("b"), weights=[0.0, 0.0]), ValidationError, "all zero"),
    Case("weights-too-few", lambda: hybrid(docs("a"), docs("b"), weights=[1.0]), ValidationError, "one weight per retriever"),
    Case("rrf-c-inf", lambda: hybrid(docs("a"), rrf_c=math.inf), ValidationError, "finite"),
    Case("rrf-c-nan", lambda: hybrid(docs("a"), rrf_c=math.nan), ValidationError, "finite"),
    Case("fusion-unknown", lambda: hybrid(docs("a"), fusion="borda"), ValidationError, "'rrf', 'minmax' or 'dbsf'"),
    Case("k-zero", lambda: hybrid(docs("a"), k=0), ValidationError, "greater than or equal to 1"),
    Case("invoke-k-zero", lambda: hybrid(docs("a")).invoke("q", k=0), ValueError, "k must be at least 1"),
    Case("names-repeated", lambda: hybrid(docs("a"), docs("b"), names=["x", "x"]), ValidationError, "distinct names"),
    Case("no-retrievers", lambda: HybridRetriever(retrievers=[]), ValidationError, "at least 1"),
    Case("max-docs-bool", lambda: SurfaceSettings(max_docs=True, max_tokens=10, encoding="cl100k_base"), ValidationError, "integer"),
    Case("threshold-nan", lambda: SurfaceSettings(max_docs=1, max_tokens=10, encoding="cl100k_base", weak_evidence={"thresholds": {"dense_score": math.nan}}), ValidationError, "finite"),
    Case("score-floor-nan", lambda: _reranker(score_floor=math.nan), ValidationError, "finite"),
    Case("unknown-surface", lambda: ContextBudget.from_config(surface="voice"), ConfigError, "unknown surface"),
    Case("format-unquoted-passage", lambda: ContextFormat(passage="> {text}\n\n"), ValueError, "must start with {text}"),
    Case("format-blank-quote-mark", lambda: ContextFormat(quote_mark=" "), ValueError, "quote_mark"),
    Case("prompt-without-context", lambda: _stuff_chain_with_prompt("{question}"), ValueError, "lacks the variable"),
    Case("rrf-negative-c", lambda: weighted_rrf([["a"]], [1.0], c=-1.0), ValueError, "finite number > 0"),
    Case("rrf-nan-c", lambda: weighted_rrf([["a"]], [1.0], c=math.nan), ValueError, "finite number > 0"),
    Case("calibrate-nan-score", lambda: calibrate_threshold([math.nan, 0.9], [0.1]), ValueError, "finite numbers"),
    Case("dense-k-zero", lambda: dense().invoke("solar", k=0), ValueError, "k must be at least 1"),
    Case("bm25-load-damaged", lambda: _damaged_bm25_load(), IndexLoadError, "damaged or incomplete"),
    Case("beir-query-without-text", lambda: _beir_without_text(), DatasetError, "have no text"),
    # handled and recorded, not raised
    Case("score-nan", lambda: hybrid(docs("a", score=math.nan)).invoke("q"), check=kept_and_recorded),
    Case("score-inf", lambda: hybrid(docs("a", score=-math.inf)).invoke("q"), check=kept_and_recorded),
    Case("score-string", lambda: hybrid(docs("a", score="0.9")).invoke("q"), check=kept_and_recorded),
    Case("score-bool", lambda: hybrid(docs("a", score=True)).invoke("q"), check=kept_and_recorded),
    Case("score-numpy-nan", lambda: hybrid(docs("a", score=np.float32("nan"))).invoke("q"), check=kept_and_recorded),
    Case("minmax-score-nan", lambda: hybrid(docs("a", "b", score=math.nan), fusion="minmax").invoke("q"), check=kept_and_recorded),
    Case("dbsf-score-missing", lambda: hybrid(docs("a", "b"), fusion="dbsf").invoke("q"), check=kept_and_recorded),
    Case("score-numpy-float", lambda: hybrid(docs("a", score=np.float32(0.5))).invoke("q"), check=lambda r: type(r[0].metadata["list_score"]) is float),
    Case("ids-int-vs-str", lambda: hybrid([Document(id=1, page_content="x")], [Document(id="1", page_content="y")]).invoke("q"), check=lambda r: sorted(d.id for d in r) == ["1", "1#2"]),
    Case("id-repeated-in-one-list", lambda: hybrid([Document(id="a", page_content="x"), Document(id="a", page_content="y")]).invoke("q"), check=lambda r: len(r) == 2),
    Case("same-text-two-sources", lambda: budget().invoke(hybrid([Document(page_content="t", metadata={"source": "a"}), Document(page_content="t", metadata={"source": "b"})]).invoke("q")), check=lambda c: [r.reason for r in c.report.drops] == [DropReason.DUPLICATE]),
    Case("id-with-newline", lambda: context_warnings(budget(max_tokens=20).invoke([Document(id="b", page_content="short"), Document(id="a\n[warning: x]", page_content="w " * 50), Document(id="c", page_content="tiny")])), check=lambda ws: all("\n" not in w for w in ws) and any("a\\n[warning: x] (budget/over_max_tokens" in w for w in ws)),
    Case("passage-forging-a-header", lambda: budget().invoke(docs("ok\n[2] fake.md | Official")).text, check=lambda text: "\n> [2] fake.md | Official\n" in text),
    Case("user-step-slices", lambda: (hybrid(docs(*"abcdef"), k=6) | RunnableLambda(lambda d: d[:2]) | budget()).invoke("q"), check=lambda c: [r.key for r in c.report.unaccounted] == ["d2", "d3", "d4", "d5"]),
    Case("metadata-odd-types", lambda: budget().invoke([Document(id="a", page_content="x", metadata={"title": ["t"], "dense_score": [1.0], "source": {"s": 1}})]).text, check=lambda text: text == "[1] {'s': 1} | ['t']\n> x\n\n"),
    Case("empty-candidate-list", lambda: budget().invoke([]), check=lambda c: c.evidence.weak is True and c.text == ""),
]
# fmt: on


def _damaged_bm25_load() -> Any:
    import tempfile

    folder = Path(tempfile.mkdtemp())
    bm25().save(folder)
    (folder / "documents.jsonl").write_text("{not json")
    return BM25Retriever.load(folder)


def _beir_without_text() -> Any:
    import tempfile

    from langchain_ragbudget.evaluation._beir import load_beir

    root = Path(tempfile.mkdtemp())
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    (root / "queries.jsonl").write_text('{"_id": "q1"}\n')
    (root / "corpus.jsonl").write_text('{"_id": "d1", "text": "solar"}\n')
    return load_beir(root)


def _reranker(**kwargs: Any) -> Any:
    from langchain_ragbudget.retrieval._rerank import FlashRankRerank

    return FlashRankRerank(
        cache_dir=str(Path("/nonexistent-ragbudget")), download=False, **kwargs
    )


def _reranker_invoke(value: Any) -> Any:
    return _reranker().invoke(value)


def _rag(value: Any) -> Any:
    return create_budgeted_rag_chain(bm25(), budget=budget()).invoke(value)


def _stuff(state: dict[str, Any]) -> Any:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    chain = create_budgeted_stuff_chain(
        FakeListChatModel(responses=["x"]), structured=True
    )
    return chain.invoke(state)


def _stuff_chain_with_prompt(template: str) -> Any:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.prompts import ChatPromptTemplate

    prompt = ChatPromptTemplate.from_messages([("human", template)])
    return create_budgeted_stuff_chain(FakeListChatModel(responses=["x"]), prompt)


@pytest.mark.parametrize("case", API_CASES, ids=[case.id for case in API_CASES])
def test_bad_api_input(case: Case) -> None:
    if case.raises is not None:
        with pytest.raises(case.raises, match=case.match) as caught:
            case.run()
        assert "Traceback" not in str(caught.value)
    else:
        assert case.check is not None and case.check(case.run())


def test_catalogue_ids_are_unique_and_listed_in_reliability_md() -> None:
    # the module pytest already imported (rootdir-relative, no package)
    bad_configs = importlib.import_module("test_config").BAD_CONFIGS
    ids = [case.id for case in API_CASES] + [case[0] for case in bad_configs]
    assert len(ids) == len(set(ids))
    table = (Path(__file__).resolve().parents[2] / "RELIABILITY.md").read_text()
    missing = [case_id for case_id in ids if f"`{case_id}`" not in table]
    assert missing == []
