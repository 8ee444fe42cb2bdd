"""Configuration: one YAML file merged over the shipped defaults, checked by pydantic.

Errors are raised here, at load time, and name the file, the dotted key path and the
offending value, so a typo never travels into the pipeline.

Strict on purpose: YAML 1.1 reads `yes` as a boolean and `.nan` as a float, and a lax
validator would turn those into `1` and a comparison that is always false. So the
models take no booleans for numbers, no strings for numbers, no fractional floats for
integers, and no NaN or infinity anywhere. The YAML itself is read with the safe
loader plus checks: duplicate keys, non-string keys, cyclic aliases, deep nesting and
alias expansion beyond a fixed size are refused (see `_read_yaml`).
"""

from __future__ import annotations

import copy
import importlib
import math
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, cast

import yaml
from langchain_core.retrievers import BaseRetriever
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    Tag,
    ValidationError,
    model_validator,
)

from langchain_ragbudget._tokens import resolve_encoding_name
from langchain_ragbudget.errors import ConfigError

DEFAULT_CONFIG_NAME = "config_default.yml"
# The surface used when none is named, and the one a new surface inherits from.
DEFAULT_SURFACE = "chat"
BM25Method = Literal["robertson", "atire", "bm25l", "bm25+", "lucene"]
QueryPrecision = Literal["float32", "int8"]
FusionMethod = Literal["rrf", "minmax", "dbsf"]  # fusion.py says what each does
Relevance = Literal["overlap", "fitted"]  # how `trim` scores sentences
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


def import_provider(path: str) -> type[Any]:
    """The class a "package.module:Class" provider setting names.

    Raises ValueError saying why it cannot be imported.
    """
    module_name, _, class_name = path.partition(":")
    try:
        return cast(
            type[Any], getattr(importlib.import_module(module_name), class_name)
        )
    except Exception as exc:  # a module may fail at import with anything
        raise ValueError(
            f"cannot import {path!r}: {type(exc).__name__}: {exc}"
        ) from exc


def _importable(path: str) -> str:
    if ":" in path:
        import_provider(path)
    return path


