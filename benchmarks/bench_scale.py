"""How the hybrid grows: synthetic corpora of 10k, 100k and 1M chunks, and a server.

The corpora are synthetic, and the report says so: each chunk is 3 to 6 SciFact
sentences drawn at random (realistic words and lengths), and its vector is the real
SciFact embedding of the abstract its first sentence came from, plus Gaussian noise
(sigma 0.05 per dimension), re-normalised (embedding a million chunks here would
take days). Queries are SciFact's test queries, embedded for real on every call.

Each size runs in its own subprocess, twice: once to build (bm25s index saved, Chroma
filled from the vectors; cached under the user cache folder, and a build cut short
resumes) and once to serve (open the saved index with bm25s memory-mapped, then time
queries), so peak RSS is measured per size and per phase. Per size: build time, peak
RSS, load time, and p50/p95 of sparse, plain bm25s (its own top-k selection, for
reference), dense, hybrid and hybrid + budget (`chat` surface), and the stock
EnsembleRetriever (rank_bm25 + Chroma) up to `--ensemble-max`; above that, the stock
ensemble is tried alone in its own process under a memory cap. Then the server
table: the 100k corpus through `ainvoke` at concurrency 1, 8, 32, embedded Chroma and
a `chroma run` on loopback side by side. Rows of sizes not run this time are kept
from `results/scale.json`.

    make bench_scale                       # 10k, 100k, 1M and the server table
    python benchmarks/bench_scale.py --sizes 10000 100000 --no-server
    python benchmarks/bench_scale.py --sizes 1000000 --no-server   # one row alone
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import resource
import shutil
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bm25s
import numpy as np
from _common import cached_store, machine, parser_with_data, percentiles, rotated
from langchain_core.documents import Document

from langchain_ragbudget import (
    ContextBudget,
    DenseRetriever,
    HybridRetriever,
    build_embeddings,
)

# The package's cache folder (RAGBUDGET_CACHE_DIR, else the user cache), where the
# synthetic corpora are built once: no public module exports it.
from langchain_ragbudget.config._disk import cache_root
from langchain_ragbudget.config._settings import load_config
from langchain_ragbudget.evaluation import load_beir
from langchain_ragbudget.retrieval._dense import open_chroma
from langchain_ragbudget.retrieval._sparse import BM25Retriever

NOISE = 0.05
SEED = 13
ADD_BATCH = 5000
SERVER_SIZE = 100_000
CONCURRENCY = (1, 8, 32)
RESULTS = Path(__file__).parent / "results"


def scale_dir(size: int) -> Path:
    return cache_root() / f"scale-{size}-seed{SEED}"


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def scifact_parts(data: str) -> tuple[list[list[str]], np.ndarray, list[str]]:
    """SciFact's sentences per abstract, their real embeddings, the test queries."""
    dataset = load_beir(data)
    config = load_config()
    store = cached_store(dataset, config)
    # langchain-chroma's own collection: the stored vectors, read back as they are.
    found: Any = store._collection.get(include=["embeddings"])  # type: ignore[attr-defined]
    by_id = dict(zip(found["ids"], found["embeddings"], strict=True))
    sentences = [
        [s for s in re.split(r"(?<=[.!?])\s+", doc.page_content) if len(s) > 20]
        for doc in dataset.corpus
    ]
    vectors = np.asarray([by_id[doc.id] for doc in dataset.corpus], dtype=np.float32)
    keep = [i for i, parts in enumerate(sentences) if parts]
    return [sentences[i] for i in keep], vectors[keep], list(dataset.queries.values())


def synthetic_chunks(
    size: int, sentences: list[list[str]]
) -> tuple[list[Document], np.ndarray]:
    """The chunks' texts, and for each the SciFact abstract its vector comes from."""
    rng = random.Random(SEED)
    documents, sources = [], []
    for i in range(size):
        source = rng.randrange(len(sentences))
        parts = [rng.choice(sentences[source])] + [
            rng.choice(rng.choice(sentences)) for _ in range(rng.randint(2, 5))
        ]
        chunk_id = f"c{i}"
        metadata = {"chunk_id": chunk_id, "doc_id": f"d{i // 4}", "source": "synth"}
        documents.append(Document(" ".join(parts), metadata=metadata, id=chunk_id))
        sources.append(source)
    return documents, np.asarray(sources, dtype=np.int32)


