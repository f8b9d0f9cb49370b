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
:class:`~logstore.broker.groups.offsets_appender.OffsetsAppender` (offsets_appender.py),
which :func:`start_coordinator` builds and returns with the coordinator.

>>> millis(__import__("datetime").timedelta(seconds=6))
6000
>>> client_host("127.0.0.1:52314"), client_host("::1:9")
('/127.0.0.1', '/::1')
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterator

from kio.schema.errors import ErrorCode

from logstore.broker.context import Services
from logstore.broker.groups.consumer_protocol import coordinator_options
from logstore.broker.groups.offsets_appender import OffsetsAppender
from logstore.broker.replication.replica_manager import AppendResult, ReplicaManager
from logstore.coordinator.clock import LoopClock
from logstore.coordinator.group.classic_group import TopicPartition
from logstore.coordinator.group.coordinator_config import CoordinatorConfig
from logstore.coordinator.group.group_coordinator import GroupCoordinator
from logstore.coordinator.group.offsets_schemas import OffsetCommitKey, OffsetCommitValue, decode_key
from logstore.coordinator.group.txn_offsets import Batch, PendingTxnOffsets, replay
from logstore.coordinator.internal_topics import OFFSETS_TOPIC, partition_for
from logstore.coordinator.record_codec import OffsetsSchemaError, Record
from logstore.errors import LogstoreError
from logstore.storage.log import Log
from logstore.storage.transactions import CompletedTxn

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


def coordinator_of(broker: Services) -> GroupCoordinator:
    coordinator = broker.coordinator
    if coordinator is None:  # start() builds it before listening
        raise RuntimeError("the group coordinator is not running")
    return coordinator


def offsets_appender_of(broker: Services) -> OffsetsAppender:
    appender = broker.offsets_appender
    if appender is None:  # start() builds it with the coordinator
        raise RuntimeError("the __consumer_offsets appender is not running")
    return appender


# -- __consumer_offsets ------------------------------------------------------------


def ensure_offsets_topic(broker: Services) -> int:
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


def on_transactions_completed(broker: Services, topic: str, index: int, completed: list[CompletedTxn]) -> None:
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


def load_offsets_topic(coordinator: GroupCoordinator, replicas: ReplicaManager, appender: OffsetsAppender) -> None:
    """Replay every partition of ``__consumer_offsets`` into the coordinator."""
    for partition in range(appender.partitions):
        log = replicas.log(OFFSETS_TOPIC, partition)
        if log.log_end_offset <= log.log_start_offset:
            continue
        coordinator.load(read_partition(log, appender.pending_txn), on_unreadable=_skip_unreadable)


def _skip_unreadable(key: bytes, error: OffsetsSchemaError) -> None:
    _log.error("skipping an unreadable %s record (key %s): %s", OFFSETS_TOPIC, key.hex(), error)


# How a failed acks=-1 write of the coordinator's reads to its clients (Kafka's GroupMetadataManager).
_REPLICATION_ERRORS = {
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
}


async def await_group_replicated(broker: Services, group_id: str) -> ErrorCode:
    """In a cluster, wait until the ISR has everything appended so far to the group's
    ``__consumer_offsets`` partition (Kafka's coordinator writes with acks=-1), at most
    ``offsets.commit.timeout.ms``; NONE, or the error to answer (COORDINATOR_NOT_AVAILABLE,
    NOT_COORDINATOR). Alone: NONE at once. O(1) plus the wait."""
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


def on_offsets_leadership(broker: Services, topic: str, index: int, leader: bool) -> None:
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


def start_coordinator(broker: Services, distributed: bool = False) -> tuple[GroupCoordinator, OffsetsAppender]:
    """Create and load ``__consumer_offsets``, and a running coordinator over it with the appender
    that writes its records (call on the loop; the broker keeps both).

    ``distributed`` (a cluster broker): nothing is created or loaded here; the coordinator serves
    the partitions this broker comes to lead (:func:`on_offsets_leadership`), and FindCoordinator
    creates the topic on first use."""
    if distributed:
        partitions = (
            broker.metadata.partition_count(OFFSETS_TOPIC) or broker.config.offsets_topic_num_partitions
        )
    else:
        partitions = ensure_offsets_topic(broker)
    config = CoordinatorConfig.from_properties({**broker.config.values, "offsets.topic.num.partitions": partitions})
    appender = OffsetsAppender(broker.replica_manager, partitions)
    coordinator = GroupCoordinator(
        config,
        clock=LoopClock(),
        writer=appender.write,
        **coordinator_options(broker.metadata, broker.data_dir, config),
    )
    if distributed:
        coordinator.serve_partitions_taken_only()
    else:
        load_offsets_topic(coordinator, broker.replica_manager, appender)
        loaded = coordinator.list_groups()
        if loaded:
            _log.info("loaded %d groups from %s", len(loaded), OFFSETS_TOPIC)
    coordinator.start()
    return coordinator, appender
