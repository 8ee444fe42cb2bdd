"""How exact, and how repeatable, Chroma's top 100 is: recall against exact search,
and lists that differ between two opens of the same index.

The dense side asks Chroma for `fetch_k` (100) neighbours; Chroma's HNSW searches with
`ef_search` 100 by default. Chroma also keeps the last writes that were not yet folded
into its saved HNSW graph (fewer than `sync_threshold`, 1,000) in its log and adds
them back in parallel each time a process opens the index, so the graph, and with it
an approximate answer, can differ from one open to the next. This script measures
both on SciFact's test queries, with the evaluation's cached index: exact top 100 by
numpy over every stored vector, then, for each `ef_search`, a copy of the index with
that setting opened by two fresh processes, each querying every test query.

    python benchmarks/bench_dense_recall.py
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import chromadb
import numpy as np
from _common import cached_store, parser_with_data
from chromadb.config import Settings

from langchain_ragbudget import build_embeddings
from langchain_ragbudget.config._settings import load_config
from langchain_ragbudget.evaluation import load_beir, vector_store_folder
from langchain_ragbudget.progress import ProgressBars

FETCH = 100
EF_SEARCH = (100, 200, 400)


def open_collection(folder: Path) -> chromadb.Collection:
    client = chromadb.PersistentClient(
        str(folder), settings=Settings(anonymized_telemetry=False)
    )
    return client.get_collection(client.list_collections()[0].name)


def query_all(folder: Path, queries: Path, out: Path) -> None:
    """One fresh open of the index: ids of each query's top `FETCH`, and timings."""
    collection = open_collection(folder)
    vectors = np.load(queries).tolist()
    ids, times = [], []
    for vector in vectors:
        start = time.perf_counter()
        found = collection.query(
            query_embeddings=[vector], n_results=FETCH, include=["distances"]
        )
        times.append(time.perf_counter() - start)
        ids.append(found["ids"][0])
    out.write_text(json.dumps({"ids": ids, "times": times}))


def fresh_open(folder: Path, queries: Path, out: Path) -> dict[str, list]:
    subprocess.run(
        [sys.executable, __file__, "--worker", str(folder), str(queries), str(out)],
        check=True,
    )
    result: dict[str, list] = json.loads(out.read_text())
    return result


def main() -> None:
    parser = parser_with_data(__doc__)
    parser.add_argument("--worker", nargs=3, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        query_all(*args.worker)
        return
    dataset = load_beir(args.data)
    config = load_config()
    embeddings = build_embeddings(config)
    with ProgressBars(transient=True) as progress:  # embeds SciFact on a first run
        cached_store(dataset, config, embeddings, progress)
    source = vector_store_folder(dataset.corpus, config.embedding, dataset.name)
    stored = open_collection(source).get(include=["embeddings"])
    corpus = np.asarray(stored["embeddings"], dtype=np.float32)
    corpus /= np.linalg.norm(corpus, axis=1, keepdims=True)
    ids = np.asarray(stored["ids"])
    questions = list(dataset.queries.values())
    vectors = np.asarray(embeddings.embed_documents(questions), dtype=np.float32)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    order = np.argsort(-(unit @ corpus.T), axis=1, kind="stable")[:, :FETCH]
    exact = [set(ids[row]) for row in order]
    exact10 = [set(ids[row[:10]]) for row in order]
    print(
        f"SciFact test: {len(questions)} queries, {len(ids)} vectors, top {FETCH}; "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    )
    print(
        f"{'ef_search':>9} {'recall@100':>10} {'recall@10':>9} "
        f"{'lists differing':>15} {'query p50 ms':>12}"
    )
    with tempfile.TemporaryDirectory() as scratch:
        queries = Path(scratch) / "queries.npy"
        np.save(queries, vectors)
        for ef in EF_SEARCH:
            folder = Path(scratch) / f"ef{ef}"
            shutil.copytree(source, folder)
            open_collection(folder).modify(configuration={"hnsw": {"ef_search": ef}})
            first = fresh_open(folder, queries, Path(scratch) / "first.json")
            second = fresh_open(folder, queries, Path(scratch) / "second.json")
            recall = statistics.fmean(
                len(set(got) & want) / FETCH
                for got, want in zip(first["ids"], exact, strict=True)
            )
            recall10 = statistics.fmean(
                len(set(got[:10]) & want) / 10
                for got, want in zip(first["ids"], exact10, strict=True)
            )
            differing = sum(
                a != b for a, b in zip(first["ids"], second["ids"], strict=True)
            )
            p50 = 1000 * statistics.median(first["times"] + second["times"])
            print(
                f"{ef:>9} {recall:>10.4f} {recall10:>9.4f} "
                f"{differing:>11} of {len(questions)} {p50:>9.2f}"
            )


if __name__ == "__main__":
    main()
