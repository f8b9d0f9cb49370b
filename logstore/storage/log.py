"""One partition's log: an ordered set of segments with Kafka's offsets.

Layout: ``<dir>/%020d.log|.index|.timeindex`` per segment (see
:mod:`logstore.storage.segment`). State: segments by base offset
(``SortedDict``), ``log_start_offset``, ``log_end_offset`` (LEO: the next
offset to assign), ``high_watermark`` (HW: equals the LEO unless replication
sets it) and ``recovery_point`` (every offset below it is fsynced).

A log opened on its own (``Log.open``) is its own data directory: it keeps
``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint`` and
the ``.kafka_cleanshutdown`` marker beside its segments. A log opened by a
:class:`~logstore.storage.store.Store` gets that state from the Store,
which keeps those files at the data directory's root, as Kafka does.

Concurrency: appends are serialized by a lock; with ``flush.messages=1``
concurrent appenders share fsyncs (group commit: whoever fsyncs makes every
append before it durable). Readers take no lock: they read whole batches
below the LEO they saw, so a reader never sees a half-written batch.

Leader epochs (replication, KIP-101): ``leader-epoch-checkpoint`` beside
the segments holds the start offset of every leader epoch in the log
(:mod:`logstore.storage.epochs`; a log that was never replicated has none
and stamps its batches with epoch -1). A batch's epoch is not CRC-covered:
every scan refuses an epoch above the cache's latest (``leader_epoch_max``)
or below an earlier batch's, so the log's epochs never decrease.

Crash policy: see :mod:`logstore.storage.loader`. Deleted segments are
renamed ``.deleted`` before their files go, so a crash mid-deletion leaves
nothing that could be served. A new epoch is written to the epoch file
(fsynced, atomically renamed; a torn ``.tmp`` is ignored) before any batch
carrying it, so after a crash every batch's epoch is at most the file's
latest and the loader accepts it; epoch entries the crash left past the
recovered log end or before its start are dropped on load (Kafka's
LogLoader).

I/O errors: an ``OSError`` from an operation that touches the log's files
(append, roll, flush, read, truncation, retention, close) is handed to
:attr:`Log.on_io_error` (set by the LogManager: it takes the log directory
offline, storage/log_dir_failure.py) and raised to the caller. An fsync that
fails raises :class:`SyncFailedError`, whatever its errno (after a failed
fsync the page cache may have dropped the data). A log whose directory failed
is closed by :meth:`Log.abandon`, with no further I/O.

Invariants: segment base offsets increase; the active segment is the last;
``log_start_offset <= HW <= LEO``; ``recovery_point <= LEO``.
"""

from __future__ import annotations

import os
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sortedcontainers import SortedDict

from logstore import _crashpoints as crashpoints
from logstore._native import ffi, lib, raise_for
from logstore._progress import terminal_progress
from logstore._speedups import record_at
from logstore.errors import (
    ClosedError,
    InvalidArgumentError,
    OffsetOutOfRangeError,
)
from logstore.records import Record, RecordBatch, build_batch
from logstore.records.batch import Columns, batches_of, columns_of, producer_batches
from logstore.records.builder import RecordLike, has_keyless
from logstore.storage import validator
from logstore.storage.checkpoints import fsync_directory, read_offsets, write_offsets
from logstore.storage.config import LogConfig
from logstore.storage.epochs import LeaderEpochFileCache
from logstore.storage.index import IndexFullError
from logstore.storage.loader import LogLoader
from logstore.storage.log_dir_failure import SyncFailedError
from logstore.storage.log_dir_failure import reports_io_errors as _reports_io_errors
from logstore.storage.segment import LogSegment, SegmentRead
from logstore.storage.transactions import AbortedTxn, CompletedTxn, LogTransactions
from logstore.storage.validator import ScannedBatches

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"
# Any int32 leader epoch: a scan of a follower's batches then checks only their order.
_ANY_EPOCH = 0x7FFFFFFF
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3


@dataclass(frozen=True)
class AppendInfo:
    """Offsets given to one append."""

    first_offset: int
    last_offset: int
    # Transactions the appended control batches ended (only when the log's transactions are built).
    completed: tuple[CompletedTxn, ...] = ()


