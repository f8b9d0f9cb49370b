"""The admin client's consumer groups: list, describe, delete, and their committed offsets
(ListGroups, DescribeGroups, DeleteGroups, OffsetFetch, OffsetCommit, OffsetDelete).

ListGroups goes to every broker (answers merged; a broker that fails is one of the result's
``errors``); the others go to each group's coordinator (FindCoordinator), and
NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS or a dropped
connection is retried once after the coordinator is looked up again. A group's error fails
its future with the broker's code (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, ...); a partition's
error is on its TopicPartition's ``error``. The offset calls take one
:class:`ConsumerGroupTopicPartitions` per call, as confluent-kafka's;
``delete_consumer_group_offsets`` (OffsetDelete) is Java's, not confluent's. Results:
:class:`ListConsumerGroupsResult` of :class:`ConsumerGroupListing`, and
:class:`ConsumerGroupDescription` with a :class:`MemberDescription` per member (assignments
decoded as the "consumer" protocol's).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from logstore.client.admin.checks import check_bool, check_unique
from logstore.client.admin.client import (
    COORDINATOR_RETRY,
    AdminBase,
    by_topic,
    kafka_error,
    new_future,
    settle,
)
from logstore.client.admin.metadata import Node, broker_node
from logstore.client.admin.resources import NO_OPERATIONS, AclOperation, OrderedEnum, operations
from logstore.client.consumer_protocol import ConsumerProtocolError, decode_assignment
from logstore.client.errors import KafkaError, KafkaException, from_code
from logstore.client.types import OFFSET_INVALID, TopicPartition

OFFSET_COMMIT = 8
OFFSET_FETCH = 9
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
DELETE_GROUPS = 42
OFFSET_DELETE = 47


class ConsumerGroupState(OrderedEnum):
    """A classic group's state, as DescribeGroups and ListGroups name it."""

    UNKNOWN = 0
    UNKOWN = 0  # confluent's deprecated misspelling: an alias of UNKNOWN
    PREPARING_REBALANCING = 1
    COMPLETING_REBALANCING = 2
    STABLE = 3
    DEAD = 4
    EMPTY = 5


_STATE_NAMES = {
    ConsumerGroupState.UNKNOWN: "Unknown",
    ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
    ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
    ConsumerGroupState.STABLE: "Stable",
    ConsumerGroupState.DEAD: "Dead",
    ConsumerGroupState.EMPTY: "Empty",
}
_STATE_OF_NAME = {name.lower(): state for state, name in _STATE_NAMES.items()}


class ConsumerGroupType(OrderedEnum):
    """A group's protocol: CLASSIC (JoinGroup/SyncGroup) or CONSUMER (KIP-848)."""

    UNKNOWN = 0
    CONSUMER = 1
    CLASSIC = 2


_TYPE_OF_NAME = {"consumer": ConsumerGroupType.CONSUMER, "classic": ConsumerGroupType.CLASSIC}


class ConsumerGroupTopicPartitions:
    """A group and partitions of it: the request and the result of the group offset operations."""

    def __init__(self, group_id: str, topic_partitions: list[TopicPartition] | None = None) -> None:
        self.group_id = group_id
        self.topic_partitions = topic_partitions

    def __repr__(self) -> str:
        return f"ConsumerGroupTopicPartitions({self.group_id!r}, {self.topic_partitions!r})"


class ConsumerGroupListing:
    """One group of ``list_consumer_groups``: simple means it has no protocol type (offsets only)."""

    def __init__(
        self,
        group_id: str,
        is_simple_consumer_group: bool,
        state: ConsumerGroupState | None = None,
        type: ConsumerGroupType | None = None,
    ) -> None:
        self.group_id = group_id
        self.is_simple_consumer_group = is_simple_consumer_group
        self.state = state
        self.type = type

    def __repr__(self) -> str:
        return f"ConsumerGroupListing({self.group_id!r}, {self.state}, {self.type})"


class ListConsumerGroupsResult:
    """``valid``: the groups every broker listed; ``errors``: a KafkaException per broker that failed."""

    def __init__(
        self, valid: list[ConsumerGroupListing] | None = None, errors: list[KafkaException] | None = None
    ) -> None:
        self.valid = valid
        self.errors = errors


