from pathlib import Path

import pytest

from langchain_ragbudget import ConfigError, load_config
from langchain_ragbudget.config._settings import DEFAULT_SURFACE, Origin, explain_config


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ragbudget.yml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_load_with_chat_and_search_surfaces() -> None:
    config = load_config()
    assert {"chat", "search"} <= set(config.surfaces)
    assert config.surface("chat").max_tokens < config.surface("search").max_tokens
    assert config.retrieval.rrf_c == 60


def test_top_level_file_links_to_the_shipped_default() -> None:
    root = Path(__file__).parents[2]
    top = root / "config_default.yml"
    shipped = root / "langchain_ragbudget" / "config_default.yml"
    # a link, not a copy: a copy could drift from what the package ships
    assert top.is_symlink() and top.resolve() == shipped.resolve()


def test_user_yaml_merges_over_defaults(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "retrieval:\n  k: 7\n  dense:\n    weight: 0.5\n"
        "surfaces:\n  chat:\n    max_tokens: 900\n"
        "  api:\n    max_docs: 3\n    max_tokens: 200\n    encoding: cl100k_base\n",
    )
    config = load_config(path)
    assert config.retrieval.k == 7
    assert config.retrieval.dense.weight == 0.5
    assert config.retrieval.dense.fetch_k == 100  # kept from the defaults
    assert config.surface("chat").max_tokens == 900
    assert config.surface("chat").max_docs == 4  # kept from the defaults
    assert config.surface("api").encoding == "cl100k_base"


@pytest.mark.parametrize(
    ("text", "key", "value", "problem"),
    [
        ("retrieval:\n  kk: 3\n", "retrieval.kk", 3, "unknown key"),
        ("retrieval:\n  k: lots\n", "retrieval.k", "lots", "integer"),
        (
            "surfaces:\n  chat:\n    max_tokens: -5\n",
            "surfaces.chat.max_tokens",
            -5,
            "greater than or equal to 1",
        ),
        (
            "surfaces:\n  chat:\n    packing: squeeze\n",
            "surfaces.chat.packing",
            "squeeze",
            "skip",
        ),
        (
            "surfaces:\n  chat:\n    packing: stop\n",
            "surfaces.chat.packing",
            "stop",
            "use 'skip' (every passage that fits, in rank order) or 'trim'",
        ),
        (
            "surfaces:\n  chat:\n    relevance: Fitted\n",
            "surfaces.chat.relevance",
            "Fitted",
            "'blend' or 'fitted'",
        ),
        (
            "retrieval:\n  sparse:\n    weight: -1\n",
            "retrieval.sparse.weight",
            -1,
            "greater than or equal to 0",
        ),
        (
            "retrieval:\n  fusion: borda\n",
            "retrieval.fusion",
            "borda",
            "'rrf', 'minmax' or 'dbsf'",
        ),
    ],
)
def test_errors_name_file_key_and_value(
    tmp_path: Path, text: str, key: str, value: object, problem: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    error = caught.value
    assert (error.file, error.key, error.value) == (str(path), key, value)
    assert problem in error.problem
    assert str(path) in str(error) and key in str(error)


def test_all_zero_weights_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "retrieval:\n  sparse: {weight: 0}\n  dense: {weight: 0}\n")
    with pytest.raises(ConfigError, match="both 0"):
        load_config(path)


def test_unknown_surface_lists_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="known: chat, search") as caught:
        load_config().surface("voice")
    assert caught.value.key == "surfaces.voice"


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "retrieval:\n  k: [1,\n")
    with pytest.raises(ConfigError, match="invalid YAML") as caught:
        load_config(path)
    assert caught.value.key.startswith("line ")


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="mapping"):
        load_config(write(tmp_path, "- a\n- b\n"))


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.yml")


def test_yaml_tags_are_not_executed(tmp_path: Path) -> None:
    path = write(tmp_path, "retrieval: !!python/object/apply:os.system ['true']\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(path)


# --- hostile and malformed input: each case is one ConfigError naming file, key, value

_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n"
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
)  # 9**9 (~387 million) strings once expanded; 9 lines of text

