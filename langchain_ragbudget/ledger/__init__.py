"""The drop ledger: how candidates are keyed, named, checked, recorded and shown.

The record types load on first use (PEP 562), so the configuration can read the
metadata keys without loading LangChain's runnables.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_ragbudget.ledger._records import (
        CandidateList,
        DropReason,
        DropRecord,
        RunLedger,
        ScoreIssue,
        Stage,
        StageSkip,
        TrimRecord,
        ledger_scope,
    )

__all__ = [
    "CandidateList",
    "DropReason",
    "DropRecord",
    "RunLedger",
    "ScoreIssue",
    "Stage",
    "StageSkip",
    "TrimRecord",
    "ledger_scope",
]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}._records"), name)
    globals()[name] = value
    return value
