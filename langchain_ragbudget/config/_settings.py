"""Configuration: one YAML file merged over the shipped defaults, checked by pydantic.

Errors are raised here, at load time, and name the file, the dotted key path and the
offending value, so a typo never travels into the pipeline.

Strict on purpose: every model is a `StrictModel` (`_settings_fields`), which takes no
booleans or strings for numbers, no fractional floats for integers, and no NaN or
infinity anywhere. The YAML itself is read by `_yaml`, which refuses duplicate keys,
non-string keys, cyclic aliases, deep nesting and alias expansion beyond a fixed
size. The fitted weak-evidence model's schema lives in `weak_model` and is
re-exported here.
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
from langchain_ragbudget.config._fields import import_provider as import_provider
from langchain_ragbudget.config._memory_settings import MemorySettings as MemorySettings
from langchain_ragbudget.config._surfaces import DEFAULT_SURFACE as DEFAULT_SURFACE
from langchain_ragbudget.config._tokens import resolve_encoding_name
from langchain_ragbudget.config._weak_model import CombinedEvidence as CombinedEvidence
from langchain_ragbudget.config._weak_settings import (
    WeakEvidenceSettings as WeakEvidenceSettings,
)
from langchain_ragbudget.config._yaml import read_text, read_yaml
from langchain_ragbudget.errors import ConfigError as ConfigError

BM25Method = Literal["robertson", "atire", "bm25l", "bm25+", "lucene"]
QueryPrecision = Literal["float32", "int8"]
FusionMethod = Literal["rrf", "minmax", "dbsf"]  # fusion.py says what each does
Relevance = Literal["blend", "fitted"]  # how `trim` scores sentences
PLACEHOLDERS = (
    "__debezium_unavailable_value",
    "placeholder",
    "lorem ipsum",
    "todo",
    "tbd",
    "coming soon",
    "n/a",
)
# A built-in name, or "package.module:ClassName" of any LangChain implementation.
_CLASS_PATH = r"[A-Za-z_][\w.]*:[A-Za-z_]\w*"
_PROVIDER = rf"^(fastembed|chroma|{_CLASS_PATH})$"
_SPARSE_PROVIDER = rf"^(bm25s|{_CLASS_PATH})$"


def default_of(settings: type[BaseModel], name: str) -> Any:
    """The default of one settings field, for a component that takes the same value.

    The settings models hold every default once; components and the shipped YAML
    agree with them (a test checks both).
    """
    return settings.model_fields[name].get_default(call_default_factory=True)


class RetrieverSettings(StrictModel):
    """Weight in the fusion and how many candidates one retriever hands over."""

    weight: StrictFloat = Field(1.0, ge=0)
    fetch_k: StrictInt = Field(100, ge=1)


class RetrievalSettings(StrictModel):
    """Hybrid retrieval: final k, the fusion method and each retriever's share.

    `fusion` is `rrf` (by rank, with `rrf_c`), `minmax` or `dbsf` (by score,
    normalised per query); `ragbudget tune` picks one on labelled queries.
    `neighbours`: the chunks either side of each of the `k` that an index's
    retriever adds after them, from the same document (0, the default: none), so
    evidence that runs on past a retrieved chunk can reach the prompt; the budget
    gives them only the room the retrieved passages leave, and drops them on the
    record when there is none.
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
    """The sparse side: BM25 on bm25s (its parameters, its tokenizer), or any retriever.

    `provider` names a LangChain retriever class as "package.module:Class" (BM25 on
    Elasticsearch or OpenSearch, say); fusion, rerank and budget stay as they are.
    `index_title`: bm25s indexes a passage's `title` metadata ahead of its text when
    the text does not contain it, so a chunk far into a document still matches the
    document's name (the passage returned is unchanged).
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
    """The embedding model; `model_path` points at a local ONNX copy when offline."""

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

    `collection`, `persist_directory`, `host`, `port`, `timeout` and `ef_search`
    are Chroma's; another provider takes its settings through `options`.
    `ef_search` is the breadth of Chroma's HNSW search, set on the collection when
    it is opened: 200 by default, twice Chroma's own, whose narrower search misses
    more of the exact nearest neighbours and can answer differently from one
    process to the next (BENCHMARKS.md); `None` keeps what the collection has.
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
    """Where an index lives, how files are chunked, which texts are placeholders."""

    directory: StrictStr = "ragbudget-index"
    chunk_size: StrictInt = Field(256, ge=16)
    chunk_overlap: StrictInt = Field(32, ge=0)
    chunker: Literal["sentences", "recursive"] = "sentences"
    encoding: StrictStr = "cl100k_base"
    placeholders: list[StrictStr] = Field(default_factory=lambda: [*PLACEHOLDERS])
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
    """The FlashRank stage: model, where it lives, what it keeps."""

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
    """The chat model for the demo and the CLI, built with init_chat_model."""

    model: StrictStr | None = None
    temperature: StrictFloat = Field(0.0, ge=0)
    max_tokens: StrictInt = Field(400, ge=1)
    timeout: StrictFloat = Field(60.0, gt=0)


class TracingSettings(StrictModel):
    """OpenTelemetry spans per stage (the `otel` extra); off unless switched on."""

    otel: StrictBool = False


class SurfaceSettings(StrictModel):
    """The context budget of one surface (chat, search, an API...).

    Frozen and strict like every settings model: no booleans or strings for
    numbers, no NaN; an unknown key is an error.

    Attributes:
        max_docs: At most this many passages reach the prompt.
        max_tokens: At most this many tokens of rendered context (headers and
            quoted passages), unless `min_docs` forces more.
        encoding: The tiktoken encoding to count in; None to derive it from `model`.
        model: The target model, whose tiktoken encoding is used when `encoding`
            is None.
        min_docs: The top `min_docs` passages are kept even when they exceed
            `max_tokens` (the report then says `over_budget`); at most `max_docs`.
        packing: `skip` passes over a passage that does not fit and tries the next;
            `stop` stops at the first one that does not fit; `trim` shortens one
            that does not fit to its most relevant whole sentences (with a record)
            and goes on.
        max_sentences: With `trim`, at most this many sentences of one shortened
            passage (None: as many as fit).
        relevance: With `trim`, how sentences are chosen: `blend` (the default),
            IDF-weighted overlap with the question plus 0.3 of a logistic model's
            score, for text of any kind; `fitted`, the model fitted on SciFact
            abstracts alone, which learned that abstracts state their findings
            late: it keeps more evidence of abstracts at small budgets and
            passes over an answer stated first.
        order: `rank` shows citations best first; `edges` puts the best first and
            last and the weakest in the middle.
        weak_evidence: When the evidence is weak: thresholds on the top score, or
            a combined model fitted by `ragbudget eval`.
        max_per_source: At most this many passages of one source document
            (None: no cap); the rest are dropped with a record.
        max_per_retriever: At most this many passages whose best rank came from
            one retriever (None: no cap); the rest are dropped with a record.
        max_prompt_tokens: Budget the whole prompt (system prompt, chat history,
            context, question, as the chat model counts messages) to this many
            tokens; None budgets the context alone, by `max_tokens`.
        reserve_output_tokens: With `max_prompt_tokens`, tokens kept free for
            the answer (the model's window minus the answer's room).
        history_share: With `max_prompt_tokens`, the share of the room left
            after the fixed parts that chat history may take; what history
            leaves unused goes to the context (still at most `max_tokens`).
        max_memories: At most this many recalled memories reach the prompt (a
            chain given `memory=`); the rest are recorded `memory / ...`.
        memory_tokens: The memory section's tokens at most (its own share,
            apart from `max_tokens`; inside `max_prompt_tokens` when set).
    """

    max_docs: StrictInt = Field(ge=1)
    max_tokens: StrictInt = Field(ge=1)
    encoding: StrictStr | None = None
    model: StrictStr | None = "gpt-4o"
    min_docs: StrictInt = Field(1, ge=0)
    packing: Literal["skip", "stop", "trim"] = "skip"
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
    """The whole validated configuration.

    Made by `load_config`: the shipped `config_default.yml` with the user's YAML
    merged over it, every value checked. Frozen.

    Attributes:
        retrieval: Final `k`, the RRF constant, the id key, and each retriever's
            weight and fetch size.
        sparse: BM25 parameters and tokenizer.
        embedding: The embedding model (provider, local path, batch size...).
        vector_store: Chroma embedded or server, or another provider.
        rerank: The FlashRank stage (model, `top_n`, `score_floor`, what to do
            when the model is unavailable).
        index: Where a `HybridIndex` lives and how files are chunked.
        llm: The chat model for the demo and the CLI.
        tracing: Whether chains built with it emit OpenTelemetry spans.
        memory: How agent memories are recalled and ranked (`memory.py`).
        surfaces: Each surface's context budget, by name.
        source: The file this configuration came from (used in error messages).
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

    def surface(self, name: str) -> SurfaceSettings:
        """Return one surface's budget, or fail naming the surfaces that exist.

        Args:
            name: The surface, a key of `surfaces` (e.g. `chat`).

        Returns:
            That surface's settings.

        Raises:
            ConfigError: No surface has that name.
        """
        try:
            return self.surfaces[name]
        except KeyError:
            raise unknown_surface(self.source, name, self.surfaces) from None


