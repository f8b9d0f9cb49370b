"""Log compaction for ``cleanup.policy=compact`` (Kafka's LogCleaner).

A compacted log keeps, for every key, at least the record with the latest
offset. :meth:`Cleaner.clean` rewrites the log's *cleanable* part: every
segment before the active one whose offsets all lie below the high watermark
(and, with ``min.compaction.lag.ms``, whose newest record is old enough).
That part has a *clean* section (cleaned before) and a *dirty* one (appended
since), split at the offset kept in the cleaner checkpoint.

One pass (Kafka's ``Cleaner.doClean``):

1. The offset map: key -> latest offset over the dirty section, whole
   segments at a time, up to ``max_map_keys`` keys (at least one segment).
   Its end (the end of the last segment it covers) becomes the new first
   dirty offset.
2. The segments below that end are grouped (Kafka's ``groupSegmentsBySize``:
   a group's bytes fit ``segment.bytes``, its index entries
   ``segment.index.bytes``, its offsets a 31-bit range) and each group is
   filtered into one new segment with the first segment's base offset.
3. The checkpoint is written.

Which records stay (Kafka's ``shouldRetainRecord``, KIP-534 tombstones):

- a record whose offset is below the map's offset for its key goes;
- a record without a key goes (Kafka's cleaner counts it invalid and drops
  it; :class:`~logstore.storage.log.Log` refuses such appends to a compacted
  topic, so only data written before the topic became compacted has them);
- a tombstone (null value) that is its key's latest stays until its batch's
  *delete horizon*: the first clean that keeps it stamps the batch with
  ``now + delete.retention.ms`` (attribute bit 0x40, the horizon in the base
  timestamp, record timestamp deltas rebased so every record keeps its
  timestamp: Kafka's v2 format since 3.1); a clean at or after the horizon
  removes it. A tombstone is therefore readable for at least
  ``delete.retention.ms`` after the first clean that saw it.

Which batches stay: offsets never change and batches keep their base offset,
last offset delta, producer id/epoch/base sequence, leader epoch and
attributes. A batch whose records all stay is copied byte for byte; one that
loses records is rebuilt from its surviving records' own bytes (the same
codec recompresses it; its max timestamp is recomputed). A batch that loses
every record vanishes, except (Kafka's ``BatchRetention.RETAIN_EMPTY``) it
stays as an empty batch (header only, uncompressed) when

- it is the last batch of its producer id in the log, and that producer wrote
  within the last ``producer_expiration_ms`` (the broker rebuilds its
  idempotence state from batch headers, so a producer's last sequence must
  survive), or
- it is the last batch of its group: the new segment then covers the same
  offsets as the segments it replaces, which is how the loader knows what a
  ``.swap`` segment replaces (Kafka keeps the last batch of a cleaning round).

Control batches and transactional batches are copied whole and their records
are left out of the offset map: without a transaction index this engine
cannot tell aborted records from committed ones, and an aborted record must
never shadow a committed value (the broker refuses transactional producers).

A group in which nothing changes (every batch kept as it is; dropping an
already-empty batch alone is not a change) is not rewritten, so cleaning twice
rewrites nothing the second time.

Checkpoint: ``cleaner-offset-checkpoint`` in Kafka's text format
(``topic partition first-dirty-offset``), at the data directory's root for a
log under a :class:`~logstore.storage.store.Store` (entries whose partition
directory is gone are dropped on each write), beside the segments for a log
opened on its own. An entry below the log start or past the log end is reset
to the log start.

On-disk protocol (Kafka's ``replaceSegments``), per group, crash point names
in brackets:

1. the new segment is written as ``<base>.log.cleaned``, ``.index.cleaned``,
   ``.timeindex.cleaned`` [``cleaner.write`` after each batch] and fsynced
   [``cleaner.after_cleaned``];
2. under the Log's lock: the three are renamed ``.swap``, the log first
   [``cleaner.mid_swap_rename``], and the directory fsynced
   [``cleaner.after_swap``];
3. the old segments are renamed ``.deleted`` [``cleaner.mid_delete_rename``
   after each] and the directory fsynced [``cleaner.after_deleted``];
4. the ``.swap`` files lose their suffix, the log last
   [``cleaner.mid_final_rename``], and the directory is fsynced
   [``cleaner.after_final_rename``];
5. the new segment is opened (its indexes verified) and switched in for the
   old ones in the Log's segment map; the lock is released
   [``cleaner.after_switch``];
6. the old segments are closed and their ``.deleted`` files removed.

After every group the next; after the last, the checkpoint
[``cleaner.before_checkpoint``].

Crash policy: :class:`~logstore.storage.loader.LogLoader` settles any crash
point. Before a ``.log.swap`` exists, ``.cleaned`` files are removed and the
old segments serve. Once it exists (it was fsynced, and so was its name), the
swap is completed: ``.deleted`` files go, the old segments whose base lies in
the ``.swap`` segment's offset range are removed (the last batch of the group
is kept, so that range is the group's), and ``.swap`` becomes the segment.
Either way every key keeps its latest record, no offset appears twice, and
the next clean starts over from the checkpoint, which is written atomically.

Concurrency: one clean per log at a time (a per-log lock); appends and reads
go on meanwhile. The Log's lock is held only for steps 2-5: renames,
directory fsyncs and opening the new segment (a header walk), never while
reading or writing records. A group is dropped (its ``.cleaned`` files
removed) when retention, truncation or a close changed any of its segments
while it was being written. Old segments are closed right after the switch:
a read that picked an old segment just before may raise
:class:`~logstore.errors.ClosedError`; reading again finds the new segment.
An I/O error during steps 2-5 leaves the Log serving its old segments and
the files for the loader: reopen the log.

Left out (documented departures from Kafka): no transaction index (see
above); the offset map holds whole keys, not 16-byte digests, and is bounded
by key count; ``max.compaction.lag.ms`` only makes a log due for cleaning,
it does not bound what one pass covers; the checkpoint is not lowered when
the log is truncated below it (a truncated and refilled range is then only
deduplicated against later keys).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from logstore import _crashpoints as crashpoints
from logstore._native import check, ffi, lib
from logstore.errors import CorruptRecordError, LogstoreError
from logstore.records.batch import HEADER_SIZE, Columns, RecordBatch, batches_of, producer_batches, scan
from logstore.records.codecs import compress
from logstore.records.varint import VarintError, read_varint, varint_bytes
from logstore.storage.checkpoints import (
    CorruptCheckpointError,
    fsync_directory,
    read_offsets,
    write_offsets,
)
from logstore.storage.index import OffsetIndex, TimeIndex
from logstore.storage.loader import Progress
from logstore.storage.log import Log, partition_key
from logstore.storage.segment import SEGMENT_SIZE_MAX, LogSegment, segment_file_name

CHECKPOINT_FILE = "cleaner-offset-checkpoint"
DELETE_HORIZON_FLAG = 0x40  # batch attribute bit 6: the base timestamp is the delete horizon
PRODUCER_EXPIRATION_MS = 86_400_000  # Kafka's producer.id.expiration.ms default
MAX_MAP_KEYS = 1_000_000
OFFSET_RANGE_MAX = 2**31 - 1  # a segment's offsets relative to its base (Kafka: Int.MaxValue)

_COMPRESSION_MASK = 0x07
_LOG_APPEND_TIME = 0x08
_EMPTY_BATCH_ATTRIBUTES = 0x08 | 0x10 | 0x20  # timestamp type, transactional, control
_KINDS = (".log", ".index", ".timeindex")
_WRITE_BUFFER = 1 << 20

CRASH_POINTS = (
    "cleaner.write",
    "cleaner.after_cleaned",
    "cleaner.mid_swap_rename",
    "cleaner.after_swap",
    "cleaner.mid_delete_rename",
    "cleaner.after_deleted",
    "cleaner.mid_final_rename",
    "cleaner.after_final_rename",
    "cleaner.after_switch",
    "cleaner.before_checkpoint",
)


@dataclass
class CleanResult:
    """What one :meth:`Cleaner.clean` did."""

    first_dirty_offset: int  # where the dirty section began
    end_offset: int  # the new checkpoint: the map's end, or the first group dropped for a race
    segments_read: int = 0  # segments in the cleaned range
    segments_replaced: int = 0  # old segments swapped out
    segments_written: int = 0  # new segments swapped in
    bytes_read: int = 0  # map building and filtering, both counted
    bytes_before: int = 0  # bytes of the replaced segments
    bytes_after: int = 0  # bytes of their replacements
    records_read: int = 0  # records filtered (not counting the map pass)
    records_removed: int = 0
    tombstones_removed: int = 0  # of records_removed: tombstones past their delete horizon
    keyless_removed: int = 0  # of records_removed: records without a key
    map_keys: int = 0
    delete_horizon_ms: int | None = None  # the earliest horizon of a tombstone still held

    @property
    def changed(self) -> bool:
        return self.segments_replaced > 0


@dataclass
class _GroupStats:
    records_read: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0
    keyless_removed: int = 0

    def add_to(self, result: CleanResult) -> None:
        result.records_read += self.records_read
        result.records_removed += self.records_removed
        result.tombstones_removed += self.tombstones_removed
        result.keyless_removed += self.keyless_removed


@dataclass
class _Plan:
    """A snapshot of the log's cleanable part, taken under its lock."""

    first_dirty: int
    cleanable: list[LogSegment]  # sealed segments, in order, all below the first uncleanable offset
    ends: list[int]  # ends[i]: the offset where cleanable[i] ends (the next segment's base)
    tail: list[LogSegment]  # every later segment, the active one included

    def dirty(self) -> list[int]:
        """Indexes of the cleanable segments with offsets at or past the first dirty offset."""
        return [i for i, end in enumerate(self.ends) if end > self.first_dirty]


