"""`ragbudget config`: the effective settings, validated, and where each is from."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from langchain_ragbudget.cli._output import print_json

if TYPE_CHECKING:
    from rich.console import Console


def run_config(args: argparse.Namespace, console: Console) -> None:
    """`ragbudget config`: the effective settings and where each one came from."""
    from langchain_ragbudget.cli._views import config_table
    from langchain_ragbudget.config import explain_config

    effective = explain_config(args.config)
    prefix = ""
    if args.surface is not None:
        effective.config.surface(args.surface)  # an unknown surface fails here
        prefix = f"surfaces.{args.surface}."
    values = [v for v in effective.values if v.key.startswith(prefix)]
    if args.json:
        print_json(
            {
                "file": effective.file,
                "surface": args.surface,
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
