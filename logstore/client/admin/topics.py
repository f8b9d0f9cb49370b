"""The admin client's topics: create, delete, add partitions, describe (CreateTopics,
DeleteTopics, CreatePartitions, Metadata).

:class:`NewTopic` and :class:`NewPartitions` are what to create (confluent-kafka's classes);
:class:`TopicCollection` names topics to describe, and :class:`TopicDescription` (with a
:class:`TopicPartitionInfo` per partition) is what is described. Creations and deletions go
to the controller (NOT_CONTROLLER is retried once, after a metadata refresh); each topic
has its own future, failed with the broker's error code and message for that topic
(TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, ...). ``describe_topics`` asks any broker, and
never creates a topic.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any

from logstore.client.admin.checks import (
    check_assignment,
    check_bool,
    check_int,
    check_list,
    check_seconds,
    check_unique,
    config_text,
)
from logstore.client.admin.client import AdminBase, kafka_error, new_future, settle
from logstore.client.admin.metadata import METADATA, Node
from logstore.client.admin.resources import NO_OPERATIONS, AclOperation, operations
from logstore.client.cluster import metadata_fields
from logstore.client.errors import from_code

CREATE_TOPICS = 19
DELETE_TOPICS = 20
CREATE_PARTITIONS = 37

_ZERO_UUID = uuid.UUID(int=0)


class NewTopic:
    """A topic to create: a partition count and replication factor, or an explicit replica assignment.

    -1 leaves the count or factor to the broker's defaults (or to ``replica_assignment``,
    a list per partition of broker ids). ``config`` is a dict of topic configs (str: str).
    """

    def __init__(
        self,
        topic: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        replica_assignment: list[list[int]] | None = None,
        config: dict[str, str] | None = None,
    ) -> None:
        if not isinstance(topic, str):
            raise TypeError(f"NewTopic: argument 1 (topic) must be str, not {type(topic).__name__}")
        self.topic = topic
        self.num_partitions = check_int("num_partitions", num_partitions)
        self.replication_factor = check_int("replication_factor", replication_factor)
        self.replica_assignment = replica_assignment
        self.config = config

    def __repr__(self) -> str:
        if self.num_partitions == -1:
            return f"NewTopic(topic={self.topic})"
        return f"NewTopic(topic={self.topic},num_partitions={self.num_partitions})"

    __str__ = __repr__


class NewPartitions:
    """A topic's new total partition count, and optionally the replicas of each added partition."""

    def __init__(
        self, topic: str, new_total_count: int, replica_assignment: list[list[int]] | None = None
    ) -> None:
        if not isinstance(topic, str):
            raise TypeError(f"NewPartitions: argument 1 (topic) must be str, not {type(topic).__name__}")
        self.topic = topic
        self.new_total_count = check_int("new_total_count", new_total_count)
        self.replica_assignment = replica_assignment

    def __repr__(self) -> str:
        return f"NewPartitions(topic={self.topic},new_total_count={self.new_total_count})"

    __str__ = __repr__


class TopicCollection:
    """Topics named for ``describe_topics``."""

    def __init__(self, topic_names: list[str]) -> None:
        self.topic_names = topic_names


class TopicPartitionInfo:
    """One partition of :class:`TopicDescription`."""

    def __init__(self, id: int, leader: Node | None, replicas: list[Node], isr: list[Node]) -> None:
        self.id = id
        self.leader = leader
        self.replicas = replicas
        self.isr = isr


class TopicDescription:
    """What ``describe_topics`` returns for a topic."""

    def __init__(
        self,
        name: str,
        topic_id: uuid.UUID | None,
        is_internal: bool,
        partitions: list[TopicPartitionInfo],
        authorized_operations: list[AclOperation] | None = None,
    ) -> None:
        self.name = name
        self.topic_id = topic_id
        self.is_internal = is_internal
        self.partitions = partitions
        self.authorized_operations = authorized_operations or None


