"""The share coordinator on the broker (KIP-932): built at start, ticked on the loop.

:func:`start_share_coordinator` builds a
:class:`~logstore.coordinator.share.share_coordinator.ShareCoordinator` over
the broker's metadata (topics and ids) and replica manager (each partition's
log start and high watermark), with the ``group.share.*`` broker settings,
and runs its :meth:`tick` every :data:`TICK_MS` (member session timeouts,
acquisition locks). Records that become available again wake the
ShareFetches waiting on :func:`share_key` in the fetch purgatory.

Alone, the share-partitions' state is persisted in ``__share_group_state``
(``share.coordinator.state.topic.num.partitions`` partitions, compacted;
created on the first write, loaded at start): a share-partition's records go
to partition ``hash("group:topicId:partition") % partitions``, appended with
:meth:`Log.append` (durable as the topic's flush settings say). In a
ZooKeeper cluster the state stays in memory on the group's coordinator
(remaining: the share coordinator as the leader of the state partition, and
the state APIs 83-87 between brokers).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Hashable

from logstore.broker.context import Services
from logstore.broker.groups.consumer_protocol import MetadataTopics
from logstore.broker.groups.offsets_topic import read_partition
from logstore.coordinator.clock import LoopClock, Repeating
from logstore.coordinator.internal_topics import SHARE_GROUP_STATE_TOPIC, partition_for
from logstore.coordinator.record_codec import OffsetsSchemaError, Record
from logstore.coordinator.share.share_config import ShareConfig
from logstore.coordinator.share.share_coordinator import ShareCoordinator
from logstore.coordinator.share.share_partition import Snapshot
from logstore.coordinator.share.share_state_records import ShareStateKey, StateFolder
from logstore.errors import LogstoreError

_log = logging.getLogger("logstore.broker")

STATE_TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": 104_857_600}
"""Kafka's ``share.coordinator.state.topic.*`` defaults: compacted, 100 MiB segments."""

TICK_MS = 100


def share_key(group_id: str, topic: str, partition: int) -> Hashable:
    """The purgatory key a ShareFetch waits on for records released in its share-partition."""
    return ("share", group_id, topic, partition)


def now_ms() -> int:
    return int(time.monotonic() * 1000)


def start_share_coordinator(broker: Services) -> tuple[ShareCoordinator, Repeating]:
    """The broker's share coordinator and its running ticker (stop it at close)."""
    replicas = broker.replica_manager

    def log_offsets(topic: str, partition: int) -> tuple[int, int] | None:
        found = replicas.leader_partition(topic, partition)
        if isinstance(found, int):  # an ErrorCode: not led here
            return None
        return found.log.log_start_offset, found.log.high_watermark

    def available(group_id: str, topic: str, partition: int) -> None:
        replicas.purgatory.notify(share_key(group_id, topic, partition))

    config = ShareConfig.from_properties(broker.config.values)
    alone = broker.cluster_link is None and not broker.config.zookeeper_connect
    coordinator = ShareCoordinator(
        config,
        MetadataTopics(broker.metadata),
        log_offsets,
        available,
        writer=StateWriter(broker).write if alone else None,
        clock_ms=lambda: int(time.time() * 1000),
    )
    if alone and broker.metadata.has_topic(SHARE_GROUP_STATE_TOPIC):
        restored = coordinator.restore(load_state(broker))
        if restored:
            _log.info("loaded %d share-partitions from %s", restored, SHARE_GROUP_STATE_TOPIC)
    ticker = Repeating(LoopClock(), TICK_MS, lambda: coordinator.tick(now_ms()))
    ticker.start()
    return coordinator, ticker


def share_coordinator_of(broker: Services) -> ShareCoordinator:
    coordinator = broker.share_coordinator
    if coordinator is None:  # start() builds it before listening
        raise RuntimeError("the share coordinator is not running")
    return coordinator


class StateWriter:
    """Appends a share-partition's records to its ``__share_group_state`` partition (creating the
    topic on the first write). Raises LogstoreError when the append fails."""

    def __init__(self, broker: Services) -> None:
        self._broker = broker

    def write(self, coordinator_key: str, records: list[Record]) -> None:
        broker = self._broker
        if not broker.metadata.has_topic(SHARE_GROUP_STATE_TOPIC):
            wanted = int(broker.config.values["share.coordinator.state.topic.num.partitions"])
            broker.controller.create_topic(SHARE_GROUP_STATE_TOPIC, wanted, STATE_TOPIC_CONFIG, 1)
            _log.info("created %s with %d partitions", SHARE_GROUP_STATE_TOPIC, wanted)
        partition = partition_for(coordinator_key, broker.metadata.partitions(SHARE_GROUP_STATE_TOPIC))
        replicas = broker.replica_manager
        try:
            replicas.log(SHARE_GROUP_STATE_TOPIC, partition).append(records)
        except OSError as e:
            raise LogstoreError(f"appending to {SHARE_GROUP_STATE_TOPIC}-{partition} failed: {e}") from e
        replicas.appended(SHARE_GROUP_STATE_TOPIC, partition)


def load_state(broker: Services) -> dict[ShareStateKey, tuple[int, int, Snapshot]]:
    """Every share-partition's latest state in ``__share_group_state`` (unreadable records skipped)."""
    folder = StateFolder()
    replicas = broker.replica_manager
    for partition in range(broker.metadata.partitions(SHARE_GROUP_STATE_TOPIC)):
        log = replicas.find_log(SHARE_GROUP_STATE_TOPIC, partition)
        if log is None:
            continue
        for key, value in read_partition(log):
            try:
                folder.add(key, value)
            except OffsetsSchemaError as e:
                _log.error("skipping an unreadable %s record: %s", SHARE_GROUP_STATE_TOPIC, e)
    return folder.states