def perturbed_vectors(
    vectors: np.ndarray, sources: np.ndarray
) -> Iterator[tuple[int, np.ndarray]]:
    """(first row, vectors) per batch: the source's vector + noise, re-normalised.

    Drawn batch by batch from one seeded stream (the same numbers as one big draw),
    so a million chunks never hold a float64 noise matrix, and a resumed build
    regenerates the batches it skips.
    """
    noise = np.random.default_rng(SEED)
    for begin in range(0, len(sources), ADD_BATCH):
        rows = vectors[sources[begin : begin + ADD_BATCH]]
        rows = rows + noise.normal(0, NOISE, rows.shape).astype(np.float32)
        yield begin, rows / np.linalg.norm(rows, axis=1, keepdims=True)


def build(size: int, data: str) -> dict[str, Any]:
    """Generate, index and save one corpus, resuming a build cut short.

    The BM25 side is saved whole or redone; Chroma is filled in batches of
    `ADD_BATCH` upserts, and a resumed build carries on from the collection's count
    (ids and vectors are deterministic), so an interrupted million is not lost.
    Times of all sessions add up in `progress.json`; `build.json` marks it done.
    """
    import chromadb
    from chromadb.config import Settings

    folder = scale_dir(size)
    folder.mkdir(parents=True, exist_ok=True)
    progress = folder / "progress.json"
    numbers: dict[str, Any] = (
        json.loads(progress.read_text())
        if progress.is_file()
        else {"size": size, "chroma_build_s": 0.0, "resumed": 0}
    )
    sentences, vectors, _ = scifact_parts(data)
    if "bm25_build_s" not in numbers:
        start = time.perf_counter()
        documents, sources = synthetic_chunks(size, sentences)
        generated = time.perf_counter()
        sparse = BM25Retriever.from_config(load_config(), documents=documents)
        shutil.rmtree(folder / "bm25", ignore_errors=True)
        sparse.save(folder / "bm25")
        np.save(folder / "sources.npy", sources)
        numbers["generate_s"] = generated - start
        numbers["bm25_build_s"] = time.perf_counter() - generated
        numbers["bm25_peak_rss_mib"] = peak_rss_mib()
        progress.write_text(json.dumps(numbers))
        del documents, sparse
    sources = np.load(folder / "sources.npy")
    client = chromadb.PersistentClient(
        str(folder / "chroma"), settings=Settings(anonymized_telemetry=False)
    )
    collection = client.get_or_create_collection(
        "scale", metadata={"hnsw:space": "cosine"}
    )
    done = collection.count()
    if done:
        numbers["resumed"] += 1
        print(f"resuming the Chroma build at {done:,} of {size:,}", file=sys.stderr)
    for begin, rows in perturbed_vectors(vectors, sources):
        if begin + len(rows) <= done:
            continue
        start = time.perf_counter()
        collection.upsert(
            ids=[f"c{i}" for i in range(begin, begin + len(rows))], embeddings=rows
        )
        numbers["chroma_build_s"] += time.perf_counter() - start
        numbers["chroma_done"] = begin + len(rows)
        numbers["build_peak_rss_mib"] = peak_rss_mib()
        progress.write_text(json.dumps(numbers))
        print(
            f"chroma {begin + len(rows):,}/{size:,} {numbers['chroma_build_s']:.0f} s",
            file=sys.stderr,
            flush=True,
        )
    (folder / "build.json").write_text(json.dumps(numbers))
    return numbers


def open_hybrid(size: int, host: str | None = None, port: int = 8000) -> Any:
    """The hybrid over a built corpus: bm25s memory-mapped, Chroma embedded or not."""
    from langchain_chroma import Chroma

    config = load_config()
    folder = scale_dir(size)
    start = time.perf_counter()
    sparse = BM25Retriever.load(folder / "bm25", mmap=True, k=100)
    loaded = time.perf_counter() - start
    embeddings = build_embeddings(config)
    settings = config.vector_store.model_copy(
        update={"collection": "scale", "persist_directory": str(folder / "chroma")}
    )
    if host is not None:
        settings = settings.model_copy(
            update={"host": host, "port": port, "persist_directory": None}
        )
    store = open_chroma(settings, embeddings)
    assert isinstance(store, Chroma)
    docstore = {doc.id: doc for doc in sparse.documents if doc.id is not None}
    hybrid = HybridRetriever.from_config(
        config, sparse=sparse, vectorstore=store, chunk_store=docstore
    )
    return hybrid, sparse, store, docstore, loaded, config


def plain_bm25s(sparse: BM25Retriever, query: str) -> Any:
    """Top 100 as bm25s's own `retrieve` selects them: the reference for the tail.

    Same tokens and scores as `sparse`; only the selection differs (bm25s's
    `selection.topk` over every document, against `top_positive`). The query's
    tokens and the bm25s index are the retriever's private parts: the point is to
    time bm25s's own selection on exactly what `sparse` scores, and no public method
    hands them out.
    """
    tokens = sparse._query_tokens(query)
    if not tokens or sparse._index is None:
        return None
    scores = sparse._index.get_scores(tokens)
    return bm25s.selection.topk(scores, 100, backend="numpy")


