"""Agent memory's settings (the `memory:` section), the one place their defaults live.

`MemoryStore` and `MemoryRetriever` take their defaults from here. The per-surface
shares (`max_memories`, `memory_tokens`) are surface settings, in `SurfaceSettings`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictBool, StrictFloat, StrictInt

from langchain_ragbudget.config._fields import StrictModel


class MemorySettings(StrictModel):
    """How memories are recalled and ranked.

    Attributes:
        half_life_days: A memory's recency factor halves every this many days
            since it was last *said* (never since it was created or last read).
        min_score: Recalled memories scoring below this are dropped, with a
            `memory / under_score_floor` record.
        k: Memories recalled per query, best score first, before supersession,
            the stale check and the surface's share.
        supersede: Among recalled memories with the same subject, keep the one
            said most recently and drop the others (`memory / superseded`).
        stale: What to do with a memory whose source document changed or left
            the index: `keep` it with a visible marker, or `drop` it (both
            recorded `memory / stale_source`).
        importance: The importance of a memory remembered without one.
        restate_similarity: Remembering a statement whose embedding is at least
            this similar (cosine) to a memory of the same subject restates that
            memory instead of adding one (the same normalised text always does).
    """

    half_life_days: StrictFloat = Field(30.0, gt=0)
    min_score: StrictFloat = Field(0.0, ge=-1, le=1)
    k: StrictInt = Field(8, ge=1, le=10_000)
    supersede: StrictBool = True
    stale: Literal["keep", "drop"] = "keep"
    importance: StrictFloat = Field(0.5, ge=0, le=1)
    restate_similarity: StrictFloat = Field(0.95, gt=0, le=1)
