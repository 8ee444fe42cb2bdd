"""Configuration: one YAML file merged over the shipped surfaces, checked by pydantic.

The settings models hold every default; `config_default.yml` holds the surfaces.
Every check happens here, at load time, so no builder can skip one, and each
error names the file, the dotted key path and the value.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

from langchain_ragbudget.config._data import (
    DEFAULT_CONFIG_NAME,
    KeyPathError,
    check_prompt_room,
    check_surface_names,
    deep_merge,
    dotted,
    has_key_path,
    leaves,
    surface_name_problem,
    unknown_surface,
    validation_error,
)
from langchain_ragbudget.config._fields import (
    Options,
    Provider,
    RetrieverProvider,
    StrictModel,
)
from langchain_ragbudget.config._memory_settings import MemorySettings as MemorySettings
from langchain_ragbudget.config._suggest import did_you_mean
from langchain_ragbudget.config._tokens import resolve_encoding_name
from langchain_ragbudget.config._weak_model import CombinedEvidence as CombinedEvidence
from langchain_ragbudget.config._weak_settings import (
    WeakEvidenceSettings as WeakEvidenceSettings,
)
from langchain_ragbudget.config._yaml import read_text, read_yaml
from langchain_ragbudget.errors import ConfigError as ConfigError
from langchain_ragbudget.ledger._metadata_keys import (
    DENSE,
    FUSED_SCORE,
    RERANK_SCORE,
    SPARSE,
    score_key,
)

BM25Method = Literal["robertson", "atire", "bm25l", "bm25+", "lucene"]
QueryPrecision = Literal["float32", "int8"]
FusionMethod = Literal["rrf", "minmax", "dbsf"]
Relevance = Literal["blend", "fitted"]
DEFAULT_SURFACE = "chat"
"""The surface used when none is named, and the one a new surface inherits from."""
SCORE_KEYS = (RERANK_SCORE, FUSED_SCORE, score_key(SPARSE), score_key(DENSE))
"""The scores the pipeline writes: the keys a weak-evidence threshold can name."""
# A built-in name, or "package.module:ClassName" of any LangChain implementation.
_CLASS_PATH = r"[A-Za-z_][\w.]*:[A-Za-z_]\w*"
_PROVIDER = rf"^(fastembed|chroma|{_CLASS_PATH})$"
_SPARSE_PROVIDER = rf"^(bm25s|{_CLASS_PATH})$"


def default_of(settings: type[BaseModel], name: str) -> Any:
    """One settings field's default, so a component and its setting cannot disagree."""
    return settings.model_fields[name].get_default(call_default_factory=True)


class RetrieverSettings(StrictModel):
    """One retriever's share of the fusion.

    Attributes:
        weight: Its weight in the fusion (0: left out; not both).
        fetch_k: Candidates it hands to fusion.
    """

    weight: StrictFloat = Field(1.0, ge=0)
    fetch_k: StrictInt = Field(100, ge=1)


class RetrievalSettings(StrictModel):
    """Hybrid retrieval: final k, the fusion method and each retriever's share.

    Attributes:
        k: Candidates returned after fusion.
        fusion: `rrf` (by rank), `minmax` or `dbsf` (by score normalised per
            query); `ragbudget tune` picks one on labelled queries.
        rrf_c: The reciprocal rank fusion constant: `score = sum w / (c + rank)`.
        id_key: The metadata key that identifies a passage without `Document.id`.
        neighbours: Chunks either side of each hit, from the same document, that
            an index's retriever adds (0: none); they get only the room left.
        sparse: The sparse retriever's weight and fetch size.
        dense: The dense retriever's weight and fetch size.
    """

    k: StrictInt = Field(10, ge=1)
    fusion: FusionMethod = "rrf"
    rrf_c: StrictFloat = Field(60.0, gt=0)
    id_key: StrictStr | None = "chunk_id"
    neighbours: StrictInt = Field(0, ge=0, le=100)
    sparse: RetrieverSettings = RetrieverSettings()
    dense: RetrieverSettings = RetrieverSettings()

    @model_validator(mode="after")
    def _some_weight(self) -> RetrievalSettings:
        if self.sparse.weight == 0 and self.dense.weight == 0:
            raise ValueError("sparse.weight and dense.weight are both 0")
        return self


