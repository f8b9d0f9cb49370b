"""Topic changes: where CreateTopics, DeleteTopics, CreatePartitions and config changes go.

In Kafka these go to the controller, which decides replica assignments and
tells every broker. :class:`LocalController` is the controller of a cluster of
one broker: it makes each change in the Store (topic files under the data
directory, the partitions' logs), and the MetadataCache and ReplicaManager
follow through the Store's topic listener. A broker in a ZooKeeper cluster
uses the cluster's controller instead, with the same methods
(:class:`TopicController`).

Every method raises the Store's exceptions (UnknownTopicError,
TopicExistsError, InvalidArgumentError, InvalidConfigError, OSError); the
handlers map them to Kafka error codes with ``error_for``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from logstore.broker.config.broker_config import BrokerConfig
from logstore.broker.metadata_cache import MetadataCache, PartitionState
from logstore.errors import LogstoreError
from logstore.storage.config import LogConfig
from logstore.storage.store import Store

PREFERRED, UNCLEAN = 0, 1
"""ElectLeaders' election types (:meth:`ClusterLink.elect_leaders`)."""


class NotControllerError(LogstoreError):
    """A :class:`ClusterLink` controller call made on a broker that is not (or no longer) the
    controller; the cluster's controller raises its subclass (ControllerMovedError)."""


class TopicController(Protocol):
    """What the API handlers ask of a controller."""

    @property
    def defaults(self) -> Mapping[str, Any]:
        """The broker's log defaults (``log.*`` keys as topic keys)."""
        ...

    def create_topic(
        self,
        name: str,
        partitions: int,
        config: Mapping[str, Any],
        replication_factor: int = 1,
        assignment: Mapping[int, Sequence[int]] | None = None,
    ) -> None: ...

    def delete_topic(self, name: str) -> None: ...

    def add_partitions(self, name: str, total: int) -> None: ...

    def set_topic_overrides(self, name: str, config: Mapping[str, Any]) -> LogConfig: ...

    def set_defaults(self, defaults: Mapping[str, Any]) -> None:
        """New broker log defaults (a dynamic broker config changed): every topic without its
        own override of a key takes the new default, and new topics start from them."""
        ...


class ClusterLink(TopicController, Protocol):
    """A broker's membership of a cluster (a ZkBroker): topic changes, ISR changes if it is the
    controller (AlterPartition), and leaving."""

    @property
    def is_controller(self) -> bool: ...

    def alter_partition(
        self,
        topic: str,
        partition: int,
        leader: int,
        leader_epoch: int,
        isr: tuple[int, ...],
        partition_epoch: int,
    ) -> tuple[Any, PartitionState | None]: ...

    def controlled_shutdown(self, timeout: float) -> list[tuple[str, int]]: ...

    def elect_leaders(
        self, election_type: int, partitions: list[tuple[str, int]] | None
    ) -> dict[tuple[str, int], tuple[Any, str | None]]: ...

    def alter_reassignments(
        self, changes: Mapping[tuple[str, int], Sequence[int] | None]
    ) -> dict[tuple[str, int], tuple[Any, str | None]]: ...

    def list_reassignments(
        self, partitions: list[tuple[str, int]] | None
    ) -> dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]: ...

    def close(self) -> None: ...


class NotJoined:
    """The controller of a cluster broker before it has joined: every change is refused."""

    @property
    def defaults(self) -> Mapping[str, Any]:
        return {}

    def _refuse(self) -> LogConfig:
        raise LogstoreError("this broker has not joined its cluster yet; retry in a moment")

    def create_topic(
        self,
        name: str,
        partitions: int,
        config: Mapping[str, Any],
        replication_factor: int = 1,
        assignment: Mapping[int, Sequence[int]] | None = None,
    ) -> None:
        self._refuse()

    def delete_topic(self, name: str) -> None:
        self._refuse()

    def add_partitions(self, name: str, total: int) -> None:
        self._refuse()

    def set_topic_overrides(self, name: str, config: Mapping[str, Any]) -> LogConfig:
        return self._refuse()

    def set_defaults(self, defaults: Mapping[str, Any]) -> None:
        """Nothing to change yet: the cluster link reads the broker's defaults when it joins."""


class LocalController:
    """The controller of a single broker: every change made in its own Store (see the module doc)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    @property
    def defaults(self) -> Mapping[str, Any]:
        return self.store.defaults

    def create_topic(
        self,
        name: str,
        partitions: int,
        config: Mapping[str, Any],
        replication_factor: int = 1,
        assignment: Mapping[int, Sequence[int]] | None = None,
    ) -> None:
        """Create ``name`` with ``partitions`` partitions and ``config``'s overrides (persisted).
        One broker: one replica each (the handlers refuse more before asking)."""
        assert replication_factor == 1, replication_factor
        self.store.create_topic(name, partitions, config)

    def delete_topic(self, name: str) -> None:
        """Close and delete every partition of ``name``."""
        self.store.delete_topic(name)

    def add_partitions(self, name: str, total: int) -> None:
        """Grow ``name`` to ``total`` partitions (never shrinks)."""
        self.store.add_partitions(name, total)

    def set_topic_overrides(self, name: str, config: Mapping[str, Any]) -> LogConfig:
        """Make ``config`` the topic's whole set of overrides; returns the new config."""
        return self.store.set_topic_overrides(name, config)

    def set_defaults(self, defaults: Mapping[str, Any]) -> None:
        """New log defaults for the Store (see :meth:`Store.set_defaults`)."""
        self.store.set_defaults(defaults)


class ClusterMember(Protocol):
    """A broker as the parts that talk to other brokers see it (the Broker satisfies it): its id,
    its config now, its metadata and its cluster link (None alone). Read each time: the config and
    the link change while the broker runs."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def node_id(self) -> int: ...

    @property
    def metadata(self) -> MetadataCache: ...

    @property
    def cluster_link(self) -> ClusterLink | None: ...
