"""The admin client's cluster metadata: brokers, topics and the controller (Metadata, DescribeCluster).

:meth:`MetadataAdmin.list_topics` and :meth:`MetadataAdmin.cluster_id` are synchronous, as
confluent-kafka's: one Metadata request to any broker (never creating a topic: an unknown
topic is listed with ``error`` UNKNOWN_TOPIC_OR_PARTITION), bounded by ``timeout`` seconds
(default ``socket.timeout.ms``), raising KafkaException ``_TIMED_OUT`` or the transport's
error. :meth:`MetadataAdmin.describe_cluster` (DescribeCluster, to any broker) returns a
future, failed with the broker's error code. The result classes have confluent's names:
:class:`ClusterMetadata` (with :class:`BrokerMetadata`, :class:`TopicMetadata`,
:class:`PartitionMetadata`; also what the producer's and consumer's ``list_topics`` return,
through :func:`cluster_metadata`), :class:`DescribeClusterResult`, and :class:`Node` (a
broker, in every area's results).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any

from logstore.client.admin.checks import check_bool, check_seconds
from logstore.client.admin.client import AdminBase, kafka_error, new_future
from logstore.client.admin.resources import AclOperation, operations
from logstore.client.cluster import BrokerMeta, metadata_fields
from logstore.client.errors import KafkaError

METADATA = 3
DESCRIBE_CLUSTER = 60


class Node:
    """A broker: id, host, port, rack."""

    def __init__(self, id: int, host: str, port: int, rack: str | None = None) -> None:
        self.id = id
        self.id_string = str(id)
        self.host = host
        self.port = port
        self.rack = rack

    def __str__(self) -> str:
        rack = f"(Rack - {self.rack})" if self.rack else ""
        return f"({self.id}) {self.host}:{self.port} {rack}"

    def __repr__(self) -> str:
        return f"Node({self.id}, {self.host!r}, {self.port}, {self.rack!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Node):
            return NotImplemented
        return (self.id, self.host, self.port, self.rack) == (other.id, other.host, other.port, other.rack)

    def __hash__(self) -> int:
        return hash((self.id, self.host, self.port))


class ClusterMetadata:
    """What ``list_topics`` returns: brokers, topics, the controller, and which broker answered."""

    def __init__(self) -> None:
        self.cluster_id: str | None = None
        self.controller_id = -1
        self.brokers: dict[int, BrokerMetadata] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.orig_broker_id = -1
        self.orig_broker_name: str | None = None

    def __repr__(self) -> str:
        return f"ClusterMetadata({self.cluster_id})"

    def __str__(self) -> str:
        return str(self.cluster_id)


class BrokerMetadata:
    """One broker of :class:`ClusterMetadata`."""

    def __init__(self) -> None:
        self.id = -1
        self.host: str | None = None
        self.port = -1

    def __repr__(self) -> str:
        return f"BrokerMetadata({self.id}, {self.host}:{self.port})"

    def __str__(self) -> str:
        return f"{self.host}:{self.port}/{self.id}"


class TopicMetadata:
    """One topic of :class:`ClusterMetadata`: its partitions, or its error."""

    def __init__(self) -> None:
        self.topic: str | None = None
        self.partitions: dict[int, PartitionMetadata] = {}
        self.error: KafkaError | None = None

    def __repr__(self) -> str:
        if self.error is not None:
            return f"TopicMetadata({self.topic}, {len(self.partitions)} partitions, {self.error})"
        return f"TopicMetadata({self.topic}, {len(self.partitions)} partitions)"

    def __str__(self) -> str:
        return str(self.topic)


class PartitionMetadata:
    """One partition of :class:`TopicMetadata`: leader, replicas, in-sync replicas."""

    def __init__(self) -> None:
        self.id = -1
        self.leader = -1
        self.replicas: list[int] = []
        self.isrs: list[int] = []
        self.error: KafkaError | None = None

    def __repr__(self) -> str:
        if self.error is not None:
            return f"PartitionMetadata({self.id}, {self.error})"
        return f"PartitionMetadata({self.id})"

    def __str__(self) -> str:
        return str(self.id)


class DescribeClusterResult:
    """What ``describe_cluster`` returns: the controller and every broker as :class:`Node`."""

    def __init__(
        self,
        controller: Node | None,
        nodes: list[Node],
        cluster_id: str | None = None,
        authorized_operations: list[AclOperation] | None = None,
    ) -> None:
        self.cluster_id = cluster_id
        self.controller = controller
        self.nodes = nodes
        self.authorized_operations = authorized_operations or None


class MetadataAdmin(AdminBase):
    """The calls of the cluster's metadata (see the module docstring)."""

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        """The cluster's brokers and topics (all, or ``topic``), synchronously (as confluent's).

        An unknown ``topic`` is listed with ``error`` UNKNOWN_TOPIC_OR_PARTITION (never created).
        """
        if topic is not None and not isinstance(topic, str):
            raise TypeError(f"topic must be a str or None, not {type(topic).__name__}")
        response, origin = self._metadata(None if topic is None else [topic], timeout)
        return cluster_metadata(response, origin)

    def cluster_id(self, timeout: float = -1) -> str | None:
        """The cluster id metadata gives (a Metadata request for no topics)."""
        response, _ = self._metadata([], timeout)
        cluster_id: str | None = response.cluster_id
        return cluster_id

    def _metadata(self, topics: list[str] | None, timeout: Any) -> tuple[Any, int]:
        """A Metadata answer (never creating topics) within ``timeout`` seconds (< 0: the default), and who gave it."""
        limit = (
            self._default_timeout if timeout is None or timeout < 0 else check_seconds("timeout", timeout, 0)
        )
        if self._closed:
            raise RuntimeError("AdminClient has been closed")
        deadline = time.monotonic() + limit
        with self._cluster.deadline(deadline):  # a broker that never answers: connecting is cut too
            conn = self._cluster.any_connection()
        response = self._wait(conn.send(METADATA, metadata_fields(topics)), deadline, "Metadata")
        return response, conn.node_id

    def describe_cluster(
        self, *, request_timeout: float | None = None, include_authorized_operations: bool = False
    ) -> Future[DescribeClusterResult]:
        """The cluster id, controller and brokers (DescribeCluster)."""
        check_bool("include_authorized_operations", include_authorized_operations)
        deadline = self._deadline(request_timeout)
        future = new_future()

        def work() -> None:
            fields = {
                "include_cluster_authorized_operations": include_authorized_operations,
                "endpoint_type": 1,
            }
            response = self._call(DESCRIBE_CLUSTER, fields, deadline)
            nodes = [Node(int(b.broker_id), b.host, int(b.port), b.rack) for b in response.brokers]
            controller = next((n for n in nodes if n.id == response.controller_id), None)
            future.set_result(
                DescribeClusterResult(controller, nodes, response.cluster_id,
                                      operations(int(response.cluster_authorized_operations)))
            )  # fmt: skip

        self._submit([future], work, deadline)
        return future