BAD_CONFIGS: list[tuple[str, str | bytes, str, str]] = [
    # (id, file content, key in the ConfigError, text naming the value)
    ("nan-sparse-weight", "retrieval:\n  sparse:\n    weight: .nan\n",
     "retrieval.sparse.weight", "nan"),
    ("inf-dense-weight", "retrieval:\n  dense:\n    weight: .inf\n",
     "retrieval.dense.weight", "inf"),
    ("minus-inf-floor", "rerank:\n  score_floor: -.inf\n", "rerank.score_floor",
     "-inf"),
    ("inf-rrf-c", "retrieval:\n  rrf_c: .inf\n", "retrieval.rrf_c", "inf"),
    ("fusion-upper-case", "retrieval:\n  fusion: RRF\n", "retrieval.fusion", "RRF"),
    ("fusion-null", "retrieval:\n  fusion: ~\n", "retrieval.fusion", "None"),
    ("nan-weak-evidence", "surfaces:\n  chat:\n    weak_evidence:\n      thresholds:\n"
     "        rerank_score: .nan\n",
     "surfaces.chat.weak_evidence.thresholds.rerank_score", "nan"),
    ("weak-evidence-flat", "surfaces:\n  chat:\n    weak_evidence:\n"
     "      rerank_score: 0.3\n", "surfaces.chat.weak_evidence", "rerank_score"),
    ("weak-evidence-unknown-method", "surfaces:\n  chat:\n    weak_evidence:\n"
     "      method: magic\n", "surfaces.chat.weak_evidence.method", "magic"),
    ("combined-without-model", "surfaces:\n  chat:\n    weak_evidence:\n"
     "      method: combined\n", "surfaces.chat.weak_evidence", "combined"),
    ("combined-threshold-over-1", "surfaces:\n  chat:\n    weak_evidence:\n"
     "      combined: {coefficients: {dense_top: 1}, intercept: 0, threshold: 2}\n",
     "surfaces.chat.weak_evidence.combined.threshold", "2"),
    ("combined-tree-model", "surfaces:\n  chat:\n    weak_evidence:\n"
     "      combined:\n        kind: trees\n        baseline: 0\n"
     "        learning_rate: 0.1\n        threshold: 0.5\n"
     "        trees:\n        - nodes:\n          - {value: 1.5}\n",
     "surfaces.chat.weak_evidence.combined", "'kind': 'trees'"),
    ("nan-score-floor", "rerank:\n  score_floor: .NaN\n", "rerank.score_floor", "nan"),
    ("inf-timeout", "llm:\n  timeout: .inf\n", "llm.timeout", "inf"),
    ("inf-in-options", "embedding:\n  options: {scale: .inf}\n",
     "embedding.options", "inf"),
    ("bool-for-int", "surfaces:\n  chat:\n    max_docs: true\n",
     "surfaces.chat.max_docs", "True"),
    ("fraction-for-int", "rerank:\n  top_n: 2.5\n", "rerank.top_n", "2.5"),
    ("ef-search-zero", "vector_store:\n  ef_search: 0\n", "vector_store.ef_search",
     "0"),
    ("ef-search-bool", "vector_store:\n  ef_search: true\n",
     "vector_store.ef_search", "True"),

    ("float-for-int", "index:\n  chunk_size: 300.0\n", "index.chunk_size", "300.0"),
    ("string-for-int", 'retrieval:\n  k: "7"\n', "retrieval.k", "'7'"),
    ("string-for-float", 'retrieval:\n  rrf_c: "60"\n', "retrieval.rrf_c", "'60'"),
    ("bool-for-float", "retrieval:\n  sparse:\n    weight: true\n",
     "retrieval.sparse.weight", "True"),
    ("int-for-bool", "rerank:\n  enabled: 1\n", "rerank.enabled", "1"),
    ("str-for-bool", "sparse:\n  index_title: 'yes'\n", "sparse.index_title",
     "'yes'"),
    ("int-for-str", "llm:\n  model: 123\n", "llm.model", "123"),
    ("bytes-for-str", "rerank:\n  model: !!binary aGVsbG8=\n", "rerank.model",
     "b'hello'"),
    ("int-in-str-list", "index:\n  placeholders: [tbd, 1]\n",
     "index.placeholders.1", "1"),
    ("union-member-tags", "sparse:\n  stopwords: 5\n", "sparse.stopwords", "5"),
    ("duplicate-top-level", "retrieval:\n  k: 3\nretrieval:\n  k: 4\n",
     "retrieval", "<mapping at line 4>"),
    ("duplicate-nested", "surfaces:\n  chat:\n    max_docs: 3\n    max_docs: 4\n",
     "surfaces.chat.max_docs", "4"),
    ("duplicate-depth-4", "surfaces:\n  chat:\n    weak_evidence:\n"
     "      precision: 0.3\n      precision: 0.9\n",
     "surfaces.chat.weak_evidence.precision", "0.9"),
    ("duplicate-in-flow", "retrieval: {k: 3, k: 4}\n", "retrieval.k", "4"),
    ("surfaces-a-list", "surfaces: [1, 2]\n", "surfaces", "[1, 2]"),
    ("surfaces-null", "surfaces:\n", "surfaces", "None"),
    ("surface-null", "surfaces:\n  chat:\n", "surfaces.chat", "None"),
    ("section-a-scalar", "retrieval: 5\n", "retrieval", "5"),
    ("weak-evidence-a-list", "surfaces:\n  chat:\n    weak_evidence: [0.3]\n",
     "surfaces.chat.weak_evidence", "[0.3]"),
    ("int-key", "1: x\n", "1", "1"),
    ("bool-key", "surfaces:\n  true: {max_docs: 1, max_tokens: 9}\n",
     "surfaces.true", "True"),
    ("null-key", "retrieval:\n  ~: 3\n", "retrieval.~", "None"),
    ("list-key", "? [a, b]\n: x\n", "<sequence key>", "<sequence at line 1>"),
    ("unknown-key", "surfaces:\n  chat:\n    max_doc: 3\n",
     "surfaces.chat.max_doc", "3"),
    ("inherited-conflict", "surfaces:\n  api:\n    min_docs: 9\n",
     "surfaces.api", "'min_docs': 9"),
    ("billion-laughs", _LAUGHS, "e", "<sequence at line 5>"),
    ("alias-cycle", "a: &a [1, *a]\n", "a.1", "<alias at line 1>"),
    ("deep-nesting", "a: " + "[" * 5000 + "]" * 5000 + "\n", "line 1", "[[[["),
    ("deep-mapping", "".join(f"{' ' * i}k{i}:\n" for i in range(40)),
     "line 32", "k31:"),
    ("not-utf8", b"retrieval:\n  id_key: caf\xe9\n", "line 2", "b'\\xe9'"),
    ("control-char", 'llm:\n  model: "a\x07b"\n', "line 2", "\\x07"),
    ("tab-indent", "retrieval:\n\tk: 3\n", "line 2", "k: 3"),
    ("python-tag", "retrieval: !!python/object/apply:os.system ['true']\n",
     "line 1", "os.system"),
    ("two-documents", "retrieval: {k: 3}\n---\nretrieval: {k: 4}\n",
     "line 2", "---"),
    ("root-a-list", "- a\n- b\n", "<root>", "['a', 'b']"),
    ("root-a-scalar", "hello\n", "<root>", "'hello'"),
    ("too-large", "# " + "x" * (256 * 1024) + "\n", "<file>", "bytes"),
    # YAML 1.2 core schema: a value means what it looks like
    ("base-60-number", "surfaces:\n  chat:\n    max_tokens: 1:30\n",
     "surfaces.chat.max_tokens", "'1:30'"),
    ("yes-for-bool", "rerank:\n  enabled: yes\n", "rerank.enabled", "'yes'"),
    ("on-for-bool", "tracing:\n  otel: on\n", "tracing.otel", "'on'"),
    ("underscore-int", "retrieval:\n  k: 1_000\n", "retrieval.k", "'1_000'"),
    ("binary-int", "retrieval:\n  k: 0b101\n", "retrieval.k", "'0b101'"),
    ("rrf-c-zero", "retrieval:\n  rrf_c: 0\n", "retrieval.rrf_c", "0"),
    ("surface-trailing-space", "surfaces:\n  'chat ':\n    max_tokens: 100\n",
     "surfaces.'chat '", "'chat '"),
    ("surface-empty-name", "surfaces:\n  '': {max_docs: 2}\n", "surfaces.''", "''"),
    ("surface-control-char", 'surfaces:\n  "chat\\x01": {max_docs: 2}\n',
     "surfaces.'chat\\x01'", "'chat\\x01'"),
    ("surface-zero-width", 'surfaces:\n  "chat\\u200b": {max_docs: 2}\n',
     "surfaces.'chat\\u200b'", "'chat\\u200b'"),
    ("logistic-unknown-feature", "surfaces:\n  chat:\n    weak_evidence:\n"
     "      combined: {coefficients: {dense_topp: 1}, intercept: 0, threshold: 0.5}\n",
     "surfaces.chat.weak_evidence.combined.coefficients", "dense_topp"),
    ("too-many-nodes", "index:\n  placeholders:\n" + "  - a\n" * 10_001,
     "line 9998", "'- a'"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("content", "key", "shown"),
    [pytest.param(*case[1:], id=case[0]) for case in BAD_CONFIGS],
)
def test_bad_config_is_one_config_error(
    tmp_path: Path, content: str | bytes, key: str, shown: str
) -> None:
    path = tmp_path / "ragbudget.yml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(Exception) as caught:  # the exact type is checked below
        load_config(path)
    error = caught.value
    assert type(error) is ConfigError, repr(error)
    assert error.file == str(path)
    assert error.key == key
    message = str(error)
    assert message.startswith(f"{path}: key '{key}' = ")
    assert shown in message.split(" = ", 1)[1]
    assert "\n" not in message and len(message) < 1200


def test_bad_config_ids_are_unique() -> None:
    assert len({case[0] for case in BAD_CONFIGS}) == len(BAD_CONFIGS)


def test_billion_laughs_is_refused_fast_and_small(tmp_path: Path) -> None:
    import time
    import tracemalloc

    path = write(tmp_path, _LAUGHS)
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(ConfigError, match="aliases expand"):
            load_config(path)
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert time.perf_counter() - started < 5
    assert peak < 20_000_000


@pytest.mark.parametrize(
    ("leaves", "key"),
    [(1, "surfaces.chat.weak_evidence.combined"), (3_400, "line 3337")],
)
def test_a_tree_model_says_how_to_fit_one_that_loads(
    tmp_path: Path, leaves: int, key: str
) -> None:
    """Boosted trees are no longer read: a file an earlier `ragbudget eval` wrote
    is refused with the command that writes a logistic model, by its key, or by
    its line when it is past the node bound (the 300 trees it shipped were)."""
    tree_model = next(case for case in BAD_CONFIGS if case[0] == "combined-tree-model")
    text = str(tree_model[1]) + "          - {value: 1.5}\n" * (leaves - 1)
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text))
    assert caught.value.key == key
    assert "weak-evidence model (kind: trees), which is no longer read" in (
        caught.value.problem
    )
    assert "ragbudget eval DATA --weak-fit train --weak-evidence-yaml FILE" in (
        caught.value.problem
    )