# -- checkpoints -------------------------------------------------------------------

_checkpoint_lock = threading.Lock()
_checkpoint_cache: dict[str, tuple[tuple[int, int, int], dict[tuple[str, int], int]]] = {}
_registry_lock = threading.Lock()
_log_locks: dict[str, threading.Lock] = {}


def _is_standalone(log: Log) -> bool:
    return bool(getattr(log, "_standalone", True))


def checkpoint_path(log: Log) -> str:
    """Where the log's first dirty offset is kept (see the module doc)."""
    root = log.path if _is_standalone(log) else os.path.dirname(os.path.abspath(log.path))
    return os.path.join(root, CHECKPOINT_FILE)


def _read_checkpoint(path: str) -> dict[tuple[str, int], int]:
    """The checkpoint's entries; cached while the file is unchanged; {} if absent or damaged."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return {}
    stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
    cached = _checkpoint_cache.get(path)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    try:
        entries = read_offsets(path)
    except CorruptCheckpointError:
        entries = {}  # the next clean covers the whole log again: slower, never wrong
    _checkpoint_cache[path] = (stamp, entries)
    return entries


def _write_checkpoint(log: Log, offset: int) -> None:
    path = checkpoint_path(log)
    key = partition_key(log.path)
    with _checkpoint_lock:
        entries = dict(_read_checkpoint(path))
        entries[key] = offset
        if not _is_standalone(log):
            root = os.path.dirname(path)
            entries = {
                k: v for k, v in entries.items() if os.path.isdir(os.path.join(root, f"{k[0]}-{k[1]}"))
            }
        write_offsets(path, entries)


def _lock_for(log: Log) -> threading.Lock:
    with _registry_lock:
        return _log_locks.setdefault(os.path.realpath(log.path), threading.Lock())


# -- records and batches -------------------------------------------------------------


def _read_varint(data: bytes | memoryview, position: int) -> tuple[int, int]:
    """The zigzag varint at ``position``: (value, position after it)."""
    try:
        return read_varint(data, position, len(data))
    except VarintError as e:
        raise CorruptRecordError(f"a varint at byte {position} of a records section {e}") from None


def record_bounds(section: bytes | memoryview, count: int) -> list[int]:
    """Start positions of the ``count`` records of a records section, then its end."""
    bounds = [0]
    position = 0
    for _ in range(count):
        length, position = _read_varint(section, position)
        position += length
        bounds.append(position)
    if position != len(section):
        raise CorruptRecordError(f"records end at byte {position} of a {len(section)}-byte section")
    return bounds


def _rebase_record(record: bytes | memoryview, shift: int) -> bytes:
    """One record with its timestamp delta moved by ``shift`` (its base timestamp moved by -shift)."""
    _, position = _read_varint(record, 0)
    attributes = record[position]
    delta, rest = _read_varint(record, position + 1)
    body = bytes([attributes]) + varint_bytes(delta + shift) + bytes(record[rest:])
    return varint_bytes(len(body)) + body


def _seal(
    batch: RecordBatch, payload: bytes, attributes: int, timestamps: tuple[int, int], count: int
) -> bytes:
    """A batch with ``batch``'s offsets and producer fields around ``payload``."""
    out = bytearray(HEADER_SIZE + len(payload))
    out[HEADER_SIZE:] = payload
    base_timestamp, max_timestamp = timestamps
    check(
        lib.ls_batch_seal(
            ffi.from_buffer(out),
            len(out),
            batch.base_offset,
            batch.partition_leader_epoch,
            attributes,
            batch.last_offset_delta,
            base_timestamp,
            max_timestamp,
            batch.producer_id,
            batch.producer_epoch,
            batch.base_sequence,
            count,
        ),
        "sealing a cleaned batch",
    )
    return bytes(out)


