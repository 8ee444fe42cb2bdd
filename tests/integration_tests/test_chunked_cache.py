"""A chunked evaluation cache whose build was killed is completed by the next run.

The build runs in a real process that SIGKILLs itself once the first batch of
vectors is written (no version committed yet, as when a user kills `ragbudget
eval`); the next `evaluate_chunked` in this process must finish that cache
silently and give the result of a clean build. Real bm25s, Chroma, fastembed.
"""

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from langchain_ragbudget import load_config
from langchain_ragbudget.evaluation._beir import BeirDataset
from langchain_ragbudget.evaluation._chunked import evaluate_chunked
from langchain_ragbudget.evidence._sentences import sentences
from langchain_ragbudget.sample import load_sample_corpus, load_sample_questions

pytestmark = [pytest.mark.needs_embedding_model, pytest.mark.needs_tiktoken]

CHUNK_SIZE = 64
BUDGETS = [128, 1024]


def sample_dataset() -> BeirDataset:
    """A small BEIR dataset from the sample corpus (evidence: each answer's end)."""
    corpus = load_sample_corpus()
    by_id = {doc.id: doc for doc in corpus}
    questions = [q for q in load_sample_questions() if q["answer_ids"]][:3]
    return BeirDataset(
        "northwind",
        corpus,
        {f"q{i}": q["question"] for i, q in enumerate(questions)},
        {f"q{i}": {d: 1 for d in q["answer_ids"]} for i, q in enumerate(questions)},
        {
            f"q{i}": {d: sentences(by_id[d].page_content)[-1:] for d in q["answer_ids"]}
            for i, q in enumerate(questions)
        },
    )


KILLED_BUILD = f"""
import os, signal
from langchain_ragbudget import load_config
from langchain_ragbudget.retrieval import _dense as dense
from langchain_ragbudget.index import _hybrid_index
from langchain_ragbudget.evaluation._chunked import evaluate_chunked
from tests.integration_tests.test_chunked_cache import sample_dataset

dense.ADD_BATCH_SIZE = 8

def killed_after_one_batch(store, documents, batch_size=None, on_batch=None):
    def die(size):
        os.kill(os.getpid(), signal.SIGKILL)
    dense.add_documents(store, documents, on_batch=die)

_hybrid_index.add_documents = killed_after_one_batch
evaluate_chunked(sample_dataset(), load_config(), {CHUNK_SIZE}, budgets={BUDGETS})
"""


def test_a_killed_cache_build_is_completed_by_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    root = Path(__file__).resolve().parents[2]
    monkeypatch.setenv("RAGBUDGET_CACHE_DIR", str(tmp_path / "killed"))
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_BUILD],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=root,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    (cache,) = (tmp_path / "killed").iterdir()
    assert not (cache / "ragbudget_complete").exists()
    assert not (cache / "index" / "CURRENT").exists()  # nothing committed ...
    assert (cache / "index" / "chroma" / "chroma.sqlite3").stat().st_size > 0  # ...
    # ... but vectors written: the state a reader refuses ("run ragbudget repair")
    resumed = evaluate_chunked(
        sample_dataset(), load_config(), CHUNK_SIZE, budgets=BUDGETS
    )
    assert (cache / "ragbudget_complete").is_file()
    assert "repair" not in caplog.text
    monkeypatch.setenv("RAGBUDGET_CACHE_DIR", str(tmp_path / "clean"))
    clean = evaluate_chunked(
        sample_dataset(), load_config(), CHUNK_SIZE, budgets=BUDGETS
    )
    assert resumed == clean