@dataclass(frozen=True)
class ReadResult:
    """Whole batches from one segment: bytes for zero-copy serving, records on demand.

    ``file``, ``position`` and ``size`` say where the bytes lie, for
    ``sendfile``; ``view`` is a zero-copy memoryview of them. ``record_count``:
    the records the batches' headers count (from the read's own check; metrics).
    """

    segment_read: SegmentRead | None
    offset: int
    record_count: int = 0

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
        return batches_of(self.view)

    def columns(self, out: Columns | None = None) -> Columns:
        """The records as numpy arrays over one buffer (zero copy when uncompressed).

        Covers whole batches: records below ``offset`` in the first batch
        are included (filter on ``columns().offsets``). ``out``: an earlier
        result whose arrays are reused when large enough (a tight loop then
        allocates nothing).
        """
        return columns_of(self.view, out)

    @property
    def records(self) -> list[Record]:
        """The records at or after the requested offset."""
        result: list[Record] = []
        for batch in self.batches:
            records = batch.records
            if not result and batch.base_offset < self.offset:
                # Only the first batch can hold records below the offset.
                records = [r for r in records if r.offset >= self.offset]
            result += records
        return result

    def __iter__(self) -> Iterator[Record]:
        """The records at or after the requested offset (``for r in log.read(0)``)."""
        return iter(self.records)


def partition_key(path: str) -> tuple[str, int]:
    """(topic, partition) of a ``<topic>-<partition>`` directory, else (name, 0)."""
    name = os.path.basename(os.path.normpath(path))
    topic, _, number = name.rpartition("-")
    return (topic, int(number)) if topic and number.isdigit() else (name, 0)


def _config_of(config: LogConfig | Mapping[str, Any] | None) -> LogConfig:
    if isinstance(config, LogConfig):
        return config
    return LogConfig.from_dict(config or {})


