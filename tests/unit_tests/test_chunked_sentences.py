"""The chunked evaluation takes the chunker and measures ranking, ceiling, overhead.

Real bm25s, Chroma, fastembed, nupunkt and tiktoken on the sample corpus.
"""

from pathlib import Path

import pytest
from test_chunked_cache import sample_dataset

from langchain_ragbudget import load_config
from langchain_ragbudget.evaluation._chunked import evaluate_chunked
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
