"""Idempotent producers: producer ids, epochs and sequence numbers (KIP-98).

``ProducerIds`` hands out producer ids that are never reused: it reserves
blocks of ids in ``producer-id-block`` (written tmp + fsync + rename before
any id of the block is given out), so a restart continues past the block.

``PartitionProducers`` is one partition's state: per producer id, its epoch
and the sequence ranges and offsets of its last five batches (Kafka's
``ProducerStateEntry``). A batch is

- a duplicate if its sequence range equals one of those five: it is not
  appended again, and its first append's offsets are returned;
- in order if it starts one past the producer's last sequence (a new epoch
  starts at 0; sequences wrap from 2**31-1 to 0);
- otherwise OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is
  INVALID_PRODUCER_EPOCH.

The state is rebuilt from the log's batch headers (in C) the first time a
partition is produced to after the broker starts, so a restart, clean or not,
dedupes a producer's retries of batches it sent before.
"""

from __future__ import annotations

import collections
import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from logstore.records.batch import CONTROL_NONE, parse_batches, producer_batches
from logstore.records.builder import MARKER_VALUE as _MARKER_VALUE
from logstore.storage.checkpoints import write_atomically
from logstore.storage.log import Log

SEQUENCE_MAX = 2**31 - 1
BATCHES_KEPT = 5
ID_BLOCK = 1000


@dataclass(frozen=True)
class BatchSpan:
    """Sequence numbers and offsets of one appended batch."""

    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int


@dataclass
class ProducerEntry:
    epoch: int
    batches: collections.deque[BatchSpan] = field(
        default_factory=lambda: collections.deque(maxlen=BATCHES_KEPT)
    )
    last_ms: float = 0.0
    # The transaction coordinator epoch of the last marker (Kafka's ``coordinatorEpoch``): a marker
    # from an older coordinator (one that lost __transaction_state's partition) is fenced.
    coordinator_epoch: int = -1


def last_sequence(first: int, offset_delta: int) -> int:
    """The sequence of a batch's last record (sequences wrap past 2**31-1)."""
    return (first + offset_delta) % (SEQUENCE_MAX + 1)


class PartitionProducers:
    """The idempotence state of one partition.

    >>> state = PartitionProducers()
    >>> state.check(7, 0, 0, 4)
    (<ErrorCode.none: 0>, None)
    >>> state.record(7, 0, 0, 4, 100, 104)
    >>> state.check(7, 0, 0, 4)[1].first_offset   # a retry of the same batch
    100
    >>> state.check(7, 0, 9, 9)[0].name
    'out_of_order_sequence_number'
    """

    def __init__(self, expiration_ms: int = 86_400_000) -> None:
        self.entries: dict[int, ProducerEntry] = {}
        self.expiration_ms = expiration_ms
        # Producer id -> the verification guard of a transaction's first batch being verified with
        # its coordinator (broker/txn_verification.py); any marker for the producer drops it.
        self.guards: dict[int, object] = {}

    def check(
        self, producer_id: int, epoch: int, first: int, last: int
    ) -> tuple[ErrorCode, BatchSpan | None]:
        """Whether a batch may be appended: (error, the earlier append it duplicates)."""
        entry = self.entries.get(producer_id)
        if entry is not None and (time.time() * 1000 - entry.last_ms) > self.expiration_ms:
            del self.entries[producer_id]
            entry = None
        if entry is None:
            # Unknown here: new, expired, or its batches deleted (retention, DeleteRecords,
            # compaction). Kafka accepts any sequence then; refusing would be fatal to the producer.
            return ErrorCode.none, None
        if epoch < entry.epoch:
            return ErrorCode.invalid_producer_epoch, None
        if epoch > entry.epoch:
            return (ErrorCode.none if first == 0 else ErrorCode.out_of_order_sequence_number), None
        for span in entry.batches:
            if span.first_sequence == first and span.last_sequence == last:
                return ErrorCode.none, span
        if not entry.batches:  # the epoch came with a transaction marker: its sequences start at 0
            return (ErrorCode.none if first == 0 else ErrorCode.out_of_order_sequence_number), None
        expected = (entry.batches[-1].last_sequence + 1) % (SEQUENCE_MAX + 1)
        if first != expected:
            return ErrorCode.out_of_order_sequence_number, None
        return ErrorCode.none, None

    def record(
        self, producer_id: int, epoch: int, first: int, last: int, first_offset: int, last_offset: int
    ) -> None:
        """Remember an appended batch."""
        entry = self.entries.get(producer_id)
        if entry is None or epoch != entry.epoch:
            entry = self.entries[producer_id] = ProducerEntry(epoch)
        entry.batches.append(BatchSpan(first, last, first_offset, last_offset))
        entry.last_ms = time.time() * 1000

    def check_epoch(self, producer_id: int, epoch: int) -> ErrorCode:
        """INVALID_PRODUCER_EPOCH when ``epoch`` is below the producer's (a fenced producer)."""
        entry = self.entries.get(producer_id)
        if entry is not None and epoch < entry.epoch:
            return ErrorCode.invalid_producer_epoch
        return ErrorCode.none

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> ErrorCode:
        """Whether a transaction marker of ``epoch`` may be written: not below the producer's epoch
        (INVALID_PRODUCER_EPOCH), and not from a coordinator older than the last marker's
        (TRANSACTION_COORDINATOR_FENCED: a zombie coordinator, as Kafka's ``checkCoordinatorEpoch``)."""
        entry = self.entries.get(producer_id)
        if entry is None:
            return ErrorCode.none
        if coordinator_epoch < entry.coordinator_epoch:
            return ErrorCode.transaction_coordinator_fenced
        return self.check_epoch(producer_id, epoch)

    def record_marker(self, producer_id: int, epoch: int, coordinator_epoch: int = -1) -> None:
        """A transaction marker was appended: a newer epoch (the coordinator fenced the producer)
        replaces the entry, whose next batch then starts at sequence 0 (Kafka's
        ``maybeUpdateProducerEpoch``); the same epoch keeps the sequences going. The marker's
        coordinator epoch is kept (the highest seen). A verification in flight is void."""
        self.guards.pop(producer_id, None)
        entry = self.entries.get(producer_id)
        if entry is None or epoch > entry.epoch:
            kept = -1 if entry is None else entry.coordinator_epoch
            entry = self.entries[producer_id] = ProducerEntry(epoch, coordinator_epoch=kept)
        entry.coordinator_epoch = max(entry.coordinator_epoch, coordinator_epoch)
        entry.last_ms = time.time() * 1000

    @classmethod
    def rebuild(cls, log: Log, expiration_ms: int = 86_400_000) -> PartitionProducers:
        """The state from the batch headers of every segment of ``log``."""
        state = cls(expiration_ms)
        last_marker: dict[int, int] = {}  # producer id -> offset of its last marker
        for segment in list(log.segments.values()):
            if segment.closed or segment.size == 0:
                continue
            fields = producer_batches(segment.view(0, segment.valid_size()))
            rows = zip(
                fields.producer_ids.tolist(),
                fields.epochs.tolist(),
                fields.base_sequences.tolist(),
                fields.last_offset_deltas.tolist(),
                fields.base_offsets.tolist(),
                fields.control_types.tolist(),
                strict=True,
            )
            for pid, epoch, first, delta, base, control in rows:
                if control != CONTROL_NONE:
                    state.record_marker(pid, epoch)
                    last_marker[pid] = base
                else:
                    state.record(pid, epoch, first, last_sequence(first, delta), base, base + delta)
        # A producer's markers carry non-decreasing coordinator epochs (check_marker fences lower
        # ones), so its last marker holds the one to keep: one small read per producer, not per
        # marker.
        for pid, offset in last_marker.items():
            entry = state.entries.get(pid)
            if entry is not None:
                entry.coordinator_epoch = max(entry.coordinator_epoch, _marker_coordinator_epoch(log, offset))
        return state


