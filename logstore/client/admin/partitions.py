"""The admin client's partitions: offsets, records, leaders and replicas (ListOffsets,
DeleteRecords, ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments).

``list_offsets`` (by :class:`OffsetSpec`: earliest, latest, max timestamp, or a timestamp;
:class:`IsolationLevel` for transactions) and ``delete_records`` go to each partition's
leader, batched per leader; a partition whose leader moved (NOT_LEADER_OR_FOLLOWER,
LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION, a fenced or unknown leader epoch) or whose
connection dropped is retried once after a metadata refresh. Each partition has its own
future (:class:`ListOffsetsResultInfo`, :class:`DeletedRecords`), failed with the broker's
code for it. ``elect_leaders`` (:class:`ElectionType`) and the reassignment calls (Java's
``alterPartitionReassignments`` / ``listPartitionReassignments``; :class:`PartitionReassignment`)
go to the controller (NOT_CONTROLLER retried once); their top-level error fails the call.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from enum import IntEnum
from typing import Any, ClassVar

from logstore.client.admin.checks import check_list, check_partition, check_seconds, check_unique
from logstore.client.admin.client import AdminBase, by_topic, kafka_error, new_future, settle
from logstore.client.admin.resources import OrderedEnum
from logstore.client.errors import KafkaError, from_code
from logstore.client.types import TopicPartition

LIST_OFFSETS = 2
DELETE_RECORDS = 21
ELECT_LEADERS = 43
ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46


class IsolationLevel(OrderedEnum):
    """What ``list_offsets`` sees of transactions: every record, or only committed ones."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


class OffsetSpec:
    """Which offset ``list_offsets`` asks for: ``earliest()``, ``latest()``, ``max_timestamp()``,
    or ``for_timestamp(ms)`` (the first offset whose timestamp is at or after ``ms``).

    As in confluent-kafka, ``OffsetSpec(n)`` is one of those: -2 earliest, -1 latest,
    -3 max timestamp, n >= 0 a timestamp.
    """

    _values: ClassVar[dict[int, OffsetSpec]] = {}

    def __new__(cls, index: int) -> OffsetSpec:
        if index < 0:
            try:
                return cls._values[index]
            except KeyError:
                raise ValueError(
                    f"OffsetSpec({index}): -1 latest, -2 earliest, -3 max timestamp, or >= 0"
                ) from None
        return TimestampSpec(index)

    @property
    def _value(self) -> int:
        raise NotImplementedError

    @classmethod
    def earliest(cls) -> OffsetSpec:
        return cls._values[-2]

    @classmethod
    def latest(cls) -> OffsetSpec:
        return cls._values[-1]

    @classmethod
    def max_timestamp(cls) -> OffsetSpec:
        return cls._values[-3]

    @classmethod
    def for_timestamp(cls, timestamp: int) -> OffsetSpec:
        return TimestampSpec(timestamp)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, OffsetSpec):
            return NotImplemented
        return self._value < other._value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._value})"


class TimestampSpec(OffsetSpec):
    """The first offset whose record timestamp is at or after ``timestamp`` (ms)."""

    def __new__(cls, timestamp: int) -> TimestampSpec:
        return object.__new__(cls)

    def __init__(self, timestamp: int) -> None:
        self.timestamp = timestamp

    @property
    def _value(self) -> int:
        return self.timestamp


class _LogicalSpec(OffsetSpec):
    """A spec Kafka names by a negative timestamp (``code``): one instance of each."""

    code: ClassVar[int]

    def __new__(cls) -> _LogicalSpec:
        return object.__new__(cls)

    @property
    def _value(self) -> int:
        return self.code


class MaxTimestampSpec(_LogicalSpec):
    """The offset of the record with the largest timestamp (ListOffsets v7+)."""

    code = -3


class LatestSpec(_LogicalSpec):
    """The log end offset (the offset the next record will get)."""

    code = -1


class EarliestSpec(_LogicalSpec):
    """The log start offset."""

    code = -2


