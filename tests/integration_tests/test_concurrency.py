"""1,000 concurrent `ainvoke`s through the whole chain give the sequential results.

Real parts: BM25 (bm25s), Chroma with fastembed ONNX embeddings, FlashRank (the tiny
test model, real code path), the budget and the stuff chain. The chat model is a
stand-in (no LLM API runs here) that answers with the prompt it was given, so the
comparison covers the exact context text as well as ids, order and drop records.
"""

import asyncio
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from langchain_ragbudget import (
    BudgetedAnswer,
    ContextBudget,
    FlashRankRerank,
    HybridRetriever,
    create_budgeted_rag_chain,
    load_config,
)
from langchain_ragbudget.sample import load_sample_corpus

QUESTIONS = [
    "How quickly must the on-call engineer acknowledge a SEV1 page?",
    "How long are application logs retained?",
    "When are refunds paid?",
    "What is the international per diem?",
    "Who approves production deploys on Fridays?",
    "How do I rotate an API key?",
    "What is the policy on working from abroad?",
    "solar",
]


class EchoChatModel(BaseChatModel):
    """Answers with the last message of its prompt (the context and question)."""

    @property
    def _llm_type(self) -> str:
        return "echo"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        reply = AIMessage(content=str(messages[-1].content))
        return ChatResult(generations=[ChatGeneration(message=reply)])


def comparable(answer: BudgetedAnswer) -> dict[str, Any]:
    return answer.model_dump()


async def test_a_thousand_concurrent_calls_equal_the_sequential_ones(
    tiny_flashrank_dir: Path,
) -> None:
    config = load_config()
    chain = create_budgeted_rag_chain(
        HybridRetriever.from_config(config, documents=load_sample_corpus()),
        EchoChatModel(),
        budget=ContextBudget.from_config(config, surface="chat"),
        reranker=FlashRankRerank(cache_dir=str(tiny_flashrank_dir), top_n=6),
        structured=True,
    )
    calls = [QUESTIONS[i % len(QUESTIONS)] for i in range(1000)]
    sequential = [comparable(chain.invoke(question)) for question in calls]
    concurrent = await asyncio.gather(*(chain.ainvoke(q) for q in calls))
    assert [comparable(answer) for answer in concurrent] == sequential
    # the comparison is not vacuous: answers differ by question and carry drops
    assert len({str(answer["answer"]) for answer in sequential}) == len(QUESTIONS)
    assert all(answer["dropped"] for answer in sequential)
    assert all(answer["answer"].count("\n> ") >= 1 for answer in sequential)
