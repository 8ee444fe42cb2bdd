"""Configuration: one YAML file over the shipped defaults, checked once, on load."""

from langchain_ragbudget.config._settings import (
    RagBudgetConfig,
    SurfaceSettings,
    explain_config,
    load_config,
    load_surface,
)

__all__ = [
    "RagBudgetConfig",
    "SurfaceSettings",
    "explain_config",
    "load_config",
    "load_surface",
]
