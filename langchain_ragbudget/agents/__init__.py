"""Agents as LangChain 1.x builds them: a budget middleware and a retrieval tool.

Needs the `agents` extra (`langchain`); without it, importing this package raises
a `MissingExtraError` that says how to install it.
"""

from langchain_ragbudget.errors import require

require("langchain.agents", "agents", "the agent budget middleware")

from langchain_ragbudget.agents._fit import RequestReport  # noqa: E402
from langchain_ragbudget.agents._middleware import (  # noqa: E402
    AgentBudgetMiddleware,
    AgentBudgetState,
)
from langchain_ragbudget.agents._tool import create_retrieval_tool  # noqa: E402

__all__ = [
    "AgentBudgetMiddleware",
    "AgentBudgetState",
    "RequestReport",
    "create_retrieval_tool",
]