def _finite_tree(value: Any) -> Any:
    """Refuse NaN and infinity inside free-form `options` too."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"{item!r} is not a finite number")
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return value


_Options = Annotated[dict[str, Any], AfterValidator(_finite_tree)]


class _Strict(BaseModel):
    # Fields use Strict* types: no `yes` for 1, no "60" for 60.0, no 2.5 for an int
    # (an int for a float is still fine). allow_inf_nan: .nan and .inf are refused.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class RetrieverSettings(_Strict):
    """Weight in the fusion and how many candidates one retriever hands over."""

    weight: StrictFloat = Field(1.0, ge=0)
    fetch_k: StrictInt = Field(100, ge=1)


class RetrievalSettings(_Strict):
    """Hybrid retrieval: final k, the fusion method and each retriever's share.

    `fusion` is `rrf` (by rank, with `rrf_c`), `minmax` or `dbsf` (by score,
    normalised per query); `ragbudget tune` picks one on labelled queries.
    """

    k: StrictInt = Field(10, ge=1)
    fusion: FusionMethod = "rrf"
    rrf_c: StrictFloat = Field(60.0, ge=0)
    id_key: StrictStr | None = "chunk_id"
    sparse: RetrieverSettings = RetrieverSettings()
    dense: RetrieverSettings = RetrieverSettings()

    @model_validator(mode="after")
    def _some_weight(self) -> RetrievalSettings:
        if self.sparse.weight == 0 and self.dense.weight == 0:
            raise ValueError("sparse.weight and dense.weight are both 0")
        return self


def _retriever_class(path: str) -> str:
    if ":" in path and not issubclass(import_provider(path), BaseRetriever):
        raise ValueError(f"{path!r} is not a LangChain BaseRetriever subclass")
    return path


class SparseSettings(_Strict):
    """The sparse side: BM25 on bm25s (its parameters, its tokenizer), or any retriever.

    `provider` names a LangChain retriever class as "package.module:Class" (BM25 on
    Elasticsearch or OpenSearch, say); fusion, rerank and budget stay as they are.
    """

    provider: Annotated[StrictStr, AfterValidator(_retriever_class)] = Field(
        "bm25s", pattern=_SPARSE_PROVIDER
    )
    options: _Options = Field(default_factory=dict)
    k1: StrictFloat = Field(1.5, gt=0)
    b: StrictFloat = Field(0.75, ge=0, le=1)
    method: BM25Method = "lucene"
    stemmer: StrictStr | None = "english"
    stopwords: StrictStr | list[StrictStr] | None = "en"


class EmbeddingSettings(_Strict):
    """The embedding model; `model_path` points at a local ONNX copy when offline."""

    provider: Annotated[StrictStr, AfterValidator(_importable)] = Field(
        "fastembed", pattern=_PROVIDER
    )
    options: _Options = Field(default_factory=dict)
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


class VectorStoreSettings(_Strict):
    """Chroma embedded (in memory or persistent) or a Chroma server.

    `collection`, `persist_directory`, `host`, `port`, `timeout` and `ef_search`
    are Chroma's; another provider takes its settings through `options`.
    `ef_search` is the breadth of Chroma's HNSW search, set on the collection when
    it is opened (200: Chroma's 100 missed 3% of the exact top 100 on SciFact, and
    answered differently from one process to the next); `None` keeps what the
    collection has.
    """

    provider: Annotated[StrictStr, AfterValidator(_importable)] = Field(
        "chroma", pattern=_PROVIDER
    )
    options: _Options = Field(default_factory=dict)
    collection: StrictStr = Field("ragbudget", min_length=3)
    persist_directory: StrictStr | None = None
    host: StrictStr | None = None
    port: StrictInt = Field(8000, ge=1, le=65535)
    timeout: StrictFloat = Field(30.0, gt=0)
    ef_search: StrictInt | None = Field(200, ge=1, le=100_000)


class IndexSettings(_Strict):
    """Where an index lives, how files are chunked, which texts are placeholders."""

    directory: StrictStr = "ragbudget-index"
    chunk_size: StrictInt = Field(256, ge=16)
    chunk_overlap: StrictInt = Field(32, ge=0)
    encoding: StrictStr = "cl100k_base"
    placeholders: list[StrictStr] = Field(default_factory=lambda: [*PLACEHOLDERS])

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

    enabled: StrictBool = True
    model: StrictStr = "ms-marco-MiniLM-L-12-v2"
    cache_dir: StrictStr | None = None
    max_length: StrictInt = Field(512, ge=8)
    top_n: StrictInt = Field(8, ge=1)
    score_floor: StrictFloat | None = None
    on_unavailable: Literal["skip", "error"] = "skip"
    download: StrictBool = True
    download_timeout: StrictFloat = Field(30.0, gt=0)


class LlmSettings(_Strict):
    """The chat model for the demo and the CLI, built with init_chat_model."""

    model: StrictStr | None = None
    temperature: StrictFloat = Field(0.0, ge=0)
    max_tokens: StrictInt = Field(400, ge=1)
    timeout: StrictFloat = Field(60.0, gt=0)


class TracingSettings(_Strict):
    """OpenTelemetry spans per stage (the `otel` extra); off unless switched on."""

    otel: StrictBool = False


class CombinedEvidence(_Strict):
    """A logistic model over the candidates' weak-evidence signals.

    `ragbudget eval --weak-evidence-yaml` fits it on a labelled split and writes
    it; the probability that the candidates hold the answer is
    `sigmoid(intercept + sum(coefficients[f] * feature f))`, the features as
    `weak_signal.signal_features` computes them.

    Attributes:
        kind: `logistic` (the default, so a model written without it loads).
        coefficients: Feature name to its weight (on the raw feature).
        intercept: The model's intercept.
        threshold: Evidence is weak when the probability is below it.
        fitted_on: What it was fitted on (dataset, split, questions), for people.
    """

    kind: Literal["logistic"] = "logistic"
    coefficients: dict[StrictStr, StrictFloat] = Field(min_length=1)
    intercept: StrictFloat
    threshold: StrictFloat = Field(ge=0, le=1)
    fitted_on: StrictStr = ""


MAX_TREES = 500
MAX_TREE_NODES = 127  # a full binary tree of depth 6
# The YAML reader's MAX_YAML_NODES and MAX_CONFIG_BYTES bound a tree model first:
# 300 trees of depth 3 take about 26,000 YAML nodes and 330 KB.


class TreeNode(_Strict):
    """One node of a regression tree: a split or a leaf.

    A split sends a case to `left` when its feature, as a 32-bit float (the
    precision the fitting library compares in), is at most `threshold`, else to
    `right`; a leaf adds `value`.

    Attributes:
        feature: The split's feature name.
        threshold: The split's threshold.
        left: Index of the node for values at most the threshold.
        right: Index of the node for values above it.
        value: The leaf's value (log-odds, before the learning rate).
    """

    feature: StrictStr | None = None
    threshold: StrictFloat | None = None
    left: StrictInt | None = None
    right: StrictInt | None = None
    value: StrictFloat | None = None

    @model_validator(mode="after")
    def _split_or_leaf(self) -> TreeNode:
        given = [
            part is not None
            for part in (self.feature, self.threshold, self.left, self.right)
        ]
        leaf = self.value is not None and not any(given)
        if not leaf and not (self.value is None and all(given)):
            raise ValueError(
                "a node is either a leaf {value} or a split {feature, threshold, "
                "left, right}"
            )
        return self

    @property
    def split(self) -> tuple[str, float, int, int] | None:
        """`(feature, threshold, left, right)` of a split, None for a leaf."""
        if self.value is not None:
            return None
        return cast(
            tuple[str, float, int, int],
            (self.feature, self.threshold, self.left, self.right),
        )


class Tree(_Strict):
    """A regression tree as a list of nodes, the root first.

    Every child comes after its parent and every node but the root is the child
    of exactly one split, so the nodes form one tree: evaluation cannot loop and
    no node is left over.

    Attributes:
        nodes: The nodes; a split's `left` and `right` index into this list.
    """

    nodes: list[TreeNode] = Field(min_length=1, max_length=MAX_TREE_NODES)

    @model_validator(mode="after")
    def _one_tree(self) -> Tree:
        reached: set[int] = set()
        for index, node in enumerate(self.nodes):
            split = node.split
            children = {} if split is None else {"left": split[2], "right": split[3]}
            for side, child in children.items():
                where = f"nodes.{index}.{side} = {child}"
                if not index < child < len(self.nodes):
                    raise ValueError(
                        f"{where}: a child must come after its parent and within "
                        f"the {len(self.nodes)} nodes (a child at or before its "
                        "parent could make a cycle)"
                    )
                if child in reached:
                    raise ValueError(f"{where}: node {child} has two parents")
                reached.add(child)
        orphans = sorted(set(range(1, len(self.nodes))) - reached)
        if orphans:
            raise ValueError(f"nodes {orphans} are the child of no split")
        return self


class TreeEvidence(_Strict):
    """Gradient-boosted regression trees over the weak-evidence signals.

    Plain data, evaluated by `boosting.boosted_score` without the library that
    fitted them: the probability that the candidates hold the answer is
    `sigmoid(baseline + learning_rate * sum(tree values))`.

    Attributes:
        kind: `trees`.
        baseline: The log-odds before any tree (the fitting split's prior).
        learning_rate: The weight of each tree's value.
        trees: The trees, in the order they were fitted.
        threshold: Evidence is weak when the probability is below it.
        fitted_on: What it was fitted on (dataset, split, questions), for people.
    """

    kind: Literal["trees"]
    baseline: StrictFloat
    learning_rate: StrictFloat = Field(gt=0, le=1)
    trees: list[Tree] = Field(min_length=1, max_length=MAX_TREES)
    threshold: StrictFloat = Field(ge=0, le=1)
    fitted_on: StrictStr = ""

    @property
    def features(self) -> list[str]:
        """The features the splits read, each once, in order of first use."""
        return list(
            dict.fromkeys(
                node.feature
                for tree in self.trees
                for node in tree.nodes
                if node.feature is not None
            )
        )


_MODEL_TAGS = {"logistic": "logistic model", "trees": "tree model"}


def _model_tag(data: Any) -> str | None:
    """The union member for a model's `kind` (logistic when it has none).

    The tags differ from every field name, so an error's key path in the file
    is not confused by them (`_key_parts`).
    """
    kind = data.get("kind", "logistic") if isinstance(data, dict) else data.kind
    return _MODEL_TAGS.get(kind) if isinstance(kind, str) else None


CombinedModel = Annotated[
    Annotated[CombinedEvidence, Tag("logistic model")]
    | Annotated[TreeEvidence, Tag("tree model")],
    Discriminator(
        _model_tag,
        custom_error_type="unknown_kind",
        custom_error_message="kind must be logistic (the default) or trees",
    ),
]
"""A fitted combined model: logistic, or boosted trees."""


class WeakEvidenceSettings(_Strict):
    """When the evidence counts as weak (said in the prompt and under the answer).

    Attributes:
        method: `threshold` compares the best score of the kept passages with
            `thresholds`; `combined` applies the fitted `combined` model to the
            candidate list the budget receives.
        thresholds: Score key to threshold, tried in order; the first key a kept
            passage carries decides (null disables a key).
        precision: The precision of the weak flag that `ragbudget eval` chooses a
            threshold for when it fits the combined model (on the train split).
        combined: The fitted model (logistic or boosted trees); required by
            `method: combined`.
    """

    method: Literal["threshold", "combined"] = "threshold"
    thresholds: dict[StrictStr, StrictFloat | None] = Field(default_factory=dict)
    precision: StrictFloat = Field(0.8, gt=0, le=1)
    combined: CombinedModel | None = None

    @model_validator(mode="before")
    @classmethod
    def _old_flat_form(cls, data: Any) -> Any:
        if isinstance(data, dict):
            flat = [k for k in data if k not in cls.model_fields and "_score" in str(k)]
            if flat:
                raise ValueError(
                    f"score thresholds go under weak_evidence.thresholds (found "
                    f"{', '.join(map(str, flat))} directly under weak_evidence)"
                )
        return data

    @model_validator(mode="after")
    def _model_for_combined(self) -> WeakEvidenceSettings:
        if self.method == "combined" and self.combined is None:
            raise ValueError(
                "method 'combined' needs a fitted model under weak_evidence.combined "
                "(write one with `ragbudget eval --weak-evidence-yaml`)"
            )
        return self


class SurfaceSettings(_Strict):
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
        relevance: With `trim`, how sentences are chosen: `overlap`, IDF-weighted
            overlap with the question, which assumes nothing about where a passage
            puts its point; `fitted`, a logistic model fitted on SciFact abstracts,
            which learned that abstracts state their findings late (better on
            abstracts, and worse wherever the point comes first).
        order: `rank` shows citations best first; `edges` puts the best first and
            last and the weakest in the middle.
        weak_evidence: When the evidence is weak: thresholds on the top score, or
            a combined model fitted by `ragbudget eval`.
    """

    max_docs: StrictInt = Field(ge=1)
    max_tokens: StrictInt = Field(ge=1)
    encoding: StrictStr | None = None
    model: StrictStr | None = "gpt-4o"
    min_docs: StrictInt = Field(1, ge=0)
    packing: Literal["skip", "stop", "trim"] = "skip"
    max_sentences: StrictInt | None = Field(None, ge=1)
    relevance: Relevance = "overlap"
    order: Literal["rank", "edges"] = "rank"
    weak_evidence: WeakEvidenceSettings = WeakEvidenceSettings()

    @model_validator(mode="after")
    def _min_within_max(self) -> SurfaceSettings:
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


class RagBudgetConfig(_Strict):
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
    surfaces: dict[str, SurfaceSettings]
    source: StrictStr = Field(DEFAULT_CONFIG_NAME, exclude=True)

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
            known = ", ".join(sorted(self.surfaces))
            raise ConfigError(
                self.source,
                f"surfaces.{name}",
                name,
                f"unknown surface; known: {known}",
            ) from None


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
    for parts, value in _leaves(loaded.config.model_dump(), []):
        if _has(loaded.user, parts):
            origin = Origin.FILE
        elif parts[0] == "surfaces" and parts[1] not in shipped_surfaces:
            origin = Origin.INHERITED
        else:
            origin = Origin.DEFAULT
        values.append(ConfigValue(_dotted(parts), value, origin))
    return EffectiveConfig(loaded.config, None if path is None else str(path), values)


def _leaves(data: Any, parts: list[str]) -> list[tuple[list[str], Any]]:
    """(key path, value) of every leaf: a non-mapping, or an empty mapping."""
    if not isinstance(data, dict) or not data:
        return [(parts, data)]
    return [
        leaf for key, value in data.items() for leaf in _leaves(value, [*parts, key])
    ]


def _has(data: Any, parts: list[str]) -> bool:
    for part in parts:
        if not isinstance(data, dict) or part not in data:
            return False
        data = data[part]
    return True


@dataclass(frozen=True)
class _Loaded:
    config: RagBudgetConfig
    defaults: dict[str, Any]
    user: dict[str, Any]


def _load(path: str | Path | None) -> _Loaded:
    defaults = _read_yaml(_default_text(), DEFAULT_CONFIG_NAME)
    if path is None:
        return _Loaded(_validate(defaults, DEFAULT_CONFIG_NAME), defaults, {})
    file = str(path)
    user = _read_yaml(_read_text(Path(path), file), file)
    merged = _inherit_surfaces(_deep_merge(defaults, user), defaults)
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
            surfaces[name] = _deep_merge(base, settings)
    return merged


def load_surface(name: str, path: str | Path | None = None) -> SurfaceSettings:
    """Shortcut: the budget of one surface from a config file.

    Args:
        name: The surface (e.g. `chat`).
        path: A YAML file; None for the shipped defaults.

    Returns:
        That surface's settings.

    Raises:
        ConfigError: The file is invalid or has no such surface.
    """
    return load_config(path).surface(name)


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


def _default_text() -> str:
    resource = resources.files("langchain_ragbudget").joinpath(DEFAULT_CONFIG_NAME)
    return resource.read_text(encoding="utf-8")


# Bounds for hostile files. A real configuration is a few kilobytes, ~150 YAML nodes
# and 5 levels deep; these leave room for long `placeholders` lists and `options`.
MAX_CONFIG_BYTES = 1 << 20
MAX_YAML_DEPTH = 32
MAX_YAML_NODES = 100_000

_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"


def _read_text(path: Path, file: str) -> str:
    """The file's text: at most MAX_CONFIG_BYTES of UTF-8 (a BOM is allowed)."""
    try:
        with path.open("rb") as stream:  # reads a pipe too, but never unbounded
            raw = stream.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        problem = f"cannot read: {exc.strerror or exc}"
        raise ConfigError(file, "<file>", file, problem) from exc
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(
            file,
            "<file>",
            _Shown(f"more than {MAX_CONFIG_BYTES} bytes"),
            f"too large for a configuration file (limit {MAX_CONFIG_BYTES} bytes)",
        )
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        bad = raw[exc.start : exc.end]
        raise ConfigError(
            file, f"line {line}", bad, f"not UTF-8 text (byte {exc.start})"
        ) from None


class _Shown:
    """A value as an error shows it: its repr, cut to a readable length."""

    LIMIT = 200

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text

    @classmethod
    def of(cls, value: Any) -> Any:
        """`value` itself, or a stand-in with a shortened repr if it is long."""
        text = repr(value)
        if len(text) <= cls.LIMIT:
            return value
        return cls(f"{text[: cls.LIMIT]}... ({len(text)} characters)")


class _ConfigLoader(yaml.SafeLoader):
    """`yaml.safe_load`'s loader (no Python tags) that bounds nesting while composing.

    The composer recurses once per level, so a file of `[[[[...` would otherwise
    end in RecursionError instead of a message.
    """

    def __init__(self, text: str, file: str) -> None:
        super().__init__(text)
        self.file = file
        self.file_text = text
        self.depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self.depth += 1
        try:
            if self.depth > MAX_YAML_DEPTH:
                mark = self.peek_event().start_mark
                raise ConfigError(
                    self.file,
                    f"line {mark.line + 1}",
                    _Shown.of(_line_at(self.file_text, mark.line)),
                    f"nested deeper than {MAX_YAML_DEPTH} levels",
                )
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _read_yaml(text: str, file: str) -> dict[str, Any]:
    loader: _ConfigLoader | None = None
    try:
        loader = _ConfigLoader(text, file)  # the reader refuses control characters
        node = loader.get_single_node()
        if node is None:
            return {}
        _check_nodes(node, loader, file)
        data = loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            line: int | None = mark.line
        elif isinstance(exc, yaml.reader.ReaderError):
            line = text[: exc.position].count("\n")
        else:
            line = None
        where = "<document>" if line is None else f"line {line + 1}"
        value = None if line is None else _Shown.of(_line_at(text, line))
        problem = " ".join(str(exc).split())
        raise ConfigError(file, where, value, f"invalid YAML: {problem}") from None
    finally:
        if loader is not None:
            loader.dispose()
    if data is None:  # "---" alone, or only `~`
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            file, "<root>", _Shown.of(data), "the top level must be a mapping"
        )
    return data