OffsetSpec._values.update({spec.code: spec() for spec in (MaxTimestampSpec, EarliestSpec, LatestSpec)})


class ElectionType(IntEnum):
    """ElectLeaders' election types (confluent-kafka's ``ElectionType``)."""

    PREFERRED = 0  #: the first assigned replica, if it is alive and in sync
    UNCLEAN = 1  #: any live replica, for a partition with no leader (may lose acknowledged records)


class PartitionReassignment:
    """A reassignment in progress (Java's ``PartitionReassignment``): the partition's replicas (the
    target first, then the original replicas not in it), those being added and those being removed."""

    def __init__(self, replicas: list[int], adding_replicas: list[int], removing_replicas: list[int]) -> None:
        self.replicas = replicas
        self.adding_replicas = adding_replicas
        self.removing_replicas = removing_replicas

    def __repr__(self) -> str:
        return (
            f"PartitionReassignment(replicas={self.replicas}, adding_replicas={self.adding_replicas}, "
            f"removing_replicas={self.removing_replicas})"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PartitionReassignment) and (
            self.replicas,
            self.adding_replicas,
            self.removing_replicas,
        ) == (other.replicas, other.adding_replicas, other.removing_replicas)


class ListOffsetsResultInfo:
    """One partition's ``list_offsets`` answer; ``leader_epoch`` None when unknown."""

    def __init__(self, offset: int, timestamp: int, leader_epoch: int) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.leader_epoch: int | None = leader_epoch if leader_epoch >= 0 else None

    def __repr__(self) -> str:
        return f"ListOffsetsResultInfo(offset={self.offset}, timestamp={self.timestamp})"


class DeletedRecords:
    """One partition's ``delete_records`` answer: its new log start offset."""

    def __init__(self, low_watermark: int) -> None:
        self.low_watermark = low_watermark

    def __repr__(self) -> str:
        return f"DeletedRecords(low_watermark={self.low_watermark})"


