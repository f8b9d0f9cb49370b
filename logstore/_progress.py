"""Progress of long work (recovery, compaction) as a rich bar on a terminal."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator

Progress = Callable[[int, int], None]


@contextlib.contextmanager
def terminal_progress(description: str) -> Iterator[Progress | None]:
    """A rich progress bar on a terminal (stderr), else no callback."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, DownloadColumn, TimeRemainingColumn
    from rich.progress import Progress as Bar

    bar = Bar(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        transient=True,
    )
    task = bar.add_task(description, total=None)
    bar.start()

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    try:
        yield update
    finally:
        bar.stop()
