"""Keep libraries from configuring the application's root logger.

flashrank calls `logging.basicConfig` in its constructor and onnxruntime's quantizer
logs through the module-level `logging.warning`, which configures the root logger when
it has no handler. A library must leave logging configuration to the application.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator


@contextlib.contextmanager
def root_logger_untouched() -> Iterator[None]:
    """Lend the root logger a NullHandler for the duration, if it has none.

    basicConfig does nothing when root already has a handler.
    """
    root = logging.getLogger()
    guard = None if root.handlers else logging.NullHandler()
    if guard is not None:
        root.addHandler(guard)
    try:
        yield
    finally:
        if guard is not None:
            root.removeHandler(guard)
