"""The FlashRank stage, on FlashRank's real code path with a tiny test-built model.

FlashRank's weights cannot be downloaded here (tests/flashrank_tiny.py explains the
stand-in): its score is sigmoid(number of query tokens found in the passage).
"""

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document

from langchain_ragbudget import load_config
from langchain_ragbudget.errors import InvalidInputError, ModelUnavailableError
from langchain_ragbudget.ledger._records import (
    CandidateList,
    DropReason,
    DropRecord,
    Stage,
)
from langchain_ragbudget.retrieval._rerank import FlashRankRerank

QUERY = "how do solar panels generate electricity"
DOCS = [
    Document(
        id="bread",
        page_content="A recipe for bread.",
        metadata={"fused_rank": 1, "source": "r.md"},
    ),
    Document(
        id="solar",
        page_content="Solar panels generate electricity from sunlight.",
        metadata={"fused_rank": 2},
    ),
    Document(
        id="experts", page_content="Panels of experts met.", metadata={"fused_rank": 3}
    ),
]
UPSTREAM = DropRecord(
    "old", Stage.FUSION, DropReason.FUSION_CUT, 9, Document(page_content="o")
)


def reranker(cache: Path, **kwargs: Any) -> FlashRankRerank:
    return FlashRankRerank(cache_dir=str(cache), **kwargs)


def test_scores_ids_and_metadata_survive(tiny_flashrank_dir: Path) -> None:
    out = reranker(tiny_flashrank_dir, top_n=3).compress_documents(DOCS, QUERY)
    assert [d.id for d in out] == ["solar", "experts", "bread"]
    assert [d.metadata["rerank_rank"] for d in out] == [1, 2, 3]
    assert all(type(d.metadata["rerank_score"]) is float for d in out)
    assert out[2].metadata["source"] == "r.md" and out[0].metadata["fused_rank"] == 2
    json.dumps([d.metadata for d in out])
    assert DOCS[1].metadata == {"fused_rank": 2}  # inputs untouched


def test_top_n_and_floor_drops_are_recorded(tiny_flashrank_dir: Path) -> None:
    upstream = DropRecord(
        "old", Stage.FUSION, DropReason.FUSION_CUT, 9, Document(page_content="o")
    )
    stage = reranker(tiny_flashrank_dir, top_n=1, score_floor=0.6)
    out = stage.compress_documents(CandidateList(DOCS, [upstream]), QUERY)
    assert [d.id for d in out] == ["solar"]
    assert [(r.key, r.stage, r.reason, r.rank) for r in out.drops] == [
        ("old", Stage.FUSION, DropReason.FUSION_CUT, 9),
        ("experts", Stage.RERANK, DropReason.RERANKED_OUT, 2),
        ("bread", Stage.RERANK, DropReason.SCORE_FLOOR, 3),
    ]
    assert "floor 0.6" in out.drops[2].detail


def test_runnable_form_in_a_chain(tiny_flashrank_dir: Path) -> None:
    out = reranker(tiny_flashrank_dir, top_n=2).invoke(
        {"question": QUERY, "documents": DOCS}
    )
    assert [d.id for d in out["documents"]] == ["solar", "experts"] and out[
        "question"
    ] == QUERY
    with pytest.raises(InvalidInputError, match="'question'"):
        reranker(tiny_flashrank_dir).invoke({"documents": DOCS})


def test_empty_input(tiny_flashrank_dir: Path) -> None:
    assert reranker(tiny_flashrank_dir).compress_documents([], QUERY) == []
    out = reranker(tiny_flashrank_dir).compress_documents(
        CandidateList([], [UPSTREAM]), QUERY
    )
    assert out == [] and out.drops == [UPSTREAM]  # upstream records survive


def test_missing_model_offline_is_skipped_and_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_network(*args: Any, **kwargs: Any) -> None:
        raise OSError("network disabled by the test")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    stage = reranker(tmp_path / "empty")
    assert not stage.available
    out = stage.compress_documents(CandidateList(DOCS, [UPSTREAM]), QUERY)
    assert [d.id for d in out] == ["bread", "solar", "experts"]  # order unchanged
    assert out.drops == [UPSTREAM]  # a skipped stage keeps the upstream records
    (skip,) = out.skipped
    assert skip.stage == Stage.RERANK and "could not download" in skip.reason
    assert not (tmp_path / "empty" / "ms-marco-MiniLM-L-12-v2").exists()


def test_missing_model_can_fail_at_start_up(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailableError, match="download is off"):
        reranker(tmp_path, download=False, on_unavailable="error")
    with pytest.raises(ModelUnavailableError, match="not a FlashRank cross-encoder"):
        reranker(tmp_path, model="no-such-model", on_unavailable="error")


def test_default_cache_is_the_user_cache_not_tmp(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RAGBUDGET_CACHE_DIR", str(tmp_path / "cache"))
    stage = FlashRankRerank(download=False)
    assert stage.model_cache_dir == tmp_path / "cache" / "flashrank"


def test_from_config_takes_the_whole_config_like_every_component(
    tiny_flashrank_dir: Path, tmp_path: Path
) -> None:
    yaml_file = tmp_path / "ragbudget.yml"
    yaml_file.write_text(
        f"retrieval:\n  id_key: doc_key\nrerank:\n  top_n: 2\n"
        f"  cache_dir: {json.dumps(str(tiny_flashrank_dir))}\n"
    )
    stage = FlashRankRerank.from_config(yaml_file)
    assert stage is not None
    assert stage.available and stage.top_n == 2 and stage.id_key == "doc_key"
    same = FlashRankRerank.from_config(load_config(yaml_file), top_n=3)
    assert same is not None
    assert same.available and same.top_n == 3 and same.id_key == "doc_key"