def serve(size: int, queries: list[str], ensemble_max: int) -> dict[str, Any]:
    """Open a built corpus and time every system on the same queries, rotated."""
    hybrid, sparse, store, docstore, loaded, config = open_hybrid(size)
    dense = DenseRetriever(vectorstore=store, k=100, docstore=docstore)
    budget = ContextBudget.from_config(config)
    systems: dict[str, Any] = {
        "sparse": lambda q: sparse.scored_hits(q, 100),
        "plain bm25s": lambda q: plain_bm25s(sparse, q),
        "dense": lambda q: dense.scored_hits(q, 100),
        "hybrid": hybrid.invoke,
        "hybrid + budget": lambda q: budget.fit(hybrid.invoke(q), question=q),
    }
    ensemble_note = f"not run above {ensemble_max:,} chunks"
    if size <= ensemble_max:
        start = time.perf_counter()
        systems["stock EnsembleRetriever"] = stock_ensemble(sparse, store).invoke
        ensemble_note = f"built in {time.perf_counter() - start:.1f} s"
    order = list(systems)
    first_ms = {}  # the first call opens Chroma's HNSW index: a load time too
    for name in order:
        start = time.perf_counter()
        systems[name](queries[0])
        first_ms[name] = (time.perf_counter() - start) * 1000
    latencies: dict[str, list[float]] = {name: [] for name in order}
    for turn, text in enumerate(queries):
        for name in rotated(order, turn):
            start = time.perf_counter()
            systems[name](text)
            latencies[name].append((time.perf_counter() - start) * 1000)
    return {
        "size": size,
        "load_s": loaded,
        "serve_peak_rss_mib": peak_rss_mib(),
        "latency_ms": {name: percentiles(v) for name, v in latencies.items()},
        "first_call_ms": first_ms,
        "ensemble": ensemble_note,
        "load_average": os.getloadavg()[0],
    }


def stock_ensemble(sparse: BM25Retriever, store: Any) -> Any:
    """LangChain's stock hybrid: rank_bm25 + the same Chroma, equal weights."""
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    from langchain_classic.retrievers import EnsembleRetriever
    from langchain_community.retrievers import BM25Retriever as StockBM25

    stock = StockBM25.from_documents(sparse.documents, k=100)
    chroma = store.as_retriever(search_kwargs={"k": 100})
    return EnsembleRetriever(retrievers=[stock, chroma], weights=[0.5, 0.5])


def rss_mib(pid: int | str = "self") -> float:
    """A process's resident memory now (Linux); 0 once it has gone."""
    try:
        pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except FileNotFoundError:
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def stock_probe(size: int, queries: list[str]) -> dict[str, Any]:
    """The stock ensemble alone at a size `serve` leaves it out: its build and cost.

    Run in its own process so its memory does not count against the hybrid's; the
    parent kills it at a memory cap (`run_child`), and the stage it reached (printed
    as it goes) says where it gave up.
    """
    _, sparse, store, _, _, _ = open_hybrid(size)
    before = rss_mib()
    print(f"STAGE building rank_bm25 ({before:,.0f} MiB before)", flush=True)
    start = time.perf_counter()
    ensemble = stock_ensemble(sparse, store)
    built = time.perf_counter() - start
    after = rss_mib()
    print(f"STAGE built in {built:.0f} s, {after:,.0f} MiB; querying", flush=True)
    latencies = []
    for text in queries:
        begin = time.perf_counter()
        ensemble.invoke(text)
        latencies.append((time.perf_counter() - begin) * 1000)
    return {
        "size": size,
        "build_s": built,
        "peak_rss_mib": peak_rss_mib(),
        "rss_added_by_build_mib": after - before,  # resident, not peak
        "queries": len(queries),
        "latency_ms": percentiles(latencies),
        "load_average": os.getloadavg()[0],
    }


async def under_load(hybrid: Any, queries: list[str], level: int) -> dict[str, float]:
    """Queries/s and p95 with `level` ainvokes in flight at once."""
    pending = list(queries)
    latencies: list[float] = []

    async def worker() -> None:
        while pending:
            text = pending.pop()
            start = time.perf_counter()
            await hybrid.ainvoke(text)
            latencies.append((time.perf_counter() - start) * 1000)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(level)))
    elapsed = time.perf_counter() - start
    return {"qps": len(queries) / elapsed, **percentiles(latencies)}


