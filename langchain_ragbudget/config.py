"""Configuration: one YAML file merged over the shipped defaults, checked by pydantic.

Errors are raised here, at load time, and name the file, the dotted key path and the
offending value, so a typo never travels into the pipeline.
"""

from __future__ import annotations

import copy
import importlib
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, cast

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from langchain_ragbudget.errors import ConfigError
from langchain_ragbudget.tokens import resolve_encoding_name

DEFAULT_CONFIG_NAME = "config_default.yml"
# A built-in name, or "package.module:ClassName" of any LangChain implementation.
_PROVIDER = r"^(fastembed|chroma|[A-Za-z_][\w.]*:[A-Za-z_]\w*)$"


def import_provider(path: str) -> type[Any]:
    """The class a "package.module:Class" provider setting names.

    Raises ValueError saying why it cannot be imported.
    """
    module_name, _, class_name = path.partition(":")
    try:
        return cast(
            type[Any], getattr(importlib.import_module(module_name), class_name)
        )
    except (ImportError, AttributeError) as exc:
        raise ValueError(
            f"cannot import {path!r}: {type(exc).__name__}: {exc}"
        ) from exc


def _importable(path: str) -> str:
    if ":" in path:
        import_provider(path)
    return path


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RetrieverSettings(_Strict):
    """Weight in the fusion and how many candidates one retriever hands over."""

    weight: float = Field(1.0, ge=0)
    fetch_k: int = Field(100, ge=1)


class RetrievalSettings(_Strict):
    """Hybrid retrieval: final k, the fusion constant and each retriever's share."""

    k: int = Field(10, ge=1)
    rrf_c: float = Field(60.0, ge=0)
    id_key: str | None = "chunk_id"
    sparse: RetrieverSettings = RetrieverSettings()
    dense: RetrieverSettings = RetrieverSettings()

    @model_validator(mode="after")
    def _some_weight(self) -> RetrievalSettings:
        if self.sparse.weight == 0 and self.dense.weight == 0:
            raise ValueError("sparse.weight and dense.weight are both 0")
        return self


class SparseSettings(_Strict):
    """BM25 parameters for bm25s, and its tokenizer."""

    k1: float = Field(1.5, gt=0)
    b: float = Field(0.75, ge=0, le=1)
    method: Literal["robertson", "atire", "bm25l", "bm25+", "lucene"] = "lucene"
    stemmer: str | None = "english"
    stopwords: str | list[str] | None = "en"


class EmbeddingSettings(_Strict):
    """The embedding model; `model_path` points at a local ONNX copy when offline."""

    provider: Annotated[str, AfterValidator(_importable)] = Field(
        "fastembed", pattern=_PROVIDER
    )
    options: dict[str, Any] = Field(default_factory=dict)
    model: str = "sentence-transformers/all-MiniLM-L6-v2"
    model_path: str | None = None
    cache_dir: str | None = None
    batch_size: int = Field(32, ge=1, le=4096)
    threads: int | None = Field(None, ge=1)
    query_precision: Literal["float32", "int8"] = "float32"

    @model_validator(mode="after")
    def _int8_needs_fastembed(self) -> EmbeddingSettings:
        if self.query_precision != "float32" and self.provider != "fastembed":
            raise ValueError(
                f"query_precision {self.query_precision!r} needs the fastembed "
                f"provider; {self.provider!r} embeds queries its own way"
            )
        return self


class VectorStoreSettings(_Strict):
    """Chroma embedded (in memory or persistent) or a Chroma server."""

    provider: Annotated[str, AfterValidator(_importable)] = Field(
        "chroma", pattern=_PROVIDER
    )
    options: dict[str, Any] = Field(default_factory=dict)
    collection: str = Field("ragbudget", min_length=3)
    persist_directory: str | None = None
    host: str | None = None
    port: int = Field(8000, ge=1, le=65535)
    timeout: float = Field(30.0, gt=0)


class IndexSettings(_Strict):
    """Where an index lives, how files are chunked, which texts are placeholders."""

    directory: str = "ragbudget-index"
    chunk_size: int = Field(256, ge=16)
    chunk_overlap: int = Field(32, ge=0)
    encoding: str = "cl100k_base"
    placeholders: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _overlap_below_size(self) -> IndexSettings:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(
                f"chunk_overlap ({self.chunk_overlap}) must be below chunk_size"
            )
        resolve_encoding_name(self.encoding, None)
        return self