def _line_at(text: str, line: int) -> str:
    """Line `line` (0-based) of `text`, stripped: the value an error shows."""
    lines = text.splitlines()
    return lines[line].strip() if 0 <= line < len(lines) else ""


def _check_nodes(root: yaml.Node, loader: _ConfigLoader, file: str) -> None:
    """Refuse what safe_load would accept silently or could not bound.

    - a duplicate key (safe_load keeps the last value without a word);
    - a key that is not a string (`1:`, `yes:`, `null:`, `[a]:`);
    - an alias cycle (`a: &x [*x]`);
    - aliases that expand past MAX_YAML_NODES nodes or MAX_YAML_DEPTH levels
      ("billion laughs"): PyYAML builds shared objects cheaply, but validating,
      copying or printing them walks every expanded node.

    Aliases themselves stay legal (sharing one surface's settings is a fair use);
    sizes are counted once per node, so checking a bomb costs its file size.
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[yaml.Node, list[str], bool]] = [(root, [], False)]
    while stack:
        node, path, leaving = stack.pop()
        children = _children(node)
        if leaving:
            active.discard(id(node))
            size[id(node)] = 1 + sum(size[id(c)] for c, _ in children)
            depth[id(node)] = 1 + max((depth[id(c)] for c, _ in children), default=0)
            if size[id(node)] > MAX_YAML_NODES or depth[id(node)] > MAX_YAML_DEPTH:
                raise ConfigError(
                    file,
                    _dotted(path),
                    _Shown(f"<{_kind(node)} at line {node.start_mark.line + 1}>"),
                    f"aliases expand to more than {MAX_YAML_NODES} nodes or "
                    f"{MAX_YAML_DEPTH} levels",
                )
            continue
        if id(node) in size:
            continue  # an alias to a node already checked
        if id(node) in active:
            raise ConfigError(
                file,
                _dotted(path),
                _Shown(f"<alias at line {node.start_mark.line + 1}>"),
                "an alias refers to a node that contains it (a cycle)",
            )
        active.add(id(node))
        if isinstance(node, yaml.MappingNode):
            _check_keys(node, path, loader, file)
        stack.append((node, path, True))
        stack.extend((c, [*path, part], False) for c, part in reversed(children))


def _children(node: yaml.Node) -> list[tuple[yaml.Node, str]]:
    if isinstance(node, yaml.MappingNode):
        pairs = []
        for key, value in node.value:
            part = key.value if isinstance(key, yaml.ScalarNode) else "<key>"
            pairs += [(key, part), (value, part)]
        return pairs
    if isinstance(node, yaml.SequenceNode):
        return [(item, str(i)) for i, item in enumerate(node.value)]
    return []


def _check_keys(
    node: yaml.MappingNode, path: list[str], loader: _ConfigLoader, file: str
) -> None:
    first: dict[str, yaml.Node] = {}
    for key, value in node.value:
        line = key.start_mark.line + 1
        if not isinstance(key, yaml.ScalarNode) or key.tag not in (
            _STR_TAG,
            _MERGE_TAG,
        ):
            raise ConfigError(
                file,
                _dotted([*path, _key_text(key)]),
                _node_value(key, loader),
                f"line {line}: a key must be a string (YAML reads 1, yes, no, "
                "null and [..] as other types; quote the key)",
            )
        if key.value in first:
            raise ConfigError(
                file,
                _dotted([*path, key.value]),
                _node_value(value, loader),
                f"duplicate key: first at line {first[key.value].start_mark.line + 1}, "
                f"again at line {line} (YAML would silently keep the last one)",
            )
        first[key.value] = key


def _key_text(key: yaml.Node) -> str:
    if isinstance(key, yaml.ScalarNode):
        return str(key.value)
    return f"<{_kind(key)} key>"


def _node_value(node: yaml.Node, loader: _ConfigLoader) -> Any:
    """A scalar as YAML reads it; a collection by kind and line, never expanded."""
    if isinstance(node, yaml.ScalarNode):
        return _Shown.of(loader.construct_object(node))
    return _Shown(f"<{_kind(node)} at line {node.start_mark.line + 1}>")


def _kind(node: yaml.Node) -> str:
    return "mapping" if isinstance(node, yaml.MappingNode) else "sequence"


def _dotted(path: list[str]) -> str:
    return ".".join(path) or "<root>"


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
        errors = exc.errors()
        first = errors[0]
        parts = _key_parts(data, first["loc"], first["type"])
        # A union (`str | list[str] | None`) reports one error per member: merge them.
        problems = [
            _problem(error)
            for error in errors
            if _key_parts(data, error["loc"], error["type"]) == parts
        ]
        value = _lookup(data, parts)
        problem = "; ".join(dict.fromkeys(problems))
        raise ConfigError(file, _dotted(parts), _Shown.of(value), problem) from None


def _problem(error: Any) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown key"
    problem = str(error["msg"])
    value = error.get("input")
    if error["type"] in ("int_type", "float_type") and isinstance(value, str):
        problem += " (this is a string; write the number without quotes, e.g. 1.0e+3)"
    elif error["type"] in ("int_type", "float_type") and isinstance(value, bool):
        problem += " (YAML reads yes/no/true/false/on/off as booleans)"
    elif error["type"] == "int_type" and isinstance(value, float):
        problem += " (a whole number, without a decimal point)"
    return problem


def _key_parts(data: Any, loc: tuple[int | str, ...], kind: str) -> list[str]:
    """The dotted path of `loc` in the user's data, without pydantic's union tags."""
    parts: list[str] = []
    for i, part in enumerate(loc):
        child = _child(data, part)
        if child is _ABSENT and not (i == len(loc) - 1 and kind == "missing"):
            continue  # "str", "list[str]", "function-after[...]": not in the file
        data = child
        parts.append(str(part))
    return parts


_ABSENT = object()


def _child(data: Any, part: int | str) -> Any:
    if isinstance(data, dict) and part in data:
        return data[part]
    if isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
        return data[part]
    return _ABSENT


def _lookup(data: Any, parts: list[str]) -> Any:
    for part in parts:
        key: int | str = (
            int(part) if isinstance(data, list) and part.isdigit() else part
        )
        data = _child(data, key)
    return None if data is _ABSENT else data
