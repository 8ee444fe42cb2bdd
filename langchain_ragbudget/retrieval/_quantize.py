"""An int8 copy of an ONNX embedding model, for embedding queries.

Embedding the query is the largest part of a hybrid query; int8 weights run faster
at a small cost in quality (BENCHMARKS.md, Retrieval). Documents stay float32, so
an index needs no rebuild.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from langchain_ragbudget.config._disk import cache_root, publish_folder, staging_path
from langchain_ragbudget.errors import ModelUnavailableError, require
from langchain_ragbudget.retrieval._logging_guard import root_logger_untouched


def int8_model_folder(source: Path, model_file: str = "model.onnx") -> Path:
    """A folder like `source` whose `model_file` has int8 weights; made once.

    Cached by the source model's sha256 and moved into place only when complete,
    so an interrupted run leaves no half model.
    """
    model = source / model_file
    if not model.is_file():
        raise ModelUnavailableError(
            f"cannot quantize: {model} does not exist (embedding.model_path should "
            "name a folder holding the ONNX model)"
        )
    digest = hashlib.sha256(model.read_bytes()).hexdigest()[:16]
    target = cache_root() / "quantized" / f"{digest}-int8"
    if (target / model_file).is_file():
        return target
    require("onnx", "int8", "embedding.query_precision: int8")
    from onnxruntime.quantization import QuantType, quantize_dynamic

    staging = staging_path(target)
    try:
        staging.mkdir(parents=True)
    except OSError as exc:
        raise ModelUnavailableError(
            f"cannot write the int8 model under {target.parent} ({exc}); set "
            "RAGBUDGET_CACHE_DIR to a writable folder"
        ) from exc
    try:
        for item in source.iterdir():  # tokenizer and config files
            if item.is_file() and item.suffix != ".onnx":
                shutil.copy2(item, staging / item.name)
        with root_logger_untouched():
            quantize_dynamic(
                model,
                staging / model_file,
                weight_type=QuantType.QInt8,
                per_channel=True,
            )
        publish_folder(staging, target)
    except OSError:
        if not (target / model_file).is_file():  # not another process's copy
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
