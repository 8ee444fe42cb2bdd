"""Error types raised where a bad value enters; each message says what to do."""

from __future__ import annotations


class RagBudgetError(Exception):
    """Base class for every error this package raises on purpose."""


class ConfigError(RagBudgetError, ValueError):
    """A configuration file or value is invalid.

    Carries the file, key and value so callers (and the CLI) can show them
    without parsing the message.

    Attributes:
        file: The configuration file that was read (or `config_default.yml`).
        key: The dotted key path (`surfaces.chat.max_tokens`), or `<file>`,
            `<root>`, `line N` when the problem is not one key's value.
        value: The offending value (a long one shortened for display).
        problem: What is wrong with it, in words.
    """

    def __init__(self, file: str, key: str, value: object, problem: str) -> None:
        self.file = file
        self.key = key
        self.value = value
        self.problem = problem
        super().__init__(f"{file}: key '{key}' = {value!r}: {problem}")


class ModelUnavailableError(RagBudgetError, RuntimeError):
    """A model (embedder, reranker) is neither on disk nor downloadable."""


class VectorStoreUnavailableError(RagBudgetError, ConnectionError):
    """A vector store server cannot be reached (within its timeout)."""


class IndexLoadError(RagBudgetError):
    """A saved index is missing, incomplete or incompatible."""


class InvalidInputError(RagBudgetError, ValueError):
    """A query, document or score handed to a stage is not what it can work with.

    Raised where the value enters, naming the argument, instead of a library's
    own exception from deep inside.
    """


class IndexLockedError(RagBudgetError):
    """Another process held an index's write lock for the whole wait; nothing written.

    The message names the holder (pid, host, command) from the lock file.
    """


class IndexWriteError(RagBudgetError):
    """An index could not be written: the disk is full, read-only, or over quota.

    Nothing of the failed write was committed: the index still opens at its last
    version. Run the same write again once there is room; the vectors already
    written are reused.
    """


class IndexRepairError(RagBudgetError):
    """An index cannot be repaired without losing data; nothing was changed."""


class MemoryStoreError(RagBudgetError):
    """A memory store cannot be opened or written (its file or server named)."""


class MissingExtraError(RagBudgetError, ImportError):
    """A feature needs an optional dependency that is not installed."""


def require(module: str, extra: str, feature: str) -> None:
    """Import `module` now, or fail naming the extra that installs it.

    Raises:
        MissingExtraError: `module` cannot be imported.
    """
    import importlib

    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"{feature} needs the {module!r} package, which is not installed "
            f"({exc}); install it with: pip install 'langchain-ragbudget[{extra}]'"
        ) from exc
