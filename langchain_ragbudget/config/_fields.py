"""The building blocks of the settings models: a strict base, checked field types.

YAML 1.1 reads `yes` as a boolean and `.nan` as a float, and a lax validator would
turn those into `1` and a comparison that is always false. So every settings model
is a `StrictModel`: its fields use `Strict*` types (no `yes` for 1, no "60" for
60.0, no 2.5 for an int; an int for a float is still fine), NaN and infinity are
refused (inside free-form `Options` too), an unknown key is an error, and a model
cannot be changed once made. A provider given as "package.module:Class" is
imported when the settings are checked, so a typo fails at load time.
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

    Raises ValueError saying why it cannot be imported.
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
    """Refuse NaN and infinity inside free-form `options` too."""
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