class SparseSettings(StrictModel):
    """The sparse side: BM25 on bm25s, or any LangChain retriever.

    Attributes:
        provider: `bm25s`, or a retriever class as "package.module:Class", built
            with `Class.from_documents(passages, **options)` if it has that,
            else `Class(**options)`.
        options: Keyword arguments for such a class (not used by bm25s).
        k1: BM25 term-frequency saturation.
        b: BM25 length normalisation, 0 to 1.
        method: The bm25s scoring variant.
        stemmer: A PyStemmer language, or None for no stemming.
        stopwords: A bm25s stopword language, a list of words, or None.
        index_title: Index a passage's `title` ahead of its text, so a chunk far
            into a document still matches the document's name.
    """

    provider: RetrieverProvider = Field("bm25s", pattern=_SPARSE_PROVIDER)
    options: Options = Field(default_factory=dict)
    k1: StrictFloat = Field(1.5, gt=0)
    b: StrictFloat = Field(0.75, ge=0, le=1)
    method: BM25Method = "lucene"
    stemmer: StrictStr | None = "english"
    stopwords: StrictStr | list[StrictStr] | None = "en"
    index_title: StrictBool = True


class EmbeddingSettings(StrictModel):
    """The embedding model.

    Attributes:
        provider: `fastembed`, or an Embeddings class as "package.module:Class".
        options: Keyword arguments for such a class (not used by fastembed).
        model: The fastembed model name.
        model_path: A local ONNX folder (also RAGBUDGET_EMBEDDING_MODEL_PATH).
        cache_dir: fastembed's download cache; None for fastembed's own.
        batch_size: Texts per batch; bounded, as a large batch takes gigabytes.
        threads: ONNX Runtime threads; None for its default.
        query_precision: `int8` embeds queries with an int8 copy of the model
            (faster; documents stay float32; fastembed only).
    """

    provider: Provider = Field("fastembed", pattern=_PROVIDER)
    options: Options = Field(default_factory=dict)
    model: StrictStr = "sentence-transformers/all-MiniLM-L6-v2"
    model_path: StrictStr | None = None
    cache_dir: StrictStr | None = None
    batch_size: StrictInt = Field(32, ge=1, le=4096)
    threads: StrictInt | None = Field(None, ge=1)
    query_precision: QueryPrecision = "float32"

    @model_validator(mode="after")
    def _int8_needs_fastembed(self) -> EmbeddingSettings:
        if self.query_precision != "float32" and self.provider != "fastembed":
            raise ValueError(
                f"query_precision {self.query_precision!r} needs the fastembed "
                f"provider; {self.provider!r} embeds queries its own way"
            )
        return self


class VectorStoreSettings(StrictModel):
    """Chroma embedded (in memory or persistent) or a Chroma server.

    Attributes:
        provider: `chroma`, or a VectorStore class as "package.module:Class",
            made with `embedding` and `options`.
        options: Keyword arguments for such a class (not used by chroma).
        collection: The Chroma collection.
        persist_directory: A folder for a persistent store; None: in memory.
        host: A Chroma server to use instead (with `port`).
        port: The server's port.
        timeout: Seconds for every request to a Chroma server.
        ef_search: HNSW search breadth, twice Chroma's own, whose narrower search
            misses neighbours and varies between processes (BENCHMARKS.md,
            Retrieval); None keeps the collection's.
    """

    provider: Provider = Field("chroma", pattern=_PROVIDER)
    options: Options = Field(default_factory=dict)
    collection: StrictStr = Field("ragbudget", min_length=3)
    persist_directory: StrictStr | None = None
    host: StrictStr | None = None
    port: StrictInt = Field(8000, ge=1, le=65535)
    timeout: StrictFloat = Field(30.0, gt=0)
    ef_search: StrictInt | None = Field(200, ge=1, le=100_000)


