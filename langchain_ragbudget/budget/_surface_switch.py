"""Switching a budget's surface for one call: `configurable={"surface": "search"}`.

The call then runs on all of the named surface's settings, and its report says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig

from langchain_ragbudget.config._settings import SurfaceSettings
from langchain_ragbudget.errors import ConfigError

SURFACE_KEY = "surface"
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
    overrides: Mapping[str, Mapping[str, Any]],
    own: tuple[str, SurfaceSettings],
    surface: str,
) -> SurfaceSettings:
    """The settings of `surface`, with the keyword `overrides` given for it.

    `surfaces` is None when the budget was built from settings alone: it then
    knows only `own` (its surface name and settings). `overrides` maps a surface
    to the settings `from_config` was given for it: `max_docs=8` given for
    `chat` is chat's, and a call switched to `api` runs api's own settings.

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
    if overrides.get(surface):
        settings = SurfaceSettings.model_validate(
            {**settings.model_dump(), **overrides[surface]}
        )
    return settings
