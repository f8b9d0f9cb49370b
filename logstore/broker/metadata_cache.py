"""The MetadataCache: what this broker knows of the cluster (Kafka's ``MetadataCache``).

Live brokers and their endpoints, the controller, and every topic with its
ID and each partition's state (leader, leader epoch, replicas, ISR, offline
replicas: the partition state of Kafka's UpdateMetadata request). The API
handlers answer Metadata, FindCoordinator, DescribeCluster and every "does
this topic exist" from here, never from the Store.

Who feeds it: on a single broker, the Store's topic registry (this broker
leads every partition; see :meth:`MetadataCache.track_store`); in a cluster,
the controller through ZooKeeper.

Concurrency: readers run on the event loop and in the Store's threads. An
update replaces a topic's whole entry (a frozen value) under a lock, so a
reader sees a topic before or after an update, never half of one. Lookups
are O(1) dict reads; :meth:`topic_names` is O(T log T) for T topics.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from logstore.errors import UnknownTopicError
from logstore.storage.config import LogConfig
from logstore.storage.store import Store

NO_LEADER = -1
"""Kafka's leader id when a partition has none (every replica offline)."""


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """A live broker: its id, where clients reach it (per listener), and its rack (``broker.rack``) or None."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
    # Every listener's endpoint (name, host, port); host/port above are the inter-broker one.
    listeners: tuple[tuple[str, str, int], ...] = ()

    def for_listener(self, name: str) -> tuple[str, int] | None:
        """Where a client of listener ``name`` reaches this broker (Kafka answers Metadata with the
        endpoints of the listener the request came in on); None if it has no such listener."""
        if not self.listeners:
            return self.host, self.port
        for listener, host, port in self.listeners:
            if listener == name:
                return host, port
        return None


@dataclass(frozen=True, slots=True)
class PartitionState:
    """One partition's leadership: Kafka's ``UpdateMetadataPartitionState``.

    Invariants (asserted): the leader is in the ISR (or there is none), the
    ISR is a subset of the replicas, and an offline replica is a replica.
    ``leader_epoch`` is -1 where no epoch is kept (a single broker);
    ``partition_epoch`` is the state's version (in ZooKeeper mode the state
    znode's zkVersion, as Kafka's), -1 alone: AlterPartition names it.
    """

    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...] = ()
    partition_epoch: int = -1

    def __post_init__(self) -> None:
        assert self.leader == NO_LEADER or self.leader in self.isr, (self.leader, self.isr)
        assert set(self.isr) <= set(self.replicas), (self.isr, self.replicas)
        assert set(self.offline) <= set(self.replicas), (self.offline, self.replicas)


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """A topic: its name, ID, config and partitions (indexed 0 .. N-1; partitions are dense)."""

    name: str
    topic_id: uuid.UUID
    config: LogConfig
    partitions: tuple[PartitionState, ...] = field(default=())


class MetadataCache:
    """Brokers, controller and topics as this broker last heard of them (see the module doc)."""

    def __init__(self, cluster_id: str, controller_id: int = NO_LEADER) -> None:
        self.cluster_id = cluster_id
        self.controller_id = controller_id
        self._lock = threading.Lock()
        self._brokers: dict[int, BrokerEndpoint] = {}
        self._topics: dict[str, TopicMetadata] = {}
        self._by_id: dict[uuid.UUID, str] = {}

    # -- brokers -------------------------------------------------------------

    def set_cluster_id(self, cluster_id: str) -> None:
        """The cluster's id (a cluster broker learns it when it joins)."""
        self.cluster_id = cluster_id

    def set_controller(self, node_id: int) -> None:
        """The controller's broker id (NO_LEADER: none known)."""
        self.controller_id = node_id

    def set_brokers(self, brokers: Iterable[BrokerEndpoint]) -> None:
        """Replace the set of live brokers. O(B)."""
        fresh = {b.node_id: b for b in brokers}
        with self._lock:
            self._brokers = fresh

    def brokers(self) -> list[BrokerEndpoint]:
        """The live brokers, by node id. O(B log B)."""
        return sorted(self._brokers.values(), key=lambda b: b.node_id)

    def broker(self, node_id: int) -> BrokerEndpoint | None:
        """A live broker by id, or None. O(1)."""
        return self._brokers.get(node_id)

    # -- topics --------------------------------------------------------------

    def put_topic(self, topic: TopicMetadata) -> None:
        """Add or replace a topic's entry (a new ID replaces the old one's lookup). O(1)."""
        with self._lock:
            old = self._topics.get(topic.name)
            if old is not None and old.topic_id != topic.topic_id:
                self._by_id.pop(old.topic_id, None)
            self._topics[topic.name] = topic
            self._by_id[topic.topic_id] = topic.name

    def remove_topic(self, name: str) -> None:
        """Forget a topic (deleted); unknown names are ignored. O(1)."""
        with self._lock:
            old = self._topics.pop(name, None)
            if old is not None:
                self._by_id.pop(old.topic_id, None)

    def has_topic(self, name: str) -> bool:
        return name in self._topics

    def topic(self, name: str) -> TopicMetadata | None:
        """The topic's entry, or None. O(1)."""
        return self._topics.get(name)

    def topic_names(self) -> list[str]:
        """Every topic, sorted. O(T log T)."""
        return sorted(self._topics)

    def partition_count(self, name: str) -> int | None:
        """The topic's partition count, or None if there is no such topic. O(1)."""
        topic = self._topics.get(name)
        return None if topic is None else len(topic.partitions)

    def partitions(self, name: str) -> int:
        """The topic's partition count; UnknownTopicError if there is none. O(1)."""
        count = self.partition_count(name)
        if count is None:
            raise UnknownTopicError(f"unknown topic {name!r}")
        return count

    def topic_id(self, name: str) -> uuid.UUID:
        """The topic's ID; UnknownTopicError if there is no such topic. O(1)."""
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopicError(f"unknown topic {name!r}")
        return topic.topic_id

    def topic_config(self, name: str) -> LogConfig:
        """The topic's config (its overrides over the broker defaults); UnknownTopicError. O(1)."""
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopicError(f"unknown topic {name!r}")
        return topic.config

    def topic_by_id(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with this ID, or None. O(1)."""
        return self._by_id.get(topic_id)

    def partition_state(self, name: str, partition: int) -> PartitionState | None:
        """One partition's state, or None if the topic or partition does not exist. O(1)."""
        topic = self._topics.get(name)
        if topic is None or not 0 <= partition < len(topic.partitions):
            return None
        return topic.partitions[partition]

    # -- a single broker -----------------------------------------------------

    def track_store(self, store: Store, node_id: int) -> None:
        """Mirror ``store``'s topics from now on, with ``node_id`` the leader of every partition
        (but those in a failed log directory: offline, no leader).

        The Store calls back on every topic change (create, delete, new
        partitions), whoever makes it: an API, the group coordinator, or a
        program that shares the Store with an embedded broker.
        """
        self.controller_id = node_id

        alone = PartitionState(node_id, -1, (node_id,), (node_id,))
        # A partition in a failed log directory: no leader, its one replica offline (Kafka's
        # offline partition: LEADER_NOT_AVAILABLE, the replica in offline_replicas).
        lost = PartitionState(NO_LEADER, -1, (node_id,), (node_id,), offline=(node_id,))
        logs = store.log_manager

        def changed(name: str) -> None:
            count = store.partition_count(name)
            if count is None:
                self.remove_topic(name)
                return
            states = tuple(lost if logs.offline_dir_of(name, p) else alone for p in range(count))
            self.put_topic(TopicMetadata(name, store.topic_id(name), store.topic_config(name), states))

        def failed(log_dir: str, partitions: list[tuple[str, int]]) -> None:
            for name in sorted({topic for topic, _ in partitions}):
                changed(name)

        logs.dir_failures.add_listener(failed)
        for name in store.add_topic_listener(changed):
            changed(name)
