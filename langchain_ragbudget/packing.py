"""Packing whole passages into a token and count budget: pure functions.

No passage is ever cut: each is kept verbatim or dropped with a reason. Policy `skip`
(default) lets smaller passages after an overflow still fit; `stop` stops at the
first overflow, as a plain truncator does. `min_docs` keeps the top passages
even when they alone exceed the budget, and says so through `over_budget`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from langchain_ragbudget.ledger import DropReason

Policy = Literal["skip", "stop"]


@dataclass(frozen=True)
class PackItem:
    """One candidate passage, as the packer sees it.

    `tokens` is the rendered passage; `group_tokens` the header its citation group
    costs if this passage is the group's first kept one; equal `content_key`s (the
    passage text) mark duplicates.
    """

    tokens: int
    group: str
    group_tokens: int
    content_key: str


@dataclass(frozen=True)
class PackResult:
    """Indices kept (in input order), indices dropped with reasons, tokens used."""

    kept: tuple[int, ...]
    dropped: tuple[tuple[int, DropReason], ...]
    tokens_used: int
    over_budget: bool


def pack(
    items: Sequence[PackItem],
    *,
    max_tokens: int,
    max_docs: int,
    policy: Policy = "skip",
    min_docs: int = 1,
) -> PackResult:
    """Keep items in rank order while they fit; every other item gets a reason."""
    kept: list[int] = []
    dropped: list[tuple[int, DropReason]] = []
    groups: set[str] = set()
    contents: set[str] = set()
    used = 0
    over_budget = False
    stopped = False
    for index, item in enumerate(items):
        cost = item.tokens + (0 if item.group in groups else item.group_tokens)
        if item.content_key in contents:
            dropped.append((index, DropReason.DUPLICATE))
        elif len(kept) >= max_docs:
            dropped.append((index, DropReason.MAX_DOCS))
        elif stopped:
            dropped.append((index, DropReason.MAX_TOKENS))
        elif used + cost <= max_tokens or len(kept) < min_docs:
            over_budget = over_budget or used + cost > max_tokens
            kept.append(index)
            groups.add(item.group)
            contents.add(item.content_key)
            used += cost
        else:
            dropped.append((index, DropReason.MAX_TOKENS))
            stopped = policy == "stop"
    return PackResult(tuple(kept), tuple(dropped), used, over_budget)
