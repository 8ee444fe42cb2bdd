"""The building blocks of the settings models: a strict base, checked field types.

A lax validator turns `true` into 1 and `.nan` into a comparison that is always
false, so settings use `Strict*` types and refuse NaN. A "package.module:Class"
provider is imported when the settings are checked, so a typo fails at load.
"""

from __future__ import annotations

import importlib
import math
from typing import Annotated, Any, cast

from pydantic import AfterValidator, BaseModel, ConfigDict, StrictStr


class StrictModel(BaseModel):
    """A frozen pydantic model that refuses unknown keys, NaN and infinity."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def import_provider(path: str) -> type[Any]:
    """The class a "package.module:Class" provider setting names.

    Raises:
        ValueError: It cannot be imported (saying why).
    """
    module_name, _, class_name = path.partition(":")
    try:
        return cast(
            type[Any], getattr(importlib.import_module(module_name), class_name)
        )
    except Exception as exc:  # a module may fail at import with anything
        raise ValueError(
            f"cannot import {path!r}: {type(exc).__name__}: {exc}"
        ) from exc


def _importable(path: str) -> str:
    if ":" in path:
        import_provider(path)
    return path


def _retriever_class(path: str) -> str:
    if ":" not in path:  # a built-in name: nothing to import (langchain_core
        return path  # is seconds, which reading a configuration must not cost)
    from langchain_core.retrievers import BaseRetriever

    if not issubclass(import_provider(path), BaseRetriever):
        raise ValueError(f"{path!r} is not a LangChain BaseRetriever subclass")
    return path


def _finite_tree(value: Any) -> Any:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"{item!r} is not a finite number")
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return value


# A built-in name, or a "package.module:Class" that imports.
Provider = Annotated[StrictStr, AfterValidator(_importable)]
# A built-in name, or a "package.module:Class" that is a LangChain retriever.
RetrieverProvider = Annotated[StrictStr, AfterValidator(_retriever_class)]
# Keyword arguments for a provider, free-form but finite.
Options = Annotated[dict[str, Any], AfterValidator(_finite_tree)]
