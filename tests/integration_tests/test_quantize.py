"""int8 query embeddings: an int8 copy of the real local model, made in the cache."""

import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from langchain_ragbudget import (
    FastEmbedEmbeddings,
    ModelUnavailableError,
    build_embeddings,
    load_config,
)
from langchain_ragbudget.errors import ConfigError
from langchain_ragbudget.retrieval._quantize import int8_model_folder

MODEL_PATH = os.environ.get("RAGBUDGET_EMBEDDING_MODEL_PATH", "")  # unset: tests skip
QUERIES = [
    "How long are application logs retained?",
    "Which genes are associated with systemic lupus erythematosus?",
    "refund policy",
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ragbudget-cache")


@pytest.fixture(scope="module")
def int8_folder(cache: Path) -> Path:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAGBUDGET_CACHE_DIR", str(cache))
        return int8_model_folder(Path(MODEL_PATH))


@pytest.mark.needs_embedding_model
def test_the_copy_is_int8_and_lives_in_the_cache(
    int8_folder: Path, cache: Path
) -> None:
    import onnx

    assert int8_folder.parent == cache / "quantized"
    model = onnx.load(str(int8_folder / "model.onnx"))
    int8_weights = [
        t for t in model.graph.initializer if t.data_type == onnx.TensorProto.INT8
    ]
    assert len(int8_weights) >= 36  # 6 layers x (Q, K, V, O, FFN in, FFN out)
    assert (int8_folder / "tokenizer.json").is_file()
    smaller = (int8_folder / "model.onnx").stat().st_size
    assert smaller < 0.5 * (Path(MODEL_PATH) / "model.onnx").stat().st_size


@pytest.mark.needs_embedding_model
def test_the_copy_is_made_once(
    int8_folder: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGBUDGET_CACHE_DIR", str(cache))
    before = (int8_folder / "model.onnx").stat().st_mtime_ns
    assert int8_model_folder(Path(MODEL_PATH)) == int8_folder
    assert (int8_folder / "model.onnx").stat().st_mtime_ns == before
    assert [p.name for p in (cache / "quantized").iterdir()] == [int8_folder.name]


@pytest.mark.needs_embedding_model
def test_int8_query_vectors_match_float32(
    int8_folder: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGBUDGET_CACHE_DIR", str(cache))
    full = FastEmbedEmbeddings()
    int8 = FastEmbedEmbeddings(query_precision="int8")
    for query in QUERIES:
        a, b = full.embed_query(query), int8.embed_query(query)
        assert math.isclose(sum(x * x for x in b), 1.0, rel_tol=1e-4)
        cosine = sum(x * y for x, y in zip(a, b, strict=True))
        assert 0.98 < cosine < 0.99999  # close, and really a different model
    # documents are never quantized
    assert int8.embed_documents(QUERIES) == full.embed_documents(QUERIES)


def test_config_selects_int8_and_rejects_other_values(tmp_path: Path) -> None:
    config = tmp_path / "c.yml"
    config.write_text("embedding:\n  query_precision: int8\n")
    embeddings = build_embeddings(config)
    assert isinstance(embeddings, FastEmbedEmbeddings)
    assert embeddings.query_precision == "int8"
    config.write_text("embedding:\n  query_precision: int4\n")
    with pytest.raises(ConfigError, match=r"embedding\.query_precision.*int4"):
        load_config(config)


def test_a_missing_model_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailableError, match=r"model\.onnx does not exist"):
        int8_model_folder(tmp_path)


@pytest.mark.needs_embedding_model
def test_quantizing_leaves_the_root_logger_alone(tmp_path: Path) -> None:
    # onnxruntime's quantizer logs through logging.warning, which configures the
    # root logger (1 handler) when nothing guards it; pytest's own handlers would
    # hide that, so this runs in a fresh process.
    code = (
        "import logging; from pathlib import Path; "
        "from langchain_ragbudget.retrieval._quantize import int8_model_folder; "
        f"int8_model_folder(Path({MODEL_PATH!r})); "
        "root = logging.getLogger(); print(len(root.handlers), root.level)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "RAGBUDGET_CACHE_DIR": str(tmp_path)},
    )
    assert out.stdout.split() == ["0", "30"]
    assert "pre-processing" not in out.stderr


@pytest.mark.needs_embedding_model
def test_an_unwritable_cache_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv("RAGBUDGET_CACHE_DIR", str(blocker))
    with pytest.raises(ModelUnavailableError, match="RAGBUDGET_CACHE_DIR"):
        int8_model_folder(Path(MODEL_PATH))


def test_int8_needs_the_fastembed_provider(tmp_path: Path) -> None:
    config = tmp_path / "c.yml"
    config.write_text(
        "embedding:\n"
        "  provider: langchain_core.embeddings:FakeEmbeddings\n"
        "  options: {size: 8}\n"
        "  query_precision: int8\n"
    )
    with pytest.raises(ConfigError, match="needs the fastembed provider"):
        load_config(config)


@pytest.mark.needs_embedding_model
def test_a_downloaded_model_is_found_in_fastembeds_folder(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without model_path, the int8 copy is made from the folder fastembed downloaded
    # into. No download can run here: a stand-in for fastembed's loaded model says
    # where the (local) model is, as fastembed's own object does.
    monkeypatch.setenv("RAGBUDGET_CACHE_DIR", str(cache))
    monkeypatch.delenv("RAGBUDGET_EMBEDDING_MODEL_PATH")
    embeddings = FastEmbedEmbeddings(query_precision="int8")
    downloaded = SimpleNamespace(
        model=SimpleNamespace(
            _model_dir=MODEL_PATH,
            model_description=SimpleNamespace(model_file="model.onnx"),
        )
    )
    embeddings._model = downloaded
    vector = embeddings.embed_query("refund policy")
    assert len(vector) == 384
    assert embeddings._query_model is not None
    embeddings._model, embeddings._query_model = SimpleNamespace(model=object()), None
    with pytest.raises(ModelUnavailableError, match="does not say where"):
        embeddings.embed_query("refund policy")
