"""The whole pipeline as one LCEL chain: retrieve, rerank, budget, answer.

    question -> {question, documents} -> FlashRankRerank -> ContextBudget -> chain

Each stage is an ordinary Runnable; the drop records ride along in the documents'
`CandidateList`, so nothing here wires the ledger by hand.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseLanguageModel
from langchain_core.prompts import BasePromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableParallel, RunnablePassthrough

from langchain_ragbudget.budget import ContextBudget
from langchain_ragbudget.chain import create_budgeted_stuff_chain
from langchain_ragbudget.drops import ledger_scope
from langchain_ragbudget.rerank import FlashRankRerank


def create_budgeted_rag_chain(
    retriever: BaseRetriever,
    llm: BaseLanguageModel[Any] | None = None,
    *,
    budget: ContextBudget,
    reranker: FlashRankRerank | None = None,
    prompt: BasePromptTemplate | None = None,
    structured: bool = False,
) -> Runnable[str, Any]:
    """A question in; an answer with warnings out (or, without `llm`, the state).

    Without a model the chain ends at the budget and returns
    `{"question", "documents", "context"}`: the prompt that would be sent can be
    rendered from it (see `chain.prompt_inputs`).
    """
    chain: Runnable[Any, Any] = RunnableParallel(
        question=RunnablePassthrough(), documents=retriever
    )
    if reranker is not None:
        chain = chain | reranker
    chain = chain | budget
    if llm is not None:
        chain = chain | create_budgeted_stuff_chain(llm, prompt, structured=structured)
    return ledger_scope(chain)
