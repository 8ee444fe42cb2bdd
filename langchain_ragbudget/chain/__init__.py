"""The chains: the budgeted stuff chain and the whole pipeline as one LCEL chain."""

from langchain_ragbudget.chain._pipeline import (
    Explained,
    build_chat_model,
    create_budgeted_rag_chain,
    explain,
)
from langchain_ragbudget.chain._stuff import BudgetedAnswer, create_budgeted_stuff_chain

__all__ = [
    "BudgetedAnswer",
    "Explained",
    "build_chat_model",
    "create_budgeted_rag_chain",
    "create_budgeted_stuff_chain",
    "explain",
]
