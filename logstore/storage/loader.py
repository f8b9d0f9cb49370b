"""Loading a partition's log from disk, after a clean or an unclean shutdown.

Follows Kafka's LogLoader:

1. Leftovers of interrupted work are settled: ``*.tmp`` and ``*.cleaned``
   files (a compaction that had not reached its swap) and ``*.deleted``
   files (a deletion in progress) are removed; a ``*.swap`` segment (a
   compaction that finished writing) replaces the segments whose offsets it
   covers, then loses its suffix. An index without its log is removed.
2. Every segment is opened; its indexes are verified against its log and
   rebuilt when missing or damaged (:class:`LogSegment`).
3. After an unclean shutdown, the segments at and after the recovery point
   are rescanned with full validation (structure, CRC-32C, increasing
   offsets); the log is truncated at the first invalid batch and every later
   segment is deleted. After a clean shutdown nothing is rescanned.

Recovery reports progress through a callback (the Log shows a bar on a
terminal).
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sortedcontainers import SortedDict

from logstore.records.batch import scan
from logstore.storage.segment import LogSegment

_SEGMENT_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex)(\.swap|\.cleaned|\.deleted)?$")

Progress = Callable[[int, int], None]


@dataclass
class LoadResult:
    segments: SortedDict
    recovered_bytes: int
    truncated_bytes: int


class LogLoader:
    """Loads the segments of one log directory. See the module doc for the policy."""

    def __init__(
        self, path: str, segment_args: Callable[[bool], dict[str, Any]], max_batch_size: int
    ) -> None:
        self.path = path
        self.segment_args = segment_args
        self.max_batch_size = max_batch_size

    def load(self, recovery_point: int, clean_shutdown: bool, progress: Progress | None = None) -> LoadResult:
        self._settle_leftovers()
        bases = self._segment_bases()
        segments: SortedDict = SortedDict()
        for i, base in enumerate(bases):
            segments[base] = LogSegment.open(
                self.path, base, clean_shutdown=clean_shutdown, **self.segment_args(i == len(bases) - 1)
            )
        recovered = truncated = 0
        if not clean_shutdown:
            recovered, truncated = self._recover(segments, recovery_point, progress)
        self._bound_damaged(segments)
        return LoadResult(segments, recovered, truncated)

    @staticmethod
    def _bound_damaged(segments: SortedDict) -> None:
        """A damaged sealed segment ends where the next one begins (its offsets are refused).

        Segments must also not overlap: a segment reaching past the next
        one's base is damaged from its last batch on.
        """
        for segment, following in itertools.pairwise(list(segments.values())):
            if segment.damaged_at is None and segment.next_offset > following.base_offset:
                found = segment.translate_offset(following.base_offset)
                segment.damaged_at = found[0] if found is not None else 0
            if segment.damaged_at is not None:
                segment.next_offset = following.base_offset

    def _segment_bases(self) -> list[int]:
        return sorted(
            int(name[:20])
            for name in os.listdir(self.path)
            if _SEGMENT_FILE.match(name) and name.endswith(".log")
        )

    def _settle_leftovers(self) -> None:
        names = os.listdir(self.path)
        for name in names:
            if name.endswith((".tmp", ".cleaned", ".deleted")):
                os.unlink(os.path.join(self.path, name))
        for name in sorted(os.listdir(self.path)):
            if name.endswith(".log.swap"):
                self._complete_swap(int(name[:20]))
        logs = {name[:20] for name in os.listdir(self.path) if name.endswith(".log")}
        for name in os.listdir(self.path):
            match = _SEGMENT_FILE.match(name)
            if match and match.group(2) != "log" and not match.group(3) and match.group(1) not in logs:
                os.unlink(os.path.join(self.path, name))  # an index whose log is gone

    def _complete_swap(self, base: int) -> None:
        """Replace the segments a finished compaction covers with its .swap segment."""
        stem = os.path.join(self.path, f"{base:020d}")
        swap_end = self._swap_next_offset(stem + ".log.swap", base)
        for other in self._segment_bases():
            if base <= other < swap_end:
                for kind in (".log", ".index", ".timeindex", ".txnindex"):
                    path = os.path.join(self.path, f"{other:020d}{kind}")
                    if os.path.exists(path):
                        os.unlink(path)
        for kind in (".index", ".timeindex"):
            if os.path.exists(stem + kind + ".swap"):
                os.unlink(stem + kind + ".swap")  # rebuilt from the log on open
        os.replace(stem + ".log.swap", stem + ".log")

    def _swap_next_offset(self, path: str, base: int) -> int:
        with open(path, "rb") as f:
            data = f.read()
        state = scan(data, 0)
        return int(state.offset_last) + 1 if state.batch_count else base

    def _recover(
        self, segments: SortedDict, recovery_point: int, progress: Progress | None
    ) -> tuple[int, int]:
        unflushed = [s for s in segments.values() if s.next_offset > recovery_point or s.active]
        total = sum(s.size for s in unflushed)
        done = recovered = truncated = 0
        for segment in unflushed:
            cut = segment.recover(self.max_batch_size)
            # What survived may never have reached the disk before the crash:
            # make it durable before anything counts it as flushed.
            segment.flush()
            recovered += segment.size + cut
            done += segment.size + cut
            if progress is not None:
                progress(done, total)
            if cut:
                truncated += cut
                for base in list(segments.irange(minimum=segment.base_offset, inclusive=(False, True))):
                    later = segments.pop(base)
                    truncated += later.size
                    later.delete()
                break
        if segments and not segments.peekitem(-1)[1].active:
            last = segments.peekitem(-1)[1]
            last.close()
            segments[last.base_offset] = LogSegment.open(
                self.path, last.base_offset, **self.segment_args(True)
            )
        return recovered, truncated
