"""Agent memory beside the documents: a store, and a retriever on the same budget.

Each name loads its module on first use (PEP 562): a chain without memory loads
neither the store nor numpy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_ragbudget.memory._retriever import (
        Memory,
        MemoryRetriever,
        MemoryStore,
        MemoryStoreError,
    )

__all__ = [
    "Memory",
    "MemoryRetriever",
    "MemoryStore",
    "MemoryStoreError",
]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}._retriever"), name)
    globals()[name] = value
    return value
