"""Agent memory's settings (the `memory:` section), where their defaults live."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictBool, StrictFloat, StrictInt

from langchain_ragbudget.config._fields import StrictModel


class MemorySettings(StrictModel):
    """How memories are recalled and ranked.

    Attributes:
        half_life_days: Recency halves every this many days since last *said*.
        min_score: Recalled memories scoring below this are dropped (recorded).
        k: Memories recalled per query, before supersession and the stale check.
        supersede: Of memories on one subject, keep the one said most recently.
        stale: `keep` (marked) or `drop` a memory whose source changed (recorded).
        importance: The importance of a memory remembered without one.
        restate_similarity: Cosine at which a statement restates a memory of the
            same subject instead of adding one, when both hold the same numbers,
            dates, times, names and negations (else it is a new memory).
    """

    half_life_days: StrictFloat = Field(30.0, gt=0)
    min_score: StrictFloat = Field(0.0, ge=-1, le=1)
    k: StrictInt = Field(8, ge=1, le=10_000)
    supersede: StrictBool = True
    stale: Literal["keep", "drop"] = "keep"
    importance: StrictFloat = Field(0.5, ge=0, le=1)
    restate_similarity: StrictFloat = Field(0.95, gt=0, le=1)
