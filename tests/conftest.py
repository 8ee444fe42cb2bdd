"""Test set-up: point the package at this workplace's offline assets in ../shared.

The Makefile exports the same variables; this makes a bare `pytest` work too.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
MODEL_DIR = SHARED / "models" / "all-MiniLM-L6-v2" / "onnx"

if (MODEL_DIR / "model.onnx").is_file():
    os.environ.setdefault("RAGBUDGET_EMBEDDING_MODEL_PATH", str(MODEL_DIR))
if (SHARED / "tiktoken_cache").is_dir():
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(SHARED / "tiktoken_cache"))
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")


@pytest.fixture(scope="session")
def tiny_flashrank_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A FlashRank cache folder holding a tiny model under the default model's name.

    FlashRank's weights cannot be downloaded here; this model runs FlashRank's real
    tokenizer and onnxruntime path (see tests/flashrank_tiny.py).
    """
    from flashrank_tiny import build_tiny_flashrank_model

    cache_dir = tmp_path_factory.mktemp("flashrank")
    build_tiny_flashrank_model(cache_dir, "ms-marco-MiniLM-L-12-v2", MODEL_DIR)
    return cache_dir
