"""Keyword arguments checked against the names a component takes.

A pydantic model may ignore a keyword it has no field for, so `top_nn=3` would do
nothing; here it raises `TypeError`, as Python does for a function.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any


def refuse_unknown(owner: str, given: Iterable[str], known: Iterable[str]) -> None:
    """Raise `TypeError` for the first name of `given` that is not in `known`.

    Args:
        owner: What took the keywords, e.g. `FlashRankRerank.from_config()`.
        given: The keyword names passed.
        known: The names it takes.

    Raises:
        TypeError: Naming the keyword, the closest choice and every choice.
    """
    choices = sorted(set(known))
    for name in given:
        if name in choices:
            continue
        close = difflib.get_close_matches(str(name), choices, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise TypeError(
            f"{owner} got an unexpected keyword argument {name!r}{hint} "
            f"(valid: {', '.join(choices)})"
        )


def field_names(model: Any) -> set[str]:
    """The keywords a pydantic model class takes: its fields and their aliases."""
    names = set(model.model_fields)
    names.update(
        field.alias for field in model.model_fields.values() if field.alias is not None
    )
    return names


def known_keywords(model: Any, data: Any) -> Any:
    """A `mode="before"` validator body: refuse keywords `model` has no field for."""
    if isinstance(data, dict):
        refuse_unknown(model.__name__, data, field_names(model))
    return data
