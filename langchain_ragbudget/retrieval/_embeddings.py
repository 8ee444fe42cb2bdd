"""Local ONNX embeddings through `fastembed`, as LangChain `Embeddings`.

Unlike `langchain_community`'s FastEmbedEmbeddings it loads a local model folder
(for machines without network), embeds in bounded batches (fastembed's default
batch of long documents takes gigabytes) and can embed queries with an int8 copy.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from langchain_core.embeddings import Embeddings
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from langchain_ragbudget.config._fields import import_provider
from langchain_ragbudget.config._settings import (
    ConfigLike,
    EmbeddingSettings,
    QueryPrecision,
    as_config,
    default_of,
)
from langchain_ragbudget.config._timeouts import call_with_timeout
from langchain_ragbudget.errors import ModelUnavailableError
from langchain_ragbudget.retrieval._model_cache import shared
from langchain_ragbudget.retrieval._quantize import int8_model_folder

MODEL_PATH_ENV = "RAGBUDGET_EMBEDDING_MODEL_PATH"


EMBEDDED_STEP = 32
"""Vectors between two progress reports: small enough for a bar to move every few
seconds, while the vector store still takes one write per batch."""
_EMBEDDED: ContextVar[Callable[[int], None] | None] = ContextVar(
    "ragbudget_embedded", default=None
)


@contextmanager
def embedding_progress(hook: Callable[[int], None] | None) -> Iterator[None]:
    """Within the block, `embed_documents` tells `hook` of each step of vectors."""
    token = _EMBEDDED.set(hook)
    try:
        yield
    finally:
        _EMBEDDED.reset(token)


class FastEmbedEmbeddings(BaseModel, Embeddings):
    """Sentence embeddings from a fastembed ONNX model, loaded on first use.

    Attributes:
        model_name: The fastembed model name, fetched the usual way without a path.
        model_path: A local folder holding `model.onnx` and the tokenizer files
            (else RAGBUDGET_EMBEDDING_MODEL_PATH).
        cache_dir: fastembed's download folder.
        batch_size: Texts embedded per batch by `embed_documents`.
        threads: ONNX Runtime threads; its default if None.
        query_precision: `int8` embeds queries with an int8 copy of the model
            (made once, in the user cache); documents stay float32.

    Raises:
        ModelUnavailableError: On first use, when the model folder holds no
            `model.onnx`, or the model cannot be loaded or downloaded.
    """

    model_name: str = default_of(EmbeddingSettings, "model")
    model_path: str | None = None
    cache_dir: str | None = None
    batch_size: int = Field(default_of(EmbeddingSettings, "batch_size"), ge=1)
    threads: int | None = None
    query_precision: QueryPrecision = default_of(EmbeddingSettings, "query_precision")

    model_config = ConfigDict(protected_namespaces=())

    _model: Any = PrivateAttr(default=None)
    _query_model: Any = PrivateAttr(default=None)

    def _text_embedding(self) -> Any:
        if self._model is None:
            self._model = _load_text_embedding(
                self.model_name,
                self.model_path or os.environ.get(MODEL_PATH_ENV),
                self.cache_dir,
                self.threads,
            )
        return self._model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed `texts` in batches, telling `embedding_progress`'s hook each step."""
        hook = _EMBEDDED.get()
        out: list[list[float]] = []
        for vector in self._text_embedding().embed(texts, batch_size=self.batch_size):
            out.append(vector.tolist())
            if hook is not None and len(out) % EMBEDDED_STEP == 0:
                hook(EMBEDDED_STEP)
        if hook is not None and len(out) % EMBEDDED_STEP:
            hook(len(out) % EMBEDDED_STEP)
        return out

    def _query_embedding(self) -> Any:
        if self.query_precision == "float32":
            return self._text_embedding()
        if self._query_model is None:
            local = self.model_path or os.environ.get(MODEL_PATH_ENV)
            if local is not None:
                source, model_file = Path(local), "model.onnx"
            else:  # the folder fastembed downloaded the model into
                source, model_file = _downloaded_model_file(self._text_embedding())
            self._query_model = _load_text_embedding(
                self.model_name,
                str(int8_model_folder(source, model_file)),
                self.cache_dir,
                self.threads,
            )
        return self._query_model

    def embed_query(self, text: str) -> list[float]:
        """Embed one query (with the int8 model if `query_precision` says so)."""
        (vector,) = self._query_embedding().query_embed(text)
        return list(vector.tolist())


# The embedding settings FastEmbedEmbeddings takes under the same names.
_FASTEMBED_FIELDS = {
    "model_path",
    "cache_dir",
    "batch_size",
    "threads",
    "query_precision",
}