def empty_batch(batch: RecordBatch) -> bytes:
    """``batch`` with no records (Kafka's ``writeEmptyHeader``): offsets, producer fields kept."""
    attributes = batch.attributes & _EMPTY_BATCH_ATTRIBUTES
    return _seal(batch, b"", attributes, (batch.max_timestamp, batch.max_timestamp), 0)


def rebuild_batch(batch: RecordBatch, columns: Columns, keep: Sequence[int], horizon: int | None) -> bytes:
    """``batch`` with only the records at indexes ``keep``, each its own bytes.

    ``horizon``: the delete horizon to stamp (None: none). The base timestamp
    moves only when the horizon flag is set or cleared; record timestamp
    deltas then move with it, so no record's timestamp changes.
    """
    section = columns.buffer
    bounds = record_bounds(section, batch.record_count)
    log_append = bool(batch.attributes & _LOG_APPEND_TIME)
    old_base = batch.base_timestamp
    if horizon is not None:
        new_base = horizon
    elif batch.attributes & DELETE_HORIZON_FLAG:
        new_base = batch.max_timestamp if log_append else int(columns.timestamps[keep[0]])
    else:
        new_base = old_base
    shift = old_base - new_base
    parts = [section[bounds[i] : bounds[i + 1]] for i in keep]
    records = b"".join(parts) if shift == 0 else b"".join(_rebase_record(p, shift) for p in parts)
    codec = batch.attributes & _COMPRESSION_MASK
    payload = compress(codec, records) if codec else records
    attributes = (batch.attributes & ~DELETE_HORIZON_FLAG) | (
        DELETE_HORIZON_FLAG if horizon is not None else 0
    )
    max_timestamp = batch.max_timestamp if log_append else max(int(columns.timestamps[i]) for i in keep)
    return _seal(batch, payload, attributes, (new_base, max_timestamp), len(keep))


