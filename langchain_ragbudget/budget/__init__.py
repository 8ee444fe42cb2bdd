"""The context budget: passages into a surface's tokens and count, on the record."""

from langchain_ragbudget.budget._context_budget import ContextBudget
from langchain_ragbudget.budget._render import Citation, ContextFormat
from langchain_ragbudget.budget._report import BudgetedContext, BudgetReport

__all__ = [
    "BudgetReport",
    "BudgetedContext",
    "Citation",
    "ContextBudget",
    "ContextFormat",
]
