"""Calls into libraries that may touch the network without a timeout of their own.

tiktoken's first load and chromadb's HttpClient constructor make requests with no
timeout; the call runs in a worker thread waited for at most `seconds`, never joined.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def call_with_timeout(function: Callable[[], T], seconds: float, what: str) -> T:
    """`function()`, or TimeoutError naming `what` after `seconds`."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    future = pool.submit(function)
    try:
        return future.result(timeout=seconds)
    except concurrent.futures.TimeoutError:
        raise TimeoutError(f"{what} took over {seconds:g} s") from None
    finally:
        pool.shutdown(wait=False)
