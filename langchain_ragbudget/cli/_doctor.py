"""`ragbudget doctor`: the models, caches and environment variables in effect.

Unlike `ragbudget config`, it includes what is filled in at run time (environment
variables, the libraries' own caches), says where each value was found, and checks
each model is on disk without loading one or touching the network.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_ragbudget.cli._exit_codes import EXIT_OK, EXIT_PARTIAL
from langchain_ragbudget.cli._output import print_json

if TYPE_CHECKING:
    from rich.console import Console

ENVIRONMENT = (
    ("RAGBUDGET_EMBEDDING_MODEL_PATH", "local ONNX folder of the embedding model"),
    ("RAGBUDGET_CACHE_DIR", "this package's cache (embedded corpora, FlashRank)"),
    ("TIKTOKEN_CACHE_DIR", "tiktoken's encoding files (offline token counts)"),
    ("FASTEMBED_CACHE_PATH", "fastembed's download cache"),
    ("HF_HUB_OFFLINE", "1: never try to download a model"),
    ("RAGBUDGET_SCIFACT_DIR", "SciFact for `make eval` and the tests"),
    ("OPENAI_API_KEY", "the demo's chat model (shown as set, never its value)"),
    ("ANONYMIZED_TELEMETRY", "Chroma's telemetry (False: off)"),
)
_SECRET = ("OPENAI_API_KEY",)


@dataclass(frozen=True)
class Finding:
    """One thing in effect: its value, where it was found, and whether it is usable.

    `status` is "ok", "missing" (a run needing it fails), or "" (nothing to check).
    """

    name: str
    value: str
    found: str
    status: str = ""


def run_doctor(args: argparse.Namespace, console: Console) -> int:
    """Exit 0 when every model is found, 1 when one is missing."""
    from langchain_ragbudget.config._settings import explain_config

    effective = explain_config(args.config)
    origins = {v.key: v.source(effective.file) for v in effective.values}
    findings = [
        Finding("configuration file", effective.file or "", "--config")
        if effective.file
        else Finding("configuration file", "none", "the shipped defaults alone"),
        *_embedding(effective.config, origins),
        *_rerank(effective.config, origins),
        *_tokens(effective.config, origins),
        *_caches(effective.config, origins),
        *_environment(),
    ]
    if args.json:
        print_json({"findings": [asdict(f) for f in findings]})
    missing = [f for f in findings if f.status == "missing"]
    if not args.json:
        console.print(_table(findings))
        if missing:
            names = ", ".join(f.name for f in missing)
            console.print(f"missing: {names} (exit 1)", highlight=False, markup=False)
    return EXIT_PARTIAL if missing else EXIT_OK


def _embedding(config: Any, origins: dict[str, str]) -> list[Finding]:
    from langchain_ragbudget.retrieval._embeddings import MODEL_PATH_ENV

    settings = config.embedding
    rows = [Finding("embedding model", settings.model, origins["embedding.model"])]
    if settings.provider != "fastembed":
        return [Finding("embedding provider", settings.provider, "configuration")]
    if settings.model_path:
        folder, found = settings.model_path, origins["embedding.model_path"]
    elif os.environ.get(MODEL_PATH_ENV):
        folder = os.environ[MODEL_PATH_ENV]
        found = f"environment {MODEL_PATH_ENV} (the file says null)"
    else:
        cache = settings.cache_dir or _fastembed_cache()
        rows.append(
            Finding(
                "embedding model folder",
                "none: fetched by name into the cache",
                f"embedding.model_path null and {MODEL_PATH_ENV} unset",
            )
        )
        held = _holds_model(Path(cache), settings.model)
        rows.append(
            Finding(
                "fastembed cache",
                cache if held else f"{cache} (absent: fetched on first use, online)",
                origins["embedding.cache_dir"]
                if settings.cache_dir
                else "FASTEMBED_CACHE_PATH, else fastembed's default",
                "ok" if held else "missing",
            )
        )
        return rows
    lacking = _lacking(Path(folder), EMBEDDING_FILES)
    shown = f"{folder} (lacks {', '.join(lacking)})" if lacking else folder
    status = "missing" if lacking else "ok"
    rows.append(Finding("embedding model folder", shown, found, status))
    return rows


# What fastembed reads from a model folder (besides optional config files).
EMBEDDING_FILES = ("model.onnx", "tokenizer.json", "tokenizer_config.json")
# What FlashRank reads from its model folder, besides the model file itself.
RERANK_FILES = ("tokenizer.json",)


def _lacking(folder: Path, names: tuple[str, ...]) -> list[str]:
    return [name for name in names if not (folder / name).is_file()]


def _fastembed_cache() -> str:
    """The cache folder fastembed picks by its own rule, repeated here."""
    default = os.path.join(tempfile.gettempdir(), "fastembed_cache")
    return os.environ.get("FASTEMBED_CACHE_PATH", default)


def _holds_model(cache: Path, model: str) -> bool:
    """Whether fastembed's cache holds an ONNX file for `model` (any layout)."""
    name = model.split("/")[-1]
    try:
        return any(name in str(p) for p in cache.glob("**/*.onnx"))
    except OSError:
        return False


