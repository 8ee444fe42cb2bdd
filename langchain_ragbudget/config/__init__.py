"""Configuration: one YAML file over the shipped surfaces, checked once, on load."""

from langchain_ragbudget.config._settings import (
    ConfigLike,
    RagBudgetConfig,
    SurfaceSettings,
    explain_config,
    load_config,
)

__all__ = [
    "ConfigLike",
    "RagBudgetConfig",
    "SurfaceSettings",
    "explain_config",
    "load_config",
]
