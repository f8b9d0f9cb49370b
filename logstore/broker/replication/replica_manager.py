"""The ReplicaManager: appends and reads for the APIs (Kafka's ``ReplicaManager``).

API handlers never touch the Store's logs: Produce appends here, Fetch,
ListOffsets and DeleteRecords read and trim here. It holds this broker's
:class:`~logstore.broker.replication.partition.Partition` objects, made on first use from
the Store's logs and the MetadataCache's partition state (a re-created topic
gets new ones: a Partition is tied to its Log), and the fetch purgatory that
appends wake.

An append finds the partition (UNKNOWN_TOPIC_OR_PARTITION, or
NOT_LEADER_OR_FOLLOWER when another broker leads it) and hands the records
to it: :meth:`Partition.append_as_leader` (Kafka's ``appendRecordsToLeader``)
checks acks=-1 against ``min.insync.replicas``, then storage validates the
batch in one C scan (:mod:`logstore.storage.validator`: Kafka's
``LogValidator``), checks it against the producer's epoch and sequence
(:mod:`logstore.storage.producer_state`; a duplicate returns its first
append's offset) and appends it.

Replicated (a broker of a cluster, :meth:`ReplicaManager.start_replication`):
appends carry the partition's leader epoch; acks=-1 waits (Kafka's delayed
produce) until the high watermark passes the batch, then answers
NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below
``min.insync.replicas`` meanwhile, or REQUEST_TIMED_OUT at the request's
timeout; a follower's fetch moves its progress, the HW and the ISR
(:class:`~logstore.broker.replication.partition.Partition`); the controller's partition
states (:meth:`apply_states`) make this broker leader or follower, and
followers fetch through the :mod:`~logstore.broker.replication.replica_fetcher`.

Disk work off the event loop: an append to a topic with ``flush.messages=1``
(an fsync per batch) runs in the default executor. Other appends write to the
page cache and stay on the loop (a thread hop costs more than the write).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, NamedTuple

from kio.schema.errors import ErrorCode

from logstore.broker.metadata_cache import NO_LEADER, MetadataCache, PartitionState
from logstore.broker.metrics.broker_metrics import BrokerMetrics
from logstore.broker.network.inter_broker import BrokerChannel, ChannelError
from logstore.broker.replication.partition import AppendResult, Partition, RecordCheck
from logstore.broker.replication.purgatory import Purgatory
from logstore.broker.replication.replica_fetcher import FetcherSettings, ReplicaFetcher
from logstore.coordinator.internal_topics import INTERNAL_TOPICS
from logstore.errors import LogstoreError, UnknownTopicError
from logstore.protocol.errors import error_for
from logstore.records.builder import build_control_batch
from logstore.storage.disk_space import LogDirSpace
from logstore.storage.log import Log, ReadResult
from logstore.storage.log_manager import LogManager
from logstore.storage.transactions import AbortedTxn, CompletedTxn

_log = logging.getLogger("logstore.broker")

LEADERSHIP_WAIT_S = 0.5
"""How long a produce to an in-sync follower waits to become the leader's (:meth:`ReplicaManager._await_leadership`)."""


SPACE_CHECK_S = 0.25  # how often the log directory's free space is read (a statvfs)

class Opening(NamedTuple):
    """A transactional batch that would open its producer's transaction on a partition led here."""

    producer_id: int
    epoch: int
    partition: Partition


class PartitionRead:
    """One partition's answer to a fetch: its error, HW, LSO, log start, what was read (or None)
    and, for a read_committed read, the aborted transactions it may hold (else None)."""

    __slots__ = ("aborted", "error", "high_watermark", "index", "last_stable", "log_start", "read")

    def __init__(self, index: int, error: ErrorCode, read: ReadResult | None = None) -> None:
        self.index = index
        self.error = error
        self.read = read
        self.high_watermark = -1
        self.last_stable = -1
        self.log_start = -1
        self.aborted: list[AbortedTxn] | None = None


