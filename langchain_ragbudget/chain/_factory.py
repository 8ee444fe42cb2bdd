"""Configuration to objects on top of the stages: a surface's budget, the chat model."""

from __future__ import annotations

import os
from collections.abc import Sequence

from langchain_core.language_models import BaseChatModel

from langchain_ragbudget.budget._context_budget import ContextBudget
from langchain_ragbudget.config._settings import LlmSettings, as_config
from langchain_ragbudget.errors import ConfigError, MissingExtraError, require
from langchain_ragbudget.retrieval._factory import (
    RETRIEVER_NAMES,
    ConfigLike,
    produced_score_keys,
)

DEFAULT_CHAT_MODEL = "openai:gpt-4o-mini"  # when only OPENAI_API_KEY is set


def build_budget(
    config: ConfigLike = None,
    *,
    surface: str = "chat",
    names: Sequence[str] = RETRIEVER_NAMES,
) -> ContextBudget:
    """The budget of `surface`, every surface's weak-evidence keys checked.

    Every surface is checked, not only `surface`: the budget can switch to any of
    them per call (`with_config(configurable={"surface": ...})`).

    Args:
        config: A loaded config, a YAML path, or None for the defaults.
        surface: The surface the budget runs on unless a call switches it.
        names: The retrievers whose scores a weak-evidence check may read.

    Raises:
        ConfigError: The surface is unknown, or a surface's weak-evidence check
            names a score that no stage writes (it would never fire). A combined
            model's unknown features are refused when it is loaded (`weak_model`).
    """
    config = as_config(config)
    budget = ContextBudget.from_config(config, surface=surface)
    known = produced_score_keys(names)
    for name, settings in config.surfaces.items():
        for key, threshold in settings.weak_evidence.thresholds.items():
            if key not in known:
                raise ConfigError(
                    config.source,
                    f"surfaces.{name}.weak_evidence.thresholds.{key}",
                    threshold,
                    f"no stage writes this score; known: {', '.join(sorted(known))}",
                )
    return budget


def build_chat_model(settings: LlmSettings | ConfigLike = None) -> BaseChatModel | None:
    """The configured chat model; gpt-4o-mini when only OPENAI_API_KEY is set.

    Args:
        settings: The `llm` section of a loaded config, or a config (a loaded one,
            a YAML file, or None for the shipped defaults).

    Returns:
        The model, or None when none is configured.

    Raises:
        MissingExtraError: The model's provider package is not installed (the
            `llm` extra holds the OpenAI one).
    """
    if not isinstance(settings, LlmSettings):
        settings = as_config(settings).llm
    name = settings.model
    if name is None and os.environ.get("OPENAI_API_KEY"):
        name = DEFAULT_CHAT_MODEL
    if name is None:
        return None
    require("langchain_classic", "llm", f"chat model {name!r}")
    from langchain_classic.chat_models import init_chat_model

    try:
        model: BaseChatModel = init_chat_model(
            name,
            temperature=settings.temperature,
            max_tokens=settings.max_tokens,
            timeout=settings.timeout,
        )
    except ImportError as exc:  # the provider's own package (langchain-openai...)
        raise MissingExtraError(
            f"chat model {name!r} needs its provider's package ({exc}); for OpenAI: "
            "pip install 'langchain-ragbudget[llm]'"
        ) from exc
    return model
