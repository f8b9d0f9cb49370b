"""One partition's idempotent and transactional producers (Kafka's ``ProducerStateManager``).

Per producer id: its epoch, the sequence ranges and offsets of its last five
batches (Kafka's ``ProducerStateEntry``) and the coordinator epoch of its last
transaction marker. A batch (:meth:`ProducerStateManager.validate`, Kafka's
``analyzeAndValidateProducerState``) is

- a duplicate if its sequence range equals one of those five: it is not
  appended again, and its first append's offsets are returned;
- in order if it starts one past the producer's last sequence (a new epoch
  starts at 0; sequences wrap from 2**31-1 to 0);
- otherwise refused: OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch,
  INVALID_PRODUCER_EPOCH.

Answers are Kafka's error codes as ints (:data:`NONE` and the constants
below; the broker's ``ErrorCode`` enum compares equal to them): the checks
run for every idempotent batch, and a refusal is an answer, not an exception.

A transaction's first batch on the partition may carry a verification guard
(KIP-890: its coordinator confirmed the partition is in the transaction); a
marker for the producer voids the guard, and a guarded batch whose guard is
gone and whose transaction is not open is refused (INVALID_TXN_STATE).

The state is rebuilt from the log's batch headers (in C) the first time a
partition is produced to after the broker starts, so a restart, clean or not,
dedupes a producer's retries of batches it sent before. The producer ids
themselves are the broker's (``broker/transactions/producer_ids.py``: ``ProducerIds``).
"""

from __future__ import annotations

import collections
import contextlib
import time
from collections.abc import Container
from dataclasses import dataclass, field
from typing import NamedTuple

from logstore.records.batch import CONTROL_NONE, parse_batches, producer_batches
from logstore.records.builder import MARKER_VALUE as _MARKER_VALUE
from logstore.storage.log import Log
from logstore.storage.validator import BatchInfo

SEQUENCE_MAX = 2**31 - 1
_SEQUENCES = SEQUENCE_MAX + 1  # sequences wrap to 0 past SEQUENCE_MAX
BATCHES_KEPT = 5
# Kafka's error codes (Errors.java) that producer state answers with.
NONE = 0
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
TRANSACTION_COORDINATOR_FENCED = 52


class BatchSpan(NamedTuple):
    """Sequence numbers and offsets of one appended batch (a tuple: one is made per append)."""

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


