"""`ragbudget config`: the effective settings, validated, and where each is from."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from langchain_ragbudget.cli._output import print_json

if TYPE_CHECKING:
    from rich.console import Console


def run_config(args: argparse.Namespace, console: Console) -> None:
    """`ragbudget config`: the effective settings and where each one came from."""
    from langchain_ragbudget.cli._views import config_table
    from langchain_ragbudget.config._settings import explain_config

    effective = explain_config(args.config)
    prefix = ""
    if args.surface is not None:
        effective.config.surface(args.surface)  # an unknown surface fails here
        prefix = f"surfaces.{args.surface}."
    values = [v for v in effective.values if v.key.startswith(prefix)]
    overridden = environment_overrides(effective.config) if not prefix else {}
    if args.json:
        print_json(
            {
                "file": effective.file,
                "surface": args.surface,
                "environment": overridden,
                "settings": {
                    v.key: {
                        "value": v.value,
                        "origin": str(v.origin),
                        "source": v.source(effective.file),
                    }
                    for v in values
                },
            }
        )
        return
    console.print(config_table(effective, values))
    for key, (variable, value) in overridden.items():
        console.print(
            f"{key} is null in the configuration; in effect: {variable}={value} "
            "(`ragbudget doctor` shows every model, cache and variable in effect)",
            highlight=False,
            markup=False,
        )


def environment_overrides(config: Any) -> dict[str, tuple[str, str]]:
    """Settings left null whose value a run takes from the environment instead."""
    from langchain_ragbudget.retrieval._embeddings import MODEL_PATH_ENV

    found: dict[str, tuple[str, str]] = {}
    folder = os.environ.get(MODEL_PATH_ENV)
    embedding = config.embedding
    if embedding.provider == "fastembed" and not embedding.model_path and folder:
        found["embedding.model_path"] = (MODEL_PATH_ENV, folder)
    return found