class MemberAssignment:
    """The partitions assigned to a member."""

    def __init__(self, topic_partitions: list[TopicPartition] | None) -> None:
        self.topic_partitions = topic_partitions or []


class MemberDescription:
    """One member of a described group."""

    def __init__(
        self,
        member_id: str,
        client_id: str,
        host: str,
        assignment: MemberAssignment,
        group_instance_id: str | None = None,
        target_assignment: MemberAssignment | None = None,
    ) -> None:
        self.member_id = member_id
        self.client_id = client_id
        self.host = host
        self.assignment = assignment
        self.target_assignment = target_assignment
        self.group_instance_id = group_instance_id

    def __repr__(self) -> str:
        return f"MemberDescription({self.member_id!r}, {self.client_id!r}, {self.host!r})"


class ConsumerGroupDescription:
    """What ``describe_consumer_groups`` returns for a group (an unknown group is DEAD with no members)."""

    def __init__(
        self,
        group_id: str,
        is_simple_consumer_group: bool,
        members: list[MemberDescription],
        partition_assignor: str,
        state: ConsumerGroupState | None,
        coordinator: Node | None,
        authorized_operations: list[AclOperation] | None = None,
        type: ConsumerGroupType = ConsumerGroupType.UNKNOWN,
    ) -> None:
        self.group_id = group_id
        self.is_simple_consumer_group = is_simple_consumer_group
        self.members = members
        self.authorized_operations = authorized_operations or None
        self.partition_assignor = partition_assignor
        self.state = state
        self.type = type
        self.coordinator = coordinator

    def __repr__(self) -> str:
        return f"ConsumerGroupDescription({self.group_id!r}, {self.state}, {len(self.members)} members)"


def _check_group_partitions(request: Any, what: str, offsets: str) -> ConsumerGroupTopicPartitions:
    """The one ConsumerGroupTopicPartitions of a group offsets request (confluent's checks and messages).

    ``offsets``: "none" (offsets must be unset), "set" (offsets >= 0 required), "any".
    """
    if request is None:
        raise TypeError("request cannot be None")
    if not isinstance(request, list):
        raise TypeError("request must be a list")
    if len(request) != 1:
        raise ValueError(f"Currently we support {what} for a single consumer group only")
    req = request[0]
    if not isinstance(req, ConsumerGroupTopicPartitions):
        raise TypeError("Expected list of 'ConsumerGroupTopicPartitions'")
    if req.group_id is None:
        raise TypeError("'group_id' cannot be None")
    if not isinstance(req.group_id, str):
        raise TypeError("'group_id' must be a string")
    if not req.group_id:
        raise ValueError("'group_id' cannot be empty")
    if req.topic_partitions is None:
        if offsets == "none":
            return req
        raise ValueError("'topic_partitions' cannot be null")
    if not isinstance(req.topic_partitions, list):
        raise TypeError("'topic_partitions' must be a list or None")
    if not req.topic_partitions:
        raise ValueError("'topic_partitions' cannot be empty")
    for tp in req.topic_partitions:
        if tp is None:
            raise ValueError("Element of 'topic_partitions' cannot be None")
        if not isinstance(tp, TopicPartition):
            raise TypeError("Element of 'topic_partitions' must be of type TopicPartition")
        if tp.topic is None:
            raise TypeError("Element of 'topic_partitions' must not have 'topic' attribute as None")
        if not tp.topic:
            raise ValueError("Element of 'topic_partitions' must not have 'topic' attribute as Empty")
        if tp.partition < 0:
            raise ValueError("Element of 'topic_partitions' must not have negative 'partition' value")
        if offsets == "none" and tp.offset != OFFSET_INVALID:
            raise ValueError("Element of 'topic_partitions' must not have 'offset' value")
        if offsets == "set" and tp.offset < 0:
            raise ValueError("Element of 'topic_partitions' must not have negative value for 'offset' field")
    check_unique("partition", ((tp.topic, tp.partition) for tp in req.topic_partitions))
    return req