class IndexSettings(StrictModel):
    """Where an index lives, how files are chunked, which texts are placeholders.

    Attributes:
        directory: Where `ragbudget index` keeps Chroma, BM25 and the manifest.
        chunk_size: Tokens per chunk, at most.
        chunk_overlap: Tokens shared by neighbouring chunks (whole sentences).
        chunker: `sentences` (chunks end at sentence ends, a heading starts one)
            or `recursive` (LangChain's splitter, which cuts inside sentences).
        encoding: The tiktoken encoding the chunker counts in.
        placeholders: A file whose whole text is one of these is refused.
        lock_timeout: Seconds a second writer waits for the write lock.
    """

    directory: StrictStr = "ragbudget-index"
    chunk_size: StrictInt = Field(256, ge=16)
    chunk_overlap: StrictInt = Field(32, ge=0)
    chunker: Literal["sentences", "recursive"] = "sentences"
    encoding: StrictStr = "cl100k_base"
    placeholders: list[StrictStr] = Field(
        default_factory=lambda: [
            "__debezium_unavailable_value",
            "placeholder",
            "lorem ipsum",
            "todo",
            "tbd",
            "coming soon",
            "n/a",
        ]
    )
    lock_timeout: StrictFloat = Field(60.0, ge=0)

    @model_validator(mode="after")
    def _overlap_below_size(self) -> IndexSettings:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(
                f"chunk_overlap ({self.chunk_overlap}) must be below chunk_size"
            )
        resolve_encoding_name(self.encoding, None)
        return self


class RerankSettings(StrictModel):
    """The FlashRank stage: model, where it lives, what it keeps.

    Attributes:
        enabled: False: no rerank stage, no model fetched, no warning of it.
        model: A FlashRank cross-encoder.
        cache_dir: Where models live; None: the user cache folder (never /tmp).
        max_length: Tokens of query and passage the cross-encoder reads.
        top_n: Candidates kept after reranking; the rest are reported.
        score_floor: Candidates scoring below it are dropped and reported.
        on_unavailable: `skip` (run without rerank and say so) or `error`.
        download: Whether a missing model may be fetched.
        download_timeout: Seconds, for connecting and for each read.
    """

    enabled: StrictBool = True
    model: StrictStr = "ms-marco-MiniLM-L-12-v2"
    cache_dir: StrictStr | None = None
    max_length: StrictInt = Field(512, ge=8)
    top_n: StrictInt = Field(8, ge=1)
    score_floor: StrictFloat | None = None
    on_unavailable: Literal["skip", "error"] = "skip"
    download: StrictBool = True
    download_timeout: StrictFloat = Field(30.0, gt=0)


class LlmSettings(StrictModel):
    """The chat model for the demo and the CLI, built with init_chat_model.

    Attributes:
        model: E.g. `openai:gpt-4o-mini`; None: that one if OPENAI_API_KEY is set.
        temperature: The sampling temperature.
        max_tokens: The answer's own budget.
        timeout: Seconds; no network call goes without one.
    """

    model: StrictStr | None = None
    temperature: StrictFloat = Field(0.0, ge=0)
    max_tokens: StrictInt = Field(400, ge=1)
    timeout: StrictFloat = Field(60.0, gt=0)


class TracingSettings(StrictModel):
    """OpenTelemetry spans per stage (the `otel` extra).

    Attributes:
        otel: Spans per stage, carrying the drop records, to your tracer provider.
    """

    otel: StrictBool = False


