"""A Partition: one topic-partition as this broker holds it (Kafka's ``Partition``).

It owns the partition's :class:`~logstore.storage.log.Log`, the producer
state of its idempotent producers (rebuilt from the log on first use), and
its leadership: leader epoch, replica set and ISR, as the controller last
said (its :class:`~logstore.broker.metadata_cache.PartitionState`).

As **leader** (replicated: a broker of a cluster) it keeps each follower's
progress (:class:`ReplicaProgress`: its log end offset, from the offset it
fetches at, and when it was last caught up) and from them:

- the **high watermark**: the smallest log end offset in the ISR, counting a
  follower whose addition is in flight (Kafka's "maximal ISR": the HW must
  never pass a replica that may already be in the ISR);
- **ISR changes**: a follower out of the ISR whose log end has reached the
  HW (and this leader's epoch) is added; one not caught up for
  ``replica.lag.time.max.ms`` is removed. Both go to the controller
  (AlterPartition); one change in flight at a time.

As **leader** it appends a producer's records (:meth:`Partition.append_as_leader`,
Kafka's ``appendRecordsToLeader``): acks=-1 needs ``min.insync.replicas``
replicas in the ISR (NOT_ENOUGH_REPLICAS), then storage's validator
(:mod:`logstore.storage.validator`: one C scan of the batch), its producer
state (:mod:`logstore.storage.producer_state`: sequences, epochs,
transactions) and the Log's append, all from that one scan.

As **follower** it holds no progress; the replica fetcher appends to its
log and moves its HW to the leader's (capped at its own log end).

Alone (one broker, no cluster) the HW is the log end offset, as today.

Invariant, asserted at each append and HW move: ``log_start_offset <=
high_watermark <= log_end_offset``. Crash policy: a Partition keeps nothing
on disk of its own: the Log recovers itself (its leader-epoch cache
included), the HW comes back from ``replication-offset-checkpoint`` (a lower
bound: it advances again as followers fetch), and the producer state is
rebuilt from the Log.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from logstore.broker.metadata_cache import PartitionState
from logstore.broker.transactions.txn_verification import NOT_ADDED
from logstore.errors import InvalidRecordError, LogstoreError
from logstore.protocol.errors import error_for
from logstore.records.batch import ATTR_TRANSACTIONAL
from logstore.storage import validator
from logstore.storage.config import LogConfig
from logstore.storage.log import AppendInfo, Log
from logstore.storage.producer_state import NONE, ProducerStateManager, last_sequence
from logstore.storage.validator import BatchInfo, ScannedBatches

_log = logging.getLogger("logstore.broker")

UNKNOWN_OFFSET = -1
_MAX_TIMESTAMP_AT = 35
_TIMESTAMP = struct.Struct(">q")
_OPENINGS_KEPT = 16  # validations kept from needs_verification for the appends that follow
# What a checked batch's write needs: its scan, the producer state (idempotent batches), the leader epoch.
_Prepared = tuple[ScannedBatches, ProducerStateManager | None, int]
# The broker's check of a validated batch's records (topic, its config, the batch): a refusal or None.
# The batch's record count follows (its header's).
RecordCheck = Callable[[str, LogConfig, bytes | bytearray | memoryview, int], "AppendResult | None"]


class AppendResult:
    """One partition's answer to an append: Kafka's ``PartitionResponse``."""

    __slots__ = (
        "append_time", "base_offset", "error", "log_start", "message", "record_errors", "records_appended",
        "required_offset", "size_appended",
    )  # fmt: skip

    def __init__(
        self,
        error: ErrorCode,
        base_offset: int = -1,
        append_time: int = -1,
        log_start: int = -1,
        message: str | None = None,
        record_errors: tuple[tuple[int, str | None], ...] = (),
    ) -> None:
        self.error = error
        self.base_offset = base_offset
        self.append_time = append_time
        self.log_start = log_start
        self.message = message
        # KIP-467: (index of the record in its batch, why) for each record that made the batch fail.
        self.record_errors = record_errors
        self.required_offset = -1  # acks=-1 when replicated: the HW this append waits for
        self.size_appended = 0  # bytes and records written (metrics); 0 for a refusal or a duplicate
        self.records_appended = 0


class ReplicaProgress:
    """A follower as its leader sees it (Kafka's ``Replica``): log end offset (-1 until it fetches),
    when it last was caught up, and the leader's log end at its previous fetch."""

    __slots__ = ("broker_id", "last_caught_up_ms", "last_fetch_leader_end", "last_fetch_ms", "log_end_offset")

    def __init__(self, broker_id: int, last_caught_up_ms: int) -> None:
        self.broker_id = broker_id
        self.log_end_offset = UNKNOWN_OFFSET
        self.last_caught_up_ms = last_caught_up_ms
        self.last_fetch_leader_end = UNKNOWN_OFFSET
        self.last_fetch_ms = 0

    def fetched(self, offset: int, leader_end: int, now_ms: int) -> None:
        """A fetch at ``offset`` (so every offset below it is on the follower). Kafka's rule for
        "caught up": it reached the leader's end now, or the end the leader had at its last fetch."""
        if offset >= leader_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif offset >= self.last_fetch_leader_end >= 0:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = offset
        self.last_fetch_leader_end = leader_end
        self.last_fetch_ms = now_ms


class Partition:
    """One topic-partition on this broker (see the module doc). Not thread-safe: the event loop's."""

    __slots__ = (
        "_producers",
        "_validated",
        "index",
        "is_leader",
        "leader_epoch_start",
        "log",
        "node_id",
        "pending_isr",
        "producer_id_expiration_ms",
        "remotes",
        "replicated",
        "state",
        "topic",
    )

    def __init__(
        self,
        topic: str,
        index: int,
        log: Log,
        state: PartitionState,
        producer_id_expiration_ms: int,
        node_id: int = 0,
        replicated: bool = False,
    ) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.state = state
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.node_id = node_id
        self.replicated = replicated
        self.is_leader = not replicated and state.leader == node_id
        self.remotes: dict[int, ReplicaProgress] = {}
        self.pending_isr: tuple[int, ...] | None = None  # an AlterPartition in flight
        self.leader_epoch_start = UNKNOWN_OFFSET
        self._producers: ProducerStateManager | None = None
        # id(records) -> (records, their scan): needs_verification's validations, for the append.
        self._validated: dict[int, tuple[object, ScannedBatches]] = {}

    def __repr__(self) -> str:
        role = "leader" if self.is_leader else "follower"
        return f"Partition({self.topic}-{self.index}, {role}, epoch {self.state.leader_epoch}, isr {self.state.isr})"

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def producers(self) -> ProducerStateManager:
        """The producer state, rebuilt from the log on first use. O(log's producer batches) once."""
        if self._producers is None:
            self._producers = ProducerStateManager.rebuild(self.log, self.producer_id_expiration_ms)
        return self._producers

    # -- appends (as leader) ---------------------------------------------------

    def validate(self, records: bytes | memoryview | None) -> ScannedBatches:
        """Storage's validator on a producer's records (one C scan); raises its refusals."""
        return validator.validate_from_client(records, self.log.config, f"{self.topic}-{self.index}")

    def opening(self, records: bytes | memoryview | None) -> tuple[int, int] | None:
        """(producer id, epoch) when ``records`` is a valid transactional batch that would open its
        producer's transaction here (KIP-890: verified with the coordinator first), else None
        (an invalid batch too: the append reports it). A valid batch's validation is kept for
        the append of the same ``records``, so their bytes are scanned once. O(batch) in C."""
        try:
            scanned = self.validate(records)
        except LogstoreError:
            return None
        kept = self._validated
        if len(kept) >= _OPENINGS_KEPT:  # refused verifications never append: forget the oldest
            del kept[next(iter(kept))]
        kept[id(records)] = (records, scanned)  # holding ``records`` keeps its id unique
        batch = scanned.first
        if not batch.attributes & ATTR_TRANSACTIONAL or batch.producer_id < 0:
            return None
        if self.has_open_transaction(batch.producer_id, batch.producer_epoch):
            return None
        return batch.producer_id, batch.producer_epoch

    def has_open_transaction(self, producer_id: int, epoch: int) -> bool:
        """Kafka's ``hasOngoingTransaction``: the producer has a transaction open here, at this epoch."""
        return self.producers.ongoing(producer_id, epoch, self.log.transactions.open)

    def append_as_leader(
        self,
        records: bytes | memoryview | None,
        acks: int,
        replicated: bool,
        guard: object | None = None,
        check: RecordCheck | None = None,
    ) -> AppendResult:
        """Kafka's ``appendRecordsToLeader``: a producer's batch, checked and appended (see the
        module doc), on the caller's thread. ``replicated``: batches carry the leader epoch and
        acks=-1 sets the offset to wait for. ``guard``: the batch opens a transaction its
        coordinator confirmed (see :meth:`ProducerStateManager.validate`). A log with
        ``flush.messages=1`` is for :meth:`append_as_leader_durably`. ``check``: the broker's
        check of the validated batch's records (schema ids: broker/schema_validation.py)."""
        prepared = self._prepare_append(records, acks, replicated, guard, check)
        if isinstance(prepared, AppendResult):
            return prepared
        scanned, epoch = prepared[0], prepared[2]
        try:
            appended = self.log.append_batch(scanned.data, epoch, True, scanned)
        except (LogstoreError, OSError) as e:
            return self._append_failed(e)
        return self._append_done(prepared, appended, acks, replicated, guard)

    async def append_as_leader_durably(
        self,
        records: bytes | memoryview | None,
        acks: int,
        replicated: bool,
        guard: object | None = None,
        check: RecordCheck | None = None,
    ) -> AppendResult:
        """:meth:`append_as_leader` with the write and its fsync (``flush.messages=1``) in the
        default executor, off the event loop; the checks and producer state stay on it."""
        prepared = self._prepare_append(records, acks, replicated, guard, check)
        if isinstance(prepared, AppendResult):
            return prepared
        scanned, epoch = prepared[0], prepared[2]
        loop = asyncio.get_running_loop()
        try:
            appended = await loop.run_in_executor(None, self.log.append_batch, scanned.data, epoch, True, scanned)
        except (LogstoreError, OSError) as e:
            return self._append_failed(e)
        return self._append_done(prepared, appended, acks, replicated, guard)

    def _prepare_append(
        self,
        records: bytes | memoryview | None,
        acks: int,
        replicated: bool,
        guard: object | None,
        check: RecordCheck | None = None,
    ) -> AppendResult | _Prepared:
        """The checks before the write: min.insync.replicas, the validator, the producer state.
        An AppendResult when the batch is refused or a duplicate, else what the write needs."""
        log = self.log
        config = log.config
        in_sync = len(self.state.isr)
        if acks == -1 and config.min_insync_replicas > in_sync:
            return AppendResult(
                ErrorCode.not_enough_replicas,
                message=f"{in_sync} replica(s) in sync, min.insync.replicas={config.min_insync_replicas}",
            )
        kept = self._validated.pop(id(records), None) if self._validated else None
        try:
            scanned = kept[1] if kept is not None and kept[0] is records else self.validate(records)
        except LogstoreError as e:
            errors = e.record_errors if isinstance(e, InvalidRecordError) else ()
            return AppendResult(error_for(e), message=str(e), record_errors=errors)
        if check is not None:
            refused = check(self.topic, config, scanned.data, scanned.first.record_count)
            if refused is not None:
                return refused
        info = scanned.first
        state = None
        if info.producer_id >= 0:
            state = self.producers
            open_ids = log.transactions.open if guard is not None else ()
            code, duplicate = state.validate(info, guard, open_ids)
            if code != NONE:
                return self._refused(ErrorCode(code), info, replicated)
            if duplicate is not None:  # a retry: its first append's offset, once replicated as acks asks
                result = AppendResult(ErrorCode.none, duplicate.first_offset, -1, log.log_start_offset)
                if acks == -1 and replicated:
                    result.required_offset = duplicate.last_offset + 1
                return result
        return scanned, state, self.leader_epoch if replicated else -1

    def _append_failed(self, error: Exception) -> AppendResult:
        code = error_for(error)
        if code in (ErrorCode.unknown_server_error, ErrorCode.kafka_storage_error):
            _log.error("append to %s-%d failed: %s", self.topic, self.index, error)
        return AppendResult(code, message=str(error))

    def _append_done(
        self, prepared: _Prepared, appended: AppendInfo, acks: int, replicated: bool, guard: object | None
    ) -> AppendResult:
        """After the write: the producer state, the HW, the answer."""
        scanned, state, _ = prepared
        info = scanned.first
        if state is not None:
            state.appended(info, appended.first_offset, appended.last_offset, guard)
        self.check_offsets()
        if replicated:
            self.maybe_advance_high_watermark()
        log = self.log
        append_time = -1
        if log.config.message_timestamp_type == "LogAppendTime":
            (append_time,) = _TIMESTAMP.unpack_from(scanned.data, _MAX_TIMESTAMP_AT)
        result = AppendResult(ErrorCode.none, appended.first_offset, append_time, log.log_start_offset)
        result.size_appended = info.size
        result.records_appended = info.record_count
        if acks == -1 and replicated:
            result.required_offset = appended.last_offset + 1
        return result

    def _refused(self, error: ErrorCode, batch: BatchInfo, replicated: bool) -> AppendResult:
        """A batch the producer state refused (a sequence or epoch error, or INVALID_TXN_STATE)."""
        log_start = self.log.log_start_offset
        if error == ErrorCode.invalid_txn_state:
            # The transaction ended (a marker) while its coordinator was asked: this batch is late.
            return AppendResult(error, log_start=log_start, message=NOT_ADDED)
        producer_id = batch.producer_id
        entry = self.producers.entries.get(producer_id)
        last = entry.batches[-1] if entry is not None and entry.batches else None
        if (
            error == ErrorCode.out_of_order_sequence_number
            and replicated
            and last is not None
            and last.last_offset < self.leader_epoch_start
        ):
            # A gap before this leadership's first batch from the producer: its earlier
            # batches were refused while this broker was not yet the leader (they come
            # again, in order). librdkafka takes OUT_OF_ORDER_SEQUENCE for "bump the
            # epoch and send everything again", and duplicated a batch that an earlier
            # leader had written (the 1,000-fault run); NOT_LEADER_OR_FOLLOWER makes it
            # resend from its first unacknowledged batch instead.
            error = ErrorCode.not_leader_or_follower
        _log.info(
            "%s-%d: %s for producer %d epoch %d sequences %d-%d (last appended: %s)",
            self.topic, self.index, error.name, producer_id, batch.producer_epoch, batch.base_sequence,
            last_sequence(batch.base_sequence, batch.last_offset_delta), last,
        )  # fmt: skip
        return AppendResult(error, log_start=log_start)

    def check_offsets(self) -> None:
        """Assert ``log_start_offset <= high_watermark <= log_end_offset``."""
        start, hw, end = self.log.log_start_offset, self.log.high_watermark, self.log.log_end_offset
        assert start <= hw <= end, f"{self.topic}-{self.index}: log start {start}, HW {hw}, LEO {end}"

    def check_leader_epoch(self, current: int) -> ErrorCode:
        """A request's ``current_leader_epoch`` against ours (KIP-320): -1 skips the check."""
        if current < 0 or current == self.state.leader_epoch or not self.replicated:
            return ErrorCode.none
        return (
            ErrorCode.fenced_leader_epoch
            if current < self.state.leader_epoch
            else ErrorCode.unknown_leader_epoch
        )

    # -- leadership ------------------------------------------------------------

    def make_leader(self, state: PartitionState, now_ms: int) -> None:
        """Lead at ``state``'s epoch: the epoch starts at our log end (in the epoch cache now, as
        Kafka does, so followers asking OffsetForLeaderEpoch see where the last one ended); every
        follower's progress is unknown until it fetches (those in the ISR count as caught up now)."""
        assert state.leader == self.node_id, (state, self.node_id)
        self.state = state
        self.is_leader = True
        self.pending_isr = None
        # Followers append without keeping producer state: rebuilt from the log on first use.
        self._producers = None
        self._validated.clear()
        if self.log.latest_epoch < state.leader_epoch:
            self.log.assign_epoch(state.leader_epoch)  # Kafka's maybeAssignEpochStartOffset
        self.leader_epoch_start = self.log.log_end_offset
        self.remotes = {
            b: ReplicaProgress(b, now_ms if b in state.isr else 0)
            for b in state.replicas
            if b != self.node_id
        }
        self.maybe_advance_high_watermark()

    def make_follower(self, state: PartitionState) -> None:
        """Follow ``state``'s leader (or nobody, with NO_LEADER): no progress kept, no ISR requests."""
        assert state.leader != self.node_id, (state, self.node_id)
        self.state = state
        self.is_leader = False
        self.pending_isr = None
        self.remotes = {}
        self._producers = None
        self._validated.clear()

    def update_state(self, state: PartitionState) -> None:
        """The controller's word at the same leader epoch (an ISR change, a partition epoch)."""
        assert (
            state.leader_epoch == self.state.leader_epoch and (state.leader == self.node_id) == self.is_leader
        )
        self.state = state
        if self.pending_isr is not None and tuple(sorted(self.pending_isr)) == tuple(sorted(state.isr)):
            self.pending_isr = None
        for b in state.replicas:
            if self.is_leader and b != self.node_id and b not in self.remotes:
                self.remotes[b] = ReplicaProgress(b, 0)

    def observe(self, state: PartitionState) -> None:
        """The metadata's state of this partition, on a broker alone (it leads what it holds)."""
        assert not self.replicated
        self.state = state

    def request_isr(self, isr: tuple[int, ...]) -> None:
        """An AlterPartition asking for ``isr`` is in flight (:meth:`maximal_isr` counts it)."""
        self.pending_isr = isr

    def settle_isr_request(self, isr: tuple[int, ...]) -> None:
        """The AlterPartition asking for ``isr`` was answered (a newer one in flight stays)."""
        if self.pending_isr == isr:
            self.pending_isr = None

    # -- the leader's bookkeeping ---------------------------------------------

    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR, with a replica whose addition is in flight (it may already be in)."""
        isr = self.state.isr
        if self.pending_isr is None:
            return isr
        return isr + tuple(b for b in self.pending_isr if b not in isr)

    def follower_fetched(self, broker_id: int, offset: int, now_ms: int) -> bool:
        """Record a follower's fetch at ``offset``; True if the HW moved. O(replicas)."""
        remote = self.remotes.get(broker_id)
        if remote is None:
            return False
        remote.fetched(offset, self.log.log_end_offset, now_ms)
        return self.maybe_advance_high_watermark()

    def maybe_advance_high_watermark(self) -> bool:
        """HW = the smallest log end offset in the maximal ISR; it never moves back. O(replicas)."""
        if not self.is_leader or not self.replicated:
            return False
        new = self.log.log_end_offset
        for b in self.maximal_isr():
            if b != self.node_id:
                remote = self.remotes.get(b)
                new = min(new, remote.log_end_offset if remote is not None else UNKNOWN_OFFSET)
        if new <= self.log.high_watermark:
            return False
        self.log.high_watermark = new
        self.check_offsets()
        return True

    def isr_to_expand(self, broker_id: int) -> tuple[int, ...] | None:
        """The ISR with ``broker_id`` added, if it is out of it and has caught up to the HW and to
        this leader's epoch (Kafka's ``isFollowerInSync``); else None."""
        remote = self.remotes.get(broker_id)
        if remote is None or self.pending_isr is not None or broker_id in self.state.isr:
            return None
        end = remote.log_end_offset
        if end >= self.log.high_watermark and end >= self.leader_epoch_start:
            return (*self.state.isr, broker_id)
        return None

    def isr_to_shrink(self, now_ms: int, lag_ms: int) -> tuple[int, ...] | None:
        """The ISR without followers not caught up for ``lag_ms``, if any are; else None."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        late = [b for b in self.state.isr if b != self.node_id and now_ms - self._caught_up_ms(b) > lag_ms]
        if not late:
            return None
        return tuple(b for b in self.state.isr if b not in late)

    def _caught_up_ms(self, broker_id: int) -> int:
        remote = self.remotes.get(broker_id)
        return remote.last_caught_up_ms if remote is not None else 0
