"""One partition's log: an ordered set of segments with Kafka's offsets.

Layout: ``<dir>/%020d.log|.index|.timeindex`` per segment (see
:mod:`logstore.storage.segment`). State: segments by base offset
(``SortedDict``), ``log_start_offset``, ``log_end_offset`` (LEO: the next
offset to assign), ``high_watermark`` (HW: equals the LEO unless replication
sets it) and ``recovery_point`` (every offset below it is fsynced).

Concurrency: one writer at a time (an internal lock); readers take a
snapshot of the segment map and read whole batches below the LEO they saw,
so a reader never sees a half-written batch.

Crash policy (this working step): on open every segment is loaded, indexes
are verified against their logs and rebuilt when damaged, and the segments
from the recovery point on are rescanned with full validation, truncating at
the first invalid batch; later segments than a damaged one are dropped.

Invariants: segment base offsets increase; ``log_start_offset <= HW <= LEO``;
the active segment is the last one.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sortedcontainers import SortedDict

from logstore._native import ffi, lib, raise_for
from logstore.errors import (
    ClosedError,
    CorruptRecordError,
    InvalidArgumentError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from logstore.records import Record, RecordBatch, build_batch
from logstore.records.batch import scan
from logstore.records.builder import RecordLike
from logstore.storage.config import LogConfig
from logstore.storage.index import IndexFullError
from logstore.storage.segment import LogSegment, SegmentRead


@dataclass(frozen=True)
class AppendInfo:
    """Offsets given to one append."""

    first_offset: int
    last_offset: int


@dataclass(frozen=True)
class ReadResult:
    """Whole batches from one segment: bytes for zero-copy serving, records on demand."""

    segment_read: SegmentRead | None
    offset: int

    @property
    def file(self) -> str | None:
        return self.segment_read.path if self.segment_read else None

    @property
    def position(self) -> int:
        return self.segment_read.position if self.segment_read else 0

    @property
    def size(self) -> int:
        return self.segment_read.size if self.segment_read else 0

    @property
    def view(self) -> memoryview:
        return self.segment_read.view if self.segment_read else memoryview(b"")

    @property
    def batches(self) -> list[RecordBatch]:
        view, result, at = self.view, [], 0
        for _ in range(len(view) // lib.LS_BATCH_HEADER_SIZE + 1):
            if at >= len(view):
                break
            batch = RecordBatch(view[at:])
            result.append(batch)
            at += batch.size
        return result

    @property
    def records(self) -> list[Record]:
        """The records at or after the requested offset."""
        return [r for b in self.batches for r in b.records if r.offset >= self.offset]


def _config_of(config: LogConfig | Mapping[str, Any] | None) -> LogConfig:
    if isinstance(config, LogConfig):
        return config
    return LogConfig.from_dict(config or {})


class Log:
    """An append-only partition log. See the module doc for format and policy."""

    def __init__(self, path: str, config: LogConfig, recovery_point: int = 0) -> None:
        self.path = path
        self.config = config
        self._lock = threading.RLock()
        self._closed = False
        self.segments: SortedDict = SortedDict()
        self._unflushed = 0
        self._last_flush = time.monotonic()
        os.makedirs(path, exist_ok=True)
        self._load(recovery_point)
        self.log_start_offset = self.segments.peekitem(0)[1].base_offset
        self._high_watermark: int | None = None

    @classmethod
    def open(cls, path: str, config: LogConfig | Mapping[str, Any] | None = None) -> Log:
        """Open (or create) the log in ``path``; unknown or invalid config keys raise."""
        return cls(path, _config_of(config))

    # -- loading -----------------------------------------------------------

    def _segment_args(self, active: bool) -> dict[str, Any]:
        return {
            "index_interval_bytes": self.config.index_interval_bytes,
            "max_index_size": self.config.segment_index_bytes,
            "active": active,
        }

    def _load(self, recovery_point: int) -> None:
        bases = sorted(
            int(name[:-4]) for name in os.listdir(self.path) if name.endswith(".log") and name[:-4].isdigit()
        )
        for i, base in enumerate(bases):
            segment = LogSegment.open(self.path, base, **self._segment_args(active=i == len(bases) - 1))
            if segment.next_offset >= recovery_point and segment.active:
                segment.recover(self.config.max_message_bytes + lib.LS_LOG_OVERHEAD)
            self.segments[base] = segment
        if not self.segments:
            self.segments[0] = LogSegment.create(self.path, 0, **self._segment_args(active=True))
        self.recovery_point = self.log_end_offset

    # -- state -------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"log {self.path} is closed; open it again with Log.open")

    @property
    def active_segment(self) -> LogSegment:
        segment: LogSegment = self.segments.peekitem(-1)[1]
        return segment

    @property
    def log_end_offset(self) -> int:
        return self.active_segment.next_offset

    @property
    def high_watermark(self) -> int:
        return self.log_end_offset if self._high_watermark is None else self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        if not self.log_start_offset <= offset <= self.log_end_offset:
            raise InvalidArgumentError(
                f"high watermark {offset} outside [{self.log_start_offset}, {self.log_end_offset}]"
            )
        self._high_watermark = offset

    # -- appending ---------------------------------------------------------

    def append(self, records: Iterable[RecordLike], timestamp: int | None = None) -> AppendInfo:
        """Append records (bytes, (key, value) pairs or Records) as one batch."""
        with self._lock:
            self._check_open()
            first = self.log_end_offset
            batch = build_batch(records, base_offset=first, timestamp=self._append_time(timestamp))
            return self._append_assigned(batch, first)

    def _append_time(self, timestamp: int | None) -> int | None:
        if self.config.message_timestamp_type == "LogAppendTime":
            return int(time.time() * 1000)
        return timestamp

    def append_batch(self, data: bytes | bytearray | memoryview) -> AppendInfo:
        """Append pre-encoded v2 batches (the broker's path): validate, assign offsets, store."""
        state = scan(data)
        if state.stop != 0 or state.bytes_valid != len(data) or state.batch_count == 0:
            raise_for(state.stop or lib.LS_ERR_CORRUPT, "appending record batches")
        buf = bytearray(data)
        self._check_batch_sizes(buf)
        with self._lock:
            self._check_open()
            first = self.log_end_offset
            last = ffi.new("int64_t *")
            append_time = (
                int(time.time() * 1000) if self.config.message_timestamp_type == "LogAppendTime" else -1
            )
            rc = lib.ls_assign_offsets(ffi.from_buffer(buf), len(buf), first, -1, append_time, last)
            if rc != 0:
                raise_for(rc, "assigning offsets")
            return self._append_assigned(buf, first)

    def _check_batch_sizes(self, buf: bytearray) -> None:
        limit = self.config.max_message_bytes
        view, at = memoryview(buf), 0
        for _ in range(len(buf) // lib.LS_BATCH_HEADER_SIZE + 1):
            if at >= len(buf):
                return
            size = RecordBatch(view[at:]).size
            if size > limit:
                raise RecordTooLargeError(
                    f"a batch of {size} bytes exceeds max.message.bytes={limit}; raise it or send smaller batches"
                )
            at += size

    def _append_assigned(self, data: bytes | bytearray, first: int) -> AppendInfo:
        self._maybe_roll(len(data))
        segment = self.active_segment
        try:
            segment.append(data)
        except IndexFullError:
            self.roll()
            self.active_segment.append(data)
        last = self.log_end_offset - 1
        self._unflushed += last - first + 1
        if self._unflushed >= self.config.flush_messages:
            self.flush()
        return AppendInfo(first, last)

    def _maybe_roll(self, incoming: int) -> None:
        segment = self.active_segment
        if segment.size == 0:
            return
        if segment.size + incoming > self.config.segment_bytes:
            self.roll()

    def roll(self) -> LogSegment:
        """Seal the active segment and start a new one at the log end offset."""
        with self._lock:
            self._check_open()
            segment = self.active_segment
            if segment.size == 0:
                return segment
            segment.flush()
            segment.seal()
            base = segment.next_offset
            new = LogSegment.create(self.path, base, **self._segment_args(active=True))
            self.segments[base] = new
            return new

    def flush(self) -> None:
        """fsync every segment with unflushed data; advance the recovery point."""
        with self._lock:
            self._check_open()
            for segment in self.segments.values():
                if segment.active or segment.next_offset > self.recovery_point:
                    segment.flush()
            self.recovery_point = self.log_end_offset
            self._unflushed = 0
            self._last_flush = time.monotonic()

    # -- reading -----------------------------------------------------------

    def read(self, offset: int, max_bytes: int = 1_048_576, upto: str = "high_watermark") -> ReadResult:
        """Whole batches from the one holding ``offset``, CRC-checked in C.

        At least one batch is returned when one exists below the limit
        (``upto``: "high_watermark" or "log_end"). Offsets below the log
        start or above the log end raise OffsetOutOfRangeError.
        """
        self._check_open()
        if upto not in ("high_watermark", "log_end"):
            raise InvalidArgumentError(f"upto must be 'high_watermark' or 'log_end', not {upto!r}")
        limit = self.high_watermark if upto == "high_watermark" else self.log_end_offset
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{self.log_start_offset}, {self.log_end_offset}] "
                "(log start to log end); seek to one of those"
            )
        segments = list(self.segments.irange(maximum=offset, reverse=True, inclusive=(True, True)))[:1]
        segments += list(self.segments.irange(minimum=offset, inclusive=(False, True)))
        for base in segments:
            if offset >= limit:
                break
            read = self.segments[base].read(offset, max_bytes)
            if read is None:
                continue
            read = self._below(read, limit)
            if read is not None:
                self._verify(read)
                return ReadResult(read, offset)
        return ReadResult(None, offset)

    def _below(self, read: SegmentRead, limit: int) -> SegmentRead | None:
        """Trim a read to the batches whose base offset is below ``limit``."""
        view, at = read.view, 0
        for _ in range(len(view) // lib.LS_BATCH_HEADER_SIZE + 1):
            if at >= len(view):
                break
            batch = RecordBatch(view[at:])
            if batch.base_offset >= limit:
                break
            at += batch.size
        if at == 0:
            return None
        return SegmentRead(read.segment, read.position, at, view[:at])

    def _verify(self, read: SegmentRead) -> None:
        state = scan(read.view, lib.LS_SCAN_CRC)
        if state.stop != 0:
            raise CorruptRecordError(
                f"{read.path}: the batch at byte {read.position + state.bytes_valid} failed its check; "
                "it is not served. Restart to recover the log, or restore the segment from a replica"
            )

    # -- lifecycle ---------------------------------------------------------

    def close(self) -> None:
        """Flush and close every segment. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self.flush()
            for segment in self.segments.values():
                segment.close()
            self._closed = True

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"Log({self.path!r}, segments={len(self.segments)}, start={self.log_start_offset}, "
            f"end={self.log_end_offset})"
        )