def test_directory_as_config_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path)
    assert type(caught.value) is ConfigError
    assert caught.value.key == "<file>"
    assert str(tmp_path) in str(caught.value)
    assert "directory" in caught.value.problem.lower()


def test_missing_file_names_path_and_reason(tmp_path: Path) -> None:
    absent = tmp_path / "absent.yml"
    with pytest.raises(ConfigError) as caught:
        load_config(absent)
    assert (caught.value.file, caught.value.key) == (str(absent), "<file>")
    assert "No such file" in caught.value.problem


def test_long_values_are_shortened_in_the_message(tmp_path: Path) -> None:
    path = write(tmp_path, "surfaces: [" + ", ".join(["12345"] * 5000) + "]\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.key == "surfaces"
    assert "characters)" in str(caught.value) and len(str(caught.value)) < 500


def test_provider_failing_at_import_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken_provider.py").write_text("raise RuntimeError('boom')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = write(tmp_path, "embedding:\n  provider: broken_provider:Thing\n")
    with pytest.raises(ConfigError, match="RuntimeError: boom") as caught:
        load_config(path)
    assert caught.value.key == "embedding.provider"


# --- legitimate configurations keep loading


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("# only a comment\n", id="comment-only"),
        pytest.param("---\n", id="empty-document"),
        pytest.param("\ufeff", id="bom-only"),
    ],
)
def test_empty_files_mean_the_defaults(tmp_path: Path, text: str) -> None:
    assert load_config(write(tmp_path, text)).model_dump() == load_config().model_dump()


