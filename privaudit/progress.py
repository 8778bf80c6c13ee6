"""One progress bar for every long loop: trials, rounds, attacked images, benchmark cells.

:func:`progress_bar` is a context manager around one rich bar; :func:`progress_bars` holds several (one per
kind of work). The bar is drawn on stderr, so ``--json`` output on stdout stays clean, and it stays visible on
any terminal width: the columns that fit are chosen from the console's width every time the bar is drawn, the
label is cut with an ellipsis, and from 40 columns up the bar keeps at least :data:`MIN_BAR_WIDTH` cells
(narrower terminals still show a shorter bar and the counter; the elapsed and remaining time and the status
text appear from 80 and 100 columns). Disabled
(``enabled=False``), the same calls do nothing and nothing is printed (but :meth:`ProgressBars.print`, which
is for messages, not for progress).

Where the console is not a terminal (``make demo > log``, a CI job, a pipe) rich draws nothing until a bar
ends, so a 30-minute step would print nothing for 30 minutes. There every bar prints plain lines instead
(:class:`LineProgress`): ``label: 3/10`` when it starts, each time it crosses another tenth of its total (every
unit up to 10 units; at 1, 2, 4, 8, … when the total is unknown) and when it ends — decided by counts, never by
the clock. :func:`step` prints one line for a step that has no count of its own (``analysing …``).

Usage::

    with progress_bar("trials", total=len(todo), completed=done, enabled=progress) as bar:
        for result in results:
            bar.advance(status=f"acc {acc:.3f}")
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # rich is imported only when a bar is shown (it costs ~0.1 s)
    from rich.console import Console
    from rich.progress import Progress, ProgressColumn, Task, TaskID

__all__ = ["MIN_BAR_WIDTH", "Bar", "LineProgress", "ProgressBars", "progress_bar", "progress_bars", "step"]

#: From 40 columns up the bar itself never gets fewer cells than this (the label gives way first).
MIN_BAR_WIDTH = 10


class Bar:
    """One task of a progress display; every method is a no-op when the display is disabled."""

    def __init__(self, progress: Progress | None, task: TaskID | None) -> None:
        self._progress, self._task = progress, task

    def advance(self, n: float = 1, *, status: str | None = None) -> None:
        """``n`` more units done; ``status`` (short text after the counter) replaces the previous one if given."""
        self._update(advance=n, status=status)

    def set(self, completed: float, *, status: str | None = None) -> None:
        """Exactly ``completed`` units done."""
        self._update(completed=completed, status=status)

    def describe(self, label: str) -> None:
        """Change the label in front of the bar."""
        self._update(description=label)

    def _update(self, *, status: str | None = None, **changes: Any) -> None:
        if self._progress is None or self._task is None:
            return
        if status is not None:
            changes["status"] = status
        self._progress.update(self._task, **changes)


class ProgressBars:
    """Several bars drawn together (see :func:`progress_bars`)."""

    def __init__(self, progress: Progress | None, console: Console | None) -> None:
        self._progress, self._console = progress, console

    def add(self, label: str, total: float | None, *, completed: float = 0) -> Bar:
        """A new bar for ``total`` units (``None``: unknown), ``completed`` of them already done."""
        if self._progress is None:
            return Bar(None, None)
        return Bar(self._progress, self._progress.add_task(label, total=total, completed=completed, status=""))

    def print(self, *objects: Any) -> None:
        """Print a message above the bars (also when the bars are disabled): for results worth keeping."""
        console = self._console
        if console is None:
            from rich.console import Console

            console = self._console = Console(stderr=True)
        console.print(*objects)


class LineProgress:
    """The bars of a console that is not a terminal, as plain lines (the part of rich's ``Progress`` a :class:`Bar`
    uses): a line when a bar starts, whenever it crosses another tenth of its total, and when it ends."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._tasks: dict[int, dict[str, Any]] = {}

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        for task in self._tasks.values():
            if task["shown"] != task["completed"]:  # the last state, once, whatever the milestones said
                self._show(task)

    def add_task(self, description: str, total: float | None = None, completed: float = 0, **fields: Any) -> int:
        task_id = len(self._tasks)
        self._tasks[task_id] = {"description": description, "total": total, "completed": completed,
                                "status": fields.get("status") or "", "shown": None}
        self._show(self._tasks[task_id])
        return task_id

    def update(self, task_id: int, *, advance: float | None = None, completed: float | None = None,
               description: str | None = None, status: str | None = None, **_: Any) -> None:
        task = self._tasks[task_id]
        before = self._milestone(task, task["completed"])
        if completed is not None:
            task["completed"] = completed
        if advance:
            task["completed"] += advance
        if description is not None:
            task["description"] = description
        if status is not None:
            task["status"] = status
        if self._milestone(task, task["completed"]) != before:
            self._show(task)

    @staticmethod
    def _milestone(task: dict[str, Any], completed: float) -> int:
        """Which tenth of the total (each unit up to 10 units; the power of two, total unknown) ``completed`` is in."""
        total = task["total"]
        if total is None or total <= 0:
            return int(math.log2(completed)) + 1 if completed >= 1 else 0
        if total <= 10:
            return int(completed)
        return int(10 * completed // total)

    def _show(self, task: dict[str, Any]) -> None:
        done = task["completed"]
        count = f"{done:g}" + ("" if task["total"] is None else f"/{task['total']:g}")
        status = f" ({task['status']})" if task["status"] else ""
        self._console.print(f"{task['description']}: {count}{status}", markup=False, highlight=False, soft_wrap=True)
        task["shown"] = done


@contextmanager
def progress_bars(enabled: bool = True, *, transient: bool = False, console: Console | None = None) -> Iterator[ProgressBars]:
    """Show bars added with :meth:`ProgressBars.add` while the block runs (on stderr unless ``console`` is given).

    ``transient=True`` removes the bars when the block ends; otherwise the final state stays on screen. A console
    that is not a terminal gets lines instead of bars (:class:`LineProgress`).
    """
    if not enabled:
        yield ProgressBars(None, console)
        return
    from rich.console import Console

    console = console or Console(stderr=True)
    if not console.is_terminal:
        with LineProgress(console) as lines:
            yield ProgressBars(lines, console)  # type: ignore[arg-type]
        return
    progress = _fitting_progress(console, transient)
    with progress:
        yield ProgressBars(progress, console)


def step(message: str, *, enabled: bool = True, console: Console | None = None) -> None:
    """One line (on stderr unless ``console`` is given) for a step that may take a while and has no count of its own,
    e.g. an audit reading's analysis; nothing when ``enabled`` is false."""
    if not enabled:
        return
    from rich.console import Console

    (console or Console(stderr=True)).print(message, markup=False, highlight=False, soft_wrap=True)


@contextmanager
def progress_bar(
    label: str,
    total: float | None,
    *,
    completed: float = 0,
    enabled: bool = True,
    transient: bool = False,
    console: Console | None = None,
) -> Iterator[Bar]:
    """One bar over ``total`` units (nothing at all when ``enabled`` is false or ``total`` is 0)."""
    with progress_bars(enabled and total != 0, transient=transient, console=console) as bars:
        yield bars.add(label, total, completed=completed)


def _fitting_progress(console: Console, transient: bool) -> Progress:
    """A rich ``Progress`` whose columns are chosen from the console width at each refresh."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.table import Column

    class FittingProgress(Progress):
        def make_tasks_table(self, tasks: Sequence[Task]):  # type: ignore[no-untyped-def]
            width = console.width  # the console given (self.console is not set yet on the first call)
            label_width = max(4, width // 3 if width < 100 else min(48, width // 3))
            label = TextColumn(
                "[bold]{task.description}",
                table_column=Column(no_wrap=True, overflow="ellipsis", max_width=label_width),
            )
            bar = BarColumn(bar_width=None, table_column=Column(ratio=1, min_width=MIN_BAR_WIDTH, no_wrap=True))
            columns: list[ProgressColumn] = [label, bar, MofNCompleteColumn(table_column=Column(no_wrap=True))]
            if width >= 80:
                columns.append(TimeRemainingColumn(table_column=Column(no_wrap=True)))
            if width >= 100:
                columns.insert(3, TimeElapsedColumn(table_column=Column(no_wrap=True)))
                if any(task.fields.get("status") for task in tasks):
                    columns.insert(
                        3,
                        TextColumn("{task.fields[status]}",
                                   table_column=Column(no_wrap=True, overflow="ellipsis", max_width=max(10, width // 5))),
                    )
            self.columns = tuple(columns)
            return super().make_tasks_table(tasks)

    return FittingProgress(console=console, transient=transient, expand=True)