def build_embeddings(config: ConfigLike = None) -> Embeddings:
    """The configured embedding model (fastembed ONNX by default, loaded on first use).

    Raises:
        ConfigError: The file is invalid (before anything is built).
    """
    settings = as_config(config).embedding
    if settings.provider != "fastembed":
        provider = import_provider(settings.provider)
        embeddings: Embeddings = provider(**settings.options)
        return embeddings
    same_names = settings.model_dump(include=_FASTEMBED_FIELDS)
    return FastEmbedEmbeddings(model_name=settings.model, **same_names)


def _downloaded_model_file(text_embedding: Any) -> tuple[Path, str]:
    """The folder and ONNX file of a downloaded model (fastembed has no accessor)."""
    model = getattr(text_embedding, "model", None)
    folder = getattr(model, "_model_dir", None)
    description = getattr(model, "model_description", None)
    model_file = getattr(description, "model_file", None)
    if folder is None or not isinstance(model_file, str):
        raise ModelUnavailableError(
            "this fastembed version does not say where it keeps the model, so no "
            f"int8 copy can be made; set embedding.model_path or {MODEL_PATH_ENV}"
        )
    return Path(folder), model_file


def _load_text_embedding(
    model_name: str, model_path: str | None, cache_dir: str | None, threads: int | None
) -> Any:
    """The loaded model, one per process for the same arguments."""
    return shared(
        ("fastembed", model_name, model_path, cache_dir, threads),
        lambda: _new_text_embedding(model_name, model_path, cache_dir, threads),
    )


def _new_text_embedding(
    model_name: str, model_path: str | None, cache_dir: str | None, threads: int | None
) -> Any:
    from fastembed import TextEmbedding

    kwargs: dict[str, Any] = {"cache_dir": cache_dir, "threads": threads}
    if model_path is not None:
        folder = Path(model_path)
        if not (folder / "model.onnx").is_file():
            raise ModelUnavailableError(
                f"embedding model_path {str(folder)!r} holds no model.onnx; point "
                f"embedding.model_path or {MODEL_PATH_ENV} at the folder of an ONNX "
                f"export of {model_name}"
            )
        kwargs["specific_model_path"] = str(folder)
    else:
        cached = _cached_text_embedding(model_name, kwargs)
        if cached is not None:
            return cached
        offline = _hub_unreachable()
        if offline is not None:
            where = cache_dir or "fastembed's cache"
            raise ModelUnavailableError(
                f"the embedding model {model_name!r} is not in {where} and cannot be "
                f"downloaded ({offline}). Set embedding.model_path or "
                f"{MODEL_PATH_ENV} to a local ONNX copy (`ragbudget doctor` shows "
                "what is in effect)."
            )
    try:
        return TextEmbedding(model_name, **kwargs)
    except Exception as exc:  # unknown names and download failures, many types
        raise ModelUnavailableError(
            f"could not load or download the embedding model {model_name!r} "
            f"({type(exc).__name__}: {exc}). Offline? Set embedding.model_path or "
            f"{MODEL_PATH_ENV} to a local ONNX copy."
        ) from exc


HUB_PROBE_SECONDS = 1.5
"""Bound on the check that the model hub can be reached (fastembed's own retries
of an unreachable hub take most of a minute)."""


def _cached_text_embedding(model_name: str, kwargs: dict[str, Any]) -> Any:
    """The model from fastembed's cache alone, or None (its expected error muted)."""
    from fastembed import TextEmbedding
    from loguru import logger

    logger.disable("fastembed")
    try:
        return TextEmbedding(model_name, local_files_only=True, **kwargs)
    except Exception:  # absent or partial: a download may still work
        return None
    finally:
        logger.enable("fastembed")


def _hub_unreachable() -> str | None:
    """Why no model can be downloaded now, or None when it may be.

    One bounded TCP connection to the hub; skipped behind a proxy, which this
    cannot check.
    """
    if os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {
        "1",
        "TRUE",
        "YES",
        "ON",
    }:
        return "HF_HUB_OFFLINE is set"
    if any(
        os.environ.get(name) for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY")
    ):
        return None
    host = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    address = (host.hostname or "huggingface.co", host.port or 443)

    def connect() -> None:
        with socket.create_connection(address, timeout=HUB_PROBE_SECONDS):
            pass

    try:
        call_with_timeout(connect, HUB_PROBE_SECONDS, f"connecting to {address[0]}")
    except (OSError, TimeoutError) as exc:
        return f"{address[0]} cannot be reached: {exc}"
    return None