def test_ints_for_floats_and_nulls_load(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "\ufeffretrieval:\n  rrf_c: 60\n  sparse: {weight: 1}\n  dense: {weight: 0}\n"
        "  id_key: null\n"
        "sparse: {stemmer: null, stopwords: [the, a], b: 1, k1: 2}\n"
        "embedding: {threads: null, options: {scale: 1.5}}\n"
        "rerank: {score_floor: 0, download_timeout: 5}\n"
        "llm: {model: null, temperature: 1.0e-1, timeout: 10}\n"
        "surfaces:\n  chat:\n    weak_evidence:\n"
        "      thresholds: {rerank_score: null, dense_score: 1}\n",
    )
    config = load_config(path)
    assert config.retrieval.rrf_c == 60.0 and type(config.retrieval.rrf_c) is float
    assert config.retrieval.sparse.weight == 1.0
    assert config.retrieval.id_key is None
    assert config.sparse.stemmer is None and config.sparse.stopwords == ["the", "a"]
    assert config.rerank.score_floor == 0.0
    assert config.llm.temperature == pytest.approx(0.1)
    assert config.surface("chat").weak_evidence.thresholds == {
        "rerank_score": None,
        "dense_score": 1.0,
    }


def test_anchors_and_merge_keys_still_work(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "surfaces:\n  chat: &base\n    max_docs: 3\n    max_tokens: 500\n"
        "  api:\n    <<: *base\n    max_docs: 5\n  voice: *base\n",
    )
    config = load_config(path)
    assert config.surface("api").max_docs == 5
    assert config.surface("api").max_tokens == 500
    assert config.surface("voice").max_docs == 3