def delete_horizon(batch: RecordBatch) -> int | None:
    """The batch's delete horizon (ms), or None when it has none."""
    return int(batch.base_timestamp) if batch.attributes & DELETE_HORIZON_FLAG else None


def _verified_view(segment: LogSegment) -> memoryview:
    """The segment's bytes, every batch's CRC checked in C; corruption stops the clean."""
    view = segment.view(0, segment.valid_size())
    state = scan(view, lib.LS_SCAN_CRC)
    if state.stop != 0 or state.bytes_valid != len(view):
        raise CorruptRecordError(
            f"{segment.log_path}: the batch at byte {state.bytes_valid} failed its check; the log is not "
            "compacted until it is recovered (restart) or the segment restored from a replica"
        )
    return view


def _keys(columns: Columns) -> list[bytes | None]:
    buffer = columns.buffer
    return [
        None if length < 0 else bytes(buffer[position : position + length])
        for position, length in zip(columns.key_positions.tolist(), columns.key_lengths.tolist(), strict=True)
    ]


def _compactable(batch: RecordBatch) -> bool:
    """Control and transactional batches are never filtered (see the module doc)."""
    return not (batch.is_control or batch.is_transactional)


def producer_last_offsets(views: Sequence[memoryview]) -> dict[int, int]:
    """Producer id -> last offset of its last batch in ``views`` (in log order): C and numpy."""
    ids: list[np.ndarray] = []
    lasts: list[np.ndarray] = []
    for view in views:
        if not len(view):
            continue
        fields = producer_batches(view)
        ids.append(fields.producer_ids)
        lasts.append(fields.base_offsets + fields.last_offset_deltas)
    if not ids:
        return {}
    # The last occurrence of each id: the first one in reverse order.
    reversed_ids, reversed_lasts = np.concatenate(ids)[::-1], np.concatenate(lasts)[::-1]
    unique, first = np.unique(reversed_ids, return_index=True)
    return dict(zip(unique.tolist(), reversed_lasts[first].tolist(), strict=True))


# -- the filter ---------------------------------------------------------------------

KEEP, DROP, WRITE = 0, 1, 2