class Log:
    """An append-only partition log. See the module doc for format and policy.

    Appends are O(bytes) plus one C scan; reads are O(log segments) to pick
    the segment, then an index lookup and a header walk in C.
    """

    def __init__(
        self,
        path: str,
        config: LogConfig,
        *,
        recovery_point: int | None = None,
        log_start_offset: int | None = None,
        clean_shutdown: bool | None = None,
    ) -> None:
        self.path = path
        self.config = config
        self._standalone = recovery_point is None and clean_shutdown is None
        self._lock = threading.RLock()
        self._flush_lock = threading.Lock()
        self._closed = False
        self.truncations = 0  # counts truncations: a log move copies every file again after one
        self._high_watermark: int | None = None
        self._transactions: LogTransactions | None = None  # built on first use (storage/transactions.py)
        self._last_flush = time.monotonic()
        # Told of every OSError of this log's I/O (the LogManager's: a failed log directory).
        self.on_io_error: Callable[[OSError], None] | None = None
        os.makedirs(path, exist_ok=True)
        # Read before the load: its scans refuse batches whose epoch passes leader_epoch_max.
        self.epochs = LeaderEpochFileCache(path)
        # The largest leader epoch a batch may carry (-1 until replication
        # assigns epochs): epochs are not CRC-covered, so this range is their check.
        self.leader_epoch_max = self.epochs.latest_epoch
        if self._standalone:
            recovery_point, log_start_offset, clean_shutdown = self._read_own_state()
        self._load(recovery_point or 0, log_start_offset or 0, bool(clean_shutdown))

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
            "dense": "compact" not in self.config.cleanup_policy,
            "leader_epoch_max": self.leader_epoch_max,
        }

    def _read_own_state(self) -> tuple[int, int, bool]:
        key = partition_key(self.path)
        marker = os.path.join(self.path, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        recovery = read_offsets(os.path.join(self.path, RECOVERY_POINT_FILE)).get(key, 0)
        start = read_offsets(os.path.join(self.path, LOG_START_FILE)).get(key, 0)
        if clean:
            os.unlink(marker)  # from now on, a crash is an unclean shutdown
            fsync_directory(self.path)
        return recovery, start, clean

    def _load(self, recovery_point: int, log_start_offset: int, clean_shutdown: bool) -> None:
        with terminal_progress(f"recovering {self.path}") as progress:
            loader = LogLoader(
                self.path, self._segment_args, self.config.max_message_bytes + lib.LS_LOG_OVERHEAD
            )
            result = loader.load(recovery_point, clean_shutdown, progress)
        self.segments: SortedDict = result.segments
        self.recovered_bytes = result.recovered_bytes
        self.truncated_bytes = result.truncated_bytes
        if not self.segments:
            self.segments[0] = LogSegment.create(self.path, 0, **self._segment_args(active=True))
            fsync_directory(self.path)
        self._refresh_active()
        first_base = self.segments.peekitem(0)[1].base_offset
        self.log_start_offset = min(max(log_start_offset, first_base), self.log_end_offset)
        self.recovery_point = self.log_end_offset
        self._durable_offset = self.log_end_offset
        # Kafka's LogLoader: forget epochs a crash (or a truncation cut short) left outside the log.
        self.epochs.truncate_from_end(self.log_end_offset)
        self.epochs.truncate_from_start(self.log_start_offset)

    # -- state -------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"log {self.path} is closed; open it again with Log.open")

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def active_segment(self) -> LogSegment:
        return self._active

    def _refresh_active(self) -> None:
        """Cache the last segment and a plain list of bases (read on every lookup).

        Called after every change to ``segments``.
        """
        self._active: LogSegment = self.segments.peekitem(-1)[1]
        self._bases: list[int] = list(self.segments.keys())
        self._segment_list: list[LogSegment] = list(self.segments.values())

    def snapshot(self) -> tuple[list[LogSegment], int]:
        """The segments, oldest first, and the high watermark, read together (the cleaner's plan). O(segments)."""
        with self._lock:
            self._check_open()
            return list(self._segment_list), self.high_watermark

    def replace_segments(self, old: Sequence[LogSegment], install: Callable[[], int]) -> LogSegment | None:
        """Kafka's ``replaceSegments``: consecutive sealed segments ``old`` give way to one new one.

        Under the log's lock, and only if every segment of ``old`` is still
        this log's (a retention or truncation meanwhile would have removed
        one): ``install()`` puts the new segment's files in place under their
        final names (the caller's crash-safe renames, see cleaner.py) and
        returns its base offset; it is opened and takes ``old``'s place. The
        old segments stay open for readers that hold them; the caller deletes
        them. Returns the new segment, or None (``install`` not called) when
        the log is closed or ``old`` changed. O(segments).
        """
        with self._lock:
            if self._closed or any(self.segments.get(s.base_offset) is not s for s in old):
                return None
            base_offset = install()
            new = LogSegment.open(self.path, base_offset, **self._segment_args(False))
            assert old and base_offset == old[0].base_offset, (
                base_offset,
                old[0].base_offset if old else None,
            )
            for segment in old:
                del self.segments[segment.base_offset]
            self.segments[new.base_offset] = new
            self._refresh_active()
            self._forget_transactions()
            return new

    @property
    def log_end_offset(self) -> int:
        return self._active.next_offset

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

    @property
    def size(self) -> int:
        """Bytes in all segments."""
        return sum(s.size for s in self.segments.values())

    # -- transactions ----------------------------------------------------------

    @property
    def transactions(self) -> LogTransactions:
        """The log's open and aborted transactions; built from the batch headers on first use
        (one C walk per segment), then kept current by appends. See storage/transactions.py."""
        found = self._transactions
        if found is None:
            with self._lock:
                self._check_open()
                if self._transactions is None:
                    segments = [s for s in self._segment_list if not s.closed]
                    self._transactions = LogTransactions.build(
                        self.path,
                        ((s.base_offset, producer_batches(s.view(0, s.valid_size()))) for s in segments),
                    )
                    self._transactions.forget_before(self.log_start_offset)
                found = self._transactions
        return found

    @property
    def last_stable_offset(self) -> int:
        """The LSO: where read_committed reads stop (``log_start_offset <= LSO <= HW``)."""
        hw = self.high_watermark
        lso = max(self.transactions.last_stable_offset(hw), self.log_start_offset)
        assert self.log_start_offset <= lso <= hw, (self.log_start_offset, lso, hw)
        return lso

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions with records in [fetch_offset, upper_bound) (a read_committed fetch)."""
        return self.transactions.aborted_between(fetch_offset, upper_bound)

    def _observe_transactions(
        self, data: bytes | bytearray | memoryview, info: AppendInfo, scanned: ScannedBatches
    ) -> AppendInfo:
        """Under the append lock: account for transactional and control batches just appended.

        Free when the state is not built yet (the build reads them from the log), and when
        the scan saw no transactional or control batch."""
        txns = self._transactions
        if txns is None or not scanned.has_transactional_or_control():
            return info
        completed = txns.observe(producer_batches(memoryview(data)), self._active.base_offset)
        return AppendInfo(info.first_offset, info.last_offset, tuple(completed)) if completed else info

    def _forget_transactions(self) -> None:
        """Truncation or compaction changed the batches: rebuild the state (and repair the
        ``.txnindex`` files) on next use."""
        self._transactions = None

    @property
    def latest_epoch(self) -> int:
        """The latest leader epoch of the log's epoch cache; -1 when it has none. O(1)."""
        return self.epochs.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch (KIP-279): (the largest epoch <= ``epoch``, its end offset).

        See :meth:`LeaderEpochFileCache.end_offset_for`; the latest epoch
        ends at the log end offset. O(log epochs).
        """
        with self._lock:
            self._check_open()
            return self.epochs.end_offset_for(epoch, self.log_end_offset)

    # -- appending ---------------------------------------------------------

    @_reports_io_errors
    def append(self, records: Iterable[RecordLike], timestamp: int | None = None) -> AppendInfo:
        """Append records (bytes, (key, value) pairs or Records) as one batch.

        With ``flush.messages=1`` the records are on disk when this returns.
        The batch joins the log's latest leader epoch (-1 in a log that was
        never replicated), so the log's epochs never decrease.
        """
        if "compact" in self.config.cleanup_policy:
            # Checked on the Python objects: cheaper than decoding the built batch again.
            records = records if isinstance(records, (list, tuple)) else list(records)
            if has_keyless(records):
                raise validator.keyless_error(self.path, self.config)
        with self._lock:
            self._check_open()
            first = self.log_end_offset
            epoch = self.epochs.latest_epoch
            batch: bytes | bytearray = build_batch(
                records, base_offset=first, timestamp=timestamp, partition_leader_epoch=epoch
            )
            if self.config.message_timestamp_type == "LogAppendTime":
                batch = self._stamp_append_time(bytearray(batch), first, epoch)
            validator.check_size(len(batch), self.config)
            info = self._append_assigned(batch, first)
        self._after_append(info)
        return info

    @staticmethod
    def _stamp_append_time(buf: bytearray, first: int, epoch: int) -> bytearray:
        """Mark batches LogAppendTime with the broker's clock (re-sealing their CRCs)."""
        last = ffi.new("int64_t *")
        now = int(time.time() * 1000)
        rc = lib.ls_assign_offsets(ffi.from_buffer(buf), len(buf), first, epoch, now, last)
        if rc != 0:
            raise_for(rc, "stamping LogAppendTime")
        return buf

    @_reports_io_errors
    def append_batch(
        self,
        data: bytes | bytearray | memoryview,
        leader_epoch: int = -1,
        keys_checked: bool = False,
        validated: ScannedBatches | None = None,
    ) -> AppendInfo:
        """Append pre-encoded v2 batches (the broker's path): validate in C, assign offsets, store.

        Offsets, ``leader_epoch`` (and LogAppendTime) are written into the
        batches in place when ``data`` is writable (a bytearray or writable
        memoryview, as a request buffer is); read-only ``bytes`` are copied
        first. A new ``leader_epoch`` is made durable in the epoch cache
        before the batches are written (Kafka's appendAsLeader). An epoch
        below the log's latest raises InvalidArgumentError: a stale leader's
        batches (or unreplicated ones, -1, in a replicated log) would break
        the log's epoch order. ``keys_checked``: the caller already refused
        keyless records for a compacted log (the broker, which names them).
        ``validated``: the validator's scan of ``data`` (a producer's batch,
        :func:`~logstore.storage.validator.validate_from_client`): its bytes
        are not scanned again, here or by the segment's index.
        """
        scanned = validated or validator.validate_for_log(data, self.config, self.path, keys_checked)
        buf = scanned.data
        append_time = int(time.time() * 1000) if self.config.message_timestamp_type == "LogAppendTime" else -1
        with self._lock:
            self._check_open()
            first = self.log_end_offset
            last = ffi.new("int64_t *")
            rc = lib.ls_assign_offsets(ffi.from_buffer(buf), len(buf), first, leader_epoch, append_time, last)
            if rc != 0:
                raise_for(rc, "assigning offsets")
            if leader_epoch != self.epochs.latest_epoch:  # the only cost to a log without replication
                self._begin_epoch(leader_epoch, first)
            info = self._append_assigned(buf, first, scanned, first, append_time)
            info = self._observe_transactions(buf, info, scanned)
        self._after_append(info)
        return info

    @_reports_io_errors
    def append_as_follower(self, data: bytes | bytearray | memoryview) -> AppendInfo:
        """Kafka's ``appendAsFollower``: store batches whose offsets and epochs the leader assigned.

        The bytes are stored as they are (byte-identical to the leader's).
        Checked first, in C: CRC and structure, offsets increasing (without
        gaps unless the log is compacted), epochs never decreasing; a batch
        above max.message.bytes raises RecordTooLargeError. The first batch
        must start at the log end offset (or after it, in a compacted log)
        and carry no epoch below the log's latest, else InvalidArgumentError:
        the follower truncates first. Each new epoch is made durable in the
        epoch cache before its first batch is written. Empty ``data``
        changes nothing and returns (LEO, LEO - 1). O(bytes) in C; the
        batches are walked in Python only when they bring a new epoch.
        """
        if not len(data):
            end = self.log_end_offset
            return AppendInfo(end, end - 1)
        dense = self._active.scan_flags & lib.LS_SCAN_DENSE
        checks = lib.LS_SCAN_CRC | lib.LS_SCAN_RECORDS | lib.LS_SCAN_MONOTONIC | lib.LS_SCAN_EPOCH | dense
        scanned = validator.validate_replicated(data, checks, _ANY_EPOCH, self.config)
        state, batches = scanned.state, scanned.batches
        first_epoch = scanned.first.partition_leader_epoch
        last_epoch = state.leader_epoch_prev  # the scan's epoch check leaves the last batch's here
        with self._lock:
            self._check_open()
            first = int(state.offset_first)
            end = self.log_end_offset
            if first < end or (dense and first != end):
                raise InvalidArgumentError(
                    f"{self.path}: replicated batches start at offset {first}, but a follower appends at its "
                    f"log end offset {end}{'' if dense else ' or later'}; truncate to the leader's epoch end "
                    "offset first"
                )
            latest = self.epochs.latest_epoch
            if first_epoch != latest or last_epoch != latest:
                for batch in batches[0 : scanned.count]:
                    if batch.partition_leader_epoch != self.epochs.latest_epoch:
                        self._begin_epoch(batch.partition_leader_epoch, batch.base_offset)
            info = self._observe_transactions(data, self._append_assigned(data, first, scanned), scanned)
        self._after_append(info)
        return info

    @_reports_io_errors
    def assign_epoch(self, epoch: int) -> None:
        """Start leader ``epoch`` at the log end offset (Kafka's ``maybeAssignEpochStartOffset``).

        A new leader calls it (Partition.makeLeader), so the previous epoch
        ends where this one starts even before anything is appended in it.
        The latest epoch again changes nothing; an earlier one raises
        InvalidArgumentError. Durable when this returns.
        """
        with self._lock:
            self._check_open()
            self._begin_epoch(epoch, self.log_end_offset)

    def _begin_epoch(self, epoch: int, start_offset: int) -> None:
        """Make ``epoch`` durable from ``start_offset`` and let scans accept it, before any batch carries it."""
        latest = self.epochs.latest_epoch
        if epoch < latest:
            raise InvalidArgumentError(
                f"{self.path}: batches of leader epoch {epoch} at offset {start_offset} follow epoch {latest}; "
                "a stale leader's batches are refused (a follower truncates to the new leader's epoch end "
                "offset first)"
            )
        self.epochs.assign(epoch, start_offset)
        if epoch > self.leader_epoch_max:
            self.leader_epoch_max = epoch
            for segment in self.segments.values():
                segment.leader_epoch_max = epoch

    def _append_assigned(
        self,
        data: bytes | bytearray | memoryview,
        first: int,
        scanned: ScannedBatches | None = None,
        offset_next: int = -1,
        append_time: int = -1,
    ) -> AppendInfo:
        """Store batches starting at offset ``first`` (under the lock). ``scanned``: their scan,
        from which the segment indexes them without reading them again; ``offset_next``: the
        offsets they were given from (-1: their own, a follower's), ``append_time`` their
        LogAppendTime (-1: none)."""
        self._maybe_roll(len(data))
        try:
            self.active_segment.append(data, scanned, offset_next, append_time)
        except IndexFullError:
            self._roll_locked()
            self.active_segment.append(data, scanned, offset_next, append_time)
        return AppendInfo(first, self.log_end_offset - 1)

    def _after_append(self, info: AppendInfo) -> None:
        """Flush per flush.messages, outside the append lock so fsyncs are shared."""
        crashpoints.crash_point("log.after_append")
        if info.last_offset + 1 - self._durable_offset >= self.config.flush_messages:
            self._flush_to(info.last_offset + 1)

    def _maybe_roll(self, incoming: int) -> None:
        segment = self.active_segment
        if segment.size == 0:
            return
        now = int(time.time() * 1000)
        if (
            segment.size + incoming > self.config.segment_bytes
            or now - segment.rolling_timestamp_ms > self.config.segment_ms - self.config.segment_jitter_ms
        ):
            self._roll_locked()

    @_reports_io_errors
    def roll(self) -> LogSegment:
        """Seal the active segment and start a new one at the log end offset."""
        with self._lock:
            self._check_open()
            return self._roll_locked()

    def _roll_locked(self) -> LogSegment:
        segment = self.active_segment
        if segment.size == 0:
            return segment
        segment.flush()
        segment.seal()
        crashpoints.crash_point("log.roll.after_seal")
        base = segment.next_offset
        self._durable_offset = max(self._durable_offset, base)
        self.recovery_point = max(self.recovery_point, base)
        new = LogSegment.create(self.path, base, **self._segment_args(active=True))
        self.segments[base] = new
        self._refresh_active()
        crashpoints.crash_point("log.roll.after_create")
        fsync_directory(self.path)  # the new segment's name survives a power loss
        if self._standalone:
            self._write_checkpoints()
        return new

    # -- flushing ----------------------------------------------------------

    @_reports_io_errors
    def flush(self) -> None:
        """fsync every segment with unflushed data; advance the recovery point."""
        self._check_open()
        self._flush_to(self.log_end_offset)

    def _flush_to(self, offset: int) -> None:
        """Make every offset below ``offset`` durable; one fsync serves every waiter."""
        with self._flush_lock:
            if self._durable_offset >= offset:
                return
            with self._lock:
                target = self.log_end_offset
                pending = [s for s in self.segments.values() if s.next_offset > self._durable_offset]
            for segment in pending:
                if not segment.closed:
                    try:
                        segment.sync_log()
                    except OSError as e:
                        raise SyncFailedError(e.errno, f"fsync of {segment.log_path}: {e.strerror}") from e
            self._durable_offset = max(self._durable_offset, target)
            self.recovery_point = max(self.recovery_point, target)
            self._last_flush = time.monotonic()

    @_reports_io_errors
    def flush_if_due(self) -> bool:
        """Flush when ``flush.ms`` has passed since the last flush (the scheduler's call)."""
        due = (time.monotonic() - self._last_flush) * 1000 >= self.config.flush_ms
        if due and self._durable_offset < self.log_end_offset:
            self.flush()
            return True
        return False

    # -- reading -----------------------------------------------------------

    @_reports_io_errors
    def read(self, offset: int, max_bytes: int = 1_048_576, upto: str = "high_watermark") -> ReadResult:
        """Whole batches from the one holding ``offset``, CRC-checked in C in the one scan that
        finds where they end (:meth:`LogSegment.read_checked`).

        At least one batch is returned when one exists below the limit
        (``upto``: "high_watermark", "last_stable" (the LSO) or "log_end"). Offsets below the log
        start or above the log end raise OffsetOutOfRangeError.
        """
        self._check_open()
        if upto == "high_watermark":
            limit = self.high_watermark
        elif upto == "log_end":
            limit = self.log_end_offset
        elif upto == "last_stable":
            limit = self.last_stable_offset
        else:
            raise InvalidArgumentError(
                f"upto must be 'high_watermark', 'last_stable' or 'log_end', not {upto!r}"
            )
        start = self.log_start_offset
        if offset < start or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{start}, {self.log_end_offset}] (log start to log end); "
                "seek to one of those"
            )
        segments = self.segments
        index = max(segments.bisect_right(offset) - 1, 0)
        for base in segments.keys()[index : index + len(segments)]:
            if offset >= limit:
                break
            segment = segments.get(base)
            if segment is None or segment.closed:
                continue
            found = segment.read_checked(offset, max_bytes, limit)
            if found is not None:
                return ReadResult(found[0], offset, found[1])
        return ReadResult(None, offset)

    @_reports_io_errors
    def get(self, offset: int, upto: str = "high_watermark") -> Record | None:
        """The one record with ``offset``; None if compaction removed it.

        O(log n) in one C call once its batch was visited (the first visit
        checks the batch's CRC). Offsets outside [log start, limit) raise
        OffsetOutOfRangeError.

        >>> import tempfile
        >>> with Log.open(tempfile.mkdtemp()) as log:
        ...     _ = log.append([b"a", b"b", b"c"])
        ...     log.get(1).value
        b'b'
        """
        segment = self._active
        hw = self._high_watermark
        limit = segment.next_offset if hw is None or upto != "high_watermark" else hw
        if not self.log_start_offset <= offset < limit:
            self._check_open()
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{self.log_start_offset}, {limit}); seek to one of those"
            )
        if offset < segment.base_offset:
            segment = self._segment_list[bisect_right(self._bases, offset) - 1]
        if segment._map is not None and segment._map_size >= segment.size and segment.damaged_at is None:
            # The common case in one C call, without LogSegment.record_at's frame;
            # anything unusual (compressed, absent, damaged, closed) takes that path.
            index = segment.offset_index
            try:
                found = record_at(segment._map, index._buffer, index._entries, segment.base_offset, offset,
                                  segment._record_cache)  # fmt: skip
            except ValueError:
                found = None
            if found:
                return found  # type: ignore[return-value]
        if segment.closed:
            self._check_open()
        return segment.record_at(offset)

    @_reports_io_errors
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record at or after ``timestamp`` (ms), or None.

        Kafka's special values: -2 the earliest offset, -1 the latest,
        -3 the record with the largest timestamp.
        """
        self._check_open()
        if timestamp == EARLIEST_TIMESTAMP:
            return -1, self.log_start_offset
        if timestamp == LATEST_TIMESTAMP:
            return -1, self.log_end_offset
        segments = list(self.segments.values())
        if timestamp == MAX_TIMESTAMP:
            best = max(segments, key=lambda s: s.max_timestamp)
            if best.max_timestamp < 0:
                return None
            # The segment keeps the offset of the batch with the largest timestamp (its last
            # offset, as Kafka's time index); the answer is the record's own offset (KAFKA-16310,
            # Kafka 3.8): the first record of the segment carrying that timestamp.
            exact = best.find_offset_by_timestamp(best.max_timestamp, self.log_start_offset)
            return exact if exact is not None else (best.max_timestamp, best.offset_of_max_timestamp)
        for segment in segments:
            if segment.max_timestamp >= timestamp and segment.next_offset > self.log_start_offset:
                found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if found is not None:
                    return found
        return None

    # -- truncation and retention -----------------------------------------

    @_reports_io_errors
    def truncate_to(self, offset: int) -> int:
        """Remove every record at or after ``offset`` (a follower's divergence); bytes removed."""
        with self._lock, self._flush_lock:
            self._check_open()
            if offset >= self.log_end_offset:
                # As Kafka: an epoch assigned with no batch after it (a leader that appended nothing) goes.
                self.epochs.truncate_from_end(self.log_end_offset)
                return 0
            if offset < 0:
                raise InvalidArgumentError(f"cannot truncate to a negative offset ({offset})")
            if offset < self.log_start_offset:
                return self._truncate_fully_and_start_at(offset)
            removed = 0
            for base in list(self.segments.irange(minimum=offset, inclusive=(False, True))):
                removed += self._delete_segment(base)
            self._refresh_active()
            segment = self.active_segment
            if not segment.active:
                segment = self._reactivate(segment)
            removed += segment.truncate_to(offset)
            # After the log, as Kafka: a crash between leaves extra entries, which the load drops.
            self.epochs.truncate_from_end(offset)
            self._after_truncation()
            return removed

    def _reactivate(self, segment: LogSegment) -> LogSegment:
        segment.close()
        reopened = LogSegment.open(self.path, segment.base_offset, **self._segment_args(active=True))
        self.segments[segment.base_offset] = reopened
        self._refresh_active()
        return reopened

    @_reports_io_errors
    def truncate_fully_and_start_at(self, offset: int) -> int:
        """Kafka's ``truncateFullyAndStartAt``: remove every record; the log restarts, empty, at ``offset``.

        A follower whose log ends below the leader's log start starts over
        there. The epoch cache is cleared. Returns the bytes removed.
        O(segments).
        """
        if offset < 0:
            raise InvalidArgumentError(f"a log cannot start at a negative offset ({offset})")
        with self._lock, self._flush_lock:
            self._check_open()
            return self._truncate_fully_and_start_at(offset)

    def _truncate_fully_and_start_at(self, offset: int) -> int:
        self.truncations += 1
        removed = 0
        for base in list(self.segments.keys()):
            removed += self._delete_segment(base)
        self.segments[offset] = LogSegment.create(self.path, offset, **self._segment_args(active=True))
        self._refresh_active()
        fsync_directory(self.path)
        self.epochs.clear()
        self._forget_transactions()
        # Nothing is left below ``offset``: every offset of the log's state restarts there.
        self.log_start_offset = self.recovery_point = self._durable_offset = offset
        if self._high_watermark is not None:
            self._high_watermark = offset
        return removed

    def _after_truncation(self) -> None:
        self.truncations += 1
        self._forget_transactions()
        end = self.log_end_offset
        self.log_start_offset = min(self.log_start_offset, end)
        if self._high_watermark is not None:
            self._high_watermark = min(self._high_watermark, end)
        self.recovery_point = min(self.recovery_point, end)
        self._durable_offset = min(self._durable_offset, end)

    def _delete_segment(self, base: int) -> int:
        """Rename a segment to .deleted, then remove it; returns its size."""
        segment = self.segments.pop(base)
        if self.segments:
            self._refresh_active()
        size = int(segment.size)
        segment.close()
        segment.rename_suffix(".deleted")
        fsync_directory(self.path)
        segment.delete()
        return size

    @_reports_io_errors
    def delete_records(self, before_offset: int) -> int:
        """Advance the log start offset to ``before_offset`` (DeleteRecords); returns it.

        Whole segments below the new start are deleted; the offset may not
        pass the high watermark.
        """
        with self._lock:
            self._check_open()
            if not 0 <= before_offset <= self.high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot delete records before {before_offset}: the limit is the high watermark "
                    f"{self.high_watermark}"
                )
            if before_offset > self.log_start_offset:
                self.log_start_offset = before_offset
                self._delete_segments_while(lambda s, nxt: nxt.base_offset <= self.log_start_offset)
            return self.log_start_offset

    @_reports_io_errors
    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Apply retention now (retention.ms, retention.bytes, log start); returns segments deleted.

        Never the active segment, never a segment holding offsets at or past
        the high watermark.
        """
        if "delete" not in self.config.cleanup_policy:
            return 0
        now = int(time.time() * 1000) if now_ms is None else now_ms
        with self._lock:
            self._check_open()
            deleted = 0
            retention_ms = self.config.retention_ms
            if retention_ms >= 0:
                deleted += self._delete_segments_while(
                    lambda s, nxt: now - s.largest_timestamp_ms > retention_ms
                )
            retention_bytes = self.config.retention_bytes
            if retention_bytes >= 0:
                excess = [self.size - retention_bytes]

                def over_size(segment: LogSegment, nxt: LogSegment) -> bool:
                    if excess[0] - segment.size < 0:
                        return False
                    excess[0] -= segment.size
                    return True

                deleted += self._delete_segments_while(over_size)
            deleted += self._delete_segments_while(lambda s, nxt: nxt.base_offset <= self.log_start_offset)
            return deleted

    def _delete_segments_while(self, predicate: Any) -> int:
        """Delete the oldest segments while ``predicate(segment, next_segment)`` holds."""
        deleted = 0
        limit = self.high_watermark
        for _ in range(len(self.segments)):
            if len(self.segments) < 2:
                break
            segment, following = self.segments.peekitem(0)[1], self.segments.peekitem(1)[1]
            if following.base_offset > limit or not predicate(segment, following):
                break
            self._delete_segment(segment.base_offset)
            deleted += 1
        first = self.segments.peekitem(0)[1].base_offset
        self.log_start_offset = max(self.log_start_offset, first)
        self.epochs.truncate_from_start(self.log_start_offset)
        if self._transactions is not None:
            self._transactions.forget_before(self.log_start_offset)
        return deleted

    # -- lifecycle ---------------------------------------------------------

    @_reports_io_errors
    def close(self) -> None:
        """Flush, write the state files (standalone), close every segment. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self.flush()
            for segment in self.segments.values():
                segment.close()
            self._closed = True
            if self._standalone:
                self._write_own_state()

    def relocate(self, path: str, finish: Callable[[], None]) -> None:
        """Serve from ``path`` (a move to another log directory, storage/log_mover.py): under the
        append lock, the log flushed and its segments closed, ``finish()`` copies what is left and
        renames the directories; the segments then reopen at ``path`` (at the old path if
        ``finish`` raised). Appends wait meanwhile; the HW and log start are kept."""
        with self._lock:
            self.flush()  # an I/O error here is the source directory's (reported by flush)
            end, start, hw, old = self.log_end_offset, self.log_start_offset, self._high_watermark, self.path
            for segment in self.segments.values():
                segment.close()
            try:
                finish()
            except BaseException:
                path = old
                raise
            finally:
                self.path = path
                self.epochs = LeaderEpochFileCache(path)
                self._transactions = None
                self._load(end, start, True)
                self._high_watermark = hw

    def abandon(self, timeout: float = 5.0) -> None:
        """Close with no I/O (no flush, no index trim): the log's directory failed. What was not
        fsynced is left to recovery at the next open. Waits up to ``timeout`` seconds for an
        operation in flight; past that the log is only marked closed (its files stay open until
        the process ends). Idempotent."""
        locked = self._lock.acquire(timeout=timeout)
        try:
            if self._closed:
                return
            self._closed = True
            if locked:
                for segment in self.segments.values():
                    segment.release()
        finally:
            if locked:
                self._lock.release()

    def _write_checkpoints(self) -> None:
        key = partition_key(self.path)
        write_offsets(os.path.join(self.path, RECOVERY_POINT_FILE), {key: self.recovery_point})
        write_offsets(os.path.join(self.path, LOG_START_FILE), {key: self.log_start_offset})

    def _write_own_state(self) -> None:
        self._write_checkpoints()
        with open(os.path.join(self.path, CLEAN_SHUTDOWN_FILE), "wb") as f:
            os.fsync(f.fileno())
        fsync_directory(self.path)

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"Log({self.path!r}, segments={len(self.segments)}, start={self.log_start_offset}, "
            f"end={self.log_end_offset})"
        )
