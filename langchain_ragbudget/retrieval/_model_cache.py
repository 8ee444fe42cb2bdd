"""One instance per process of what is costly to load (ONNX models).

A server that builds a pipeline per surface or per request holds one copy and pays
the load once. ONNX Runtime sessions may be run from many threads, so sharing is
safe; a lock per key keeps two threads from loading the same model twice. A load
that fails is not remembered: the next call tries again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")

_guard = threading.Lock()
_locks: dict[Hashable, threading.Lock] = {}
_loaded: dict[Hashable, Any] = {}


def shared(key: Hashable, load: Callable[[], T]) -> T:
    """The one instance for `key`, made by `load` on the first call only."""
    with _guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        if key not in _loaded:
            _loaded[key] = load()
        instance: T = _loaded[key]
        return instance
