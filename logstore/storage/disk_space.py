"""The free space of a log directory against its reserve: :class:`LogDirSpace`.

A filesystem that fills up must not take the data with it. Below the reserve
(``log.dir.min.free.bytes``) the broker refuses produce to user topics, while
the writes that let users recover go on into the reserve: the internal topics
(group commits and assignments, transactions), transaction markers, replicas
following their leaders. Reads, DeleteRecords, DeleteTopics and retention free
space; once the free space is back above the reserve, produce resumes by itself.
This is Redpanda's approach (``storage_min_free_bytes``), where Kafka takes a
full log directory offline.

The reserve: ``log.dir.min.free.bytes`` when set (>= 0), else the smaller of 5%
of the filesystem and 1 GiB, so that a small disk is not all reserve.

State: the free bytes of the last ``statvfs`` (:meth:`refresh`, a few
microseconds; the broker calls it every 250 ms) less the bytes written since
(:meth:`written`), so that a burst is refused before the next refresh sees it.
Nothing is persisted. Thread-safety: the broker's event loop only.

>>> import tempfile
>>> space = LogDirSpace(tempfile.gettempdir(), reserve=1)
>>> space.below_reserve, space.free_bytes > 0
(False, True)
>>> space.written(space.free_bytes + 1); space.below_reserve
True
>>> space.refresh(); space.below_reserve   # statvfs again: the write was never made
False
"""

from __future__ import annotations

import os

RESERVE_FRACTION = 0.05  # of the filesystem, when log.dir.min.free.bytes is not set
RESERVE_MAX = 1 << 30  # 1 GiB


def default_reserve(total_bytes: int) -> int:
    """The reserve of a filesystem of ``total_bytes`` when none is configured.

    >>> default_reserve(48 << 20), default_reserve(100 << 30) == 1 << 30
    (2516582, True)
    """
    return min(int(total_bytes * RESERVE_FRACTION), RESERVE_MAX)


class LogDirSpace:
    """Free space of one log directory and whether it is below the reserve (see the module doc)."""

    def __init__(self, path: str, reserve: int = -1) -> None:
        """``reserve``: bytes to keep free; negative: :func:`default_reserve` of the filesystem."""
        self.path = path
        self._configured = reserve
        self.total_bytes = 0
        self.reserve_bytes = 0
        self._free_at_refresh = 0
        self._written = 0
        self.refresh()

    def refresh(self) -> None:
        """Read the filesystem's free space again (an OSError, the directory gone, keeps the last
        reading)."""
        try:
            stat = os.statvfs(self.path)
        except OSError:
            return
        self.total_bytes = stat.f_blocks * stat.f_frsize
        self.reserve_bytes = self._configured if self._configured >= 0 else default_reserve(self.total_bytes)
        self._free_at_refresh = stat.f_bavail * stat.f_frsize
        self._written = 0

    def written(self, size: int) -> None:
        """``size`` bytes were written since the last refresh (counted against the free space)."""
        self._written += size

    @property
    def free_bytes(self) -> int:
        """The free bytes now, as far as known: the last reading less what was written since."""
        return max(self._free_at_refresh - self._written, 0)

    @property
    def below_reserve(self) -> bool:
        return self.free_bytes < self.reserve_bytes

    def refusal(self) -> str:
        """Why a produce is refused now, and what frees space."""
        return (
            f"the log directory {self.path} has {self.free_bytes} bytes free, below its reserve of "
            f"{self.reserve_bytes} (log.dir.min.free.bytes): produce is refused until space is freed "
            "(consume and let retention delete segments, DeleteRecords, DeleteTopics, or a larger disk)"
        )