class PartitionsAdmin(AdminBase):
    """The calls on partitions (see the module docstring)."""

    def list_offsets(
        self,
        topic_partition_offsets: dict[TopicPartition, OffsetSpec],
        *,
        isolation_level: IsolationLevel | None = None,
        request_timeout: float | None = None,
    ) -> dict[TopicPartition, Future[ListOffsetsResultInfo]]:
        """Offsets by spec (ListOffsets to each partition's leader); ``{TopicPartition: Future[ListOffsetsResultInfo]}``.

        The keys are new TopicPartitions whose ``offset`` is the spec's value (as confluent's),
        equal to (hashed as) the caller's.
        """
        if not isinstance(topic_partition_offsets, dict):
            raise TypeError(
                "Expected topic_partition_offsets to be dict of [TopicPartitions,OffsetSpec] for list offsets request"
            )
        for tp, spec in topic_partition_offsets.items():
            check_partition(tp)
            if spec is None:
                raise TypeError("OffsetSpec cannot be None")
            if not isinstance(spec, OffsetSpec):
                raise TypeError("Value must be a OffsetSpec")
        if isolation_level is not None and not isinstance(isolation_level, IsolationLevel):
            raise TypeError("isolation_level argument should be an IsolationLevel")
        level = 0 if isolation_level is None else isolation_level.value
        deadline = self._deadline(request_timeout)
        specs = {(tp.topic, tp.partition): int(spec._value) for tp, spec in topic_partition_offsets.items()}
        futures = {TopicPartition(t, p, spec): new_future() for (t, p), spec in specs.items()}

        def partition(t: str, p: int) -> dict[str, Any]:
            return {"partition_index": p, "current_leader_epoch": -1, "timestamp": specs[(t, p)]}

        def value_of(p: Any) -> ListOffsetsResultInfo:
            return ListOffsetsResultInfo(int(p.offset), int(p.timestamp), int(getattr(p, "leader_epoch", -1)))

        self._leaders_call(LIST_OFFSETS, futures, list(specs), partition,
                           {"replica_id": -1, "isolation_level": level}, value_of, deadline)  # fmt: skip
        return futures

    def delete_records(
        self,
        topic_partition_offsets: list[TopicPartition],
        *,
        request_timeout: float | None = None,
        operation_timeout: float = 60,
    ) -> dict[TopicPartition, Future[DeletedRecords]]:
        """Delete the records before each ``offset`` (OFFSET_END: all) (DeleteRecords to the leaders).

        ``{TopicPartition: Future[DeletedRecords]}``; the new log start offset is ``low_watermark``.
        """
        if not isinstance(topic_partition_offsets, list):
            raise TypeError(f"Expected Request to be a list, got '{type(topic_partition_offsets).__name__}' ")
        for tp in topic_partition_offsets:
            if not isinstance(tp, TopicPartition):
                raise TypeError(
                    f"Element of the request list must be of type 'TopicPartition' got '{type(tp).__name__}' "
                )
            check_partition(tp)
            if tp.offset < 0 and tp.offset != -1:
                raise ValueError(f"{tp!r}: offset must be >= 0, or OFFSET_END (-1) to delete every record")
        check_unique("partition", ((tp.topic, tp.partition) for tp in topic_partition_offsets))
        timeout_ms = int(check_seconds("operation_timeout", operation_timeout, 60) * 1000)
        deadline = self._deadline(request_timeout)
        offsets = {(tp.topic, tp.partition): tp.offset for tp in topic_partition_offsets}
        futures = {tp: new_future() for tp in topic_partition_offsets}
        self._leaders_call(DELETE_RECORDS, futures, list(offsets),
                           lambda t, p: {"partition_index": p, "offset": offsets[(t, p)]}, {"timeout": timeout_ms},
                           lambda p: DeletedRecords(int(p.low_watermark)), deadline)  # fmt: skip
        return futures

    def _leaders_call(
        self,
        api_key: int,
        futures: Mapping[TopicPartition, Future[Any]],
        partitions: list[tuple[str, int]],
        partition_fields: Callable[[str, int], dict[str, Any]],
        fields: dict[str, Any],
        value_of: Callable[[Any], Any],
        deadline: float,
    ) -> None:
        """Send ``partitions`` to their leaders (``fields`` and the topics, each partition's
        ``partition_fields``) and settle ``futures`` with each partition's answer: ``value_of``
        it, or its error."""

        def build(batch: list[tuple[str, int]]) -> dict[str, Any]:
            return {**fields, "topics": by_topic((t, partition_fields(t, p)) for t, p in batch)}

        def parse(response: Any, _: list[tuple[str, int]]) -> dict[tuple[str, int], Any]:
            out: dict[tuple[str, int], Any] = {}
            for t in response.topics:
                for p in t.partitions:
                    key = (t.name, int(p.partition_index))
                    if p.error_code:
                        out[key] = from_code(p.error_code, f"{t.name} [{p.partition_index}]")
                    else:
                        out[key] = value_of(p)
            return out

        def work() -> None:
            outcomes = self._to_leaders(api_key, partitions, build, parse, deadline)
            settle(futures, {TopicPartition(t, p): outcome for (t, p), outcome in outcomes.items()})

        self._submit(futures.values(), work, deadline)

    # -- leaders and replicas (the controller's) ---------------------------------

    def elect_leaders(
        self,
        election_type: ElectionType,
        partitions: list[TopicPartition] | None = None,
        *,
        request_timeout: float | None = None,
        operation_timeout: float = 60.0,
    ) -> Future[dict[TopicPartition, KafkaError | None]]:
        """A preferred or unclean leader election (ElectLeaders, sent to the controller) for
        ``partitions`` or, with None, every partition. The future's result: each partition's
        KafkaError (ELECTION_NOT_NEEDED when its leader is already the one asked for) or None."""
        election = ElectionType(election_type)
        if partitions is not None:
            check_list("partitions", partitions, TopicPartition, "TopicPartition objects")
        timeout_ms = int(check_seconds("operation_timeout", operation_timeout, 0) * 1000)
        deadline = self._deadline(request_timeout)
        future = new_future()
        fields = {
            "election_type": int(election),
            "topic_partitions": None if partitions is None else by_topic(
                ((tp.topic, tp.partition) for tp in partitions), name="topic"
            ),
            "timeout": timeout_ms,
        }  # fmt: skip

        def work() -> None:
            response = self._call(ELECT_LEADERS, fields, deadline, controller=True)
            result: dict[TopicPartition, KafkaError | None] = {}
            for topic in response.replica_election_results:
                for p in topic.partition_result:
                    error = kafka_error(p.error_code, p.error_message) if p.error_code else None
                    result[TopicPartition(topic.topic, p.partition_id)] = error
            future.set_result(result)

        self._submit([future], work, deadline)
        return future

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, list[int] | None],
        *,
        request_timeout: float | None = None,
    ) -> dict[TopicPartition, Future[None]]:
        """Move partitions to new replicas, or cancel a move with None (AlterPartitionReassignments,
        sent to the controller; Java's ``alterPartitionReassignments``). One future per partition;
        it settles when the controller has started the move (ListPartitionReassignments shows it
        until the new replicas are in sync and the old ones gone)."""
        if not isinstance(reassignments, Mapping) or not reassignments:
            raise ValueError(
                "reassignments must be a non-empty dict of TopicPartition to a list of broker ids or None"
            )
        for tp, replicas in reassignments.items():
            if not isinstance(tp, TopicPartition):
                raise TypeError(
                    f"reassignments' keys must be TopicPartition objects, not {type(tp).__name__}"
                )
            if replicas is not None and (
                not isinstance(replicas, list) or not all(isinstance(b, int) for b in replicas)
            ):
                raise TypeError(f"{tp}: replicas must be a list of broker ids (int) or None to cancel")
        deadline = self._deadline(request_timeout)
        futures = {tp: new_future() for tp in reassignments}
        fields = {
            "timeout": int(max(deadline - time.monotonic(), 0) * 1000),
            "topics": by_topic(
                (tp.topic, {"partition_index": tp.partition, "replicas": replicas})
                for tp, replicas in reassignments.items()
            ),
            "allow_replication_factor_change": True,
        }

        def work() -> None:
            response = self._call(ALTER_PARTITION_REASSIGNMENTS, fields, deadline, controller=True)
            outcomes: dict[TopicPartition, Any] = {}
            for topic in response.responses:
                for p in topic.partitions:
                    error = kafka_error(p.error_code, p.error_message) if p.error_code else None
                    outcomes[TopicPartition(topic.name, p.partition_index)] = error
            settle(futures, outcomes)

        self._submit(futures.values(), work, deadline)
        return futures

    def list_partition_reassignments(
        self, partitions: list[TopicPartition] | None = None, *, request_timeout: float | None = None
    ) -> Future[dict[TopicPartition, PartitionReassignment]]:
        """The reassignments in progress, among ``partitions`` or all (ListPartitionReassignments,
        sent to the controller)."""
        if partitions is not None:
            check_list("partitions", partitions, TopicPartition, "TopicPartition objects")
        deadline = self._deadline(request_timeout)
        fields = {
            "timeout": int(max(deadline - time.monotonic(), 0) * 1000),
            "topics": None if partitions is None else by_topic(
                ((tp.topic, tp.partition) for tp in partitions), "partition_indexes"
            ),
        }  # fmt: skip
        future = new_future()

        def work() -> None:
            response = self._call(LIST_PARTITION_REASSIGNMENTS, fields, deadline, controller=True)
            future.set_result({
                TopicPartition(topic.name, p.partition_index): PartitionReassignment(
                    list(p.replicas), list(p.adding_replicas), list(p.removing_replicas)
                )
                for topic in response.topics
                for p in topic.partitions
            })  # fmt: skip

        self._submit([future], work, deadline)
        return future
