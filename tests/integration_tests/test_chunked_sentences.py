"""The chunked evaluation takes the chunker and measures ranking, ceiling, overhead.

Real bm25s, Chroma, fastembed, nupunkt and tiktoken on the sample corpus.
"""

from pathlib import Path

import pytest
from test_chunked_cache import sample_dataset

from langchain_ragbudget import BM25Retriever, load_config
from langchain_ragbudget.evaluation._beir import BeirDataset
from langchain_ragbudget.evaluation._chunked import (
    _chunk_index,
    document_ndcg,
    evaluate_chunked,
)
from langchain_ragbudget.evaluation._tables import chunked_caption, overhead_rows

pytestmark = [pytest.mark.needs_embedding_model, pytest.mark.needs_tiktoken]


def test_both_chunkers_measured_side_by_side(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGBUDGET_CACHE_DIR", str(tmp_path))
    base = load_config()
    results = {}
    for chunker in ("recursive", "sentences"):
        index = base.index.model_copy(update={"chunker": chunker})
        config = base.model_copy(update={"index": index})
        results[chunker] = evaluate_chunked(
            sample_dataset(), config, 32, budgets=[128, 1024]
        )
    assert len(list(tmp_path.iterdir())) == 2  # one cache per chunker
    sentences = results["sentences"]
    assert [r.chunker for r in results.values()] == ["recursive", "sentences"]
    assert sentences.evidence_gold > 0
    # whole sentences: evidence is split only where a sentence outgrows a chunk
    assert sentences.split_evidence == sentences.split_long
    assert sentences.ndcg_at_10 is not None and 0 < sentences.ndcg_at_10 <= 1
    for row in sentences.overhead.values():
        assert all(v is not None and 0 < v < 1 for v in row)
    assert "sentences" in chunked_caption(sentences)
    assert overhead_rows(sentences)[0][0] == "trim: overhead"
    unjoined = evaluate_chunked(
        sample_dataset(),
        base.model_copy(
            update={"index": base.index.model_copy(update={"chunker": "sentences"})}
        ),
        32,
        budgets=[128, 1024],
        join_neighbours=False,
    )
    assert not unjoined.joined and "not joined" in chunked_caption(unjoined)


def test_document_ndcg_ranks_ten_documents_however_few_chunks_are_packed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nDCG@10 reads a deep chunk ranking, not only the chunks handed to the budget.

    Every document is judged relevant, so any ranking of 10 documents scores 1;
    the 4 chunks packed at `k` 1 (64-token chunks) hold fewer than 10.
    """
    monkeypatch.setenv("RAGBUDGET_CACHE_DIR", str(tmp_path))
    base = load_config()
    sample = sample_dataset()
    everything = {doc.id: 1 for doc in sample.corpus if doc.id}
    dataset = BeirDataset(
        sample.name,
        sample.corpus,
        sample.queries,
        dict.fromkeys(sample.queries, everything),
        sample.rationales,
    )
    config = base.model_copy(
        update={"retrieval": base.retrieval.model_copy(update={"k": 1})}
    )
    result = evaluate_chunked(dataset, config, 64, budgets=[256])
    assert result.k == 4
    assert result.ndcg_at_10 == pytest.approx(1.0)


def test_per_query_ndcg_is_what_the_chunked_evaluation_averages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`bench_chunk_retrieval.py` compares the numbers `make eval` reports."""
    monkeypatch.setenv("RAGBUDGET_CACHE_DIR", str(tmp_path))
    config = load_config()
    per_query = document_ndcg(sample_dataset(), config, 64)
    result = evaluate_chunked(sample_dataset(), config, 64, budgets=[256])
    assert len(per_query) == len(sample_dataset().queries)
    assert result.ndcg_at_10 == pytest.approx(sum(per_query) / len(per_query))


def test_a_cached_chunk_index_saves_bm25_anew_when_its_settings_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """No vector depends on BM25's settings: the cache is kept, its BM25 re-saved."""
    monkeypatch.setenv("RAGBUDGET_CACHE_DIR", str(tmp_path))
    base = load_config()
    plain = base.model_copy(
        update={"sparse": base.sparse.model_copy(update={"index_title": False})}
    )
    _chunk_index(sample_dataset(), plain, 64, None).close()
    with caplog.at_level("WARNING"):
        titled = _chunk_index(sample_dataset(), base, 64, None)  # saved once, here
    bm25 = titled.as_retriever().retrievers[0]
    titled.close()
    assert isinstance(bm25, BM25Retriever) and bm25.index_title
    assert len(list(tmp_path.iterdir())) == 1  # the same cache, not a new one
    caplog.clear()
    with caplog.at_level("WARNING"):
        _chunk_index(sample_dataset(), base, 64, None).close()
    assert not caplog.records  # read as saved: nothing rebuilt
