"""Test set-up: find the offline assets, and skip the tests whose asset is absent.

This workplace keeps the assets in ../shared, beside the checkout; a clone elsewhere
has none of them, and no test may then fail or try to download. Three markers
(registered in pyproject.toml) say which asset a test needs; each is available when:

* ``needs_embedding_model``: RAGBUDGET_EMBEDDING_MODEL_PATH, or when it is unset
  ../shared/models/all-MiniLM-L6-v2/onnx, is a folder holding model.onnx. Tests using
  the ``tiny_flashrank_dir`` fixture need it too (it borrows that folder's tokenizer).
* ``needs_tiktoken`` (optionally ``needs_tiktoken("o200k_base", ...)``; bare, it
  means cl100k_base and o200k_base): the folder tiktoken reads (TIKTOKEN_CACHE_DIR,
  set here to ../shared/tiktoken_cache when that exists; else DATA_GYM_CACHE_DIR;
  else <tmp>/data-gym-cache) holds the encoding's file, named by the sha1 of its
  download URL.
* ``needs_scifact``: RAGBUDGET_SCIFACT_DIR, or ../shared/data/scifact, holds
  queries.jsonl and corpus.jsonl(.gz).

Nothing is downloaded to decide, even on a connected machine: a missing asset skips
its tests with a reason that says where to put it (`pytest -rs` lists them).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
MODEL_DIR = SHARED / "models" / "all-MiniLM-L6-v2" / "onnx"
MODEL_ENV = "RAGBUDGET_EMBEDDING_MODEL_PATH"
SCIFACT_ENV = "RAGBUDGET_SCIFACT_DIR"
TIKTOKEN_ENCODINGS = ("cl100k_base", "o200k_base")
TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"

if (MODEL_DIR / "model.onnx").is_file():
    os.environ.setdefault(MODEL_ENV, str(MODEL_DIR))
if (SHARED / "tiktoken_cache").is_dir():
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(SHARED / "tiktoken_cache"))
if (SHARED / "data" / "scifact").is_dir():
    os.environ.setdefault(SCIFACT_ENV, str(SHARED / "data" / "scifact"))
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")


def embedding_model_dir() -> Path | None:
    """The local ONNX folder the package will load, or None when there is none."""
    configured = os.environ.get(MODEL_ENV)
    if configured and (Path(configured) / "model.onnx").is_file():
        return Path(configured)
    return None


def tiktoken_cache_dir() -> Path | None:
    """The folder tiktoken reads cached encodings from (None: caching is off)."""
    for name in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if name in os.environ:
            return Path(os.environ[name]) if os.environ[name] else None
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def missing_tiktoken_encodings(names: tuple[str, ...]) -> list[str]:
    cache = tiktoken_cache_dir()
    return [
        name
        for name in names
        if cache is None
        or not (
            cache / hashlib.sha1(TIKTOKEN_URL.format(name).encode()).hexdigest()
        ).is_file()
    ]


def scifact_dir() -> Path | None:
    folder = Path(os.environ.get(SCIFACT_ENV, SHARED / "data" / "scifact"))
    corpus = ("corpus.jsonl", "corpus.jsonl.gz")
    has_corpus = any((folder / name).is_file() for name in corpus)
    return folder if has_corpus and (folder / "queries.jsonl").is_file() else None


MODEL_REASON = (
    f"embedding model not available: put the all-MiniLM-L6-v2 ONNX export in "
    f"{MODEL_DIR} or set {MODEL_ENV} to a folder holding its model.onnx"
)
SCIFACT_REASON = (
    f"SciFact not available: put it in {SHARED / 'data' / 'scifact'} "
    f"or set {SCIFACT_ENV}"
)


def tiktoken_reason(missing: list[str]) -> str:
    return (
        f"tiktoken encoding(s) {', '.join(missing)} not available: no file in "
        f"{tiktoken_cache_dir()}; put them in {SHARED / 'tiktoken_cache'} or set "
        "TIKTOKEN_CACHE_DIR (files named by the sha1 of the download URL)"
    )


def pytest_report_header(config: pytest.Config) -> str:
    missing = missing_tiktoken_encodings(TIKTOKEN_ENCODINGS)
    return (
        f"ragbudget assets: embedding model {embedding_model_dir() or 'MISSING'}; "
        f"tiktoken {'MISSING ' + ', '.join(missing) if missing else 'ok'} "
        f"({tiktoken_cache_dir()}); SciFact {scifact_dir() or 'MISSING'}"
    )


def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> None:
    has_model = embedding_model_dir() is not None
    has_scifact = scifact_dir() is not None
    for item in items:
        if "tiny_flashrank_dir" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.needs_embedding_model)
        if not has_model and item.get_closest_marker("needs_embedding_model"):
            item.add_marker(pytest.mark.skip(reason=MODEL_REASON))
        if not has_scifact and item.get_closest_marker("needs_scifact"):
            item.add_marker(pytest.mark.skip(reason=SCIFACT_REASON))
        wanted = tuple(
            name
            for marker in item.iter_markers("needs_tiktoken")
            for name in (marker.args or TIKTOKEN_ENCODINGS)
        )
        if wanted and (missing := missing_tiktoken_encodings(wanted)):
            item.add_marker(pytest.mark.skip(reason=tiktoken_reason(missing)))


@pytest.fixture(scope="session")
def tiny_flashrank_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A FlashRank cache folder holding a tiny model under the default model's name.

    FlashRank's weights cannot be downloaded here; this model runs FlashRank's real
    tokenizer and onnxruntime path (see tests/flashrank_tiny.py), with the tokenizer
    of the local embedding model.
    """
    from flashrank_tiny import build_tiny_flashrank_model

    model_dir = embedding_model_dir()
    if model_dir is None:
        pytest.skip(MODEL_REASON)
    cache_dir = tmp_path_factory.mktemp("flashrank")
    build_tiny_flashrank_model(cache_dir, "ms-marco-MiniLM-L-12-v2", model_dir)
    return cache_dir


@pytest.fixture(scope="session")
def postgres_host() -> Iterator[str]:
    """A throwaway PostgreSQL cluster's socket folder (skips when none can start)."""
    import postgres_cluster

    if reason := postgres_cluster.why_not():
        pytest.skip(f"no PostgreSQL test cluster: {reason}")
    with postgres_cluster.cluster() as host:
        yield host


@pytest.fixture(scope="session")
def new_memory_store(tmp_path_factory: pytest.TempPathFactory) -> Callable[[], Path]:
    """A factory of empty memory store locations, a new SQLite file per call.

    tests/integration_tests/test_memory_postgres.py overrides it with new schemas
    on a PostgreSQL server and runs the memory tests that use it again.
    """
    return lambda: tmp_path_factory.mktemp("memory") / "memory.sqlite"
