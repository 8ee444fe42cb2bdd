"""A missing embedding model is reported at once, not after fastembed's retries.

Real fastembed, an empty cache folder and no model path: fastembed alone retried
an unreachable hub for 42 s before failing. The package looks in the cache
without the network first, then checks once that the hub can be reached.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from langchain_ragbudget.errors import ModelUnavailableError
from langchain_ragbudget.retrieval._embeddings import (
    MODEL_PATH_ENV,
    FastEmbedEmbeddings,
)


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FastEmbedEmbeddings:
    monkeypatch.delenv(MODEL_PATH_ENV, raising=False)
    for proxy in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY"):
        monkeypatch.delenv(proxy, raising=False)
    return FastEmbedEmbeddings(cache_dir=str(tmp_path / "empty-cache"))


def test_offline_by_setting_fails_naming_it(
    no_model: FastEmbedEmbeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelUnavailableError) as raised:
        no_model.embed_query("x")
    message = str(raised.value)
    assert "HF_HUB_OFFLINE is set" in message and MODEL_PATH_ENV in message
    assert "empty-cache" in message


def test_an_unreachable_hub_fails_naming_it(
    no_model: FastEmbedEmbeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: closed
    with pytest.raises(ModelUnavailableError, match=r"127\.0\.0\.1 cannot be reached"):
        no_model.embed_documents(["x"])