def load_config(path: str | Path | None = None) -> RagBudgetConfig:
    """Load the shipped defaults, merge the YAML at `path` over them, validate.

    Mappings merge key by key, so a file that sets `surfaces.chat.max_tokens`
    keeps every other default; lists and scalars replace the default. A surface
    the shipped file does not define takes every key it leaves out from the
    shipped `chat` surface (`DEFAULT_SURFACE`; see `_inherit_surfaces` for why).

    Args:
        path: A YAML file; None for the shipped defaults alone.

    Returns:
        The validated, frozen configuration.

    Raises:
        ConfigError: Any problem with the file (unreadable, larger than 1 MiB, not
            UTF-8, not YAML, duplicate or non-string keys, alias bombs, deep
            nesting, an unknown key, a bad value), naming the file, the key or
            line, and the value.

    Example:
        .. code-block:: python

            from langchain_ragbudget import ContextBudget, load_config

            config = load_config("ragbudget.yml")
            print(config.surface("chat").max_tokens)
            budget = ContextBudget.from_config(config, surface="chat")
    """
    return _load(path).config


class Origin(StrEnum):
    """Where one effective configuration value came from."""

    DEFAULT = "default"  # the shipped config_default.yml
    FILE = "file"  # the user's YAML
    INHERITED = "inherited"  # a new surface's key, from the shipped default surface