class SurfaceSettings(StrictModel):
    """The context budget of one surface (chat, search, an API...).

    Attributes:
        max_docs: At most this many passages reach the prompt.
        max_tokens: Tokens of rendered context (headers and quoted passages).
        encoding: The tiktoken encoding to count in; None: the one of `model`.
        model: The target model, for its encoding when `encoding` is None.
        min_docs: The top passages kept even over `max_tokens` (the report says
            `over_budget`); at most `max_docs`. 0 by default: a budget is never
            exceeded unless you ask.
        packing: For a passage that does not fit: `skip` it and try the next,
            or `trim` it to its most relevant whole sentences.
        max_sentences: With `trim`, the sentences of one passage at most.
        relevance: With `trim`, how sentences are scored: `blend` (question
            overlap plus a logistic model, for any text) or `fitted` (the model
            fitted on SciFact abstracts alone, which favours late sentences).
        order: `rank` (best first) or `edges` (best first and last, weakest in
            the middle).
        weak_evidence: Thresholds on the top score, or a fitted combined model.
        max_per_source: Passages of one source document at most (None: no cap).
        max_per_retriever: Passages whose best rank came from one retriever at
            most (None: no cap).
        max_prompt_tokens: Budget the whole prompt as the chat model counts its
            messages; None budgets the context alone, by `max_tokens`.
        reserve_output_tokens: With `max_prompt_tokens`, tokens kept for the answer.
        history_share: With `max_prompt_tokens`, the share of the room left after
            the fixed parts that chat history may take; the rest goes to context.
        max_memories: Recalled memories in the prompt at most.
        memory_tokens: The memory section's own token budget.
    """

    max_docs: StrictInt = Field(ge=1)
    max_tokens: StrictInt = Field(ge=1)
    encoding: StrictStr | None = None
    model: StrictStr | None = "gpt-4o"
    min_docs: StrictInt = Field(0, ge=0)
    packing: Literal["skip", "trim"] = "skip"
    max_sentences: StrictInt | None = Field(None, ge=1)
    relevance: Relevance = "blend"
    order: Literal["rank", "edges"] = "rank"
    weak_evidence: WeakEvidenceSettings = WeakEvidenceSettings()
    max_per_source: StrictInt | None = Field(None, ge=1)
    max_per_retriever: StrictInt | None = Field(None, ge=1)
    max_prompt_tokens: StrictInt | None = Field(None, ge=1)
    reserve_output_tokens: StrictInt = Field(0, ge=0)
    history_share: StrictFloat = Field(0.5, ge=0, le=1)
    max_memories: StrictInt = Field(5, ge=0)
    memory_tokens: StrictInt = Field(300, ge=0)

    @field_validator("packing", mode="before")
    @classmethod
    def _no_stop(cls, value: Any) -> Any:
        """`stop` kept less evidence than `skip` at every budget (BENCHMARKS.md)."""
        if value == "stop":
            raise ValueError(
                "packing 'stop' is not a policy; use 'skip' (every passage that "
                "fits, in rank order) or 'trim' (shorten the one that does not)"
            )
        return value

    @model_validator(mode="after")
    def _min_within_max(self) -> SurfaceSettings:
        check_prompt_room(self.max_prompt_tokens, self.reserve_output_tokens)
        if self.min_docs > self.max_docs:
            raise ValueError(
                f"min_docs ({self.min_docs}) exceeds max_docs ({self.max_docs})"
            )
        resolve_encoding_name(self.encoding, self.model)
        return self

    @property
    def encoding_name(self) -> str:
        """The tiktoken encoding the budget counts in."""
        return resolve_encoding_name(self.encoding, self.model)


