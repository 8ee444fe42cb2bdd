"""Where a command writes: a rich console for tables and messages, stdout for JSON.

rich is imported when a console is made, so `ragbudget --help` does not load it.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


def make_console(*, to_stderr: bool) -> Console:
    """The console for tables and messages: stderr when stdout carries JSON.

    Off a terminal (make, CI logs) tables get 140 columns unless COLUMNS is set.
    """
    from rich.console import Console

    stream = sys.stderr if to_stderr else sys.stdout
    fixed = stream.isatty() or "COLUMNS" in os.environ
    return Console(stderr=to_stderr, width=None if fixed else 140)


def print_json(data: Any) -> None:
    """One JSON object: the only thing a --json command writes to stdout."""
    print(json.dumps(data, indent=2, ensure_ascii=False), flush=True)
