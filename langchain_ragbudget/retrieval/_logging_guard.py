"""Keep libraries from configuring the application's root logger.

flashrank calls `logging.basicConfig`, and onnxruntime's quantizer logs through
`logging.warning`, which configures a root logger that has no handler; logging
configuration belongs to the application.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator


@contextlib.contextmanager
def root_logger_untouched() -> Iterator[None]:
    """Lend the root logger a NullHandler meanwhile, so basicConfig does nothing."""
    root = logging.getLogger()
    guard = None if root.handlers else logging.NullHandler()
    if guard is not None:
        root.addHandler(guard)
    try:
        yield
    finally:
        if guard is not None:
            root.removeHandler(guard)
