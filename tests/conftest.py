"""Test set-up: point the package at this workplace's offline assets in ../shared.

The Makefile exports the same variables; this makes a bare `pytest` work too.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
MODEL_DIR = SHARED / "models" / "all-MiniLM-L6-v2" / "onnx"

if (MODEL_DIR / "model.onnx").is_file():
    os.environ.setdefault("RAGBUDGET_EMBEDDING_MODEL_PATH", str(MODEL_DIR))
if (SHARED / "tiktoken_cache").is_dir():
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(SHARED / "tiktoken_cache"))
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")


@pytest.fixture
def collection_name() -> str:
    """A fresh Chroma collection name: in-memory clients share one process."""
    return f"test-{uuid.uuid4().hex[:12]}"