class ReplicaManager:
    """This broker's partitions: appends, reads and the fetch purgatory (see the module doc)."""

    def __init__(
        self,
        logs: LogManager,
        metadata: MetadataCache,
        node_id: int,
        producer_id_expiration_ms: int,
        metrics: BrokerMetrics | None = None,
        on_transactions_completed: Callable[[str, int, list[CompletedTxn]], None] | None = None,
        space: LogDirSpace | None = None,
        spaces: Mapping[str, LogDirSpace] | None = None,
    ) -> None:
        """``on_transactions_completed``: told of the transactions a marker completed (topic,
        partition, them): the group coordinator's hook. ``space``: the log directory's free
        space; below its reserve, produce to user topics is refused (storage/disk_space.py).
        ``spaces``: each log directory's (several ``log.dirs``); a partition's own is checked."""
        self.logs_by_partition = logs
        self.space = space
        self.spaces: dict[str, LogDirSpace] = dict(spaces or ({space.path: space} if space is not None else {}))
        # A failed log directory (storage/log_dir_failure.py): its partitions answer
        # KAFKA_STORAGE_ERROR; the listener runs in the failing thread, the rest on the loop.
        self._loop: asyncio.AbstractEventLoop | None = None
        logs.dir_failures.add_listener(self._on_dir_failure)
        self.metadata = metadata
        self.node_id = node_id
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.purgatory = Purgatory()
        self.metrics = BrokerMetrics() if metrics is None else metrics  # traffic and ISR counts
        self._partitions: dict[tuple[str, int], Partition] = {}
        # Replication (start_replication): off for a broker alone.
        self.replicated = False
        # The broker's check of produced records after storage's validation (schema ids:
        # broker/schema_validation.py); None: none.
        self.record_check: RecordCheck | None = None
        self.fetcher_settings = FetcherSettings()
        self.lag_ms = 30_000
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._following: dict[tuple[str, int], int] = {}  # partition -> the leader it is fetched from
        self._controller: BrokerChannel | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        # Told of each leadership gained (True) or lost (False): the coordinators' hook (start_replication).
        self.on_leadership: Callable[[str, int, bool], None] = lambda topic, index, leader: None
        self.on_transactions_completed: Callable[[str, int, list[CompletedTxn]], None] = (
            on_transactions_completed or (lambda topic, index, completed: None)
        )

    # -- partitions ----------------------------------------------------------

    def partition(self, topic: str, index: int) -> Partition | None:
        """The partition if this broker holds its log, else None. O(1)."""
        log = self.logs_by_partition.find_log(topic, index)
        if log is None:
            return None
        found = self._partitions.get((topic, index))
        if self.replicated:  # made by apply_states, as the controller says
            return found if found is not None and found.log is log else None
        state = self.metadata.partition_state(topic, index)
        if found is not None and found.log is log:
            if state is not None:
                found.observe(state)
            return found
        if state is None:  # the log is here, the cache not yet (a topic made this instant)
            return None
        made = Partition(topic, index, log, state, self.producer_id_expiration_ms, self.node_id)
        self._partitions[(topic, index)] = made
        return made

    def leader_partition(self, topic: str, index: int) -> Partition | ErrorCode:
        """The partition if this broker leads it; else UNKNOWN_TOPIC_OR_PARTITION (no such
        partition) or NOT_LEADER_OR_FOLLOWER (another broker leads it, or none does). O(1)."""
        partition = self.partition(topic, index)
        if partition is not None and partition.is_leader:
            return partition
        if self.logs_by_partition.offline_dir_of(topic, index) is not None:
            return ErrorCode.kafka_storage_error  # its log directory failed (retriable)
        if self.metadata.partition_state(topic, index) is not None:
            return ErrorCode.not_leader_or_follower
        return ErrorCode.unknown_topic_or_partition

    def find_log(self, topic: str, index: int) -> Log | None:
        """The partition's Log if this broker leads it, else None. O(1)."""
        partition = self.leader_partition(topic, index)
        return partition.log if isinstance(partition, Partition) else None

    def log(self, topic: str, index: int) -> Log:
        """The partition's Log; UnknownTopicError if this broker holds no such partition. O(1)."""
        found = self.find_log(topic, index)
        if found is None:
            raise UnknownTopicError(f"this broker holds no partition {index} of topic {topic!r}")
        return found

    def appended(self, topic: str, index: int) -> None:
        """Wake the fetches waiting on a partition that was appended to outside :meth:`append`
        (and, as its leader, move its HW: a partition with no other replica in sync has it at once)."""
        partition = self._partitions.get((topic, index)) if self.replicated else None
        if partition is not None and partition.is_leader:
            partition.maybe_advance_high_watermark()
        self.purgatory.notify((topic, index))

    def logs(self) -> dict[tuple[str, int], Log]:
        """Every partition's Log (DescribeLogDirs). O(P)."""
        return self.logs_by_partition.logs()

    def held_partitions(self) -> list[Partition]:
        """The Partition objects made so far (metrics: leaders, under-replicated). O(P)."""
        return list(self._partitions.values())

    def forget_topic(self, name: str) -> None:
        """Drop the partitions of a deleted topic (their producer state goes with them), and stop
        fetching the ones followed here. O(P)."""
        self.metrics.traffic.pop(name, None)
        for key in [key for key in {*self._partitions, *self._following} if key[0] == name]:
            self._drop(key)

    # -- appends -------------------------------------------------------------

    def needs_verification(self, topic: str, index: int, records: bytes | memoryview | None) -> Opening | None:
        """The Opening when ``records`` is a transactional batch that would open its
        producer's transaction on this partition (none open there at that epoch): KIP-890's
        verification with the coordinator comes first (broker/transactions/txn_verification.py). None for
        anything else, and for partitions not led here (the append reports those). The
        partition keeps its validation of ``records`` for their append (one scan). O(batch) in C."""
        if not records:
            return None
        partition = self.leader_partition(topic, index)
        if not isinstance(partition, Partition):
            return None
        found = partition.opening(records)
        return Opening(found[0], found[1], partition) if found is not None else None

    async def append(
        self, topic: str, index: int, records: bytes | memoryview | None, acks: int, guard: object | None = None
    ) -> AppendResult:
        """Validate and append one partition's batch (see the module doc); wakes its fetches.

        ``guard``: the batch opens a transaction its coordinator confirmed; the partition's
        guard for the producer must still be this one (no marker since), else INVALID_TXN_STATE."""
        space = self.spaces.get(self.logs_by_partition.dir_of(topic, index) or "", self.space)
        if space is not None and space.below_reserve and topic not in INTERNAL_TOPICS:
            # Retriable: the client retries until delivery.timeout.ms, and space may come back.
            return AppendResult(ErrorCode.kafka_storage_error, message=space.refusal())
        partition = self.leader_partition(topic, index)
        if partition == ErrorCode.not_leader_or_follower and self.replicated:
            partition = await self._await_leadership(topic, index)
        if not isinstance(partition, Partition):
            return AppendResult(partition)
        check = self.record_check if topic not in INTERNAL_TOPICS else None
        if partition.log.config.flush_messages == 1:  # an fsync per batch: off the event loop
            result = await partition.append_as_leader_durably(records, acks, self.replicated, guard, check)
        else:  # page-cache writes stay on the loop: a thread hop costs more than the write
            result = partition.append_as_leader(records, acks, self.replicated, guard, check)
        if result.size_appended:
            if space is not None:
                space.written(result.size_appended)
            self.metrics.traffic.produced(topic, result.size_appended, result.records_appended)
            # Fetches wake; of the produces waiting for the ISR, those the HW now covers.
            self.purgatory.notify((topic, index), partition.log.high_watermark)
        return result

    async def append_marker(
        self, topic: str, index: int, producer_id: int, epoch: int, coordinator_epoch: int, commit: bool
    ) -> AppendResult:
        """Write a transaction marker (WriteTxnMarkers) as leader: a control batch ending the
        producer's transaction on this partition. INVALID_PRODUCER_EPOCH below the producer's
        epoch. The transactions it completes go to :attr:`on_transactions_completed` (the group
        coordinator settles transactional offset commits on ``__consumer_offsets``). With
        replication, ``required_offset`` is set: the caller waits for the ISR (acks=-1)."""
        partition = self.leader_partition(topic, index)
        if not isinstance(partition, Partition):
            return AppendResult(partition)
        log = partition.log
        state = partition.producers
        error = state.check_marker(producer_id, epoch, coordinator_epoch)
        if error != ErrorCode.none:
            return AppendResult(ErrorCode(error), log_start=log.log_start_offset)
        _ = log.transactions  # built before the append, so that it reports what the marker completes
        batch = bytearray(build_control_batch(commit, producer_id, epoch, coordinator_epoch))
        try:
            info = log.append_batch(batch, partition.leader_epoch if self.replicated else -1)
        except (LogstoreError, OSError) as e:
            _log.error("writing a transaction marker to %s-%d failed: %s", topic, index, e)
            return AppendResult(error_for(e), message=str(e))
        state.record_marker(producer_id, epoch, coordinator_epoch)
        partition.check_offsets()
        if self.replicated:
            partition.maybe_advance_high_watermark()
        self.purgatory.notify((topic, index))
        if info.completed:
            self.on_transactions_completed(topic, index, list(info.completed))
        result = AppendResult(ErrorCode.none, info.first_offset, -1, log.log_start_offset)
        if self.replicated:
            result.required_offset = info.last_offset + 1
        return result

    async def _await_leadership(self, topic: str, index: int) -> Partition | ErrorCode:
        """A produce that reaches an in-sync follower may be early: another broker's metadata can
        name this one leader before the controller's word reaches it. It waits up to
        :data:`LEADERSHIP_WAIT_S` for that word rather than answering NOT_LEADER_OR_FOLLOWER at once.

        Why: librdkafka, answered NOT_LEADER for one batch and then OUT_OF_ORDER_SEQUENCE for the
        next (sent to the same broker once it leads), bumps its producer epoch and sends again
        every batch it holds, duplicating any whose earlier outcome it did not know (the chaos
        run found one such duplicate). A follower out of the ISR cannot be elected: it answers
        at once. Requests on a connection are served in order, so a later batch cannot overtake."""
        held = self._partitions.get((topic, index))
        if held is None or self.node_id not in held.state.isr:
            return ErrorCode.not_leader_or_follower
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LEADERSHIP_WAIT_S
        for _ in range(1 << 16):  # each pass waits for a change on the partition or the deadline
            left = deadline - loop.time()
            if left <= 0 or self._closing:
                break
            await self.purgatory.wait([(topic, index)], left)
            found = self.leader_partition(topic, index)
            if found != ErrorCode.not_leader_or_follower:
                return found
        return self.leader_partition(topic, index)

    async def await_replication(self, appended: list[tuple[str, int, AppendResult]], timeout: float) -> None:
        """Kafka's delayed produce: wait until each acks=-1 append is below its partition's HW,
        or ``timeout`` seconds; settle each result's error (see the module doc)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        for topic, index, result in appended:
            if result.required_offset < 0 or result.error != ErrorCode.none:
                continue
            for _ in range(1 << 20):  # each pass waits for a change or the deadline
                partition = self.leader_partition(topic, index)
                if not isinstance(partition, Partition):
                    result.error = partition
                    break
                if partition.high_watermark >= result.required_offset:
                    in_sync = len(partition.state.isr)
                    if in_sync < partition.log.config.min_insync_replicas:
                        result.error = ErrorCode.not_enough_replicas_after_append
                        result.message = (
                            f"{in_sync} replica(s) in sync, min.insync.replicas="
                            f"{partition.log.config.min_insync_replicas}"
                        )
                    break
                left = deadline - loop.time()
                if left <= 0:
                    result.error = ErrorCode.request_timed_out
                    result.message = (
                        f"not replicated to the ISR {list(partition.state.isr)} within the timeout"
                    )
                    break
                await self.purgatory.wait_replicated((topic, index), result.required_offset, left)

    # -- reads ---------------------------------------------------------------

    def read(
        self,
        topic: str,
        index: int,
        offset: int,
        limit: int,
        first: bool,
        upto: str,
        replica_id: int = -1,
        current_leader_epoch: int = -1,
    ) -> PartitionRead:
        """Up to ``limit`` bytes of whole batches from ``offset`` (at least one batch when
        ``first``: Kafka's rule that a fetch makes progress), up to the HW, the LSO
        (``upto="last_stable"``, read_committed: with the aborted transactions listed) or
        the log end. A follower's read (``replica_id`` >= 0) first records its progress."""
        partition = self.leader_partition(topic, index)
        if not isinstance(partition, Partition):
            return PartitionRead(index, partition)
        error = partition.check_leader_epoch(current_leader_epoch)
        if error != ErrorCode.none:
            return PartitionRead(index, error)
        if replica_id >= 0 and self.replicated:
            self._follower_fetched(partition, replica_id, offset)
        log = partition.log
        result = PartitionRead(index, ErrorCode.none)
        result.high_watermark = log.high_watermark
        result.log_start = log.log_start_offset
        if replica_id < 0:
            result.last_stable = log.last_stable_offset
        if limit <= 0 and not first:
            return result
        try:
            read = log.read(offset, max(limit, 1), upto=upto)
            if upto == "last_stable":
                # Upper bound: the LSO (Kafka stops at the next batch's offset; listing a
                # transaction past the data read is harmless, the consumer meets none of it).
                result.aborted = log.aborted_transactions(offset, result.last_stable)
        except (LogstoreError, OSError) as e:
            result.error = error_for(e)
            return result
        if read.size and (first or read.size <= limit):
            result.read = read
        return result

    async def wait_for_data(self, keys: Iterable[Hashable], timeout: float) -> bool:
        """Wait until an append to one of ``keys`` (topic, partition) or ``timeout`` seconds."""
        return await self.purgatory.wait(keys, timeout)

    def wake_all(self) -> None:
        """Wake every waiting fetch (the broker is closing)."""
        self.purgatory.wake_all()

    # -- replication -----------------------------------------------------------

    def start_replication(
        self, settings: FetcherSettings, lag_ms: int, on_leadership: Callable[[str, int, bool], None]
    ) -> None:
        """Act as a broker of a cluster (on the event loop): epochs, HWs, followers, ISR checks;
        ``on_leadership`` is told of each leadership gained (True) or lost (False)."""
        self.replicated = True
        self.on_leadership = on_leadership
        self.fetcher_settings = settings
        self.lag_ms = lag_ms
        self._spawn(self._check_isr_forever())

    def watch_space(self, interval: float = SPACE_CHECK_S) -> None:
        """Read each log directory's free space every ``interval`` seconds (on the event loop),
        and say once per change whether produce is refused (see storage/disk_space.py)."""
        self._loop = asyncio.get_running_loop()
        for space in self.spaces.values():
            if space.below_reserve:
                _log.warning("%s", space.refusal())
            self._spawn(self._watch_space_forever(space, interval))

    def _on_dir_failure(self, log_dir: str, partitions: list[tuple[str, int]]) -> None:
        """A log directory failed (any thread): on the loop, stop following its partitions, give up
        their leaderships (the coordinators unload) and wake their waits, which then answer
        KAFKA_STORAGE_ERROR (a delayed produce included: never acknowledged)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._dir_failed, partitions)

    def _dir_failed(self, partitions: list[tuple[str, int]]) -> None:
        for key in partitions:
            self._drop(key)
            self.purgatory.notify(key)

    async def _watch_space_forever(self, space: LogDirSpace, interval: float) -> None:
        said = space.below_reserve
        while not self._closing:
            await asyncio.sleep(interval)
            space.refresh()
            if space.below_reserve == said:
                continue
            said = space.below_reserve
            if said:
                _log.warning("%s", space.refusal())
            else:
                _log.info(
                    "the log directory %s has %d bytes free, above its reserve of %d: produce accepted again",
                    space.path, space.free_bytes, space.reserve_bytes,
                )  # fmt: skip

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Stop the fetchers and the ISR checks (and start no more)."""
        self._closing = True
        for task in list(self._tasks):
            task.cancel()
        for fetcher in list(self.fetchers.values()):
            await fetcher.close()
        self.fetchers.clear()
        if self._controller is not None:
            self._controller.close()

    def apply_states(self, topic: str) -> None:
        """The controller's word on ``topic`` (its partition states in the MetadataCache): become
        leader or follower of each partition this broker holds a replica of (Kafka's
        ``becomeLeaderOrFollower``). On the event loop. O(partitions of the topic)."""
        if not self.replicated or self._closing:
            return
        count = self.metadata.partition_count(topic) or 0
        for key in [k for k in {*self._partitions, *self._following} if k[0] == topic and k[1] >= count]:
            self._drop(key)
        for index in range(count):
            state = self.metadata.partition_state(topic, index)
            log = self.logs_by_partition.find_log(topic, index)
            if state is not None and log is not None and self.node_id not in state.replicas:
                self._drop((topic, index))
                self._spawn(self._delete_replica((topic, index)))
                continue
            if state is None or log is None:
                self._drop((topic, index))
                continue
            self._apply_state(topic, index, log, state)

    async def _delete_replica(self, key: tuple[str, int]) -> None:
        """This broker's replica was reassigned away (Kafka's StopReplica with delete): its fetch
        stopped first (:meth:`_drop`), then its log goes, off the event loop."""
        _log.info("%s-%d: no longer a replica on broker %d; deleting its log", *key, self.node_id)
        await asyncio.get_running_loop().run_in_executor(None, self.logs_by_partition.delete_logs, [key])

    def _drop(self, key: tuple[str, int]) -> None:
        """Forget a partition this broker no longer holds (its topic deleted, or the replica moved)."""
        self._stop_following(key)
        partition = self._partitions.pop(key, None)
        if partition is not None and partition.is_leader:
            self.on_leadership(*key, False)

    def _apply_state(self, topic: str, index: int, log: Log, state: PartitionState) -> None:
        key = (topic, index)
        partition = self._partitions.get(key)
        if partition is None or partition.log is not log:
            nobody = PartitionState(NO_LEADER, -1, state.replicas, ())  # until the state below is applied
            partition = Partition(topic, index, log, nobody, self.producer_id_expiration_ms, self.node_id, True)
            self._partitions[key] = partition
        old = partition.state
        if state.leader == self.node_id:
            if not partition.is_leader or old.leader_epoch != state.leader_epoch:
                self._stop_following(key)
                partition.make_leader(state, _now_ms())
                _log.info(
                    "%s-%d: leader at epoch %d, isr %s", topic, index, state.leader_epoch, list(state.isr)
                )
                self.on_leadership(topic, index, True)
            else:
                partition.update_state(state)
                partition.maybe_advance_high_watermark()
            self.purgatory.notify(key)  # fetches see a new HW; delayed produces re-check the ISR
            return
        if partition.is_leader or old.leader_epoch != state.leader_epoch or old.leader != state.leader:
            if partition.is_leader:
                self.on_leadership(topic, index, False)
            partition.make_follower(state)
            self._follow(partition, state)
            self.purgatory.notify(key)  # waiting fetches and produces learn they lost leadership
        else:
            partition.update_state(state)

    def _follow(self, partition: Partition, state: PartitionState) -> None:
        key = (partition.topic, partition.index)
        self._stop_following(key)
        leader = self.metadata.broker(state.leader) if state.leader != NO_LEADER else None
        if leader is None:
            return  # no leader (or not yet known): the next state change starts the fetch
        fetcher = self.fetchers.get(leader.node_id)
        if fetcher is None or (fetcher.channel.host, fetcher.channel.port) != (leader.host, leader.port):
            if fetcher is not None:
                self._spawn(fetcher.close())
            fetcher = ReplicaFetcher(self, leader.node_id, leader.host, leader.port, self.fetcher_settings)
            self.fetchers[leader.node_id] = fetcher
        fetcher.add(partition, state.leader_epoch)
        self._following[key] = leader.node_id
        _log.info(
            "%s-%d: following broker %d at epoch %d from offset %d",
            *key, leader.node_id, state.leader_epoch, partition.log.log_end_offset,
        )  # fmt: skip

    def _stop_following(self, key: tuple[str, int]) -> None:
        leader = self._following.pop(key, None)
        fetcher = self.fetchers.get(leader) if leader is not None else None
        if fetcher is not None:
            fetcher.remove(key)

    def follower_high_watermark(self, partition: Partition, leader_hw: int, leader_log_start: int) -> None:
        """A follower's HW after a fetch: the leader's, capped at our log end; never backwards.
        The log start follows the leader's (its DeleteRecords and retention), up to our HW."""
        log = partition.log
        hw = min(leader_hw, log.log_end_offset)
        if hw > log.high_watermark:
            log.high_watermark = hw
        start = min(leader_log_start, log.high_watermark)
        if start > log.log_start_offset:
            log.delete_records(start)
        partition.check_offsets()

    def _follower_fetched(self, partition: Partition, replica_id: int, offset: int) -> None:
        if partition.follower_fetched(replica_id, offset, _now_ms()):
            self.purgatory.notify((partition.topic, partition.index), partition.log.high_watermark)
        grown = partition.isr_to_expand(replica_id)
        if grown is not None:
            self._alter_isr(partition, grown)

    async def _check_isr_forever(self) -> None:
        """Kafka's ``isr-expiration`` task: every half ``replica.lag.time.max.ms``, drop the
        followers that have not caught up within it."""
        while True:
            await asyncio.sleep(self.lag_ms / 2000)
            now = _now_ms()
            for partition in list(self._partitions.values()):
                shrunk = partition.isr_to_shrink(now, self.lag_ms)
                if shrunk is not None:
                    _log.info("%s-%d: shrinking the ISR %s to %s", partition.topic, partition.index,
                              list(partition.state.isr), list(shrunk))  # fmt: skip
                    self._alter_isr(partition, shrunk)

    def _alter_isr(self, partition: Partition, isr: tuple[int, ...]) -> None:
        partition.request_isr(isr)
        self._spawn(self._send_alter_partition(partition, isr, partition.state.isr))

    async def _send_alter_partition(
        self, partition: Partition, isr: tuple[int, ...], before: tuple[int, ...] = ()
    ) -> None:
        """AlterPartition to the controller; the answer is the partition's new state (also seen
        later through the controller's watch). An error leaves the ISR as it was: the next
        fetch or check asks again, after ``replica.fetch.backoff.ms``."""
        key = (partition.topic, partition.index)
        error: Any = "no controller"
        try:
            channel = self._controller_channel()
            if channel is not None:
                response = await channel.request(56, 2, self._alter_request(partition, isr), 10)
                error = response.error_code
                if error == ErrorCode.none:
                    answer = response.topics[0].partitions[0]
                    error = answer.error_code
                    if error == ErrorCode.none:
                        self.metrics.isr_changed(before, answer.isr)
                    if (
                        error == ErrorCode.none
                        and self._partitions.get(key) is partition
                        and partition.is_leader
                    ):
                        partition.update_state(
                            PartitionState(
                                answer.leader_id, answer.leader_epoch, partition.state.replicas,
                                tuple(answer.isr), partition.state.offline, answer.partition_epoch,
                            )
                        )  # fmt: skip
                        partition.settle_isr_request(isr)
                        partition.maybe_advance_high_watermark()
                        self.purgatory.notify(key)
                        _log.info("%s-%d: ISR now %s", *key, list(answer.isr))
                        return
        except ChannelError as e:
            error = e
        if error not in (ErrorCode.none,):
            _log.info(
                "%s-%d: AlterPartition to %s refused: %s", *key, list(isr), getattr(error, "name", error)
            )
            await asyncio.sleep(self.fetcher_settings.backoff_ms / 1000)
        partition.settle_isr_request(isr)

    def _alter_request(self, partition: Partition, isr: tuple[int, ...]) -> dict[str, Any]:
        return {
            "broker_id": self.node_id,
            "broker_epoch": -1,
            "topics": [
                {
                    "topic_id": self.metadata.topic_id(partition.topic),
                    "partitions": [
                        {
                            "partition_index": partition.index,
                            "leader_epoch": partition.leader_epoch,
                            "new_isr": list(isr),
                            "leader_recovery_state": 0,
                            "partition_epoch": partition.state.partition_epoch,
                        }
                    ],
                }
            ],
        }

    def _controller_channel(self) -> BrokerChannel | None:
        controller = self.metadata.broker(self.metadata.controller_id)
        if controller is None:
            return None
        channel = self._controller
        if channel is None or (channel.node_id, channel.host, channel.port) != (
            controller.node_id, controller.host, controller.port,
        ):  # fmt: skip
            if channel is not None:
                channel.close()
            channel = self._controller = BrokerChannel(
                controller.node_id, controller.host, controller.port, f"broker-{self.node_id}-alter-partition"
            )
        return channel


def _now_ms() -> int:
    return int(time.monotonic() * 1000)
