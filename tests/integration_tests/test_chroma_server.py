"""The same pipeline pointed at a Chroma server (chromadb's own `chroma run`)."""

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import chromadb
import pytest
from langchain_core.runnables import RunnableParallel, RunnablePassthrough

from langchain_ragbudget import (
    ContextBudget,
    DenseRetriever,
    HybridRetriever,
    build_embeddings,
    build_vector_store,
    load_config,
)
from langchain_ragbudget.retrieval._dense import add_documents
from langchain_ragbudget.sample import load_sample_corpus


@pytest.fixture
def chroma_port(tmp_path: Path) -> Iterator[int]:
    executable = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [executable, "run", "--path", str(tmp_path / "db"), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as client:
                if client.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        else:
            pytest.fail("chroma run did not start within 30 s")
        yield port
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_hybrid_retrieval_against_a_chroma_server(
    tmp_path: Path, chroma_port: int
) -> None:
    path = tmp_path / "server.yml"
    path.write_text(
        f"vector_store:\n  host: 127.0.0.1\n  port: {chroma_port}\n  timeout: 10\n"
    )
    retriever = HybridRetriever.from_config(
        load_config(path), documents=load_sample_corpus()
    )
    top = retriever.invoke("How long are application logs retained?", k=3)
    assert "data-retention-policy::0" in [doc.id for doc in top]
    assert all(
        "dense_rank" in doc.metadata or "bm25_rank" in doc.metadata for doc in top
    )


def test_ef_search_is_set_on_the_server_s_collection(
    tmp_path: Path, chroma_port: int
) -> None:
    path = tmp_path / "server.yml"
    path.write_text(
        f"vector_store:\n  host: 127.0.0.1\n  port: {chroma_port}\n"
        "  collection: widened\n  ef_search: 300\n"
    )
    config = load_config(path)
    store = build_vector_store(config, build_embeddings(config))
    collection = chromadb.HttpClient(host="127.0.0.1", port=chroma_port).get_collection(
        "widened"
    )
    assert collection.configuration_json["hnsw"]["ef_search"] == 300
    add_documents(store, load_sample_corpus())
    hits = DenseRetriever(vectorstore=store, k=3).invoke("application log retention")
    assert "data-retention-policy::0" in [doc.id for doc in hits]


def test_budgeted_pipeline_on_a_chroma_server_with_a_class_path_sparse_side(
    tmp_path: Path, chroma_port: int
) -> None:
    # Both sides moved by YAML alone: vectors to a real `chroma run`, the sparse side
    # to langchain_community's BM25Retriever; fusion and the budget are unchanged.
    path = tmp_path / "moved.yml"
    path.write_text(
        "sparse:\n  provider: langchain_community.retrievers:BM25Retriever\n"
        f"vector_store:\n  host: 127.0.0.1\n  port: {chroma_port}\n  timeout: 10\n"
        "  collection: moved\n"
    )
    config = load_config(path)
    retriever = HybridRetriever.from_config(config, documents=load_sample_corpus())
    assert type(retriever.retrievers[0]).__module__.startswith("langchain_community")
    chain = RunnableParallel(
        question=RunnablePassthrough(), documents=retriever
    ) | ContextBudget.from_config(config, surface="chat")
    result = chain.invoke("How long are application logs retained?")
    context = result["context"]
    assert "data-retention-policy::0" in context.report.kept_ids
    fused = {
        doc.id for doc in retriever.invoke("How long are application logs retained?")
    }
    dropped = {record.key for record in context.report.drops}
    assert dropped and not dropped & set(context.report.kept_ids)
    # every fused candidate is kept or named in a drop record: none vanished
    assert fused <= set(context.report.kept_ids) | dropped
