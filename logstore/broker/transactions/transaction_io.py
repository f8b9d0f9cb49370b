"""The broker's side of the transaction coordinator: :class:`BrokerTransactionIO`.

It is what the :class:`~logstore.coordinator.txn.transaction_coordinator.TransactionCoordinator`
needs from the broker:

- producer ids from the broker's :class:`~logstore.broker.transactions.producer_ids.ProducerIds`
  (ZooKeeper's blocks in a cluster);
- writes to ``__transaction_state`` as its leader, waiting for the ISR
  (acks=-1, as Kafka's coordinator writes), at most
  ``offsets.commit.timeout.ms``; a broker alone creates the topic on the first
  write (:func:`ensure_transaction_topic`);
- transaction markers: to each partition's leader, this broker's own
  partitions directly (:func:`write_markers_here`) and others' through
  WriteTxnMarkers (API 27) on an inter-broker channel, retried with backoff
  until every partition has its marker or its topic is gone (Kafka's
  ``TransactionMarkerChannelManager``).

It reads the broker through :class:`TransactionHost` (the Broker satisfies it);
state_topic.py builds it with the coordinator.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from logstore.broker.cluster_member import ClusterMember, TopicController
from logstore.broker.metadata_cache import NO_LEADER
from logstore.broker.network.inter_broker import BrokerChannel, ChannelError
from logstore.broker.replication.replica_manager import AppendResult, ReplicaManager
from logstore.broker.transactions.producer_ids import ProducerIds
from logstore.coordinator.internal_topics import TRANSACTION_STATE_TOPIC
from logstore.coordinator.record_codec import Record
from logstore.coordinator.txn.transaction_log import TopicPartition
from logstore.errors import LogstoreError, RecordTooLargeError
from logstore.protocol.codec import group_by_topic

_log = logging.getLogger("logstore.broker")


class TransactionHost(ClusterMember, Protocol):
    """What the transaction coordinator's I/O reads of the broker (read each time: the
    controller changes while the broker runs)."""

    @property
    def replica_manager(self) -> ReplicaManager: ...

    @property
    def producer_ids(self) -> ProducerIds: ...

    @property
    def controller(self) -> TopicController: ...


WRITE_TXN_MARKERS = 27
MARKER_RETRY_S = (0.02, 1.0)  # backoff between marker attempts: first, largest

# How a failed acks=-1 write reads to the transaction APIs' clients (Kafka's TransactionStateManager).
_WRITE_ERRORS = {
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
}


def transaction_topic_config(broker: TransactionHost, factor: int) -> dict[str, Any]:
    """The overrides Kafka gives ``__transaction_state``."""
    return {
        "cleanup.policy": "compact",
        "segment.bytes": broker.config.transaction_state_log_segment_bytes,
        "min.insync.replicas": min(broker.config.transaction_state_log_min_isr, factor),
    }


def ensure_transaction_topic(broker: TransactionHost) -> int:
    """Create ``__transaction_state`` if missing; returns its partition count. Blocks (ZooKeeper)."""
    wanted = int(broker.config.transaction_state_log_num_partitions)
    if broker.metadata.has_topic(TRANSACTION_STATE_TOPIC):
        return broker.metadata.partitions(TRANSACTION_STATE_TOPIC)
    factor = int(broker.config.transaction_state_log_replication_factor) if broker.cluster_link is not None else 1
    live = len(broker.metadata.brokers())
    if factor > live:
        raise LogstoreError(
            f"{TRANSACTION_STATE_TOPIC} needs transaction.state.log.replication.factor={factor} brokers; "
            f"{live} are up"
        )
    broker.controller.create_topic(TRANSACTION_STATE_TOPIC, wanted, transaction_topic_config(broker, factor), factor)
    _log.info("created %s with %d partitions", TRANSACTION_STATE_TOPIC, wanted)
    return wanted


# Marker errors that retrying cannot mend (Kafka gives up on the transaction's markers).
_MARKER_STALE = frozenset({ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced})


class BrokerTransactionIO:
    """The broker's side of the transaction coordinator (see the module doc)."""

    def __init__(self, broker: TransactionHost) -> None:
        self.broker = broker
        self._channels: dict[int, BrokerChannel] = {}

    def allocate_producer_id(self) -> int:
        return self.broker.producer_ids.allocate()

    def coordinator_epoch(self, partition: int) -> int:
        state = self.broker.metadata.partition_state(TRANSACTION_STATE_TOPIC, partition)
        return max(state.leader_epoch, 0) if state is not None else 0

    async def write(self, partition: int, record: Record) -> ErrorCode:
        manager = self.broker.replica_manager
        log = manager.find_log(TRANSACTION_STATE_TOPIC, partition)
        if log is None and self.broker.cluster_link is None and not self.broker.metadata.has_topic(TRANSACTION_STATE_TOPIC):
            ensure_transaction_topic(self.broker)  # alone: created on first use, as Kafka does (local files)
            log = manager.find_log(TRANSACTION_STATE_TOPIC, partition)
        if log is None:
            return ErrorCode.not_coordinator
        try:
            info = log.append([record])
        except RecordTooLargeError as e:
            _log.error("appending to %s-%d failed: %s", TRANSACTION_STATE_TOPIC, partition, e)
            return ErrorCode.unknown_server_error
        except (LogstoreError, OSError) as e:
            _log.error("appending to %s-%d failed: %s", TRANSACTION_STATE_TOPIC, partition, e)
            return ErrorCode.coordinator_not_available
        manager.appended(TRANSACTION_STATE_TOPIC, partition)
        if not manager.replicated:
            return ErrorCode.none
        result = AppendResult(ErrorCode.none)
        result.required_offset = info.last_offset + 1
        timeout = self.broker.config.offsets_commit_timeout_ms / 1000
        await manager.await_replication([(TRANSACTION_STATE_TOPIC, partition, result)], timeout)
        return _WRITE_ERRORS.get(result.error, result.error)

    async def write_markers(
        self, producer_id: int, epoch: int, coordinator_epoch: int, commit: bool, partitions: set[TopicPartition]
    ) -> None:
        left = set(partitions)
        delay = MARKER_RETRY_S[0]
        for attempt in range(1 << 30):  # until every marker is written; the coordinator cancels on close
            left = {tp for tp in left if self._exists(tp)}
            if not left:
                return
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in left:
                state = self.broker.metadata.partition_state(*tp)
                leader = state.leader if state is not None else NO_LEADER
                by_leader.setdefault(leader, []).append(tp)
            done: set[TopicPartition] = set()
            for leader, tps in by_leader.items():
                if leader == NO_LEADER:
                    continue
                errors = await self._send(leader, producer_id, epoch, coordinator_epoch, commit, tps)
                for tp, error in errors.items():
                    if error == ErrorCode.none:
                        done.add(tp)
                    elif error in _MARKER_STALE:
                        # Kafka's TransactionMarkerRequestCompletionHandler: the producer's epoch or
                        # the coordinator's has moved on; a newer coordinator owns this ending.
                        _log.info("marker for producer %d on %s-%d: %s; not retried", producer_id, *tp, error.name)
                        done.add(tp)
                    elif attempt % 50 == 0:
                        _log.info(
                            "marker for producer %d on %s-%d: %s (retrying)", producer_id, *tp, error.name
                        )
            left -= done
            if left:
                await asyncio.sleep(delay)
                delay = min(delay * 2, MARKER_RETRY_S[1])

    def _exists(self, tp: TopicPartition) -> bool:
        count = self.broker.metadata.partition_count(tp[0])
        return count is not None and 0 <= tp[1] < count

    async def _send(
        self, leader: int, producer_id: int, epoch: int, coordinator_epoch: int, commit: bool,
        tps: list[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:  # fmt: skip
        if leader == self.broker.node_id:
            return await write_markers_here(self.broker, producer_id, epoch, coordinator_epoch, commit, tps)
        channel = self.channel_to(leader)
        if channel is None:
            return {tp: ErrorCode.not_leader_or_follower for tp in tps}
        by_topic = group_by_topic(tps)
        request = {
            "markers": [
                {
                    "producer_id": producer_id,
                    "producer_epoch": epoch,
                    "transaction_result": commit,
                    "topics": [{"name": t, "partition_indexes": p} for t, p in by_topic.items()],
                    "coordinator_epoch": coordinator_epoch,
                }
            ]
        }
        try:
            response = await channel.request(WRITE_TXN_MARKERS, 1, request, timeout=30.0)
        except ChannelError as e:
            _log.info("sending markers to broker %d failed: %s", leader, e)
            return {tp: ErrorCode.not_leader_or_follower for tp in tps}
        errors = {}
        for marker in response.markers:
            for topic in marker.topics:
                for partition in topic.partitions:
                    errors[(topic.name, partition.partition_index)] = ErrorCode(partition.error_code)
        return errors

    def channel_to(self, broker_id: int) -> BrokerChannel | None:
        """The inter-broker channel to ``broker_id`` (markers, transaction verification), made on
        first use and again when the broker's address changes; None when it is not registered."""
        endpoint = self.broker.metadata.broker(broker_id)
        if endpoint is None:
            return None
        channel = self._channels.get(broker_id)
        if channel is None or (channel.host, channel.port) != (endpoint.host, endpoint.port):
            if channel is not None:
                channel.close()
            channel = self._channels[broker_id] = BrokerChannel(
                broker_id, endpoint.host, endpoint.port, f"txn-sender-{self.broker.node_id}"
            )
        return channel

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()


async def write_markers_here(
    broker: TransactionHost, producer_id: int, epoch: int, coordinator_epoch: int, commit: bool, tps: list[TopicPartition]
) -> dict[TopicPartition, ErrorCode]:
    """Write one producer's markers to partitions this broker leads, and wait for their ISR
    (the WriteTxnMarkers handler's work, and the coordinator's for its own partitions)."""
    manager = broker.replica_manager
    results = []
    for topic, index in tps:
        result = await manager.append_marker(topic, index, producer_id, epoch, coordinator_epoch, commit)
        results.append((topic, index, result))
    if manager.replicated:
        await manager.await_replication(results, broker.config.offsets_commit_timeout_ms / 1000)
    return {(topic, index): result.error for topic, index, result in results}
