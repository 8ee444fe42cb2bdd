"""What `ragbudget eval` writes besides its tables: Markdown, and weak-evidence YAML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from langchain_ragbudget.config._disk import atomic_write_text
from langchain_ragbudget.evaluation._tables import weak_caption
from langchain_ragbudget.evaluation._weak_evidence import WeakEvidence

QUALITY_START = "<!-- ragbudget-eval:start -->"
QUALITY_END = "<!-- ragbudget-eval:end -->"


def update_section(path: Path, section: str) -> None:
    """Replace the text between the eval markers of `path` (append if absent)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    block = f"{QUALITY_START}\n{section}{QUALITY_END}"
    if QUALITY_START in text and QUALITY_END in text:
        head, rest = text.split(QUALITY_START, 1)
        tail = rest.split(QUALITY_END, 1)[1]
        text = head + block + tail
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    atomic_write_text(path, text)


def weak_evidence_yaml(weak: WeakEvidence, surfaces: list[str]) -> str:
    """A YAML to merge over a configuration: the combined method on `surfaces`."""
    section: dict[str, Any] = {
        "method": "combined",
        "precision": weak.target_precision,
        "combined": weak.model.model_dump(),
    }
    if weak.calibrated_with is not None:  # so a budget with other models says stale
        section["calibrated_with"] = weak.calibrated_with.model_dump()
    header = (
        f"# written by `ragbudget eval`: the combined weak-evidence signal, "
        f"{weak_caption(weak)}\n"
    )
    body = {"surfaces": {name: {"weak_evidence": section} for name in surfaces}}
    return header + yaml.safe_dump(body, sort_keys=False, width=1_000)