def _rerank(config: Any, origins: dict[str, str]) -> list[Finding]:
    """The model file FlashRank loads and its tokenizer; absent is missing.

    A run may fetch an absent model (`rerank.download`), but until then a run
    offline skips the stage, so the doctor says so.
    """
    from flashrank.Config import model_file_map

    from langchain_ragbudget.config._disk import cache_root

    settings = config.rerank
    if not settings.enabled:
        return [Finding("rerank", "off", origins["rerank.enabled"])]
    if settings.cache_dir:
        folder, found = Path(settings.cache_dir), origins["rerank.cache_dir"]
    else:
        folder, found = cache_root() / "flashrank", "the package cache (below)"
    value = f"{settings.model} in {folder}"
    if settings.model not in model_file_map:
        return [
            Finding(
                "rerank model", f"{value} (not a FlashRank model)", found, "missing"
            )
        ]
    lacking = _lacking(
        folder / settings.model, (model_file_map[settings.model], *RERANK_FILES)
    )
    if lacking:
        fetch = "fetched on first use, online" if settings.download else "download off"
        value += f" (lacks {', '.join(lacking)}: {fetch})"
    return [Finding("rerank model", value, found, "missing" if lacking else "ok")]


# The files tiktoken reads for each encoding, cached under the SHA-1 of the URL.
_BLOB = "https://openaipublic.blob.core.windows.net/"
TIKTOKEN_FILES = {
    "gpt2": (
        f"{_BLOB}gpt-2/encodings/main/vocab.bpe",
        f"{_BLOB}gpt-2/encodings/main/encoder.json",
    ),
    "r50k_base": (f"{_BLOB}encodings/r50k_base.tiktoken",),
    "p50k_base": (f"{_BLOB}encodings/p50k_base.tiktoken",),
    "p50k_edit": (f"{_BLOB}encodings/p50k_base.tiktoken",),
    "cl100k_base": (f"{_BLOB}encodings/cl100k_base.tiktoken",),
    "o200k_base": (f"{_BLOB}encodings/o200k_base.tiktoken",),
    "o200k_harmony": (f"{_BLOB}encodings/o200k_base.tiktoken",),
}


def _tokens(config: Any, origins: dict[str, str]) -> list[Finding]:
    """The tiktoken cache, checked for the file of every encoding in use."""
    cache = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    if cache:
        source = (
            "environment TIKTOKEN_CACHE_DIR"
            if os.environ.get("TIKTOKEN_CACHE_DIR")
            else "environment DATA_GYM_CACHE_DIR"
        )
    else:
        cache = os.path.join(tempfile.gettempdir(), "data-gym-cache")
        source = "tiktoken's default"
    names = sorted(
        {config.index.encoding}
        | {surface.encoding_name for surface in config.surfaces.values()}
    )
    lacking = [
        name
        for name in names
        if not all(
            (Path(cache) / hashlib.sha1(url.encode()).hexdigest()).is_file()
            for url in TIKTOKEN_FILES.get(name, ())
        )
    ]
    value = cache
    if lacking:
        value += f" (lacks {', '.join(lacking)}: fetched on first use, online)"
    return [
        Finding("chunking encoding", config.index.encoding, origins["index.encoding"]),
        Finding(
            "tiktoken cache",
            value,
            f"{source}; encodings in use: {', '.join(names)}",
            "missing" if lacking else "ok",
        ),
    ]


def _caches(config: Any, origins: dict[str, str]) -> list[Finding]:
    from langchain_ragbudget.config._disk import CACHE_DIR_ENV, cache_root

    where = (
        f"environment {CACHE_DIR_ENV}"
        if os.environ.get(CACHE_DIR_ENV)
        else "XDG_CACHE_HOME or ~/.cache"
    )
    return [
        Finding("package cache", str(cache_root()), where),
        Finding("index folder", config.index.directory, origins["index.directory"]),
        Finding(
            "vector store",
            _store(config.vector_store),
            "vector_store.*",
        ),
    ]


def _store(settings: Any) -> str:
    if settings.provider != "chroma":
        return settings.provider
    if settings.host:
        return f"Chroma server {settings.host}:{settings.port}"
    return "Chroma, embedded"


def _environment() -> list[Finding]:
    rows = []
    for name, what in ENVIRONMENT:
        value = os.environ.get(name)
        if value is None:
            rows.append(Finding(name, "unset", what))
        else:
            shown = "set" if name in _SECRET else value
            rows.append(Finding(name, shown, f"environment: {what}"))
    return rows


def _table(findings: list[Finding]) -> Any:
    """One block per finding: its check and name, then value and origin.

    On lines of their own, a path is never broken where a terminal has room for it.
    """
    from rich.table import Table
    from rich.text import Text

    table = Table.grid(padding=(0, 1))
    table.title = "in effect (ragbudget doctor)"
    table.title_justify = "left"
    table.add_column("check", no_wrap=True, min_width=7)
    table.add_column("finding", overflow="fold")
    for f in findings:
        style = {"ok": "green", "missing": "red"}.get(f.status, "")
        body = Text(f.name, style="bold")
        body.append(f"\n{f.value}\nfound in: {f.found}")
        table.add_row(Text(f.status or "-", style), body)
    return table
