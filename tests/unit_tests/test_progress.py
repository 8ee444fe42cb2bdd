"""Progress counts the real unit of work: positions that only grow and end at the total.

The index and evaluation tests run the real parts (fastembed ONNX, Chroma, bm25s),
with embedding batches made small (8) so a tiny corpus takes several batches, and a
bar fed batch sizes instead of positions would show it.
"""

import io
from pathlib import Path

import pytest
from langchain_core.documents import Document
from rich.console import Console

from langchain_ragbudget import load_config
from langchain_ragbudget.evaluation._beir import BeirDataset
from langchain_ragbudget.evaluation._cache import EMBEDDING_CORPUS
from langchain_ragbudget.evaluation._harness import evaluate
from langchain_ragbudget.index._hybrid_index import CHUNKING, EMBEDDING, HybridIndex
from langchain_ragbudget.progress import ProgressBars, StageProgress, prefixed
from langchain_ragbudget.retrieval import _dense as dense


class Recorder:
    """A ProgressCallback that keeps every report, in order."""

    def __init__(self) -> None:
        self.reports: list[tuple[str, int, int | None]] = []

    def __call__(self, stage: str, done: int, total: int | None) -> None:
        self.reports.append((stage, done, total))

    def stages(self) -> list[str]:
        return list(dict.fromkeys(stage for stage, _, _ in self.reports))

    def positions(self, stage: str) -> list[int]:
        return [done for name, done, _ in self.reports if name == stage]

    def totals(self, stage: str) -> set[int | None]:
        return {total for name, _, total in self.reports if name == stage}

    def assert_counts_up_to(self, stage: str, total: int) -> None:
        """Starts at 0, never goes back, ends at `total`, told up front."""
        positions = self.positions(stage)
        assert positions[0] == 0 and positions[-1] == total, positions
        assert positions == sorted(positions), positions
        assert self.totals(stage) == {total}


def test_stage_progress_turns_batch_sizes_into_positions() -> None:
    recorder = Recorder()
    stage = StageProgress(recorder, "embedding", 600).start()
    for batch in (256, 256, 88):
        stage.advance(batch)
    assert recorder.reports == [
        ("embedding", 0, 600),
        ("embedding", 256, 600),
        ("embedding", 512, 600),
        ("embedding", 600, 600),
    ]
    StageProgress(None, "nobody listens", 3).start().advance()  # no callback: fine


def test_prefixed_names_the_run() -> None:
    recorder = Recorder()
    report = prefixed(recorder, "64-token chunks: ")
    assert report is not None
    report("embedding", 1, 2)
    assert recorder.reports == [("64-token chunks: embedding", 1, 2)]
    assert prefixed(None, "x") is None


def test_progress_bars_draw_one_bar_per_stage_at_its_last_position() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100, color_system=None)
    with ProgressBars(console) as progress:
        progress("reading files", 0, 3)
        progress("reading files", 3, 3)
        progress("embedding chunks", 0, 700)
        progress("embedding chunks", 512, 700)
    last_frame = out.getvalue().rsplit("\x1b[2K", 2)[-2:]  # rich clears each line
    shown = "".join(last_frame)
    assert "reading files" in shown and "3/3" in shown
    assert "embedding chunks" in shown and "512/700" in shown


BATCH = 8


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dense, "ADD_BATCH_SIZE", BATCH)


def notes(count: int) -> list[Document]:
    return [
        Document(id=f"note-{i}", page_content=f"Note {i} says topic{i} matters.")
        for i in range(count)
    ]


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
@pytest.mark.usefixtures("small_batches")
def test_eval_embedding_progress_ends_at_the_corpus_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGBUDGET_CACHE_DIR", str(tmp_path / "cache"))
    corpus = notes(20)  # three embedding batches
    queries = {"q0": "what does note 7 say?", "q1": "topic12"}
    qrels = {"q0": {"note-7": 1}, "q1": {"note-12": 1}}
    dataset = BeirDataset("notes", corpus, queries, qrels)
    yaml = tmp_path / "offline.yml"
    yaml.write_text("rerank:\n  download: false\n")  # no FlashRank model here
    config = load_config(yaml)
    recorder = Recorder()
    evaluate(dataset, config, surfaces=["chat"], budgets=(256,), progress=recorder)
    assert recorder.stages() == [EMBEDDING_CORPUS, "queries"]
    recorder.assert_counts_up_to(EMBEDDING_CORPUS, 20)
    assert recorder.positions(EMBEDDING_CORPUS) == [0, 8, 16, 20]
    recorder.assert_counts_up_to("queries", 2)
    again = Recorder()
    evaluate(dataset, config, surfaces=["chat"], budgets=(256,), progress=again)
    assert again.stages() == ["queries"]  # the corpus comes from the cache


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
@pytest.mark.usefixtures("small_batches")
def test_upsert_chunks_every_document_then_counts_chunks_embedded(
    tmp_path: Path,
) -> None:
    config = load_config()
    config = config.model_copy(
        update={
            "index": config.index.model_copy(
                update={"chunk_size": 16, "chunk_overlap": 0}
            )
        }
    )
    documents = [
        Document(
            id=f"doc-{d}",
            page_content=" ".join(
                f"Sentence {s} of document {d} is about topic{d}x{s}." for s in range(6)
            ),
        )
        for d in range(4)
    ]
    recorder = Recorder()
    with HybridIndex.open(tmp_path / "ix", config) as index:
        summary = index.upsert(documents, progress=recorder)
        chunks = summary.chunks_added
        assert chunks == index.chunk_count > 2 * BATCH  # several embedding batches
        assert recorder.stages() == [CHUNKING, EMBEDDING]  # all chunked first
        recorder.assert_counts_up_to(CHUNKING, len(documents))
        recorder.assert_counts_up_to(EMBEDDING, chunks)
        assert len(recorder.positions(EMBEDDING)) == 1 + -(-chunks // BATCH)
        # a generator has no length: chunking counts without a total
        unchanged = Recorder()
        index.upsert((d for d in documents), progress=unchanged)
        assert unchanged.stages() == [CHUNKING]  # nothing left to embed
        assert unchanged.totals(CHUNKING) == {None}
        assert unchanged.positions(CHUNKING)[-1] == len(documents)
