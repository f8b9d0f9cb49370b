"""The transaction coordinator (KIP-98), without sockets: Kafka's ``TransactionCoordinator``.

A transactional producer names a ``transactional.id``; the coordinator of
that id (the leader of partition ``hash(id) % transaction.state.log.num.partitions``
of ``__transaction_state``) keeps its
:class:`~logstore.coordinator.txn.transaction_log.TransactionMetadata`: producer
id and epoch, timeout, state, the partitions of the open transaction. Every
change is first written to ``__transaction_state`` (acks=all) and applied
only once written, so a new coordinator reads the same state back.

States and moves (Kafka's ``TransactionState``; the byte is the stored one)::

    Empty(0) / CompleteCommit(4) / CompleteAbort(5)
        --AddPartitionsToTxn / AddOffsetsToTxn--> Ongoing(1)
    Ongoing --EndTxn(commit)--> PrepareCommit(2) --markers written--> CompleteCommit
    Ongoing --EndTxn(abort), timeout, InitProducerId--> PrepareAbort(3) --markers--> CompleteAbort
    any but Prepare* --InitProducerId--> epoch + 1 (a new producer id once the epoch is exhausted)

A producer is *fenced* by the epoch: a request with an older epoch is
PRODUCER_FENCED (INVALID_PRODUCER_EPOCH on versions before KIP-588), and
InitProducerId, a timed-out transaction or a new producer with the same id
bumps it. Requests arriving while a write is in flight, or while a
transaction is being completed (Prepare*), get CONCURRENT_TRANSACTIONS:
the client retries. After EndTxn's Prepare* record is written, the client is
answered and the markers go out (:meth:`TransactionIO.write_markers`, which
retries until every partition has its marker); then Complete* is written.

The records and their byte layout: :mod:`~logstore.coordinator.txn.transaction_log`.

Crash policy: nothing but ``__transaction_state`` is kept. A coordinator that
loads a partition (:meth:`TransactionCoordinator.load`) replays its records
(the latest per id wins) and finishes every transaction it finds in Prepare*
(the client was already told it committed or aborted).

Complexity: every API is O(partitions of the request) plus one write; the
timeout scan is O(transactional ids coordinated here).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from logstore.coordinator.internal_topics import TRANSACTION_STATE_TOPIC, partition_for
from logstore.coordinator.record_codec import OffsetsSchemaError, Record
from logstore.coordinator.txn.transaction_log import (
    NO_EPOCH,
    TopicPartition,
    TransactionMetadata,
    TxnState,
    decode_transaction_key,
    decode_transaction_value,
    transaction_key,
    transaction_value,
)

_log = logging.getLogger("logstore.coordinator")

EPOCH_MAX = 32767  # Short.MAX_VALUE
NO_PRODUCER_ID = -1

_SETTLED = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


# -- what the coordinator needs from the broker ------------------------------------


class TransactionIO(Protocol):
    """The broker's side: producer ids, ``__transaction_state`` writes and transaction markers."""

    def allocate_producer_id(self) -> int: ...

    async def write(self, partition: int, record: Record) -> ErrorCode:
        """Append one record to ``__transaction_state``'s ``partition`` and wait for the ISR;
        the error the request gets (NONE, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, ...)."""
        ...

    async def write_markers(
        self, producer_id: int, epoch: int, coordinator_epoch: int, commit: bool, partitions: set[TopicPartition]
    ) -> None:
        """Write the COMMIT or ABORT marker to every partition (retrying until each is written or
        its topic is gone); returns once done, or raises CancelledError when the coordinator stops."""
        ...

    def coordinator_epoch(self, partition: int) -> int:
        """The leader epoch of ``__transaction_state``'s ``partition`` here (the markers carry it)."""
        ...


@dataclass(frozen=True)
class TransactionsConfig:
    """The broker settings the coordinator reads (Kafka's names)."""

    num_partitions: int = 50  # transaction.state.log.num.partitions
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    abort_interval_ms: int = 10_000  # transaction.abort.timed.out.transaction.cleanup.interval.ms


