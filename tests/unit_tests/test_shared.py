"""One loaded model per process: shared by instances, loaded once under threads."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from langchain_ragbudget.retrieval._embeddings import FastEmbedEmbeddings
from langchain_ragbudget.retrieval._model_cache import shared
from langchain_ragbudget.retrieval._rerank import FlashRankRerank


def test_a_key_is_loaded_once_when_threads_ask_first_together() -> None:
    loads: list[int] = []
    start = threading.Barrier(8)

    def load() -> object:
        loads.append(1)
        time.sleep(0.05)  # long enough for every thread to be waiting
        return object()

    def ask(_: int) -> object:
        start.wait()
        return shared(("test", "once", id(loads)), load)

    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(ask, range(8)))
    assert len(loads) == 1
    assert all(instance is got[0] for instance in got)


def test_a_failed_load_is_tried_again_and_other_keys_are_apart() -> None:
    key = ("test", "fails-then-works", object())
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("model file half written")
        return "model"

    with pytest.raises(RuntimeError):
        shared(key, flaky)
    assert shared(key, flaky) == "model" and len(calls) == 2
    assert shared(("test", "other", object()), lambda: "other") == "other"


@pytest.mark.needs_embedding_model
def test_two_embedders_with_the_same_settings_share_one_model() -> None:
    first, second = FastEmbedEmbeddings(), FastEmbedEmbeddings()
    with ThreadPoolExecutor(2) as pool:
        vectors = list(pool.map(lambda e: e.embed_query("solar"), (first, second)))
    assert vectors[0] == vectors[1]
    assert first._text_embedding() is second._text_embedding()
    other = FastEmbedEmbeddings(threads=1)  # different settings: its own session
    assert other._text_embedding() is not first._text_embedding()


def test_two_rerankers_on_one_model_share_it(tiny_flashrank_dir: Path) -> None:
    first = FlashRankRerank(cache_dir=str(tiny_flashrank_dir))
    second = FlashRankRerank(cache_dir=str(tiny_flashrank_dir), top_n=2)
    assert first.available and first._ranker is second._ranker