class GroupsAdmin(AdminBase):
    """The calls on consumer groups (see the module docstring)."""

    def list_consumer_groups(
        self,
        *,
        request_timeout: float | None = None,
        states: set[ConsumerGroupState] | None = None,
        types: set[ConsumerGroupType] | None = None,
    ) -> Future[ListConsumerGroupsResult]:
        """The groups of every broker (ListGroups to each), filtered by ``states`` and ``types`` (sets)."""
        for name, values, kind in (
            ("states", states, ConsumerGroupState),
            ("types", types, ConsumerGroupType),
        ):
            if values is None:
                continue
            if not isinstance(values, set):
                raise TypeError(f"'{name}' must be a set")
            for value in values:
                if not isinstance(value, kind):
                    raise TypeError(f"All elements of {name} must be of type {kind.__name__}")
        deadline = self._deadline(request_timeout)
        future = new_future()
        state_names = sorted(_STATE_NAMES[s] for s in states or ())
        type_names = sorted(t.name.lower() for t in types or () if t is not ConsumerGroupType.UNKNOWN)
        fields = {"states_filter": state_names, "types_filter": type_names}

        def work() -> None:
            self._ensure_metadata(refresh=True)
            sent = {b: self._cluster.send(b, LIST_GROUPS, fields) for b in sorted(self._cluster.brokers)}
            valid: dict[str, ConsumerGroupListing] = {}
            errors: list[KafkaException] = []
            for broker, request in sent.items():
                try:
                    response = self._wait(request, deadline, f"ListGroups to broker {broker}")
                except KafkaException as e:
                    errors.append(e)
                    continue
                if response.error_code:
                    errors.append(
                        KafkaException(kafka_error(response.error_code, f"ListGroups of broker {broker}"))
                    )
                    continue
                for g in response.groups:
                    state = _STATE_OF_NAME.get(
                        str(getattr(g, "group_state", "")).lower(), ConsumerGroupState.UNKNOWN
                    )
                    kind = _TYPE_OF_NAME.get(
                        str(getattr(g, "group_type", "")).lower(), ConsumerGroupType.UNKNOWN
                    )
                    if states and state not in states:  # a broker before ListGroups v4 filters nothing
                        continue
                    if types and kind not in types:
                        continue
                    valid[g.group_id] = ConsumerGroupListing(g.group_id, g.protocol_type == "", state, kind)
            future.set_result(ListConsumerGroupsResult(list(valid.values()), errors))

        self._submit([future], work, deadline)
        return future

    @staticmethod
    def _check_group_ids(group_ids: Any, verb: str) -> list[str]:
        if not isinstance(group_ids, list):
            raise TypeError(f"Expected input to be list of group ids to be {verb}")
        if not group_ids:
            raise ValueError(f"Expected at least one group to be {verb}")
        for g in group_ids:
            if not isinstance(g, str):
                raise TypeError(f"Expected list of str group ids, found {g!r}")
            if not g:
                raise ValueError("group ids cannot be empty")
        check_unique("group", group_ids)
        return group_ids

    def describe_consumer_groups(
        self, group_ids: list[str], *, request_timeout: float | None = None,
        include_authorized_operations: bool = False,
    ) -> dict[str, Future[ConsumerGroupDescription]]:  # fmt: skip
        """Describe groups (DescribeGroups to each coordinator); ``{group: Future[ConsumerGroupDescription]}``.

        Members' assignments are decoded as the "consumer" protocol's; a group the
        coordinator does not know is DEAD with no members (Kafka's answer).
        """
        self._check_group_ids(group_ids, "described")
        check_bool("include_authorized_operations", include_authorized_operations)
        deadline = self._deadline(request_timeout)
        futures = {g: new_future() for g in group_ids}

        def build(groups: list[str]) -> dict[str, Any]:
            return {"groups": groups, "include_authorized_operations": include_authorized_operations}

        def parse(response: Any, _: list[str]) -> dict[str, Any]:
            out: dict[str, Any] = {}
            for g in response.groups:
                if g.error_code:
                    out[g.group_id] = from_code(g.error_code, f"group {g.group_id!r}")
                    continue
                coordinator = self._cluster.coordinator(g.group_id)
                out[g.group_id] = ConsumerGroupDescription(
                    g.group_id,
                    g.protocol_type == "",
                    [_member(m, g.protocol_type) for m in g.members],
                    g.protocol_data,
                    _STATE_OF_NAME.get(g.group_state.lower(), ConsumerGroupState.UNKNOWN),
                    broker_node(self._cluster.brokers, coordinator),
                    operations(int(getattr(g, "authorized_operations", NO_OPERATIONS))),
                    ConsumerGroupType.CLASSIC,
                )
            return out

        def work() -> None:
            settle(futures, self._to_coordinators(DESCRIBE_GROUPS, group_ids, build, parse, deadline))

        self._submit(futures.values(), work, deadline)
        return futures

    def delete_consumer_groups(
        self, group_ids: list[str], *, request_timeout: float | None = None
    ) -> dict[str, Future[None]]:
        """Delete groups with no members (DeleteGroups); ``{group: Future[None]}``."""
        self._check_group_ids(group_ids, "deleted")
        deadline = self._deadline(request_timeout)
        futures = {g: new_future() for g in group_ids}

        def parse(response: Any, _: list[str]) -> dict[str, Any]:
            return {
                r.group_id: from_code(r.error_code, f"group {r.group_id!r}")
                if r.error_code else None
                for r in response.results
            }  # fmt: skip

        def work() -> None:
            settle(futures, self._to_coordinators(DELETE_GROUPS, group_ids, lambda gs: {"groups_names": gs}, parse,
                                                   deadline))  # fmt: skip

        self._submit(futures.values(), work, deadline)
        return futures

    def list_consumer_group_offsets(
        self,
        list_consumer_group_offsets_request: list[ConsumerGroupTopicPartitions],
        *,
        require_stable: bool = False,
        request_timeout: float | None = None,
    ) -> dict[str, Future[ConsumerGroupTopicPartitions]]:
        """A group's committed offsets (OffsetFetch): of the partitions given, or all when None.

        One group per call (as confluent). A partition with no committed offset has offset
        OFFSET_INVALID (-1001). ``{group: Future[ConsumerGroupTopicPartitions]}``.
        """
        req = _check_group_partitions(list_consumer_group_offsets_request, "listing offsets", "none")
        check_bool("require_stable", require_stable)
        deadline = self._deadline(request_timeout)
        group = req.group_id
        topics = None
        if req.topic_partitions is not None:
            topics = by_topic(((tp.topic, tp.partition) for tp in req.topic_partitions), "partition_indexes")
        fields = {"group_id": group, "topics": topics, "groups": [{"group_id": group, "topics": topics}],
                  "require_stable": require_stable}  # fmt: skip

        def parse(response: Any) -> Any:
            answer = response.groups[0] if getattr(response, "groups", None) else response
            if answer.error_code:
                return from_code(answer.error_code, f"group {group!r}")
            partitions = []
            for t in answer.topics:
                for p in t.partitions:
                    if p.error_code in COORDINATOR_RETRY:
                        return kafka_error(p.error_code, None)
                    offset = int(p.committed_offset)
                    tp = TopicPartition(t.name, int(p.partition_index), offset if offset >= 0 else OFFSET_INVALID,
                                        p.metadata or None,
                                        int(getattr(p, "committed_leader_epoch", -1)))  # fmt: skip
                    if tp.leader_epoch is not None and tp.leader_epoch < 0:
                        tp.leader_epoch = None
                    if p.error_code:
                        tp.error = kafka_error(p.error_code, None)
                    partitions.append(tp)
            return ConsumerGroupTopicPartitions(group, sorted(partitions))

        return self._group_call(OFFSET_FETCH, group, fields, parse, deadline)

    def alter_consumer_group_offsets(
        self,
        alter_consumer_group_offsets_request: list[ConsumerGroupTopicPartitions],
        *,
        request_timeout: float | None = None,
    ) -> dict[str, Future[ConsumerGroupTopicPartitions]]:
        """Commit offsets for a group with no active members (OffsetCommit as an admin: generation -1).

        One group per call (as confluent). A partition's error is on its TopicPartition's
        ``error``; a group-level error fails the future. ``{group: Future[ConsumerGroupTopicPartitions]}``.
        """
        req = _check_group_partitions(alter_consumer_group_offsets_request, "altering offsets", "set")
        deadline = self._deadline(request_timeout)
        group = req.group_id
        assert req.topic_partitions is not None
        topics = by_topic(
            (tp.topic, {"partition_index": tp.partition, "committed_offset": tp.offset,
                        "committed_leader_epoch": -1 if tp.leader_epoch is None else tp.leader_epoch,
                        "committed_metadata": tp.metadata})
            for tp in req.topic_partitions
        )  # fmt: skip
        fields = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                  "retention_time": -1, "topics": topics}  # fmt: skip
        requested = {(tp.topic, tp.partition): tp for tp in req.topic_partitions}

        def parse(response: Any) -> Any:
            return _partition_results(group, response, requested, offsets=True)

        return self._group_call(OFFSET_COMMIT, group, fields, parse, deadline)

    def delete_consumer_group_offsets(
        self,
        delete_consumer_group_offsets_request: list[ConsumerGroupTopicPartitions],
        *,
        request_timeout: float | None = None,
    ) -> dict[str, Future[ConsumerGroupTopicPartitions]]:
        """Delete a group's committed offsets of some partitions (OffsetDelete); not in confluent-kafka.

        Takes one ConsumerGroupTopicPartitions (offsets unset), as ``list_consumer_group_offsets``.
        A group error (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, ...) fails the future; a partition's
        (GROUP_SUBSCRIBED_TO_TOPIC) is on its TopicPartition's ``error``.
        ``{group: Future[ConsumerGroupTopicPartitions]}``.
        """
        req = _check_group_partitions(delete_consumer_group_offsets_request, "deleting offsets", "none")
        if req.topic_partitions is None:
            raise ValueError("'topic_partitions' cannot be null")
        deadline = self._deadline(request_timeout)
        group = req.group_id
        topics = by_topic((tp.topic, {"partition_index": tp.partition}) for tp in req.topic_partitions)
        fields = {"group_id": group, "topics": topics}
        requested = {(tp.topic, tp.partition): tp for tp in req.topic_partitions}

        def parse(response: Any) -> Any:
            if response.error_code:
                return from_code(response.error_code, f"group {group!r}")
            return _partition_results(group, response, requested, offsets=False)

        return self._group_call(OFFSET_DELETE, group, fields, parse, deadline)

    def _group_call(
        self, api_key: int, group: str, fields: dict[str, Any], parse: Callable[[Any], Any], deadline: float
    ) -> dict[str, Future[Any]]:
        """``{group: Future}`` for one request to the group's coordinator; ``parse`` gives the
        answer's outcome (a KafkaError with a coordinator code is retried once)."""
        futures = {group: new_future()}

        def work() -> None:
            outcomes = self._to_coordinators(api_key, [group], lambda _: fields,
                                             lambda response, _: {group: parse(response)}, deadline)  # fmt: skip
            settle(futures, outcomes)

        self._submit(futures.values(), work, deadline)
        return futures


