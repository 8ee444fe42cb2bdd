"""Agent memory's settings (the `memory:` section), where their defaults live."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr

from langchain_ragbudget.config._fields import StrictModel


class MemorySettings(StrictModel):
    """How memories are recalled and ranked.

    Attributes:
        store: Where memories live: a SQLite file, or a `postgresql://` URL
            (leave the password out: PGPASSWORD or ~/.pgpass supply it).
        half_life_days: Recency halves every this many days since last *said*.
            Supersession already lets the newer statement on a subject win, so
            recency only orders subjects: at 30 days a fact unsaid for half a
            year fell below newer memories on other subjects (bench_memory
            --stream: 71.5% of current facts served at 30 days, 97.3% at 90,
            99.9% at 180).
        min_score: Recalled memories scoring below this are dropped (recorded).
        k: Memories recalled per query, before supersession and the stale check.
        supersede: Of memories on one subject, keep the one said most recently.
        stale: `keep` (marked) or `drop` a memory whose source changed (recorded).
        importance: The importance of a memory remembered without one.
        restate_similarity: Cosine at which a statement restates a memory of the
            same subject instead of adding one, when both hold the same numbers,
            dates, times, names and negations (else it is a new memory).
    """

    store: StrictStr | None = None
    half_life_days: StrictFloat = Field(180.0, gt=0)
    min_score: StrictFloat = Field(0.0, ge=-1, le=1)
    k: StrictInt = Field(8, ge=1, le=10_000)
    supersede: StrictBool = True
    stale: Literal["keep", "drop"] = "keep"
    importance: StrictFloat = Field(0.5, ge=0, le=1)
    restate_similarity: StrictFloat = Field(0.95, gt=0, le=1)