@dataclass(frozen=True)
class ConfigValue:
    """One leaf of the effective configuration and where it came from.

    Attributes:
        key: The dotted key path, e.g. `surfaces.voice.max_docs`.
        value: The validated value (as `model_dump` gives it).
        origin: The shipped defaults, the user's file, or inherited by a new
            surface from the shipped default surface.
    """

    key: str
    value: Any
    origin: Origin

    def source(self, file: str | None) -> str:
        """The origin in words, naming the file it came from."""
        if self.origin == Origin.FILE:
            return str(file)
        if self.origin == Origin.INHERITED:
            return f"inherited from {DEFAULT_CONFIG_NAME} surfaces.{DEFAULT_SURFACE}"
        return DEFAULT_CONFIG_NAME


@dataclass(frozen=True)
class EffectiveConfig:
    """A loaded configuration with the origin of every value, for `ragbudget config`.

    Attributes:
        config: The validated configuration.
        file: The user's YAML, or None for the shipped defaults alone.
        values: Every leaf value with its origin, in the order of the settings.
    """

    config: RagBudgetConfig
    file: str | None
    values: list[ConfigValue]


def explain_config(path: str | Path | None = None) -> EffectiveConfig:
    """Load like `load_config`, and say where each effective value came from.

    Args:
        path: A YAML file; None for the shipped defaults alone.

    Returns:
        The configuration and every leaf value with its origin.

    Raises:
        ConfigError: As `load_config`.
    """
    loaded = _load(path)
    shipped_surfaces = loaded.defaults.get("surfaces", {})
    values = []
    for parts, value in leaves(loaded.config.model_dump(), []):
        if has_key_path(loaded.user, parts):
            origin = Origin.FILE
        elif parts[0] == "surfaces" and parts[1] not in shipped_surfaces:
            origin = Origin.INHERITED
        else:
            origin = Origin.DEFAULT
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
    """Give each surface the shipped file lacks the keys it leaves out.

    They come from the shipped default surface (`chat` in config_default.yml),
    not from the user's own `chat` and not from `SurfaceSettings`' field defaults:

    - not the field defaults: a budget has no neutral size (`max_docs` and
      `max_tokens` have none), and they would give a new surface `skip` packing
      and no weak-evidence check, silently unlike every shipped surface;
    - not the user's `chat`: an edit to one surface must not change another,
      so each surface reads as "shipped chat plus what the file says here";
    - `chat` rather than `search`: it is the surface used when none is named,
      and its budget is the small one, so a surface that leaves out a size
      drops passages (and reports them) rather than overrunning a small model.
    """
    surfaces = merged.get("surfaces")
    base = defaults["surfaces"][DEFAULT_SURFACE]
    if not isinstance(surfaces, dict):
        return merged  # validation names the bad value
    for name, settings in surfaces.items():
        if name not in defaults["surfaces"] and isinstance(settings, dict):
            surfaces[name] = deep_merge(base, settings)
    return merged


def load_surface(
    path: RagBudgetConfig | str | Path | None = None, *, name: str
) -> SurfaceSettings:
    """Shortcut: the budget of one surface from a config file.

    The config comes first, as in every builder; `name` is keyword-only, since a
    call in the old order, `load_surface("chat", "ragbudget.yml")`, cannot be told
    apart from a file named `chat` by its values (it now fails with a TypeError).

    Args:
        path: A YAML file, a loaded config, or None for the shipped defaults.
        name: The surface (e.g. `chat`).

    Returns:
        That surface's settings.

    Raises:
        ConfigError: The file is invalid or has no such surface.
    """
    return as_config(path).surface(name)


def as_config(config: RagBudgetConfig | str | Path | None) -> RagBudgetConfig:
    """The configuration a component's `from_config` was given, loaded if need be.

    Args:
        config: A loaded configuration, a YAML file merged over the defaults, or
            None for the shipped defaults.

    Returns:
        The validated configuration.

    Raises:
        ConfigError: The file is invalid.
    """
    return config if isinstance(config, RagBudgetConfig) else load_config(config)


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
