"""A tiny, offline stand-in for a FlashRank cross-encoder.

FlashRank downloads its real weights from Hugging Face, which tests cannot
reach. This module writes a folder in FlashRank's own cache layout
(``cache_dir/model_name/`` holding the ONNX file and the tokenizer files), so
``flashrank.Ranker(model_name=..., cache_dir=...)`` finds it, never downloads,
and runs its real tokenizer + onnxruntime path on a model that is small and
easy to reason about.

The model's logit for a (query, passage) pair is the number of query token
positions whose token id also occurs in the passage (special tokens such as
[CLS]/[SEP]/[PAD] excluded), plus ``logit_offset``. FlashRank turns a
``(batch, 1)`` logit into ``sigmoid(logit)``, so with the default offset an
unrelated passage scores exactly 0.5 and each further matching query token
raises the score. Float32 sigmoid reaches 1.0 at about 17 matches, so keep
test queries short.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from flashrank.Config import listwise_rankers, model_file_map
from onnx import TensorProto, helper, numpy_helper

DEFAULT_TOKENIZER_DIR = (
    Path(__file__).resolve().parents[1].parent
    / "shared"
    / "models"
    / "all-MiniLM-L6-v2"
    / "onnx"
)
REQUIRED_TOKENIZER_FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)
OPTIONAL_TOKENIZER_FILES = ("vocab.txt",)
OPSET = 18
IR_VERSION = 8


def _special_token_ids(tokenizer_json: Path) -> list[int]:
    data = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    ids = [int(tok["id"]) for tok in data.get("added_tokens", []) if tok["special"]]
    return ids or [-1]


def _overlap_graph(special_ids: list[int], logit_offset: float) -> onnx.ModelProto:
    """Build logits[b, 0] = #query tokens found in the passage + offset."""
    dims = ["batch", "seq"]
    inputs = [
        helper.make_tensor_value_info(name, TensorProto.INT64, dims)
        for name in ("input_ids", "attention_mask", "token_type_ids")
    ]
    output = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])
    consts: dict[str, npt.NDArray[Any]] = {
        "special": np.array(special_ids, dtype=np.int64),
        "one": np.array(1.0, dtype=np.float32),
        "offset": np.array(logit_offset, dtype=np.float32),
        "ax1": np.array([1], dtype=np.int64),
        "ax2": np.array([2], dtype=np.int64),
    }
    inits = [numpy_helper.from_array(v, name=k) for k, v in consts.items()]
    n = helper.make_node
    float_ = TensorProto.FLOAT
    nodes = [
        # real[b, i] = 1 for attended, non-special tokens
        n("Unsqueeze", ["input_ids", "ax2"], ["ids_col"]),  # (B, L, 1)
        n("Equal", ["ids_col", "special"], ["is_sp_k"]),  # (B, L, K)
        n("Cast", ["is_sp_k"], ["is_sp_kf"], to=float_),
        n("ReduceMax", ["is_sp_kf", "ax2"], ["is_sp"], keepdims=0),
        n("Sub", ["one", "is_sp"], ["not_sp"]),
        n("Cast", ["attention_mask"], ["attn"], to=float_),
        n("Mul", ["attn", "not_sp"], ["real"]),
        # segment masks from token_type_ids: 0 = query, 1 = passage
        n("Cast", ["token_type_ids"], ["tt"], to=float_),
        n("Mul", ["real", "tt"], ["p_mask"]),
        n("Sub", ["real", "p_mask"], ["q_mask"]),
        # found[b, i] = 1 if token i's id occurs at any passage position
        n("Unsqueeze", ["input_ids", "ax1"], ["ids_row"]),  # (B, 1, L)
        n("Equal", ["ids_col", "ids_row"], ["same"]),  # (B, L, L)
        n("Cast", ["same"], ["same_f"], to=float_),
        n("Unsqueeze", ["p_mask", "ax1"], ["p_row"]),
        n("Mul", ["same_f", "p_row"], ["hits"]),
        n("ReduceMax", ["hits", "ax2"], ["found"], keepdims=0),  # (B, L)
        n("Mul", ["found", "q_mask"], ["q_found"]),
        n("ReduceSum", ["q_found", "ax1"], ["matches"], keepdims=1),  # (B, 1)
        n("Add", ["matches", "offset"], ["logits"]),
    ]
    graph = helper.make_graph(nodes, "tiny_overlap_ranker", inputs, [output], inits)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        ir_version=IR_VERSION,
        producer_name="langchain_ragbudget-tests",
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def build_tiny_flashrank_model(
    cache_dir: Path,
    model_name: str = "ms-marco-TinyBERT-L-2-v2",
    tokenizer_dir: Path = DEFAULT_TOKENIZER_DIR,
    logit_offset: float = 0.0,
) -> Path:
    """Write a token-overlap cross-encoder into ``cache_dir/model_name``.

    ``model_name`` must be one of FlashRank's pairwise (ONNX) model names, since
    FlashRank derives the ONNX file name from it. Returns the model folder.
    """
    if model_name not in model_file_map or model_name in listwise_rankers:
        raise ValueError(f"not a FlashRank ONNX (pairwise) model name: {model_name}")
    model_dir = Path(cache_dir) / model_name
    model_dir.mkdir(parents=True, exist_ok=True)
    for fname in REQUIRED_TOKENIZER_FILES:
        shutil.copyfile(tokenizer_dir / fname, model_dir / fname)
    for fname in OPTIONAL_TOKENIZER_FILES:
        if (tokenizer_dir / fname).is_file():
            shutil.copyfile(tokenizer_dir / fname, model_dir / fname)
    special_ids = _special_token_ids(model_dir / "tokenizer.json")
    model = _overlap_graph(special_ids, logit_offset)
    onnx.save_model(model, str(model_dir / str(model_file_map[model_name])))
    return model_dir
