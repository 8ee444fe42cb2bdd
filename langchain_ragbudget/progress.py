"""Progress: one callback the library calls, one renderer for terminal and notebook.

Long work reports `(stage, done, total)` to a `ProgressCallback`: positions, not
increments, so a renderer never adds up and a report that arrives twice does no
harm. The library never draws; the caller supplies the renderer (`ProgressBars`).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType
from typing import Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class ProgressCallback(Protocol):
    """What the library calls as long work advances."""

    def __call__(self, stage: str, done: int, total: int | None) -> None:
        """`done` of `total` units of `stage` are finished; `total` None if unknown."""


@dataclass
class StageProgress:
    """The position of one stage, advanced by the size of each finished batch."""

    callback: ProgressCallback | None
    stage: str
    total: int | None
    done: int = 0

    def start(self) -> StageProgress:
        """Report position 0, so the bar shows before the first batch."""
        self._report()
        return self

    def advance(self, units: int = 1) -> None:
        """Count `units` more as finished and report."""
        self.done += units
        self._report()

    def _report(self) -> None:
        if self.callback is not None:
            self.callback(self.stage, self.done, self.total)


def prefixed(callback: ProgressCallback | None, prefix: str) -> ProgressCallback | None:
    """`callback` with `prefix` before each stage name (to tell repeated runs apart)."""
    if callback is None:
        return None

    def report(stage: str, done: int, total: int | None) -> None:
        callback(prefix + stage, done, total)

    return report


class ProgressBars:
    """A `ProgressCallback` drawn as rich progress bars, one bar per stage.

    Draws in a terminal or a Jupyter widget (ipywidgets, the `notebooks` extra);
    on a pipe or a log file it draws nothing.

    Args:
        console: The console to draw on; rich's default (stdout) if None.
        transient: Remove the bars when done (the CLI), or leave them (notebooks).

    Example:
        .. code-block:: python

            from langchain_ragbudget.progress import ProgressBars

            with ProgressBars() as progress:
                index.upsert(documents, progress=progress)
    """

    def __init__(self, console: Console | None = None, *, transient: bool = False):
        self._bars = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=transient,
            # ETA over a minute, so a stage reporting every few seconds has several
            speed_estimate_period=60,
        )
        self._tasks: dict[str, TaskID] = {}

    def __enter__(self) -> ProgressBars:
        self._bars.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._bars.refresh()  # rich's stop skips the last frame in Jupyter
        self._bars.stop()

    def __call__(self, stage: str, done: int, total: int | None) -> None:
        """Move the bar of `stage` (made on its first report)."""
        task = self._tasks.get(stage)
        if task is None:
            self._tasks[stage] = self._bars.add_task(stage, total=total, completed=done)
        else:
            self._bars.update(task, total=total, completed=done)
