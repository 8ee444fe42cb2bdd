"""The context budget: passages into a surface's tokens and count, on the record."""

from langchain_ragbudget.budget._context_budget import ContextBudget
from langchain_ragbudget.budget._history import message_tokens, prompt_tokens
from langchain_ragbudget.budget._prompt import DEFAULT_PROMPT, MEMORY_PROMPT
from langchain_ragbudget.budget._render import Citation, ContextFormat
from langchain_ragbudget.budget._report import BudgetedContext, BudgetReport

__all__ = [
    "DEFAULT_PROMPT",
    "MEMORY_PROMPT",
    "BudgetReport",
    "BudgetedContext",
    "Citation",
    "ContextBudget",
    "ContextFormat",
    "message_tokens",
    "prompt_tokens",
]
