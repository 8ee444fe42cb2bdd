"""Local ONNX embeddings through `fastembed`, as LangChain `Embeddings`.

A thin adapter: unlike `langchain_community`'s FastEmbedEmbeddings it loads a local
model folder (for machines without network) and embeds in bounded batches, since
fastembed's default batch of 256 long documents took 17 GB of memory here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from langchain_ragbudget.errors import ModelUnavailableError

MODEL_PATH_ENV = "RAGBUDGET_EMBEDDING_MODEL_PATH"


class FastEmbedEmbeddings(BaseModel, Embeddings):
    """Sentence embeddings from a fastembed ONNX model, loaded on first use.

    `model_path` (or the environment variable RAGBUDGET_EMBEDDING_MODEL_PATH) names a
    local folder holding the ONNX model and tokenizer; without it the model is fetched
    by name the usual way.
    """

    model_name: str = "sentence-transformers/all-MiniLM-L6-v2"
    model_path: str | None = None
    cache_dir: str | None = None
    batch_size: int = Field(32, ge=1)
    threads: int | None = None

    model_config = ConfigDict(protected_namespaces=())

    _model: Any = PrivateAttr(default=None)

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
        """Embed `texts` in batches of `batch_size`."""
        vectors = self._text_embedding().embed(texts, batch_size=self.batch_size)
        return [vector.tolist() for vector in vectors]

    def embed_query(self, text: str) -> list[float]:
        """Embed one query."""
        (vector,) = self._text_embedding().query_embed(text)
        return list(vector.tolist())


def _load_text_embedding(
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
    try:
        return TextEmbedding(model_name, **kwargs)
    except Exception as exc:  # unknown names and download failures, many types
        raise ModelUnavailableError(
            f"could not load or download the embedding model {model_name!r} "
            f"({type(exc).__name__}: {exc}). Offline? Set embedding.model_path or "
            f"{MODEL_PATH_ENV} to a local ONNX copy."
        ) from exc