class RerankSettings(_Strict):
    """The FlashRank stage: model, where it lives, what it keeps."""

    enabled: bool = True
    model: str = "ms-marco-MiniLM-L-12-v2"
    cache_dir: str | None = None
    max_length: int = Field(512, ge=8)
    top_n: int = Field(8, ge=1)
    score_floor: float | None = None
    on_unavailable: Literal["skip", "error"] = "skip"
    download: bool = True
    download_timeout: float = Field(30.0, gt=0)


class LlmSettings(_Strict):
    """The chat model for the demo and the CLI, built with init_chat_model."""

    model: str | None = None
    temperature: float = Field(0.0, ge=0)
    max_tokens: int = Field(400, ge=1)
    timeout: float = Field(60.0, gt=0)


class SurfaceSettings(_Strict):
    """The context budget of one surface (chat, search, an API...)."""

    max_docs: int = Field(ge=1)
    max_tokens: int = Field(ge=1)
    encoding: str | None = None
    model: str | None = "gpt-4o"
    min_docs: int = Field(1, ge=0)
    packing: Literal["skip", "stop"] = "skip"
    order: Literal["rank", "edges"] = "rank"
    weak_evidence: dict[str, float | None] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _min_within_max(self) -> SurfaceSettings:
        if self.min_docs > self.max_docs:
            raise ValueError(f"min_docs ({self.min_docs}) exceeds max_docs")
        resolve_encoding_name(self.encoding, self.model)
        return self

    @property
    def encoding_name(self) -> str:
        """The tiktoken encoding the budget counts in."""
        return resolve_encoding_name(self.encoding, self.model)


class RagBudgetConfig(_Strict):
    """The whole validated configuration."""

    retrieval: RetrievalSettings = RetrievalSettings()
    sparse: SparseSettings = SparseSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    vector_store: VectorStoreSettings = VectorStoreSettings()
    rerank: RerankSettings = RerankSettings()
    index: IndexSettings = IndexSettings()
    llm: LlmSettings = LlmSettings()
    surfaces: dict[str, SurfaceSettings]
    source: str = Field(DEFAULT_CONFIG_NAME, exclude=True)

    def surface(self, name: str) -> SurfaceSettings:
        """Return one surface's budget, or fail naming the surfaces that exist."""
        try:
            return self.surfaces[name]
        except KeyError:
            known = ", ".join(sorted(self.surfaces))
            raise ConfigError(
                self.source,
                f"surfaces.{name}",
                name,
                f"unknown surface; known: {known}",
            ) from None


def load_config(path: str | Path | None = None) -> RagBudgetConfig:
    """Load the shipped defaults, merge the YAML at `path` over them, validate."""
    defaults = _read_yaml(_default_text(), DEFAULT_CONFIG_NAME)
    if path is None:
        return _validate(defaults, DEFAULT_CONFIG_NAME)
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(file, "<file>", file, f"cannot read: {exc.strerror}") from exc
    user = _read_yaml(text, file)
    return _validate(_deep_merge(defaults, user), file)


def load_surface(name: str, path: str | Path | None = None) -> SurfaceSettings:
    """Shortcut: the budget of one surface from a config file."""
    return load_config(path).surface(name)


def _default_text() -> str:
    resource = resources.files("langchain_ragbudget").joinpath(DEFAULT_CONFIG_NAME)
    return resource.read_text(encoding="utf-8")


def _read_yaml(text: str, file: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "<document>"
        raise ConfigError(file, where, None, f"invalid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(file, "<root>", data, "the top level must be a mapping")
    return data


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _validate(data: dict[str, Any], file: str) -> RagBudgetConfig:
    """Validate merged settings; blame `file`, since the shipped defaults are valid."""
    try:
        return RagBudgetConfig.model_validate({**data, "source": file})
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = [str(part) for part in error["loc"]]
        key = ".".join(loc) or "<root>"
        value = _lookup(data, loc)
        problem = error["msg"]
        if error["type"] == "extra_forbidden":
            problem = "unknown key"
        raise ConfigError(file, key, value, problem) from None


def _lookup(data: Any, loc: list[str]) -> Any:
    for part in loc:
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return None
    return data
