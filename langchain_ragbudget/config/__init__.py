"""Configuration: one YAML file over the shipped surfaces, checked once, on load."""

from langchain_ragbudget.config._settings import (
    ConfigLike,
    RagBudgetConfig,
    SurfaceSettings,
    explain_config,
    load_config,
)
from langchain_ragbudget.config._tokens import count_tokens

__all__ = [
    "ConfigLike",
    "RagBudgetConfig",
    "SurfaceSettings",
    "count_tokens",
    "explain_config",
    "load_config",
]
