"""Token counting in the target model's tokens (tiktoken), cached per text.

Each rendered block is counted once per process, so warm packing is lookups.
Loading an encoding may download it, under a timeout.
"""

from __future__ import annotations

from functools import lru_cache

import tiktoken

from langchain_ragbudget.config._timeouts import call_with_timeout
from langchain_ragbudget.errors import ModelUnavailableError

LOAD_TIMEOUT_SECONDS = 30.0


def resolve_encoding_name(encoding: str | None, model: str | None) -> str:
    """The tiktoken encoding as named, or the one tiktoken maps `model` to.

    Raises:
        ValueError: tiktoken knows neither (the message names which).
    """
    if encoding is not None:
        if encoding not in tiktoken.list_encoding_names():
            known = ", ".join(tiktoken.list_encoding_names())
            raise ValueError(f"unknown tiktoken encoding {encoding!r}; known: {known}")
        return encoding
    if model is None:
        raise ValueError("set encoding or model, so tokens can be counted")
    try:
        return tiktoken.encoding_name_for_model(model)
    except KeyError:
        raise ValueError(
            f"tiktoken does not know model {model!r}; set encoding (e.g. o200k_base)"
        ) from None


@lru_cache(maxsize=16)
def get_encoding(name: str) -> tiktoken.Encoding:
    """Load an encoding (TIKTOKEN_CACHE_DIR honoured), or ModelUnavailableError."""
    resolve_encoding_name(name, None)
    try:  # tiktoken downloads a missing file with no timeout of its own
        return call_with_timeout(
            lambda: tiktoken.get_encoding(name),
            LOAD_TIMEOUT_SECONDS,
            f"loading tiktoken encoding {name!r}",
        )
    except Exception as exc:
        raise ModelUnavailableError(
            f"cannot load tiktoken encoding {name!r} ({type(exc).__name__}: {exc}); "
            "offline? set TIKTOKEN_CACHE_DIR to a folder holding its file"
        ) from exc


@lru_cache(maxsize=200_000)
def count_tokens(text: str, encoding_name: str) -> int:
    """Tokens of `text` in `encoding_name`, counted once per process.

    Special-token text counts as plain text (`encode(disallowed_special=())`),
    without that call's scan for special tokens.
    """
    return len(get_encoding(encoding_name).encode_ordinary(text))