@dataclass
class _Filter:
    """Kafka's ``RecordFilter`` of one clean: which records and batches stay."""

    offsets: dict[bytes, int]  # the offset map
    now: int
    delete_retention_ms: int
    producer_last: dict[int, int]  # producers with no batch after the cleaned range
    producer_expiration_ms: int
    earliest_horizon: int | None = None
    stats: _GroupStats = field(default_factory=_GroupStats)

    def decide(self, batch: RecordBatch, group_last: bool) -> tuple[int, bytes | None]:
        """(KEEP | DROP | WRITE, the new batch for WRITE)."""
        if not _compactable(batch):
            return KEEP, None
        if batch.record_count == 0:
            return (KEEP if self._retain_empty(batch, group_last) else DROP), None
        columns = batch.columns()
        keep = self._retained(batch, columns)
        holds_tombstones = bool(keep) and bool((columns.value_lengths[keep] < 0).any())
        horizon = delete_horizon(batch)
        if holds_tombstones:
            horizon = horizon if horizon is not None else self.now + self.delete_retention_ms
            self._note_horizon(horizon)
        if len(keep) == batch.record_count and (horizon is None or delete_horizon(batch) == horizon):
            return KEEP, None
        if not keep:
            return (WRITE, empty_batch(batch)) if self._retain_empty(batch, group_last) else (DROP, None)
        return WRITE, rebuild_batch(batch, columns, keep, horizon if holds_tombstones else None)

    def _retained(self, batch: RecordBatch, columns: Columns) -> list[int]:
        """Indexes of the records that stay (Kafka's ``shouldRetainRecord``)."""
        horizon = delete_horizon(batch)
        deletes_expired = horizon is not None and self.now >= horizon
        offsets = self.offsets
        keep: list[int] = []
        values = columns.value_lengths.tolist()
        for i, (key, offset) in enumerate(zip(_keys(columns), columns.offsets.tolist(), strict=True)):
            if key is None:
                self.stats.keyless_removed += 1
            elif offset < offsets.get(key, -1):
                pass  # a later record has the key
            elif values[i] < 0 and deletes_expired:
                self.stats.tombstones_removed += 1
            else:
                keep.append(i)
        self.stats.records_read += len(values)
        self.stats.records_removed += len(values) - len(keep)
        return keep

    def _retain_empty(self, batch: RecordBatch, group_last: bool) -> bool:
        """Whether a batch with no records left stays as an empty batch (see the module doc)."""
        if group_last:
            return True
        producer = batch.producer_id
        return (
            producer >= 0
            and self.producer_last.get(producer) == batch.last_offset
            and self.now - batch.max_timestamp < self.producer_expiration_ms
        )

    def _note_horizon(self, horizon: int) -> None:
        if self.earliest_horizon is None or horizon < self.earliest_horizon:
            self.earliest_horizon = horizon


# -- writing a cleaned segment -----------------------------------------------------------