def cluster_metadata(response: Any, origin: int = -1) -> ClusterMetadata:
    """A Metadata answer as confluent's ``ClusterMetadata`` (``list_topics`` of every client)."""
    md = ClusterMetadata()
    md.cluster_id = response.cluster_id
    md.controller_id = int(response.controller_id)
    for b in response.brokers:
        broker = BrokerMetadata()
        broker.id, broker.host, broker.port = int(b.node_id), b.host, int(b.port)
        md.brokers[broker.id] = broker
    if origin < 0 and len(md.brokers) == 1:  # a bootstrap connection to a one-broker cluster
        origin = next(iter(md.brokers))
    md.orig_broker_id = origin
    if origin in md.brokers:
        md.orig_broker_name = str(md.brokers[origin])
    for t in response.topics:
        tm = TopicMetadata()
        tm.topic = t.name
        tm.error = kafka_error(t.error_code, None) if t.error_code else None
        for p in t.partitions:
            pm = PartitionMetadata()
            pm.id, pm.leader = int(p.partition_index), int(p.leader_id)
            pm.replicas = [int(r) for r in p.replica_nodes]
            pm.isrs = [int(r) for r in p.isr_nodes]
            pm.error = kafka_error(p.error_code, None) if p.error_code else None
            tm.partitions[pm.id] = pm
        md.topics[t.name] = tm
    return md


def broker_node(brokers: Mapping[int, BrokerMeta], node_id: int) -> Node:
    """The Node of ``node_id`` in the client's metadata (host "" and port -1 when it is not known)."""
    broker = brokers.get(node_id)
    if broker is None:
        return Node(node_id, "", -1)
    return Node(broker.node_id, broker.host, broker.port, broker.rack)