class RagBudgetConfig(StrictModel):
    """The whole validated configuration, as `load_config` makes it. Frozen.

    Attributes:
        retrieval: Final `k`, fusion, the id key, each retriever's share.
        sparse: BM25 parameters and tokenizer, or another retriever.
        embedding: The embedding model.
        vector_store: Chroma embedded or server, or another provider.
        rerank: The FlashRank stage.
        index: Where a `HybridIndex` lives and how files are chunked.
        llm: The chat model for the demo and the CLI.
        tracing: Whether chains built with it emit OpenTelemetry spans.
        memory: How agent memories are recalled and ranked.
        surfaces: Each surface's context budget, by name. A weak-evidence
            threshold on a score no stage writes (not in `SCORE_KEYS`) would
            never fire, so it is refused, on every surface.
        source: The file this configuration came from, for error messages.
    """

    retrieval: RetrievalSettings = RetrievalSettings()
    sparse: SparseSettings = SparseSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    vector_store: VectorStoreSettings = VectorStoreSettings()
    rerank: RerankSettings = RerankSettings()
    index: IndexSettings = IndexSettings()
    llm: LlmSettings = LlmSettings()
    tracing: TracingSettings = TracingSettings()
    memory: MemorySettings = MemorySettings()
    surfaces: dict[str, SurfaceSettings]
    source: StrictStr = Field(DEFAULT_CONFIG_NAME, exclude=True)

    @field_validator("surfaces")
    @classmethod
    def _readable_names(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name in value:
            problem = surface_name_problem(name)
            if problem is not None:
                raise ValueError(f"surface {name!r}: {problem}")
        return value

    @field_validator("surfaces")
    @classmethod
    def _thresholds_on_written_scores(
        cls, value: dict[str, SurfaceSettings]
    ) -> dict[str, SurfaceSettings]:
        for name, settings in value.items():
            for key in settings.weak_evidence.thresholds:
                if key not in SCORE_KEYS:
                    raise KeyPathError(
                        [name, "weak_evidence", "thresholds", key],
                        f"no stage writes this score; known: "
                        f"{', '.join(sorted(SCORE_KEYS))}"
                        f"{did_you_mean(key, SCORE_KEYS)}",
                    )
        return value

    def surface(self, name: str) -> SurfaceSettings:
        """One surface's budget.

        Raises:
            ConfigError: No surface has that name (the error lists those that do).
        """
        try:
            return self.surfaces[name]
        except KeyError:
            raise unknown_surface(self.source, name, self.surfaces) from None


def load_config(path: str | Path | None = None) -> RagBudgetConfig:
    """Load the shipped surfaces, merge the YAML at `path` over them, validate.

    Every check a value gets happens here, once, so no builder can skip one;
    every builder takes the result, or a path it loads through here. Mappings
    merge key by key; lists and scalars replace the default. A surface the
    shipped file lacks takes the keys it leaves out from the shipped `chat`.

    Args:
        path: A YAML file; None for the shipped defaults alone.

    Raises:
        ConfigError: Any problem with the file (unreadable, over 1 MiB, not
            UTF-8, not YAML, duplicate or non-string keys, alias bombs, deep
            nesting, an unknown key, a bad value, a threshold on a score no
            stage writes), naming the file, the key or line, and the value.
    """
    return _load(path).config


class Origin(StrEnum):
    """Where one effective configuration value came from."""

    DEFAULT = "default"  # the shipped config_default.yml
    FILE = "file"  # the user's YAML
    INHERITED = "inherited"  # a new surface's key, from the shipped default surface
    BUILT_IN = "built-in"  # the settings model's default


@dataclass(frozen=True)
class ConfigValue:
    """One leaf of the effective configuration and where it came from."""

    key: str
    value: Any
    origin: Origin

    def source(self, file: str | None) -> str:
        """The origin in words, naming the file it came from."""
        if self.origin == Origin.FILE:
            return str(file)
        if self.origin == Origin.INHERITED:
            return f"inherited from {DEFAULT_CONFIG_NAME} surfaces.{DEFAULT_SURFACE}"
        if self.origin == Origin.BUILT_IN:
            return "built-in default"
        return DEFAULT_CONFIG_NAME


@dataclass(frozen=True)
class EffectiveConfig:
    """A loaded configuration with the origin of every leaf value, in settings order."""

    config: RagBudgetConfig
    file: str | None
    values: list[ConfigValue]


def explain_config(path: str | Path | None = None) -> EffectiveConfig:
    """Load like `load_config`, and say where each effective value came from.

    Raises:
        ConfigError: As `load_config`.
    """
    loaded = _load(path)
    shipped = loaded.defaults["surfaces"]
    values = []
    for parts, value in leaves(loaded.config.model_dump(), []):
        if has_key_path(loaded.user, parts):
            origin = Origin.FILE
        elif parts[0] == "surfaces" and parts[1] not in shipped:
            inherited = has_key_path(shipped[DEFAULT_SURFACE], parts[2:])
            origin = Origin.INHERITED if inherited else Origin.BUILT_IN
        elif has_key_path(loaded.defaults, parts):
            origin = Origin.DEFAULT
        else:
            origin = Origin.BUILT_IN
        values.append(ConfigValue(dotted(parts), value, origin))
    return EffectiveConfig(loaded.config, None if path is None else str(path), values)


@dataclass(frozen=True)
class _Loaded:
    config: RagBudgetConfig
    defaults: dict[str, Any]
    user: dict[str, Any]


def _load(path: str | Path | None) -> _Loaded:
    defaults = _defaults()
    if path is None:
        return _Loaded(_validate(defaults, DEFAULT_CONFIG_NAME), defaults, {})
    file = str(path)
    user = read_yaml(read_text(Path(path), file), file)
    merged = _inherit_surfaces(deep_merge(defaults, user), defaults)
    return _Loaded(_validate(merged, file), defaults, user)


def _inherit_surfaces(
    merged: dict[str, Any], defaults: dict[str, Any]
) -> dict[str, Any]:
    """Give each surface the shipped file lacks the keys it leaves out, from `chat`.

    Not the field defaults: a budget has no neutral size, and they would give a
    new surface `skip` packing and no weak-evidence check. Not the user's
    `chat`: an edit to one surface must not change another. `chat` because its
    budget is the small one, so a surface that leaves out a size drops (on the
    record) rather than overruns a small model.
    """
    surfaces = merged.get("surfaces")
    base = defaults["surfaces"][DEFAULT_SURFACE]
    if not isinstance(surfaces, dict):
        return merged  # validation names the bad value
    for name, settings in surfaces.items():
        if name not in defaults["surfaces"] and isinstance(settings, dict):
            surfaces[name] = deep_merge(base, settings)
    return merged


ConfigLike = RagBudgetConfig | str | Path | None
"""What every builder takes: a loaded config, a YAML file, or None for the defaults."""


def as_config(config: ConfigLike) -> RagBudgetConfig:
    """The configuration a builder was given, loaded (and so checked) if need be.

    Raises:
        ConfigError: The file is invalid.
        TypeError: `config` is none of those (a settings section, say).
    """
    if isinstance(config, RagBudgetConfig):
        return config
    if config is not None and not isinstance(config, str | Path):
        raise TypeError(
            "a builder takes the whole configuration (load_config(...)), a YAML "
            f"path or None; got a {type(config).__name__}"
        )
    return load_config(config)


def _defaults() -> dict[str, Any]:
    """The shipped defaults: parsed once per process, a fresh copy per load."""
    return copy.deepcopy(_parsed_defaults())


@functools.cache
def _parsed_defaults() -> dict[str, Any]:
    resource = resources.files("langchain_ragbudget").joinpath(DEFAULT_CONFIG_NAME)
    return read_yaml(resource.read_text(encoding="utf-8"), DEFAULT_CONFIG_NAME)


def _validate(data: dict[str, Any], file: str) -> RagBudgetConfig:
    """Validate merged settings; blame `file`, since the shipped defaults are valid."""
    check_surface_names(data, file)
    try:
        return RagBudgetConfig.model_validate({**data, "source": file})
    except ValidationError as exc:
        raise validation_error(data, file, exc, RagBudgetConfig) from None