class TopicsAdmin(AdminBase):
    """The calls on topics (see the module docstring)."""

    def create_topics(
        self,
        new_topics: list[NewTopic],
        *,
        operation_timeout: float = 0,
        request_timeout: float | None = None,
        validate_only: bool = False,
    ) -> dict[str, Future[None]]:
        """Create topics (CreateTopics); ``{topic: Future[None]}``.

        ``operation_timeout`` (seconds) is how long the controller may wait for the topics to
        be created everywhere (0: answer at once); ``validate_only`` checks without creating.
        """
        check_list("new_topics", new_topics, NewTopic, "NewTopic objects")
        check_unique("topic", (t.topic for t in new_topics))
        timeout_ms = int(check_seconds("operation_timeout", operation_timeout, 0) * 1000)
        deadline = self._deadline(request_timeout)
        check_bool("validate_only", validate_only)
        specs = {t.topic: self._topic_spec(t) for t in new_topics}
        return self._topics_call(CREATE_TOPICS, list(specs), _with_specs(specs, timeout_ms, validate_only),
                                 "topics", deadline)  # fmt: skip

    @staticmethod
    def _topic_spec(topic: NewTopic) -> dict[str, Any]:
        owner = f"NewTopic({topic.topic!r})"
        if not topic.topic:
            raise ValueError(f"{owner}: the topic name is empty")
        if topic.config is not None and not isinstance(topic.config, dict):
            raise TypeError(f"{owner}: config must be a dict of str: str")
        configs = [
            {"name": name, "value": config_text(owner, name, value)}
            for name, value in (topic.config or {}).items()
        ]
        assignments = []
        partitions, factor = topic.num_partitions, topic.replication_factor
        if topic.replica_assignment is not None:
            assignment = check_assignment(owner, topic.replica_assignment)
            if factor != -1:
                raise ValueError(f"{owner}: replication_factor must be -1 when replica_assignment is set")
            if partitions not in (-1, len(assignment)):
                raise ValueError(
                    f"{owner}: num_partitions={partitions} but replica_assignment has {len(assignment)} partitions"
                )
            assignments = [{"partition_index": i, "broker_ids": list(r)} for i, r in enumerate(assignment)]
            partitions = -1
        else:
            if partitions == 0 or partitions < -1:
                raise ValueError(f"{owner}: num_partitions must be >= 1 (or -1 for the broker's default)")
            if factor == 0 or factor < -1:
                raise ValueError(f"{owner}: replication_factor must be >= 1 (or -1 for the broker's default)")
        return {"name": topic.topic, "num_partitions": partitions, "replication_factor": factor,
                "assignments": assignments, "configs": configs}  # fmt: skip

    def delete_topics(
        self, topics: list[str], *, operation_timeout: float = 0, request_timeout: float | None = None
    ) -> dict[str, Future[None]]:
        """Delete topics (DeleteTopics); ``{topic: Future[None]}``."""
        check_list("topics", topics, str, "topic strings")
        check_unique("topic", topics)
        timeout_ms = int(check_seconds("operation_timeout", operation_timeout, 0) * 1000)
        deadline = self._deadline(request_timeout)

        def build(names: list[str]) -> dict[str, Any]:
            return {"topic_names": names, "topics": [{"name": n, "topic_id": _ZERO_UUID} for n in names],
                    "timeout": timeout_ms}  # fmt: skip

        return self._topics_call(DELETE_TOPICS, topics, build, "responses", deadline)

    def create_partitions(
        self,
        new_partitions: list[NewPartitions],
        *,
        operation_timeout: float = 0,
        request_timeout: float | None = None,
        validate_only: bool = False,
    ) -> dict[str, Future[None]]:
        """Add partitions to topics (CreatePartitions); ``{topic: Future[None]}``."""
        check_list("new_partitions", new_partitions, NewPartitions, "NewPartitions objects")
        check_unique("topic", (p.topic for p in new_partitions))
        timeout_ms = int(check_seconds("operation_timeout", operation_timeout, 0) * 1000)
        deadline = self._deadline(request_timeout)
        check_bool("validate_only", validate_only)
        specs = {}
        for p in new_partitions:
            owner = f"NewPartitions({p.topic!r})"
            if p.new_total_count < 1:
                raise ValueError(f"{owner}: new_total_count must be >= 1")
            assignments = None
            if p.replica_assignment is not None:
                assignments = [{"broker_ids": list(r)} for r in check_assignment(owner, p.replica_assignment)]
            specs[p.topic] = {"name": p.topic, "count": p.new_total_count, "assignments": assignments}
        return self._topics_call(CREATE_PARTITIONS, list(specs), _with_specs(specs, timeout_ms, validate_only),
                                 "results", deadline)  # fmt: skip

    def _topics_call(
        self,
        api_key: int,
        names: list[str],
        build: Callable[[list[str]], dict[str, Any]],
        results_field: str,
        deadline: float,
    ) -> dict[str, Future[None]]:
        """``{topic: Future[None]}`` for a request to the controller whose answer has a result
        (name, error_code, error_message) per topic in ``results_field``."""
        futures = {n: new_future() for n in names}

        def work() -> None:
            settle(
                futures, self._to_controller(api_key, names, build, _topic_results(results_field), deadline)
            )

        self._submit(futures.values(), work, deadline)
        return futures

    def describe_topics(
        self, topics: TopicCollection, *, request_timeout: float | None = None,
        include_authorized_operations: bool = False,
    ) -> dict[str, Future[TopicDescription]]:  # fmt: skip
        """Describe topics (Metadata); ``{topic: Future[TopicDescription]}``."""
        if not isinstance(topics, TopicCollection):
            raise TypeError("Expected input to be instance of TopicCollection")
        names = topics.topic_names
        if not isinstance(names, list):
            raise TypeError("Expected list of topic names to be described")
        for name in names:
            if not isinstance(name, str):
                raise TypeError(f"topic names are strings, not {name!r}")
            if not name:
                raise ValueError("Empty topic name")
        check_unique("topic", names)
        check_bool("include_authorized_operations", include_authorized_operations)
        deadline = self._deadline(request_timeout)
        futures = {name: new_future() for name in names}
        if not names:
            return futures

        def work() -> None:
            fields = metadata_fields(names, topic_operations=include_authorized_operations)
            response = self._wait(self._cluster.send(None, METADATA, fields), deadline, "Metadata")
            nodes = {
                int(b.node_id): Node(int(b.node_id), b.host, int(b.port), b.rack) for b in response.brokers
            }

            def node(node_id: int) -> Node:
                return nodes.get(node_id) or Node(node_id, "", -1)

            outcomes: dict[str, Any] = {}
            for t in response.topics:
                if t.error_code:
                    outcomes[t.name] = from_code(t.error_code, f"topic {t.name!r}")
                    continue
                partitions = [
                    TopicPartitionInfo(int(p.partition_index), node(int(p.leader_id)) if p.leader_id >= 0 else None,
                                       [node(int(r)) for r in p.replica_nodes], [node(int(r)) for r in p.isr_nodes])
                    for p in sorted(t.partitions, key=lambda p: p.partition_index)
                ]  # fmt: skip
                topic_id = getattr(t, "topic_id", None)
                outcomes[t.name] = TopicDescription(
                    t.name, topic_id, bool(getattr(t, "is_internal", False)), partitions,
                    operations(int(getattr(t, "topic_authorized_operations", NO_OPERATIONS))),
                )  # fmt: skip
            settle(futures, outcomes)

        self._submit(futures.values(), work, deadline)
        return futures


def _topic_results(field: str) -> Callable[[Any, list[str]], dict[str, Any]]:
    """A parser of per-topic results (name, error_code, error_message) in ``field``: None or a KafkaError."""

    def parse(response: Any, _: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for result in getattr(response, field):
            if result.error_code:
                out[result.name] = kafka_error(result.error_code, getattr(result, "error_message", None))
            else:
                out[result.name] = None
        return out

    return parse


def _with_specs(
    specs: Mapping[str, dict[str, Any]], timeout_ms: int, validate_only: bool
) -> Callable[[list[str]], dict[str, Any]]:
    """The request builder of CreateTopics and CreatePartitions: the named topics' specs."""

    def build(names: list[str]) -> dict[str, Any]:
        return {"topics": [specs[n] for n in names], "timeout": timeout_ms, "validate_only": validate_only}

    return build