def concurrency(size: int, queries: list[str], host: str | None, port: int) -> Any:
    hybrid = open_hybrid(size, host, port)[0]
    hybrid.invoke(queries[0])
    return {
        str(level): asyncio.run(under_load(hybrid, queries, level))
        for level in CONCURRENCY
    }


def start_chroma_server(path: Path) -> tuple[subprocess.Popen[bytes], int]:
    executable = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    server = subprocess.Popen(
        [executable, "run", "--path", str(path), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket() as client:
            if client.connect_ex(("127.0.0.1", port)) == 0:
                return server, port
        time.sleep(0.2)
    server.terminate()
    raise RuntimeError("chroma run did not start within 60 s")


def child(args: argparse.Namespace) -> None:
    """One phase of one size, in this process; prints its numbers as JSON."""
    _, _, queries = scifact_parts(args.data)
    queries = queries[: args.queries]
    if args.phase == "build":
        result: Any = build(args.size, args.data)
    elif args.phase == "serve":
        result = serve(args.size, queries, args.ensemble_max)
    elif args.phase == "stock":
        result = stock_probe(args.size, queries)
    elif args.phase == "embedded":
        result = concurrency(args.size, queries, None, 0)
    else:
        server, port = start_chroma_server(scale_dir(args.size) / "chroma")
        try:
            result = concurrency(args.size, queries, "127.0.0.1", port)
        finally:
            server.terminate()
            server.wait(timeout=30)
    print("RESULT " + json.dumps(result))


def run_child(
    args: argparse.Namespace,
    phase: str,
    size: int,
    queries: int | None = None,
    cap_mib: float | None = None,
) -> Any:
    """Run one phase in a fresh process; its RESULT line, or why it was stopped.

    With `cap_mib`, the child is killed once its resident memory passes the cap
    (watched from here, since a child busy in one long call cannot watch itself).
    """
    command = [sys.executable, __file__, "--child", phase, "--size", str(size)]
    count = args.queries if queries is None else queries
    command += ["--data", args.data, "--queries", str(count)]
    command += ["--ensemble-max", str(args.ensemble_max)]
    start = time.perf_counter()
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        while process.poll() is None:
            if cap_mib is not None and rss_mib(process.pid) > cap_mib:
                process.kill()
                stages = [x for x in process.communicate()[0].splitlines() if x]
                return {
                    "size": size,
                    "gave_up": f"resident memory passed {cap_mib:,.0f} MiB after "
                    f"{time.perf_counter() - start:.0f} s; last stage: "
                    f"{stages[-1] if stages else 'loading'}",
                    "load_average": os.getloadavg()[0],
                }
            time.sleep(0.2)
        stdout = process.communicate()[0]
    if process.returncode:
        raise subprocess.CalledProcessError(process.returncode, command, stdout)
    line = next(x for x in stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def main() -> None:
    parser = parser_with_data(__doc__)
    parser.add_argument(
        "--sizes", type=int, nargs="*", default=[10_000, 100_000, 1_000_000]
    )
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--ensemble-max", type=int, default=100_000)
    parser.add_argument(
        "--stock-sizes",
        type=int,
        nargs="*",
        default=None,
        help="sizes at which to try the stock ensemble alone, in its own process "
        "(default: the sizes above --ensemble-max)",
    )
    parser.add_argument("--stock-queries", type=int, default=20)
    parser.add_argument(
        "--stock-cap-gib",
        type=float,
        default=8.0,
        help="stop the stock probe once its process holds this much memory",
    )
    parser.add_argument("--no-server", action="store_true")
    parser.add_argument(
        "--child", choices=["build", "serve", "stock", "embedded", "server"]
    )
    parser.add_argument("--size", type=int, default=0)
    args = parser.parse_args()
    if args.child:
        args.phase = args.child
        child(args)
        return
    previous = (
        json.loads((RESULTS / "scale.json").read_text())
        if (RESULTS / "scale.json").is_file()
        else {}
    )
    rows = []
    for size in args.sizes:
        cached = scale_dir(size) / "build.json"
        built = (
            json.loads(cached.read_text())
            if cached.is_file()
            else run_child(args, "build", size)
        )
        row = {**built, **run_child(args, "serve", size)}
        rows.append(row)
        print_row(row)
    probes = {str(p["size"]): p for p in previous.get("stock_probe", [])}
    if args.stock_sizes is None:
        args.stock_sizes = [s for s in args.sizes if s > args.ensemble_max]
    for size in args.stock_sizes:
        probe = run_child(
            args, "stock", size, args.stock_queries, args.stock_cap_gib * 1024
        )
        probes[str(size)] = probe
        print("stock EnsembleRetriever alone", json.dumps(probe), flush=True)
    server_rows = previous.get("server", {})
    if not args.no_server:
        for phase in ("embedded", "server"):
            server_rows[phase] = run_child(args, phase, SERVER_SIZE)
            print(phase, json.dumps(server_rows[phase]), flush=True)
        server_rows["load_average"] = os.getloadavg()[0]
    # Rows measured in earlier runs (other sizes) are kept: a million is slow.
    measured = {row["size"] for row in rows}
    rows = sorted(
        rows + [r for r in previous.get("rows", []) if r["size"] not in measured],
        key=lambda row: row["size"],
    )
    RESULTS.mkdir(exist_ok=True)
    report = {
        "rows": rows,
        "server": server_rows,
        "stock_probe": [probes[key] for key in sorted(probes, key=int)],
        "machine": machine(),
        "load_average": os.getloadavg(),
        "synthetic": f"SciFact sentences recombined; real SciFact vectors + "
        f"N(0, {NOISE}) noise, re-normalised",
    }
    (RESULTS / "scale.json").write_text(json.dumps(report, indent=2))
    plot(rows, report["stock_probe"])


def print_row(row: dict[str, Any]) -> None:
    latency = row["latency_ms"]
    cells = ", ".join(
        f"{name} {v['p50']:.1f}/{v['p95']:.1f}" for name, v in latency.items()
    )
    print(
        f"{row['size']:>9,} chunks: build {row['bm25_build_s']:.0f}+"
        f"{row['chroma_build_s']:.0f} s (bm25s+Chroma), peak RSS build "
        f"{row['build_peak_rss_mib']:.0f} MiB / serve {row['serve_peak_rss_mib']:.0f}"
        f" MiB, load {row['load_s']:.2f} s; p50/p95 ms: {cells}; "
        f"ensemble {row['ensemble']}",
        flush=True,
    )


def plot(rows: list[dict[str, Any]], probes: list[dict[str, Any]]) -> None:
    """Latency (p50 solid, p95 dotted, one colour per system) and memory by size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [row["size"] for row in rows]
    names = list(dict.fromkeys(name for row in rows for name in row["latency_ms"]))
    figure, (left, right) = plt.subplots(
        1, 2, figsize=(14, 4.8), gridspec_kw={"width_ratios": [1.6, 1]}
    )
    for index, name in enumerate(names):
        shown = [
            (r["size"], r["latency_ms"][name]) for r in rows if name in r["latency_ms"]
        ]
        colour = f"C{index}"
        for stat, style in (("p50", "-o"), ("p95", ":x")):
            left.plot(
                [size for size, _ in shown],
                [value[stat] for _, value in shown],
                style,
                color=colour,
                label=f"{name} {stat}",
            )
        if name == "stock EnsembleRetriever":
            for probe in (p for p in probes if "latency_ms" in p):
                left.plot(
                    [probe["size"]] * 2,
                    [probe["latency_ms"]["p50"], probe["latency_ms"]["p95"]],
                    "s",
                    color=colour,
                    fillstyle="none",
                    label=f"{name} alone, {probe['queries']} queries",
                )
    for target, label in ((50, "target p50"), (150, "target p95")):
        left.axhline(target, color="grey", linewidth=0.6, linestyle="--")
        left.annotate(label, (sizes[-1], target), fontsize=6, color="grey", ha="right")
    left.set(xscale="log", yscale="log", xlabel="chunks", ylabel="ms per query")
    for probe in (p for p in probes if "gave_up" in p):
        left.annotate(
            f"stock ensemble: no result at {probe['size']:,}\n"
            "(memory cap, BENCHMARKS.md)",
            (probe["size"], 150),
            fontsize=6,
            ha="right",
            va="bottom",
        )
    left.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    for key, label in (
        ("build_peak_rss_mib", "build"),
        ("serve_peak_rss_mib", "serve"),
    ):
        right.plot(sizes, [r[key] / 1024 for r in rows], "-o", label=label)
    right.axhline(
        8, color="grey", linewidth=0.6, linestyle="--", label="target (serve)"
    )
    right.set(xscale="log", xlabel="chunks", ylabel="peak RSS, GiB")
    right.legend()
    figure.suptitle(
        "synthetic corpora (SciFact sentences, perturbed SciFact vectors); "
        "2 shared cores, load in BENCHMARKS.md"
    )
    figure.tight_layout()
    figure.savefig(RESULTS / "scale.png", dpi=120)


if __name__ == "__main__":
    main()