def _now_ms() -> int:
    return int(time.time() * 1000)


class TransactionCoordinator:
    """The transactional ids of the ``__transaction_state`` partitions this broker leads.

    Not thread-safe: the event loop's. See the module doc for states and policy.
    """

    def __init__(
        self, config: TransactionsConfig, io: TransactionIO, clock: Callable[[], int] = _now_ms
    ) -> None:
        self.config = config
        self.io = io
        self.clock = clock
        self.txns: dict[str, TransactionMetadata] = {}
        self.owned: set[int] | None = None  # None: every partition (a broker alone)
        self.loading: set[int] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._timer: asyncio.Task[None] | None = None
        self.closed = False

    # -- ownership ---------------------------------------------------------------

    def partition_of(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    def serve_partitions_taken_only(self) -> None:
        """In a cluster: coordinate only the partitions :meth:`load` is given."""
        self.owned = set()

    def owner_error(self, transactional_id: str) -> ErrorCode:
        """NONE if this coordinator serves the id now, else Kafka's error for where it stands."""
        if self.closed:
            return ErrorCode.not_coordinator
        partition = self.partition_of(transactional_id)
        if partition in self.loading:
            return ErrorCode.coordinator_load_in_progress
        if self.owned is not None and partition not in self.owned:
            return ErrorCode.not_coordinator
        return ErrorCode.none

    def load(self, partition: int, records: Iterable[Record]) -> None:
        """Take ``partition``: replay its records, then finish the transactions left in Prepare*."""
        self.loading.add(partition)
        try:
            found: dict[str, TransactionMetadata | None] = {}
            for key, value in records:
                try:
                    txn_id = decode_transaction_key(key)
                    found[txn_id] = None if value is None else decode_transaction_value(txn_id, value)
                except OffsetsSchemaError as e:
                    _log.error("skipping an unreadable %s record: %s", TRANSACTION_STATE_TOPIC, e)
            for txn_id, metadata in found.items():
                if metadata is not None and self.partition_of(txn_id) == partition:
                    self.txns[txn_id] = metadata
        finally:
            self.loading.discard(partition)
        if self.owned is not None:
            self.owned.add(partition)
        for metadata in list(self.txns.values()):
            if self.partition_of(metadata.transactional_id) != partition:
                continue
            if metadata.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                self._spawn(self._complete(metadata, metadata.state == TxnState.PREPARE_COMMIT))

    def unload(self, partition: int) -> None:
        """Give ``partition`` up (another broker leads it now): forget its ids."""
        if self.owned is not None:
            self.owned.discard(partition)
        for txn_id in [t for t in self.txns if self.partition_of(t) == partition]:
            del self.txns[txn_id]

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> None:
        """Start aborting timed-out transactions (call on the event loop)."""
        self._timer = asyncio.get_running_loop().create_task(self._abort_timed_out_forever())

    async def close(self) -> None:
        self.closed = True
        tasks = [*self._tasks, *([self._timer] if self._timer is not None else [])]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):  # cancelled; errors were logged
                await task

    def _spawn(self, work: Awaitable[None]) -> None:
        async def run() -> None:
            try:
                await work
            except asyncio.CancelledError:
                raise
            except Exception:
                _log.exception("completing a transaction failed")

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- writes ------------------------------------------------------------------

    async def _persist(self, metadata: TransactionMetadata, target: TransactionMetadata) -> ErrorCode:
        """Write ``target`` (the next state of ``metadata``); apply it once written. Sets and clears
        ``pending`` around the write, so concurrent requests get CONCURRENT_TRANSACTIONS."""
        assert not metadata.pending
        metadata.pending = True
        try:
            target.last_update_ms = self.clock()
            record = (transaction_key(target.transactional_id), transaction_value(target))
            error = await self.io.write(self.partition_of(target.transactional_id), record)
        finally:
            metadata.pending = False
        if error != ErrorCode.none:
            return error
        if self.txns.get(metadata.transactional_id) is not metadata:
            return ErrorCode.not_coordinator  # the partition moved away meanwhile
        metadata.producer_id, metadata.producer_epoch = target.producer_id, target.producer_epoch
        metadata.last_producer_epoch = target.last_producer_epoch
        metadata.timeout_ms, metadata.state = target.timeout_ms, target.state
        metadata.partitions, metadata.start_ms = target.partitions, target.start_ms
        metadata.last_update_ms = target.last_update_ms
        return ErrorCode.none

    # -- InitProducerId ------------------------------------------------------------

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected_pid: int = NO_PRODUCER_ID,
        expected_epoch: int = NO_EPOCH,
    ) -> tuple[ErrorCode, int, int]:  # fmt: skip
        """(error, producer id, epoch) for a transactional producer starting (Kafka's
        ``handleInitProducerId``): the epoch is bumped, fencing any earlier producer of the
        id; an open transaction is aborted first (CONCURRENT_TRANSACTIONS until it is)."""
        if not transactional_id:
            return ErrorCode.invalid_request, NO_PRODUCER_ID, NO_EPOCH
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return ErrorCode.invalid_transaction_timeout, NO_PRODUCER_ID, NO_EPOCH
        error = self.owner_error(transactional_id)
        if error != ErrorCode.none:
            return error, NO_PRODUCER_ID, NO_EPOCH
        metadata = self.txns.get(transactional_id)
        if metadata is None:
            metadata = TransactionMetadata(transactional_id, self.io.allocate_producer_id(), NO_EPOCH, timeout_ms)
            self.txns[transactional_id] = metadata
        if metadata.pending:
            return ErrorCode.concurrent_transactions, NO_PRODUCER_ID, NO_EPOCH
        if expected_pid != NO_PRODUCER_ID:
            retried = expected_epoch == metadata.last_producer_epoch and metadata.state in _SETTLED
            if expected_pid != metadata.producer_id or (
                expected_epoch != metadata.producer_epoch and not retried
            ):
                return ErrorCode.producer_fenced, NO_PRODUCER_ID, NO_EPOCH
            if retried:  # the answer to the earlier attempt was lost: the same id and epoch again
                return ErrorCode.none, metadata.producer_id, metadata.producer_epoch
        if metadata.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return ErrorCode.concurrent_transactions, NO_PRODUCER_ID, NO_EPOCH
        if metadata.state == TxnState.ONGOING:
            # Fence the running producer (epoch + 1) and abort its transaction; the new one retries.
            await self._fence_and_abort(metadata)
            return ErrorCode.concurrent_transactions, NO_PRODUCER_ID, NO_EPOCH
        if metadata.state not in _SETTLED:
            return ErrorCode.invalid_txn_state, NO_PRODUCER_ID, NO_EPOCH
        target = metadata.copy()
        if metadata.producer_epoch >= EPOCH_MAX - 1:  # exhausted: a new producer id at epoch 0
            target.producer_id, target.producer_epoch = self.io.allocate_producer_id(), 0
        else:
            target.producer_epoch = metadata.producer_epoch + 1
        target.last_producer_epoch = metadata.producer_epoch
        target.timeout_ms, target.state, target.partitions, target.start_ms = timeout_ms, TxnState.EMPTY, set(), -1
        error = await self._persist(metadata, target)
        if error != ErrorCode.none:
            return error, NO_PRODUCER_ID, NO_EPOCH
        return ErrorCode.none, metadata.producer_id, metadata.producer_epoch

    def _check_producer(self, transactional_id: str, producer_id: int, epoch: int) -> tuple[ErrorCode, TransactionMetadata | None]:
        error = self.owner_error(transactional_id)
        if error != ErrorCode.none:
            return error, None
        metadata = self.txns.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping, None
        if epoch != metadata.producer_epoch:
            return ErrorCode.producer_fenced, None
        if metadata.pending:
            return ErrorCode.concurrent_transactions, None
        return ErrorCode.none, metadata

    # -- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------

    async def add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[TopicPartition]
    ) -> ErrorCode:
        """Add ``partitions`` to the producer's transaction, starting it if none is open."""
        error, metadata = self._check_producer(transactional_id, producer_id, epoch)
        if metadata is None:
            return error
        if metadata.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return ErrorCode.concurrent_transactions
        if metadata.state not in (TxnState.ONGOING, *_SETTLED):
            return ErrorCode.invalid_txn_state
        wanted = set(partitions)
        if metadata.state == TxnState.ONGOING and wanted <= metadata.partitions:
            return ErrorCode.none  # nothing new: no write
        target = metadata.copy()
        if metadata.state != TxnState.ONGOING:
            target.partitions, target.start_ms = set(), self.clock()
        target.partitions |= wanted
        target.state = TxnState.ONGOING
        return await self._persist(metadata, target)

    def verify_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """Are ``partitions`` in the producer's open transaction? (KIP-890 part 1: a partition
        leader asks before it appends a transaction's first batch; Kafka's
        ``handleVerifyPartitionsInTransaction``.) Per partition NONE, or TRANSACTION_ABORTABLE
        when it was never added; one error for all when the producer is unknown here
        (INVALID_PRODUCER_ID_MAPPING), fenced (PRODUCER_FENCED) or ending its transaction
        (CONCURRENT_TRANSACTIONS). No write; a pending write is not waited for (Kafka's rule:
        the partition's own check at append time covers it). O(partitions)."""
        wanted = list(partitions)
        error = ErrorCode.none if transactional_id else ErrorCode.invalid_request
        if error == ErrorCode.none:
            error = self.owner_error(transactional_id)
        metadata = self.txns.get(transactional_id) if error == ErrorCode.none else None
        if error == ErrorCode.none and (metadata is None or metadata.producer_id != producer_id):
            error = ErrorCode.invalid_producer_id_mapping
        elif metadata is not None and metadata.producer_epoch != epoch:
            error = ErrorCode.producer_fenced
        elif metadata is not None and metadata.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            error = ErrorCode.concurrent_transactions
        if error != ErrorCode.none or metadata is None:
            return dict.fromkeys(wanted, error)
        return {
            tp: ErrorCode.none if tp in metadata.partitions else ErrorCode.transaction_abortable for tp in wanted
        }

    # -- EndTxn --------------------------------------------------------------------

    async def end_transaction(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> ErrorCode:
        """Commit or abort the producer's transaction (Kafka's ``handleEndTransaction``): the
        Prepare* record is written and the client answered; markers and Complete* follow."""
        error, metadata = self._check_producer(transactional_id, producer_id, epoch)
        if metadata is None:
            return error
        prepare = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        complete = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        state = metadata.state
        if state == complete:
            return ErrorCode.none  # a retry of an EndTxn that succeeded
        if state == prepare:
            return ErrorCode.concurrent_transactions
        if state != TxnState.ONGOING:
            return ErrorCode.invalid_txn_state
        return await self._prepare(metadata, commit, metadata.producer_epoch)

    async def _prepare(self, metadata: TransactionMetadata, commit: bool, epoch: int) -> ErrorCode:
        target = metadata.copy()
        target.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        target.producer_epoch = epoch
        error = await self._persist(metadata, target)
        if error == ErrorCode.none:
            self._spawn(self._complete(metadata, commit))
        return error

    async def _complete(self, metadata: TransactionMetadata, commit: bool) -> None:
        """Write the markers, then the Complete* record (retried until written or the id moves)."""
        partition = self.partition_of(metadata.transactional_id)
        await self.io.write_markers(
            metadata.producer_id, metadata.producer_epoch, self.io.coordinator_epoch(partition), commit,
            set(metadata.partitions),
        )  # fmt: skip
        for attempt in range(1 << 30):  # bounded by the coordinator losing the id or closing
            if self.closed or self.txns.get(metadata.transactional_id) is not metadata:
                return
            if metadata.pending:
                await asyncio.sleep(0.01)
                continue
            target = metadata.copy()
            target.state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
            target.partitions, target.start_ms = set(), -1
            error = await self._persist(metadata, target)
            if error == ErrorCode.none:
                return
            _log.warning(
                "writing %s of transactional id %r failed (%s); attempt %d",
                target.state.wire_name, metadata.transactional_id, error.name, attempt + 1,
            )  # fmt: skip
            await asyncio.sleep(min(0.05 * (attempt + 1), 1.0))

    async def _fence_and_abort(self, metadata: TransactionMetadata) -> ErrorCode:
        """Abort an open transaction with the epoch bumped: its producer is fenced (Kafka's
        ``PrepareEpochFence`` then abort). An exhausted epoch aborts with the current one."""
        epoch = metadata.producer_epoch + 1 if metadata.producer_epoch < EPOCH_MAX - 1 else metadata.producer_epoch
        return await self._prepare(metadata, False, epoch)

    # -- timeouts and expiry ----------------------------------------------------------

    def timed_out(self, now_ms: int | None = None) -> list[TransactionMetadata]:
        """Open transactions past their timeout, not being changed."""
        now = self.clock() if now_ms is None else now_ms
        return [
            m for m in self.txns.values()
            if m.state == TxnState.ONGOING and not m.pending and m.start_ms + m.timeout_ms < now
        ]  # fmt: skip

    async def abort_timed_out(self) -> int:
        """Abort (and fence) every timed-out transaction; returns how many were started."""
        started = 0
        for metadata in self.timed_out():
            _log.info(
                "aborting transaction of %r (producer %d epoch %d): open for more than %d ms",
                metadata.transactional_id, metadata.producer_id, metadata.producer_epoch, metadata.timeout_ms,
            )  # fmt: skip
            if await self._fence_and_abort(metadata) == ErrorCode.none:
                started += 1
        return started

    async def _abort_timed_out_forever(self) -> None:
        interval = self.config.abort_interval_ms / 1000
        for _ in range(1 << 62):  # until cancelled
            await asyncio.sleep(interval)
            try:
                await self.abort_timed_out()
                await self.expire_ids()
            except asyncio.CancelledError:
                raise
            except Exception:
                _log.exception("the transaction timeout scan failed")

    async def expire_ids(self, now_ms: int | None = None) -> int:
        """Remove ids settled and unused for ``transactional.id.expiration.ms`` (a tombstone each)."""
        now = self.clock() if now_ms is None else now_ms
        expired = [
            m for m in self.txns.values()
            if m.state in _SETTLED and not m.pending and now - m.last_update_ms > self.config.id_expiration_ms
        ]  # fmt: skip
        removed = 0
        for metadata in expired:
            metadata.pending = True
            try:
                error = await self.io.write(
                    self.partition_of(metadata.transactional_id), (transaction_key(metadata.transactional_id), None)
                )
            finally:
                metadata.pending = False
            if error == ErrorCode.none and self.txns.get(metadata.transactional_id) is metadata:
                del self.txns[metadata.transactional_id]
                removed += 1
        return removed

    # -- describing ------------------------------------------------------------------

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TransactionMetadata | None]:
        error = self.owner_error(transactional_id)
        if error != ErrorCode.none:
            return error, None
        metadata = self.txns.get(transactional_id)
        if metadata is None:
            return ErrorCode.transactional_id_not_found, None
        return ErrorCode.none, metadata

    def list(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (), min_duration_ms: int = -1) -> Iterator[TransactionMetadata]:
        """The ids coordinated here, filtered as ListTransactions asks (empty filter: all)."""
        wanted_states, wanted_ids = set(states), set(producer_ids)
        now = self.clock()
        for metadata in self.txns.values():
            if wanted_states and metadata.state.wire_name not in wanted_states:
                continue
            if wanted_ids and metadata.producer_id not in wanted_ids:
                continue
            if min_duration_ms >= 0 and (metadata.state != TxnState.ONGOING or now - metadata.start_ms < min_duration_ms):
                continue
            yield metadata