class ProducerStateManager:
    """The idempotence state of one partition.

    >>> state = ProducerStateManager()
    >>> state.check(7, 0, 0, 4)
    (0, None)
    >>> state.record(7, 0, 0, 4, 100, 104)
    >>> state.check(7, 0, 0, 4)[1].first_offset   # a retry of the same batch
    100
    >>> state.check(7, 0, 9, 9)[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    True
    """

    def __init__(self, expiration_ms: int = 86_400_000) -> None:
        self.entries: dict[int, ProducerEntry] = {}
        self.expiration_ms = expiration_ms
        # Producer id -> the verification guard of a transaction's first batch being verified with
        # its coordinator (broker/transactions/txn_verification.py); any marker for the producer drops it.
        self.guards: dict[int, object] = {}

    def check(
        self, producer_id: int, epoch: int, first: int, last: int
    ) -> tuple[int, BatchSpan | None]:
        """Whether a batch may be appended: (error, the earlier append it duplicates)."""
        entry = self.entries.get(producer_id)
        if entry is not None and (time.time() * 1000 - entry.last_ms) > self.expiration_ms:
            del self.entries[producer_id]
            entry = None
        if entry is None:
            # Unknown here: new, expired, or its batches deleted (retention, DeleteRecords,
            # compaction). Kafka accepts any sequence then; refusing would be fatal to the producer.
            return NONE, None
        if epoch < entry.epoch:
            return INVALID_PRODUCER_EPOCH, None
        if epoch > entry.epoch:
            return (NONE if first == 0 else OUT_OF_ORDER_SEQUENCE_NUMBER), None
        for span in entry.batches:
            if span.first_sequence == first and span.last_sequence == last:
                return NONE, span
        if not entry.batches:  # the epoch came with a transaction marker: its sequences start at 0
            return (NONE if first == 0 else OUT_OF_ORDER_SEQUENCE_NUMBER), None
        expected = (entry.batches[-1].last_sequence + 1) % (SEQUENCE_MAX + 1)
        if first != expected:
            return OUT_OF_ORDER_SEQUENCE_NUMBER, None
        return NONE, None

    def record(
        self, producer_id: int, epoch: int, first: int, last: int, first_offset: int, last_offset: int
    ) -> None:
        """Remember an appended batch."""
        entry = self.entries.get(producer_id)
        if entry is None or epoch != entry.epoch:
            entry = self.entries[producer_id] = ProducerEntry(epoch)
        entry.batches.append(BatchSpan(first, last, first_offset, last_offset))
        entry.last_ms = time.time() * 1000

    def validate(
        self, batch: BatchInfo, guard: object | None, open_ids: Container[int]
    ) -> tuple[int, BatchSpan | None]:
        """Kafka's ``analyzeAndValidateProducerState`` for one batch with a producer id (as the
        validator's scan read it): (error code, the earlier append it duplicates).

        ``guard``: the batch opens a transaction its coordinator confirmed; unless the
        transaction is open here (``open_ids``: the log's open transactions), the producer's
        guard must still be this one (INVALID_TXN_STATE: a marker ended the transaction
        meanwhile). O(1)."""
        producer_id, epoch, first = batch.producer_id, batch.producer_epoch, batch.base_sequence
        error, duplicate = self.check(producer_id, epoch, first, (first + batch.last_offset_delta) % _SEQUENCES)
        if error != NONE or duplicate is not None:
            return error, duplicate
        if guard is not None and self.guards.get(producer_id) is not guard and not self.ongoing(producer_id, epoch, open_ids):
            return INVALID_TXN_STATE, None
        return NONE, None

    def appended(self, batch: BatchInfo, first_offset: int, last_offset: int, guard: object | None) -> None:
        """Remember a batch :meth:`validate` passed, now appended at ``first_offset..last_offset``;
        a transaction's verification guard is spent (the transaction is open here now)."""
        producer_id, first = batch.producer_id, batch.base_sequence
        last = (first + batch.last_offset_delta) % _SEQUENCES
        self.record(producer_id, batch.producer_epoch, first, last, first_offset, last_offset)
        if guard is not None and self.guards.get(producer_id) is guard:
            del self.guards[producer_id]

    def ongoing(self, producer_id: int, epoch: int, open_ids: Container[int]) -> bool:
        """Kafka's ``hasOngoingTransaction``: the producer has a transaction open on the partition
        (``open_ids``: the log's open transactions), at this epoch."""
        if producer_id not in open_ids:
            return False
        entry = self.entries.get(producer_id)
        return entry is not None and entry.epoch == epoch

    def check_epoch(self, producer_id: int, epoch: int) -> int:
        """INVALID_PRODUCER_EPOCH when ``epoch`` is below the producer's (a fenced producer)."""
        entry = self.entries.get(producer_id)
        if entry is not None and epoch < entry.epoch:
            return INVALID_PRODUCER_EPOCH
        return NONE

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> int:
        """Whether a transaction marker of ``epoch`` may be written: not below the producer's epoch
        (INVALID_PRODUCER_EPOCH), and not from a coordinator older than the last marker's
        (TRANSACTION_COORDINATOR_FENCED: a zombie coordinator, as Kafka's ``checkCoordinatorEpoch``)."""
        entry = self.entries.get(producer_id)
        if entry is None:
            return NONE
        if coordinator_epoch < entry.coordinator_epoch:
            return TRANSACTION_COORDINATOR_FENCED
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
    def rebuild(cls, log: Log, expiration_ms: int = 86_400_000) -> ProducerStateManager:
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