class _CleanedWriter:
    """The three files of one cleaned segment, under the ``.cleaned`` suffix.

    Index entries follow the segment's own rule (an offset entry when more
    than ``index.interval.bytes`` passed since the last, a time entry when the
    largest timestamp grew); entries past the index's capacity are left out
    (lookups then scan further), so a group never fails for its index.
    """

    def __init__(self, directory: str, base_offset: int, index_interval: int, max_index_size: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.stem = os.path.join(directory, segment_file_name(base_offset, ""))
        self.index_interval = index_interval
        for kind in _KINDS:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.stem + kind + ".cleaned")
        self._fd = os.open(self.stem + ".log.cleaned", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        self.offset_index = OffsetIndex(
            self.stem + ".index.cleaned", base_offset, max_index_size, writable=True
        )
        self.time_index = TimeIndex(
            self.stem + ".timeindex.cleaned", base_offset, max_index_size, writable=True
        )
        self.size = 0
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self._since_index = 0
        self._pending = bytearray()
        self._closed = False

    def write(self, data: bytes | memoryview) -> None:
        """Append one whole batch."""
        batch = RecordBatch(memoryview(data))
        if self.size + batch.size > SEGMENT_SIZE_MAX:
            raise LogstoreError(
                f"{self.stem}.log.cleaned would pass {SEGMENT_SIZE_MAX} bytes; lower segment.bytes"
            )
        if batch.max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = batch.max_timestamp, batch.last_offset
        if self.index_interval > 0 and self._since_index > self.index_interval:
            if not self.offset_index.is_full:
                self.offset_index.append(batch.last_offset, self.size)
            if self.max_timestamp > self.time_index.last_timestamp:
                self.time_index.maybe_append(
                    self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
                )
            self._since_index = 0
        self._since_index += batch.size
        self._pending += data
        self.size += batch.size
        if len(self._pending) >= _WRITE_BUFFER:
            self._flush_pending()
        crashpoints.crash_point("cleaner.write")

    def _flush_pending(self) -> None:
        view = memoryview(self._pending)
        for _ in range(len(view) + 1):  # each pass writes at least one byte
            if not view:
                break
            view = view[os.write(self._fd, view) :]
        self._pending = bytearray()

    def finish(self) -> None:
        """Write the rest, seal the indexes (the last time entry, trimmed), fsync all three."""
        self._flush_pending()
        os.fsync(self._fd)
        os.close(self._fd)
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(
                self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
            )
        for index in (self.offset_index, self.time_index):
            index.seal()
            index.close()
            fd = os.open(index.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._closed = True

    def abort(self) -> None:
        """Remove the ``.cleaned`` files (a clean that failed or lost its race before its swap)."""
        if not self._closed:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self.offset_index.close()
            self.time_index.close()
            self._closed = True
        for kind in _KINDS:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.stem + kind + ".cleaned")

    def rename(self, old: str, new: str, kinds: Sequence[str], crash_point: str) -> None:
        """Rename the files from suffix ``old`` to ``new`` in ``kinds`` order; crash point after the first."""
        for i, kind in enumerate(kinds):
            os.replace(self.stem + kind + old, self.stem + kind + new)
            if i == 0:
                crashpoints.crash_point(crash_point)


# -- the cleaner -----------------------------------------------------------------------


class Cleaner:
    """Compacts logs; see the module doc for the rules, the on-disk protocol and the crash policy.

    ``clean`` is O(bytes of the cleanable part) (read twice at most: the
    dirty section for the map, everything for the filter) plus O(records) of
    Python for the keys; memory is the offset map (``max_map_keys`` keys at
    most, past the first segment).

    >>> import tempfile
    >>> log = Log.open(tempfile.mkdtemp(), {"cleanup.policy": "compact"})
    >>> for value in (b"1", b"2", b"3"):
    ...     _ = log.append([(b"k", value)]); _ = log.roll()
    >>> result = Cleaner().clean(log)
    >>> [(r.offset, r.value) for r in log.read(0).records]
    [(2, b'3')]
    >>> log.close()
    """

    def __init__(
        self,
        *,
        max_map_keys: int = MAX_MAP_KEYS,
        producer_expiration_ms: int = PRODUCER_EXPIRATION_MS,
    ) -> None:
        self.max_map_keys = max(1, max_map_keys)
        self.producer_expiration_ms = producer_expiration_ms
        # Per log path: the earliest delete horizon of a tombstone it holds (None: none).
        self._horizons: dict[str, int | None] = {}

    # -- what is due ---------------------------------------------------------------------

    def first_dirty_offset(self, log: Log) -> int:
        """The checkpointed first dirty offset, reset to the log start when out of range."""
        offset = _read_checkpoint(checkpoint_path(log)).get(partition_key(log.path), log.log_start_offset)
        if offset < log.log_start_offset or offset > log.log_end_offset:
            return log.log_start_offset
        return offset

    def dirty_ratio(self, log: Log, now_ms: int | None = None) -> float:
        """Dirty bytes / cleanable bytes (Kafka's cleanable ratio); 0 for nothing cleanable."""
        clean, dirty = self._clean_and_dirty_bytes(self._plan(log, _now(now_ms)))
        return dirty / (clean + dirty) if clean + dirty else 0.0

    def needs_cleaning(self, log: Log, now_ms: int | None = None) -> bool:
        """Whether the scheduler should clean ``log`` now.

        When its policy includes compact and: the dirty ratio reaches
        ``min.cleanable.dirty.ratio``, or the oldest dirty segment is older
        than ``max.compaction.lag.ms``, or a tombstone's delete horizon passed.
        """
        if "compact" not in log.config.cleanup_policy or log.closed:
            return False
        now = _now(now_ms)
        plan = self._plan(log, now)
        clean, dirty = self._clean_and_dirty_bytes(plan)
        if dirty and dirty / (clean + dirty) >= log.config.min_cleanable_dirty_ratio:
            return True
        lag = log.config.max_compaction_lag_ms
        dirty_segments = plan.dirty()
        if dirty and dirty_segments and now - plan.cleanable[dirty_segments[0]].rolling_timestamp_ms > lag:
            return True
        horizon = self._known_horizon(log, plan)
        return horizon is not None and horizon <= now

    def _clean_and_dirty_bytes(self, plan: _Plan) -> tuple[int, int]:
        dirty = set(plan.dirty())
        sizes = [int(s.size) for s in plan.cleanable]
        return (
            sum(size for i, size in enumerate(sizes) if i not in dirty),
            sum(size for i, size in enumerate(sizes) if i in dirty),
        )

    def _known_horizon(self, log: Log, plan: _Plan) -> int | None:
        """The earliest delete horizon in the log: remembered from the last clean, else read once."""
        path = os.path.realpath(log.path)
        if path not in self._horizons:
            horizons = [
                h
                for segment in plan.cleanable
                if not segment.closed
                for batch in batches_of(segment.view(0, segment.valid_size()))
                if (h := delete_horizon(batch)) is not None
            ]
            self._horizons[path] = min(horizons) if horizons else None
        return self._horizons[path]

    # -- cleaning ----------------------------------------------------------------------

    def clean(self, log: Log, now_ms: int | None = None, progress: Progress | None = None) -> CleanResult:
        """Compact the cleanable part of ``log`` now, whatever its dirty ratio.

        ``now_ms`` stands in for the clock (delete horizons, compaction lags,
        producer expiry); ``progress(done_bytes, total_bytes)`` is called as
        segments are read. Raises ClosedError if the log closes meanwhile and
        CorruptRecordError (changing nothing more) at a damaged batch.
        """
        now = _now(now_ms)
        with _lock_for(log):
            plan = self._plan(log, now)
            dirty = plan.dirty()
            # Bytes to read: the dirty segments (at most) for the map, then every target.
            total = sum(int(plan.cleanable[i].size) for i in dirty) + sum(int(s.size) for s in plan.cleanable)
            offsets, end, done = self._build_offset_map(plan, progress, total)
            count = sum(1 for segment_end in plan.ends if segment_end <= end)
            targets, later = plan.cleanable[:count], plan.cleanable[count:] + plan.tail
            total = done + sum(int(s.size) for s in targets)  # the map may have stopped early
            result = CleanResult(plan.first_dirty, end, segments_read=count, map_keys=len(offsets))
            live = _Filter(
                offsets,
                now,
                log.config.delete_retention_ms,
                self._active_producers(targets, later),
                self.producer_expiration_ms,
            )
            for group in group_segments(targets, plan.ends[:count], log):
                done = self._clean_group(log, group, live, result, progress, (done, total))
            result.bytes_read = done
            result.delete_horizon_ms = live.earliest_horizon
            self._horizons[os.path.realpath(log.path)] = live.earliest_horizon
            crashpoints.crash_point("cleaner.before_checkpoint")
            stored = _read_checkpoint(checkpoint_path(log)).get(partition_key(log.path))
            if not log.closed and stored != result.end_offset:
                _write_checkpoint(log, result.end_offset)
            return result

    def _plan(self, log: Log, now: int) -> _Plan:
        """The cleanable segments: sealed, wholly below the high watermark, past the compaction lag."""
        segments, high_watermark = log.snapshot()
        min_lag = log.config.min_compaction_lag_ms
        cleanable: list[LogSegment] = []
        ends: list[int] = []
        for segment, following in itertools.pairwise(segments):
            if (
                following.base_offset > high_watermark
                or segment.damaged_at is not None
                or (min_lag > 0 and segment.largest_timestamp_ms > now - min_lag)
            ):
                break
            cleanable.append(segment)
            ends.append(following.base_offset)
        return _Plan(self.first_dirty_offset(log), cleanable, ends, segments[len(cleanable) :])

    def _build_offset_map(
        self, plan: _Plan, progress: Progress | None, total: int
    ) -> tuple[dict[bytes, int], int, int]:
        """(key -> latest offset over the dirty segments, the end of the last one mapped, bytes read).

        Whole segments, until the map holds ``max_map_keys`` keys (Kafka's
        ``buildOffsetMap``); the map's end is where the next clean starts.
        """
        offsets: dict[bytes, int] = {}
        end = plan.first_dirty
        done = 0
        for i in plan.dirty():
            if done and len(offsets) >= self.max_map_keys:
                break
            segment = plan.cleanable[i]
            for batch in batches_of(_verified_view(segment)):
                if _compactable(batch) and batch.record_count:
                    columns = batch.columns()
                    for key, offset in zip(_keys(columns), columns.offsets.tolist(), strict=True):
                        if key is not None:
                            offsets[key] = offset
            end = plan.ends[i]
            done = self._report(progress, done, total, max(int(segment.size), 1))
        return offsets, end, done

    def _active_producers(self, targets: list[LogSegment], later: list[LogSegment]) -> dict[int, int]:
        """Producer id -> last offset, for producers whose last batch lies in ``targets``."""
        if not targets:
            return {}
        inside = producer_last_offsets([s.view(0, s.valid_size()) for s in targets if not s.closed])
        after = producer_last_offsets([s.view(0, s.valid_size()) for s in later if not s.closed])
        return {pid: last for pid, last in inside.items() if pid not in after}

    @staticmethod
    def _report(progress: Progress | None, done: int, total: int, step: int) -> int:
        done += step
        if progress is not None:
            progress(done, total)
        return done

    def _clean_group(
        self,
        log: Log,
        group: list[LogSegment],
        live: _Filter,
        result: CleanResult,
        progress: Progress | None,
        position: tuple[int, int],
    ) -> int:
        """Filter one group into a new segment and swap it in; returns the bytes done so far."""
        done, total = position
        live.stats = _GroupStats()
        writer = self._filter_group(log, group, live)
        done = self._report(progress, done, total, sum(int(s.size) for s in group))
        if writer is None:
            return done
        crashpoints.crash_point("cleaner.after_cleaned")
        new = self._swap(log, group, writer)
        if new is None:  # dropped: its records were not cleaned, so the next clean starts there
            result.end_offset = min(result.end_offset, group[0].base_offset)
        else:
            live.stats.add_to(result)
            result.segments_replaced += len(group)
            result.segments_written += 1
            result.bytes_before += sum(int(s.size) for s in group)
            result.bytes_after += int(new.size)
        return done

    def _filter_group(self, log: Log, group: list[LogSegment], live: _Filter) -> _CleanedWriter | None:
        """Write the group's surviving batches as ``.cleaned`` files; None when nothing changes."""
        writer: _CleanedWriter | None = None
        unchanged: list[memoryview] = []  # batches kept as they are, before the first change
        try:
            for segment in group:
                batches = batches_of(_verified_view(segment))
                for i, batch in enumerate(batches):
                    last = segment is group[-1] and i == len(batches) - 1
                    kind, data = live.decide(batch, last)
                    if writer is None:
                        if kind == KEEP or (kind == DROP and batch.record_count == 0):
                            if kind == KEEP:
                                unchanged.append(batch.raw)
                            continue
                        writer = _CleanedWriter(
                            log.path,
                            group[0].base_offset,
                            log.config.index_interval_bytes,
                            log.config.segment_index_bytes,
                        )
                        for raw in unchanged:
                            writer.write(raw)
                        unchanged = []
                    if kind == KEEP:
                        writer.write(batch.raw)
                    elif kind == WRITE:
                        assert data is not None
                        writer.write(data)
            if writer is not None:
                writer.finish()
        except BaseException:
            if writer is not None:
                writer.abort()
            raise
        return writer

    def _swap(self, log: Log, group: list[LogSegment], writer: _CleanedWriter) -> LogSegment | None:
        """Steps 2-6 of the module doc; None (files removed) if the group changed meanwhile."""

        def install() -> int:
            writer.rename(".cleaned", ".swap", _KINDS, "cleaner.mid_swap_rename")
            fsync_directory(log.path)
            crashpoints.crash_point("cleaner.after_swap")
            for old in group:
                old.rename_suffix(".deleted")
                crashpoints.crash_point("cleaner.mid_delete_rename")
            fsync_directory(log.path)
            crashpoints.crash_point("cleaner.after_deleted")
            writer.rename(".swap", "", (".index", ".timeindex", ".log"), "cleaner.mid_final_rename")
            fsync_directory(log.path)
            crashpoints.crash_point("cleaner.after_final_rename")
            return writer.base_offset

        new = log.replace_segments(group, install)
        if new is None:
            writer.abort()
            return None
        crashpoints.crash_point("cleaner.after_switch")
        for old in group:
            old.delete()  # closes it, then removes its .deleted files
        return new


def group_segments(segments: Sequence[LogSegment], ends: Sequence[int], log: Log) -> list[list[LogSegment]]:
    """Kafka's ``groupSegmentsBySize``: consecutive segments whose bytes fit ``segment.bytes``,
    whose index entries fit ``segment.index.bytes`` and whose offsets fit a 31-bit range.
    """
    segment_bytes = log.config.segment_bytes
    index_bytes = log.config.segment_index_bytes
    groups: list[list[LogSegment]] = []
    totals = (0, 0, 0)
    for segment, end in zip(segments, ends, strict=True):
        size = (
            int(segment.size),
            (segment.offset_index.entries + 1) * lib.LS_OFFSET_INDEX_ENTRY_SIZE,
            (segment.time_index.entries + 1) * lib.LS_TIME_INDEX_ENTRY_SIZE,
        )
        grown = tuple(a + b for a, b in zip(totals, size, strict=True))
        if (
            groups
            and grown[0] <= segment_bytes
            and grown[1] <= index_bytes
            and grown[2] <= index_bytes
            and end - 1 - groups[-1][0].base_offset <= OFFSET_RANGE_MAX
        ):
            groups[-1].append(segment)
            totals = grown
        else:
            groups.append([segment])
            totals = size
    return groups


def _now(now_ms: int | None) -> int:
    return int(time.time() * 1000) if now_ms is None else now_ms


__all__ = [
    "CHECKPOINT_FILE",
    "CRASH_POINTS",
    "CleanResult",
    "Cleaner",
    "checkpoint_path",
    "group_segments",
]
