"""The group coordinator on the broker: ``__consumer_offsets`` and what the group APIs share.

At start (:func:`start_coordinator`) the broker creates ``__consumer_offsets``
if it is missing (``offsets.topic.num.partitions`` partitions,
``cleanup.policy=compact``, 100 MiB segments: Kafka's
``offsets.topic.segment.bytes``), builds a
:class:`~logstore.coordinator.GroupCoordinator` on the event loop's clock,
replays every partition of the topic into it (all batches in offset order)
and starts offset expiry. An existing topic's partition count wins over the
config, as in Kafka (a group's partition is ``hash(group) % count``).

The coordinator's records reach the partitions through an
:class:`OffsetsAppender` (with :meth:`Log.append`, so the topic's
``flush.messages`` and ``flush.ms`` make them durable like any other log),
which batches the OffsetCommits of one event-loop pass and wakes fetches
waiting on the partition.

>>> millis(__import__("datetime").timedelta(seconds=6))
6000
>>> client_host("127.0.0.1:52314"), client_host("::1:9")
('/127.0.0.1', '/::1')
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from logstore.broker.consumer_groups import coordinator_options
from logstore.coordinator.clock import LoopClock
from logstore.coordinator.group.classic_group import TopicPartition
from logstore.coordinator.group.coordinator_config import CoordinatorConfig
from logstore.coordinator.group.group_coordinator import GroupCoordinator
from logstore.coordinator.group.offsets_schemas import OffsetCommitKey, OffsetCommitValue, decode_key
from logstore.coordinator.group.persistence import WriteError
from logstore.coordinator.group.txn_offsets import Batch, PendingTxnOffsets, replay
from logstore.coordinator.internal_topics import OFFSETS_TOPIC, partition_for
from logstore.coordinator.record_codec import OffsetsSchemaError, Record
from logstore.errors import LogstoreError, RecordTooLargeError
from logstore.storage.log import Log
from logstore.storage.transactions import CompletedTxn

if TYPE_CHECKING:
    from logstore.broker.server import Broker

_log = logging.getLogger("logstore.broker")

OFFSETS_TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": 104_857_600}
"""The overrides Kafka gives ``__consumer_offsets``."""

_ONE_MS = datetime.timedelta(milliseconds=1)

# Kafka's Errors.message() for the codes the group APIs put in error_message fields.
ERROR_MESSAGES = {
    ErrorCode.none: "NONE",
    ErrorCode.coordinator_not_available: "The coordinator is not available.",
    ErrorCode.not_coordinator: "This is not the correct coordinator.",
    ErrorCode.invalid_request: (
        "This most likely occurs because of a request being malformed by the client library or "
        "the message was sent to an incompatible broker. See the broker logs for more details."
    ),
    ErrorCode.group_id_not_found: "The group id does not exist.",
}



def millis(value: datetime.timedelta) -> int:
    """A kio duration field as whole milliseconds (negative allowed: -1 = "not given")."""
    return value // _ONE_MS


def client_host(peer: str) -> str:
    """Kafka's ``clientAddress.toString()`` form ("/127.0.0.1") of a connection's "host:port"."""
    host, sep, _ = peer.rpartition(":")
    return "/" + (host if sep else peer)


def coordinator_of(broker: Broker) -> GroupCoordinator:
    coordinator = broker.coordinator
    if coordinator is None:  # start() builds it before listening
        raise RuntimeError("the group coordinator is not running")
    return coordinator


def offsets_appender_of(broker: Broker) -> OffsetsAppender:
    appender = broker.offsets_appender
    if appender is None:  # start() builds it with the coordinator
        raise RuntimeError("the __consumer_offsets appender is not running")
    return appender


# -- __consumer_offsets ------------------------------------------------------------


def ensure_offsets_topic(broker: Broker) -> int:
    """Create ``__consumer_offsets`` if missing; returns its partition count.

    In a cluster it gets ``offsets.topic.replication.factor`` replicas (Kafka's default 3); with
    fewer live brokers than that the creation fails, as Kafka's does, and FindCoordinator answers
    COORDINATOR_NOT_AVAILABLE until enough brokers are up. Blocks (call off the event loop there)."""
    wanted = broker.config.offsets_topic_num_partitions
    if not broker.metadata.has_topic(OFFSETS_TOPIC):
        factor = broker.config.offsets_topic_replication_factor if broker.cluster_link is not None else 1
        live = len(broker.metadata.brokers())
        if factor > live:
            raise LogstoreError(
                f"{OFFSETS_TOPIC} needs offsets.topic.replication.factor={factor} brokers; {live} are up"
            )
        broker.controller.create_topic(OFFSETS_TOPIC, wanted, OFFSETS_TOPIC_CONFIG, factor)
        _log.info("created %s with %d partitions", OFFSETS_TOPIC, wanted)
        return int(wanted)
    count = broker.metadata.partitions(OFFSETS_TOPIC)
    if count != wanted:
        _log.warning(
            "%s has %d partitions, not offsets.topic.num.partitions=%d; groups are placed over %d",
            OFFSETS_TOPIC,
            count,
            wanted,
            count,
        )
    return count


def _batches(log: Log, max_bytes: int) -> Iterator[Batch]:
    """Every batch of a log in offset order, with its keyed records (txn_offsets' Batch)."""
    offset = log.log_start_offset
    end = log.log_end_offset
    while offset < end:
        progressed = False
        for batch in log.read(offset, max_bytes, upto="log_end").batches:
            if batch.next_offset <= offset:
                continue
            control = -1
            records: list[Record] = []
            for record in batch.records:
                if record.offset < offset or record.key is None:
                    continue
                if batch.is_control:
                    key = bytes(record.key)
                    control = int.from_bytes(key[2:4], "big", signed=True) if len(key) >= 4 else -1
                else:
                    value = record.value
                    records.append((bytes(record.key), None if value is None else bytes(value)))
            yield batch.producer_id, batch.is_transactional, control, records
            offset = batch.next_offset
            progressed = True
        if not progressed:
            break


def read_partition(
    log: Log, pending: PendingTxnOffsets | None = None, max_bytes: int = 4 * 1024 * 1024
) -> Iterator[Record]:
    """Every keyed record of one ``__consumer_offsets`` (or ``__transaction_state``) partition as
    loading sees it, in offset order: a transaction's records where its COMMIT marker is, none
    for an ABORT, and those of a transaction still open into ``pending`` (txn_offsets.py)."""
    return replay(_batches(log, max_bytes), pending or PendingTxnOffsets(), _pending_offsets)


def _pending_offsets(records: list[Record]) -> dict[str, dict[TopicPartition, OffsetCommitValue]]:
    """The offsets of an open transaction's records, by group (other records are skipped)."""
    found: dict[str, dict[TopicPartition, OffsetCommitValue]] = {}
    for key, value in records:
        try:
            decoded = decode_key(key)
            if isinstance(decoded, OffsetCommitKey) and value is not None:
                partition = (decoded.topic, decoded.partition)
                found.setdefault(decoded.group, {})[partition] = OffsetCommitValue.decode(value)
        except OffsetsSchemaError as e:
            _skip_unreadable(key, e)
    return found


def on_transactions_completed(broker: Broker, topic: str, index: int, completed: list[CompletedTxn]) -> None:
    """The ReplicaManager's hook: markers on a ``__consumer_offsets`` partition settle the
    transactional offset commits of its groups (COMMIT: they become the groups' offsets)."""
    coordinator, appender = broker.coordinator, broker.offsets_appender
    if topic != OFFSETS_TOPIC or coordinator is None or appender is None:
        return
    def here(group_id: str) -> bool:
        return partition_for(group_id, appender.partitions) == index

    for txn in completed:
        committed = appender.pending_txn.complete(txn.producer_id, not txn.aborted, here)
        for group_id, values in committed.items():
            coordinator.apply_committed_offsets(group_id, values)


def load_offsets_topic(coordinator: GroupCoordinator, broker: Broker, partitions: int) -> None:
    """Replay every partition of ``__consumer_offsets`` into the coordinator."""
    for partition in range(partitions):
        log = broker.replica_manager.log(OFFSETS_TOPIC, partition)
        if log.log_end_offset <= log.log_start_offset:
            continue
        pending = offsets_appender_of(broker).pending_txn
        coordinator.load(read_partition(log, pending), on_unreadable=_skip_unreadable)


def _skip_unreadable(key: bytes, error: OffsetsSchemaError) -> None:
    _log.error("skipping an unreadable %s record (key %s): %s", OFFSETS_TOPIC, key.hex(), error)


class Ticket:
    """The outcome of one event-loop pass's batch on one ``__consumer_offsets`` partition."""

    __slots__ = ("_appender", "_on_failure", "error")

    def __init__(self, appender: OffsetsAppender) -> None:
        self._appender = appender
        self._on_failure: list[Callable[[], None]] = []
        self.error: ErrorCode | None = None  # None until the batch is appended

    def on_failure(self, undo: Callable[[], None]) -> None:
        self._on_failure.append(undo)

    def result(self) -> ErrorCode:
        """The batch's error code (appending it now if it is still staged)."""
        if self.error is None:
            self._appender.flush()
        assert self.error is not None
        return self.error

    def settle(self, error: ErrorCode) -> None:
        self.error = error
        if error != ErrorCode.none:
            for undo in reversed(self._on_failure):
                undo()
        self._on_failure.clear()


class OffsetsAppender:
    """Writes the coordinator's records to ``__consumer_offsets``.

    OffsetCommit records are *staged*: every commit that arrives in one pass
    of the event loop joins one batch per partition, appended by a callback
    at the end of the pass (``loop.call_soon``), before the responses of that
    pass are written (they are written by a later callback, or resolve their
    ticket first). A commit applies its offsets at once, so requests after it
    read them, and reverts them if its batch then fails; its response carries
    the batch's outcome. One append of N commits instead of N appends is what
    makes the commit path cheap.

    Every other write (group metadata, tombstones) goes through :meth:`write`,
    which first appends whatever is staged (a partition's records stay in
    the order they were made) and returns once its records are appended.
    Append errors become Kafka's: a batch over ``max.message.bytes`` is
    INVALID_COMMIT_OFFSET_SIZE, a storage error NOT_COORDINATOR, anything
    else COORDINATOR_NOT_AVAILABLE.
    """

    def __init__(self, broker: Broker, partitions: int) -> None:
        self._broker = broker
        self.partitions = partitions
        self._staged: dict[int, tuple[list[Record], Ticket]] = {}
        self._staged_bytes: dict[int, int] = {}
        self._scheduled = False
        self.pending_txn = PendingTxnOffsets()  # TxnOffsetCommits awaiting their transaction's marker

    def _limit(self, partition: int) -> int:
        return self._broker.replica_manager.log(OFFSETS_TOPIC, partition).config.max_message_bytes

    def stage(self, group_id: str, records: list[Record]) -> Ticket:
        """Add a commit's records to this pass's batch of the group's partition."""
        partition = partition_for(group_id, self.partitions)
        size = 32 * len(records)
        for key, value in records:
            size += len(key) + (len(value) if value else 0)
        limit = self._limit(partition)
        if size > limit // 2:  # too big to share a batch: on its own, now, after what is staged
            self.flush()
            ticket = Ticket(self)
            ticket.settle(self._append(partition, records))
            return ticket
        if self._staged_bytes.get(partition, 0) + size > limit // 2:
            self.flush()
        staged = self._staged.get(partition)
        if staged is None:
            staged = self._staged[partition] = ([], Ticket(self))
            self._staged_bytes[partition] = 0
        staged[0].extend(records)
        self._staged_bytes[partition] += size
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)
        return staged[1]

    def flush(self) -> None:
        """Append every staged batch and settle its ticket."""
        self._scheduled = False
        staged, self._staged = self._staged, {}
        self._staged_bytes = {}
        for partition, (records, ticket) in staged.items():
            ticket.settle(self._append(partition, records))

    def write(self, group_id: str, records: list[Record]) -> None:
        """The coordinator's :data:`Writer`: append now (after anything staged)."""
        if not records:
            return
        self.flush()
        error = self._append(partition_for(group_id, self.partitions), records)
        if error != ErrorCode.none:
            raise WriteError(error, f"appending to {OFFSETS_TOPIC} failed: {error.name}")

    def _append(self, partition: int, records: list[Record]) -> ErrorCode:
        try:
            self._broker.replica_manager.log(OFFSETS_TOPIC, partition).append(records)
        except RecordTooLargeError as e:
            _log.error("appending to %s-%d failed: %s", OFFSETS_TOPIC, partition, e)
            return ErrorCode.invalid_commit_offset_size
        except OSError as e:
            _log.error("appending to %s-%d failed: %s", OFFSETS_TOPIC, partition, e)
            return ErrorCode.not_coordinator
        except LogstoreError as e:
            _log.error("appending to %s-%d failed: %s", OFFSETS_TOPIC, partition, e)
            return ErrorCode.coordinator_not_available
        except Exception:  # a ticket must settle whatever happens, or its answers never go out
            _log.exception("appending to %s-%d failed", OFFSETS_TOPIC, partition)
            return ErrorCode.coordinator_not_available
        self._broker.replica_manager.appended(OFFSETS_TOPIC, partition)
        return ErrorCode.none


# How a failed acks=-1 write of the coordinator's reads to its clients (Kafka's GroupMetadataManager).
_REPLICATION_ERRORS = {
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
}


async def await_group_replicated(broker: Broker, group_id: str) -> ErrorCode:
    """In a cluster, wait until the ISR has everything appended so far to the group's
    ``__consumer_offsets`` partition (Kafka's coordinator writes with acks=-1), at most
    ``offsets.commit.timeout.ms``; NONE, or the error to answer (COORDINATOR_NOT_AVAILABLE,
    NOT_COORDINATOR). Alone: NONE at once. O(1) plus the wait."""
    from logstore.broker.replica_manager import AppendResult  # the broker layer imports this module

    manager = broker.replica_manager
    if not manager.replicated:
        return ErrorCode.none
    partition = partition_for(group_id, offsets_appender_of(broker).partitions)
    log = manager.find_log(OFFSETS_TOPIC, partition)
    if log is None:
        return ErrorCode.not_coordinator
    result = AppendResult(ErrorCode.none)
    result.required_offset = log.log_end_offset
    timeout = broker.config.offsets_commit_timeout_ms / 1000
    await manager.await_replication([(OFFSETS_TOPIC, partition, result)], timeout)
    return _REPLICATION_ERRORS.get(result.error, result.error)


def on_offsets_leadership(broker: Broker, topic: str, index: int, leader: bool) -> None:
    """The ReplicaManager's hook: a ``__consumer_offsets`` partition's groups are served by this
    broker from the moment it leads the partition (loaded from its log) until it no longer does."""
    coordinator = broker.coordinator
    if topic != OFFSETS_TOPIC or coordinator is None:
        return
    appender = offsets_appender_of(broker)
    if not leader:
        coordinator.release_partition(index)
        appender.pending_txn.forget(lambda group_id: partition_for(group_id, appender.partitions) == index)
        _log.info("no longer coordinating the groups of %s-%d", OFFSETS_TOPIC, index)
        return
    log = broker.replica_manager.find_log(OFFSETS_TOPIC, index)
    if log is not None:
        appender.pending_txn.forget(lambda group_id: partition_for(group_id, appender.partitions) == index)
        coordinator.take_partition(index, read_partition(log, appender.pending_txn), on_unreadable=_skip_unreadable)
        _log.info("coordinating the groups of %s-%d", OFFSETS_TOPIC, index)


def start_coordinator(broker: Broker, distributed: bool = False) -> GroupCoordinator:
    """Create and load ``__consumer_offsets``, and a running coordinator over it (call on the loop).

    ``distributed`` (a cluster broker): nothing is created or loaded here; the coordinator serves
    the partitions this broker comes to lead (:func:`on_offsets_leadership`), and FindCoordinator
    creates the topic on first use."""
    if distributed:
        partitions = (
            broker.metadata.partition_count(OFFSETS_TOPIC) or broker.config.offsets_topic_num_partitions
        )
        config = CoordinatorConfig.from_properties(
            {**broker.config.values, "offsets.topic.num.partitions": partitions}
        )
        appender = broker.offsets_appender = OffsetsAppender(broker, partitions)
        coordinator = GroupCoordinator(
            config, clock=LoopClock(), writer=appender.write, **coordinator_options(broker, config)
        )
        coordinator.serve_partitions_taken_only()
        coordinator.start()
        return coordinator
    partitions = ensure_offsets_topic(broker)
    values = dict(broker.config.values)
    values["offsets.topic.num.partitions"] = partitions
    config = CoordinatorConfig.from_properties(values)
    appender = OffsetsAppender(broker, partitions)
    broker.offsets_appender = appender
    coordinator = GroupCoordinator(
        config, clock=LoopClock(), writer=appender.write, **coordinator_options(broker, config)
    )
    load_offsets_topic(coordinator, broker, partitions)
    loaded = coordinator.list_groups()
    if loaded:
        _log.info("loaded %d groups from %s", len(loaded), OFFSETS_TOPIC)
    coordinator.start()
    return coordinator
