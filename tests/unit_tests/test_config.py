from pathlib import Path

import pytest

from langchain_ragbudget import ConfigError, load_config, load_surface


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ragbudget.yml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_load_with_chat_and_search_surfaces() -> None:
    config = load_config()
    assert {"chat", "search"} <= set(config.surfaces)
    assert config.surface("chat").max_tokens < config.surface("search").max_tokens
    assert config.retrieval.rrf_c == 60


def test_top_level_copy_is_the_shipped_default() -> None:
    top = Path(__file__).resolve().parents[2] / "config_default.yml"
    shipped = (
        Path(__file__).resolve().parents[2]
        / "langchain_ragbudget"
        / "config_default.yml"
    )
    assert top.read_text() == shipped.read_text()


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
    assert load_surface("api", path).encoding == "cl100k_base"


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
            "retrieval:\n  sparse:\n    weight: -1\n",
            "retrieval.sparse.weight",
            -1,
            "greater than or equal to 0",
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
