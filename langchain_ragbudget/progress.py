"""Progress: one callback the library calls, one renderer for terminal and notebook.

Long work (embedding a corpus, indexing a folder, evaluating queries) reports through
a `ProgressCallback` as `(stage, done, total)`: `done` counts the units of that stage
finished so far (it only grows, and ends at `total`), `total` the units known before
the work starts. Positions, not increments, so a renderer never has to add up, and
a report that arrives twice does no harm. Work that comes in batches goes through
`StageProgress`, which turns batch sizes into positions.

The library never draws anything itself; the caller supplies the renderer. The one
shipped is `ProgressBars` (rich), for the CLI, the benchmarks and Jupyter.
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
    """The position of one stage, advanced by the size of each finished batch.

    Attributes:
        callback: Where positions are reported; None reports nothing.
        stage: The stage's name, as a renderer shows it.
        total: The units of work in the stage, when known up front.
        done: The units finished so far.
    """

    callback: ProgressCallback | None
    stage: str
    total: int | None
    done: int = 0

    def start(self) -> StageProgress:
        """Report position 0, so the bar and its total show before the first batch."""
        self._report()
        return self

    def advance(self, units: int = 1) -> None:
        """Count `units` more as finished and report the new position."""
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

    rich draws in a terminal and, in Jupyter, a widget updated in place (it needs
    ipywidgets, part of the `notebooks` extra); on output that is neither (a pipe, a
    log file) it draws nothing, so scripts reading stdout see no bar.

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
            # the ETA from the last minute of reports, so a slow stage that
            # reports every few seconds has several to go on
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
        """Move the bar of `stage` (made on its first report) to `done` of `total`."""
        task = self._tasks.get(stage)
        if task is None:
            self._tasks[stage] = self._bars.add_task(stage, total=total, completed=done)
        else:
            self._bars.update(task, total=total, completed=done)
