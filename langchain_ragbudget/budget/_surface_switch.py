"""Switching a budget's surface for one call, through the run's config.

`chain.with_config(configurable={"surface": "search"})` reaches every stage's
`RunnableConfig`; the budget reads the name there and runs that call on the named
surface's settings, all of them, and labels its report with that name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig

from langchain_ragbudget.config._settings import SurfaceSettings
from langchain_ragbudget.errors import ConfigError

SURFACE_KEY = "surface"
"""The key of `RunnableConfig["configurable"]` that names the surface of a call."""

_SOURCE = "<run config>"


def requested_surface(config: RunnableConfig | None) -> str | None:
    """The surface the run's config names, if any."""
    surface = ((config or {}).get("configurable") or {}).get(SURFACE_KEY)
    if surface is not None and not isinstance(surface, str):
        raise ConfigError(
            _SOURCE, f"configurable.{SURFACE_KEY}", surface, "not a surface name"
        )
    return surface


def surface_settings(
    surfaces: Mapping[str, SurfaceSettings] | None,
    overrides: Mapping[str, Any],
    own: tuple[str, SurfaceSettings],
    surface: str,
) -> SurfaceSettings:
    """The settings of `surface`, with a budget's keyword `overrides` applied.

    Args:
        surfaces: Every surface of the budget's config; None when the budget was
            built from settings alone, and then knows only `own`.
        overrides: Surface settings given as keywords; they apply on any surface.
        own: The budget's own surface and settings.
        surface: The surface asked for.

    Raises:
        ConfigError: No such surface, or the budget knows only its own.
        ValidationError: An override is not valid on that surface.
    """
    if surfaces is None:
        if surface == own[0]:
            return own[1]
        raise ConfigError(
            _SOURCE,
            f"configurable.{SURFACE_KEY}",
            surface,
            f"this budget knows only its surface {own[0]!r}; build it with "
            "ContextBudget.from_config to switch surfaces at run time",
        )
    if surface not in surfaces:
        known = ", ".join(sorted(surfaces))
        raise ConfigError(
            _SOURCE,
            f"configurable.{SURFACE_KEY}",
            surface,
            f"unknown surface; known: {known}",
        )
    settings = surfaces[surface]
    if overrides:
        settings = SurfaceSettings.model_validate(
            {**settings.model_dump(), **overrides}
        )
    return settings
