"""A process killed in the middle of a save leaves the previous index loadable.

Real parts (bm25s, embedded Chroma, fastembed ONNX); the kill is a real SIGKILL of a
child process, which is why this lives with the integration tests.
"""

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from langchain_core.documents import Document

from langchain_ragbudget.index._hybrid_index import HybridIndex
from langchain_ragbudget.retrieval._sparse import BM25Retriever

pytestmark = [pytest.mark.needs_embedding_model, pytest.mark.needs_tiktoken]


def doc(doc_id: str, text: str) -> Document:
    return Document(id=doc_id, page_content=text, metadata={"source": doc_id})


def sparse_texts(index: HybridIndex) -> list[str]:
    bm25 = index.as_retriever().retrievers[0]
    assert isinstance(bm25, BM25Retriever)
    return [d.page_content for d in bm25.documents]


CRASH_SCRIPT = """
import sys, time
from langchain_core.documents import Document
from langchain_ragbudget.config import _disk as files_module
from langchain_ragbudget.index import _versions as index_module
from langchain_ragbudget.index._hybrid_index import HybridIndex
from langchain_ragbudget.retrieval._sparse import BM25Retriever

where = sys.argv[2]
if where == "mid-write":
    original = BM25Retriever.save
    def save(self, directory):
        original(self, directory)          # BM25 files written, records not yet
        print("SAVING", flush=True); time.sleep(120)
    BM25Retriever.save = save
else:
    def atomic_write(path, text):  # the new version is written, CURRENT not switched
        print("SAVING", flush=True); time.sleep(120)
    index_module.atomic_write_text = atomic_write
ix = HybridIndex.open(sys.argv[1])
ix.upsert([Document(id="policy.md", page_content="Refunds are paid within 90 days.")])
"""


@pytest.mark.parametrize("where", ["mid-write", "before-switch"])
def test_killed_mid_save_leaves_the_previous_index(tmp_path: Path, where: str) -> None:
    directory = tmp_path / "ix"
    HybridIndex.open(directory).upsert(
        [doc("policy.md", "Refunds are paid within 180 days.")]
    )
    script = tmp_path / "crash.py"
    script.write_text(textwrap.dedent(CRASH_SCRIPT))
    process = subprocess.Popen(
        [sys.executable, str(script), str(directory), where],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "SAVING"
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    reopened = HybridIndex.open(directory)
    assert sparse_texts(reopened) == ["Refunds are paid within 180 days."]
    committed = (directory / "CURRENT").read_text()
    versions = [p.name for p in directory.iterdir() if "sparse-" in p.name]
    assert committed in versions and len(versions) == 2  # the newer stray waits
    assert reopened.sync_report.differing == ["policy.md::0"]  # vector side ran ahead
    reopened.repair()
    assert reopened.sync_report.in_sync
    versions = [p.name for p in directory.iterdir() if "sparse-" in p.name]
    assert versions == [(directory / "CURRENT").read_text()]  # strays removed
    assert (
        reopened.as_retriever(k=1)
        .invoke("refunds")[0]
        .page_content.endswith("180 days.")
    )
