"""The broker's scrape-time metric families: logs, partitions, groups, connections.

Read from the broker's live objects at each scrape, never kept up to date
between scrapes (broker_metrics.py's module doc): each log's size, start offset, end
offset (LEO) and high watermark; leader and under-replicated partition counts;
consumer groups by state, their members, and each group's committed offsets
and lag (HW - committed); active connections. The broker adds
:func:`broker_state` to its :class:`~logstore.broker.metrics.broker_metrics.BrokerMetrics`
as a collector.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any, Protocol

from prometheus_client.core import GaugeMetricFamily, Metric

from logstore.broker.replication.replica_manager import ReplicaManager
from logstore.coordinator.group.group_coordinator import GroupCoordinator
from logstore.storage.log_manager import LogManager


class Listening(Protocol):
    @property
    def listener_name(self) -> str: ...


class LiveState(Protocol):
    """What the families read of the broker."""

    @property
    def node_id(self) -> int: ...

    @property
    def cluster_id(self) -> str: ...

    @property
    def connections(self) -> Iterable[Listening]: ...

    @property
    def log_manager(self) -> LogManager: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...

    @property
    def coordinator(self) -> GroupCoordinator | None: ...


def broker_state(broker: LiveState) -> Iterable[Metric]:
    """The scrape-time families: logs, partitions, groups, connections. O(logs + groups + offsets)."""
    info = GaugeMetricFamily(
        "logstore_broker_info",
        "This broker: its id and cluster id (value 1).",
        labels=["node_id", "cluster_id"],
    )
    info.add_metric([str(broker.node_id), broker.cluster_id], 1)
    yield info
    active = GaugeMetricFamily(
        "logstore_connections", "Open client connections, by listener.", labels=["listener"]
    )
    by_listener: dict[str, int] = {}
    for connection in list(broker.connections):
        by_listener[connection.listener_name] = by_listener.get(connection.listener_name, 0) + 1
    for listener, count in by_listener.items():
        active.add_metric([listener], count)
    if not by_listener:
        active.add_metric(["PLAINTEXT"], 0)
    yield active
    yield from _log_dir_state(broker)
    yield from _log_state(broker)
    yield from _partition_state(broker)
    yield from _group_state(broker)


def _log_dir_state(broker: LiveState) -> Iterable[Metric]:
    replicas = broker.replica_manager
    labels = ["dir"]
    offline = GaugeMetricFamily(
        "logstore_log_dir_offline",
        "1 once the log directory failed (an I/O error): its partitions answer KAFKA_STORAGE_ERROR "
        "until the broker restarts.",
        labels=labels,
    )
    failures = replicas.logs_by_partition.dir_failures
    for log_dir in replicas.logs_by_partition.log_dirs:
        offline.add_metric([log_dir], int(failures.is_offline(log_dir)))
    yield offline
    if not replicas.spaces:
        return
    free = GaugeMetricFamily(
        "logstore_log_dir_free_bytes", "Free bytes of the log directory's filesystem.", labels=labels
    )
    reserve = GaugeMetricFamily(
        "logstore_log_dir_reserve_bytes",
        "Bytes kept free in the log directory (log.dir.min.free.bytes).",
        labels=labels,
    )
    refused = GaugeMetricFamily(
        "logstore_log_dir_produce_refused",
        "1 while the free bytes are below the reserve: produce to user topics is refused.",
        labels=labels,
    )
    for space in replicas.spaces.values():
        free.add_metric([space.path], space.free_bytes)
        reserve.add_metric([space.path], space.reserve_bytes)
        refused.add_metric([space.path], int(space.below_reserve))
    yield from (free, reserve, refused)


def _log_state(broker: LiveState) -> Iterable[Metric]:
    labels = ["topic", "partition"]
    size = GaugeMetricFamily(
        "logstore_log_size_bytes", "Bytes in the partition's segments on this broker.", labels=labels
    )
    start = GaugeMetricFamily("logstore_log_start_offset", "The partition's log start offset.", labels=labels)
    end = GaugeMetricFamily("logstore_log_end_offset", "The partition's log end offset (LEO).", labels=labels)
    hw = GaugeMetricFamily("logstore_high_watermark", "The partition's high watermark.", labels=labels)
    try:
        logs = broker.log_manager.logs()
    except Exception:  # closing
        logs = {}
    for (topic, index), log in sorted(logs.items()):
        try:
            segments, high_watermark = log.snapshot()
            values = (sum(s.size for s in segments), log.log_start_offset, log.log_end_offset, high_watermark)
        except Exception:  # deleted or closed meanwhile
            continue
        key = [topic, str(index)]
        for family, value in zip((size, start, end, hw), values, strict=True):
            family.add_metric(key, value)
    yield from (size, start, end, hw)


def _partition_state(broker: LiveState) -> Iterable[Metric]:
    replicas = broker.replica_manager
    leaders = under = 0
    if not replicas.replicated:  # alone: every log is a leader of a one-replica partition
        with contextlib.suppress(Exception):
            leaders = len(broker.log_manager.logs())
    for partition in replicas.held_partitions() if replicas.replicated else ():
        if partition.is_leader:
            leaders += 1
            if len(partition.state.isr) < len(partition.state.replicas):
                under += 1
    yield GaugeMetricFamily("logstore_leader_partitions", "Partitions this broker leads.", value=leaders)
    yield GaugeMetricFamily(
        "logstore_under_replicated_partitions",
        "Partitions this broker leads whose ISR is smaller than their replica set.",
        value=under,
    )


def _group_state(broker: LiveState) -> Iterable[Metric]:
    coordinator = broker.coordinator
    groups = GaugeMetricFamily(
        "logstore_consumer_groups",
        "Consumer groups this broker coordinates, by type and state.",
        labels=["type", "state"],
    )
    members = GaugeMetricFamily("logstore_consumer_group_members", "Members of a group.", labels=["group"])
    committed = GaugeMetricFamily(
        "logstore_consumer_group_committed_offset",
        "A group's committed offset.",
        labels=["group", "topic", "partition"],
    )
    lag = GaugeMetricFamily(
        "logstore_consumer_group_lag",
        "High watermark minus the group's committed offset (partitions whose log is on this broker).",
        labels=["group", "topic", "partition"],
    )
    if coordinator is not None:
        counts: dict[tuple[str, str], int] = {}
        find_log = broker.log_manager.find_log
        for overview in coordinator.list_groups():
            group_id = overview.group_id
            key = (overview.group_type, overview.state)
            counts[key] = counts.get(key, 0) + 1
            live: Any = coordinator.consumer_group(group_id) or coordinator.group(group_id)
            members.add_metric([group_id], len(live.members) if live is not None else 0)
            offsets = coordinator.fetch_offsets(group_id).offsets
            for (topic, index), fetched in sorted(offsets.items()):
                if fetched.offset < 0:
                    continue
                labels = [group_id, topic, str(index)]
                committed.add_metric(labels, fetched.offset)
                try:
                    log = find_log(topic, index)
                except Exception:
                    log = None
                if log is not None:
                    lag.add_metric(labels, log.high_watermark - fetched.offset)
        for (group_type, state), count in sorted(counts.items()):
            groups.add_metric([group_type, state], count)
    yield from (groups, members, committed, lag)