def _member(member: Any, protocol_type: str) -> MemberDescription:
    partitions: list[TopicPartition] = []
    if protocol_type == "consumer" and member.member_assignment:
        try:
            assignment = decode_assignment(member.member_assignment)
        except ConsumerProtocolError:
            assignment = None
        if assignment is not None:
            partitions = [TopicPartition(t, p) for t, p in assignment.partitions]
    return MemberDescription(member.member_id, member.client_id, member.client_host, MemberAssignment(partitions),
                             getattr(member, "group_instance_id", None))  # fmt: skip


def _partition_results(
    group: str, response: Any, requested: dict[tuple[str, int], TopicPartition], *, offsets: bool
) -> ConsumerGroupTopicPartitions | KafkaError:
    """The partitions of an OffsetCommit/OffsetDelete answer, each with its error (a coordinator error: retry)."""
    partitions = []
    for t in response.topics:
        for p in t.partitions:
            if p.error_code in COORDINATOR_RETRY:
                return from_code(p.error_code, f"group {group!r}")
            key = (t.name, int(p.partition_index))
            asked = requested.get(key)
            tp = TopicPartition(
                t.name, key[1], asked.offset if asked is not None and offsets else OFFSET_INVALID
            )
            if asked is not None and offsets:
                tp.metadata, tp.leader_epoch = asked.metadata, asked.leader_epoch
            if p.error_code:
                tp.error = kafka_error(p.error_code, None)
            partitions.append(tp)
    return ConsumerGroupTopicPartitions(group, sorted(partitions))