def _marker_coordinator_epoch(log: Log, offset: int) -> int:
    """The coordinator epoch in the transaction marker at ``offset`` (its one control record's
    value: version, coordinator epoch), -1 where it cannot be read. O(one batch): markers are
    read one by one at rebuild, and a log holds one per transaction per partition."""
    with contextlib.suppress(Exception):
        view = log.read(offset, 256, upto="log_end").view
        for batch in parse_batches(view, allow_partial=True):
            if batch.base_offset == offset and batch.is_control:
                value = batch.records[0].value
                if value is not None and len(value) >= _MARKER_VALUE.size:
                    return int(_MARKER_VALUE.unpack_from(value, 0)[1])
            break
    return -1


class ProducerIds:
    """Producer ids unique across restarts: reserved in durable blocks of 1,000.

    Alone, a block is reserved in the data directory's ``producer-id-block``
    file; in a cluster, from the cluster (:meth:`use_blocks_from`: ZooKeeper's
    ``/latest_producer_id_block``), so no two brokers hand out one id. A
    reservation blocks the caller (a file write, or a ZooKeeper round trip)
    once per 1,000 ids.
    """

    def __init__(self, data_dir: str) -> None:
        self._path = os.path.join(data_dir, "producer-id-block")
        self._lock = threading.Lock()
        self._next = self._block_end = self._read()
        self._reserve: Callable[[int], tuple[int, int]] | None = None

    def use_blocks_from(self, reserve: Callable[[int], tuple[int, int]]) -> None:
        """Take blocks from ``reserve(size) -> (first, last)`` (the cluster's), from the next id on."""
        with self._lock:
            self._reserve = reserve
            self._next = self._block_end = 0

    def _read(self) -> int:
        with contextlib.suppress(FileNotFoundError, ValueError), open(self._path, encoding="ascii") as f:
            return int(f.read().strip())
        return 0

    def allocate(self) -> int:
        with self._lock:
            if self._next >= self._block_end:
                if self._reserve is not None:
                    first, last = self._reserve(ID_BLOCK)
                    self._next, self._block_end = first, last + 1
                else:
                    end = self._next + ID_BLOCK
                    write_atomically(self._path, f"{end}\n".encode("ascii"))
                    self._block_end = end
            producer_id = self._next
            self._next += 1
            return producer_id