def test_the_shipped_defaults_pass_the_strict_loader() -> None:
    shipped = Path(__file__).resolve().parents[2] / "config_default.yml"
    assert load_config(shipped).model_dump() == load_config().model_dump()


def test_programmatic_settings_are_strict_too() -> None:
    from pydantic import ValidationError

    from langchain_ragbudget.config._settings import SurfaceSettings

    with pytest.raises(ValidationError):
        SurfaceSettings(max_docs=True, max_tokens=10)
    with pytest.raises(ValidationError):
        SurfaceSettings(
            max_docs=1, max_tokens=10, weak_evidence={"thresholds": {"x": float("nan")}}
        )


def test_a_new_surface_inherits_every_key_it_leaves_out(tmp_path: Path) -> None:
    # the user's chat is edited too: the new surface inherits the shipped chat,
    # not the edit, so changing one surface never changes another
    path = write(
        tmp_path,
        "surfaces:\n  voice:\n    max_tokens: 300\n  chat:\n    max_docs: 2\n"
        "    weak_evidence: {thresholds: {rerank_score: 0.9}}\n",
    )
    config = load_config(path)
    shipped = load_config().surface(DEFAULT_SURFACE)
    voice = config.surface("voice")
    assert voice.max_tokens == 300
    assert voice.model_dump(exclude={"max_tokens"}) == shipped.model_dump(
        exclude={"max_tokens"}
    )
    assert voice.max_docs != config.surface("chat").max_docs
    assert voice.weak_evidence != config.surface("chat").weak_evidence


def test_a_new_surface_merges_its_weak_evidence_key_by_key(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "surfaces:\n  api:\n    weak_evidence: {thresholds: {dense_score: 0.7}}\n",
    )
    api = load_config(path).surface("api")
    shipped = load_config().surface(DEFAULT_SURFACE).weak_evidence
    assert api.weak_evidence.thresholds == {**shipped.thresholds, "dense_score": 0.7}
    assert api.weak_evidence.method == shipped.method


def test_every_effective_value_says_where_it_came_from(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "retrieval: {k: 7}\nsurfaces:\n  voice:\n    max_tokens: 300\n"
        "  chat:\n    weak_evidence: {thresholds: {rerank_score: 0.5}}\n",
    )
    effective = explain_config(path)
    origins = {value.key: value.origin for value in effective.values}
    values = {value.key: value.value for value in effective.values}
    assert origins["retrieval.k"] == Origin.FILE and values["retrieval.k"] == 7
    assert origins["retrieval.rrf_c"] == Origin.BUILT_IN
    assert origins["surfaces.voice.max_tokens"] == Origin.FILE
    assert origins["surfaces.voice.packing"] == Origin.INHERITED
    assert origins["surfaces.voice.order"] == Origin.BUILT_IN
    assert origins["surfaces.chat.order"] == Origin.BUILT_IN
    assert origins["surfaces.chat.weak_evidence.thresholds.rerank_score"] == Origin.FILE
    assert (
        origins["surfaces.chat.weak_evidence.thresholds.dense_score"] == Origin.DEFAULT
    )
    assert origins["surfaces.search.max_docs"] == Origin.DEFAULT
    # one entry per leaf of the validated config, nothing invented
    dumped = effective.config.model_dump()
    for key, value in values.items():
        node: object = dumped
        for part in key.split("."):
            assert isinstance(node, dict)
            node = node[part]
        assert node == value
    sources = {v.key: v.source(effective.file) for v in effective.values}
    assert sources["retrieval.k"] == str(path)
    assert sources["surfaces.voice.packing"] == (
        "inherited from config_default.yml surfaces.chat"
    )
    assert sources["surfaces.search.max_docs"] == "config_default.yml"
    assert sources["retrieval.rrf_c"] == "built-in default"


def test_the_shipped_defaults_alone_are_the_file_s_or_built_in() -> None:
    effective = explain_config()
    assert effective.file is None
    origins = {value.key: value.origin for value in effective.values}
    assert set(origins.values()) == {Origin.DEFAULT, Origin.BUILT_IN}
    assert origins["surfaces.chat.max_tokens"] == Origin.DEFAULT
    assert origins["rerank.top_n"] == Origin.BUILT_IN
