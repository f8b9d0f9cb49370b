"""The ``__consumer_offsets`` records of consumer-protocol groups (KIP-848), in Kafka's byte layouts.

Kafka's new group coordinator persists a consumer group as six record types,
told apart by the key's version (the record type); each key is a plain
(non-flexible) struct of strings, each value a version-0 flexible struct
(compact strings and arrays, 16-byte UUIDs, a tagged-field section after
every struct):

====  ==========================================  ===========================================
type  key (Kafka's name)                          value
====  ==========================================  ===========================================
3     ConsumerGroupMetadataKey(group)             :class:`GroupEpochValue`: the group epoch
4     ConsumerGroupPartitionMetadataKey(group)    :class:`SubscriptionMetadataValue`: the
                                                  subscribed topics (id, name, partitions)
5     ConsumerGroupMemberMetadataKey(group, m)    :class:`MemberSubscriptionValue`: a member's
                                                  client, subscription, rebalance timeout
6     ConsumerGroupTargetAssignmentMetadataKey    :class:`AssignmentEpochValue`: the epoch of
                                                  the target assignment
7     ConsumerGroupTargetAssignmentMemberKey      :class:`TargetAssignmentValue`: a member's
                                                  target partitions
8     ConsumerGroupCurrentMemberAssignmentKey     :class:`CurrentAssignmentValue`: a member's
                                                  epochs, state, owned and revoking partitions
====  ==========================================  ===========================================

A value of ``None`` is a tombstone. Unknown tagged fields are skipped on read
(Kafka's tagged ``ClassicMemberMetadata`` of type 5 among them); nothing
tagged is written. Keys of other types (0-2: the classic records, 9+: share
and streams groups) are not this module's: :func:`decode_consumer_record`
answers ``None`` for them.

>>> key = ConsumerGroupKey(GROUP_EPOCH, "g")
>>> key.encode().hex()  # type 3, "g"
'0003000167'
>>> record = (key, GroupEpochValue(7))
>>> decode_consumer_record(*encode_consumer_record(record)) == record
True
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from logstore.coordinator.record_codec import OffsetsSchemaError, Record, RecordReader, RecordWriter

GROUP_EPOCH = 3
SUBSCRIPTION_METADATA = 4
MEMBER_SUBSCRIPTION = 5
ASSIGNMENT_EPOCH = 6
TARGET_ASSIGNMENT = 7
CURRENT_ASSIGNMENT = 8
CONSUMER_RECORD_TYPES = frozenset(range(GROUP_EPOCH, CURRENT_ASSIGNMENT + 1))
_MEMBER_TYPES = frozenset({MEMBER_SUBSCRIPTION, TARGET_ASSIGNMENT, CURRENT_ASSIGNMENT})
_VALUE_VERSION = 0

Assignment = Mapping[uuid.UUID, frozenset[int]]
"""Partitions by topic id; by invariant no topic maps to an empty set."""

EMPTY_ASSIGNMENT: Assignment = {}


def assignment(pairs: Iterable[tuple[uuid.UUID, Iterable[int]]]) -> dict[uuid.UUID, frozenset[int]]:
    """An :data:`Assignment` from (topic id, partitions) pairs; repeated topics merge, empty ones drop.

    O(partitions).

    >>> t = uuid.UUID(int=1)
    >>> assignment([(t, [1]), (t, [0]), (uuid.UUID(int=2), [])]) == {t: frozenset({0, 1})}
    True
    """
    merged: dict[uuid.UUID, set[int]] = {}
    for topic_id, partitions in pairs:
        merged.setdefault(topic_id, set()).update(partitions)
    return {topic_id: frozenset(parts) for topic_id, parts in merged.items() if parts}


@dataclass(frozen=True, order=True)
class TopicMetadata:
    """A subscribed topic as a group last saw it: its id, name and partition count."""

    name: str
    topic_id: uuid.UUID
    partitions: int


@dataclass(frozen=True)
class ConsumerGroupKey:
    """A key of types 3-8: the group, and the member for the per-member types (5, 7, 8).

    Invariant (checked on construction): ``member`` is set iff the type is per-member.
    """

    type: int
    group: str
    member: str | None = None

    def __post_init__(self) -> None:
        if self.type not in CONSUMER_RECORD_TYPES:
            raise ValueError(f"record type {self.type} is not a consumer group record")
        if (self.member is not None) != (self.type in _MEMBER_TYPES):
            raise ValueError(f"record type {self.type} {'needs' if self.member is None else 'has no'} member")

    def encode(self) -> bytes:
        """The key bytes: the type as an int16 version, then the strings. O(size of the key)."""
        writer = RecordWriter(self.type, flexible=False)
        writer.string(self.group)
        if self.member is not None:
            writer.string(self.member)
        return bytes(writer.out)


@dataclass(frozen=True)
class GroupEpochValue:
    """ConsumerGroupMetadataValue: the group epoch."""

    epoch: int


@dataclass(frozen=True)
class SubscriptionMetadataValue:
    """ConsumerGroupPartitionMetadataValue: the topics the members subscribe to, as they were seen."""

    topics: tuple[TopicMetadata, ...] = ()


@dataclass(frozen=True)
class MemberSubscriptionValue:
    """ConsumerGroupMemberMetadataValue: a member's client and what it subscribes to.

    ``subscribed_topic_names`` is sorted (a set in Kafka); ``rebalance_timeout_ms`` is -1
    when never given.
    """

    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None


@dataclass(frozen=True)
class AssignmentEpochValue:
    """ConsumerGroupTargetAssignmentMetadataValue: the epoch of the target assignment."""

    epoch: int


@dataclass(frozen=True)
class TargetAssignmentValue:
    """ConsumerGroupTargetAssignmentMemberValue: the partitions a member should own."""

    partitions: Assignment = field(default_factory=dict)


@dataclass(frozen=True)
class CurrentAssignmentValue:
    """ConsumerGroupCurrentMemberAssignmentValue: a member's epochs, state and partitions.

    ``state`` is Kafka's MemberState byte (0 stable, 1 unrevoked, 2 unreleased partitions).
    """

    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)


ConsumerValue = (
    GroupEpochValue
    | SubscriptionMetadataValue
    | MemberSubscriptionValue
    | AssignmentEpochValue
    | TargetAssignmentValue
    | CurrentAssignmentValue
)
ConsumerRecord = tuple[ConsumerGroupKey, ConsumerValue | None]
"""A typed record: its key, and its value or None (a tombstone)."""

_VALUE_TYPES: dict[type, int] = {
    GroupEpochValue: GROUP_EPOCH,
    SubscriptionMetadataValue: SUBSCRIPTION_METADATA,
    MemberSubscriptionValue: MEMBER_SUBSCRIPTION,
    AssignmentEpochValue: ASSIGNMENT_EPOCH,
    TargetAssignmentValue: TARGET_ASSIGNMENT,
    CurrentAssignmentValue: CURRENT_ASSIGNMENT,
}


# -- the wire ------------------------------------------------------------------------


class _Out(RecordWriter):
    """Kafka's flexible primitives the classic records do not need."""

    def int8(self, value: int) -> None:
        self.out += value.to_bytes(1, "big", signed=True)

    def topic_id(self, value: uuid.UUID) -> None:
        self.out += value.bytes

    def strings(self, values: tuple[str, ...]) -> None:
        self.array_length(len(values))
        for value in values:
            self.string(value)

    def partitions(self, value: Assignment) -> None:
        """[]TopicPartitions{TopicId, Partitions []int32}, topics and partitions ascending."""
        self.array_length(len(value))
        for topic_id in sorted(value):
            self.topic_id(topic_id)
            parts = sorted(value[topic_id])
            self.array_length(len(parts))
            for partition in parts:
                self.int32(partition)
            self.tagged_fields()


class _In(RecordReader):
    def int8(self) -> int:
        return int.from_bytes(self._take(1), "big", signed=True)

    def topic_id(self) -> uuid.UUID:
        return uuid.UUID(bytes=self._take(16))

    def strings(self) -> tuple[str, ...]:
        return tuple(self.string() for _ in range(self.array_length()))

    def partitions(self) -> dict[uuid.UUID, frozenset[int]]:
        pairs = []
        for _ in range(self.array_length()):
            topic_id = self.topic_id()
            parts = [self.int32() for _ in range(self.array_length())]
            self.tagged_fields()
            pairs.append((topic_id, parts))
        return assignment(pairs)

    def end(self) -> None:
        if self.pos != len(self.data):
            raise OffsetsSchemaError(f"{self.what} has {len(self.data) - self.pos} bytes past its end")


def _encode_value(value: ConsumerValue) -> bytes:
    out = _Out(_VALUE_VERSION, flexible=True)
    if isinstance(value, GroupEpochValue | AssignmentEpochValue):
        out.int32(value.epoch)
    elif isinstance(value, SubscriptionMetadataValue):
        out.array_length(len(value.topics))
        for topic in value.topics:
            out.topic_id(topic.topic_id)
            out.string(topic.name)
            out.int32(topic.partitions)
            out.array_length(0)  # PartitionMetadata (racks): unused since Kafka 4.0
            out.tagged_fields()
    elif isinstance(value, MemberSubscriptionValue):
        out.string(value.instance_id)
        out.string(value.rack_id)
        out.string(value.client_id)
        out.string(value.client_host)
        out.strings(value.subscribed_topic_names)
        out.string(value.subscribed_topic_regex)
        out.int32(value.rebalance_timeout_ms)
        out.string(value.server_assignor)
    elif isinstance(value, TargetAssignmentValue):
        out.partitions(value.partitions)
    else:
        out.int32(value.member_epoch)
        out.int32(value.previous_member_epoch)
        out.int8(value.state)
        out.partitions(value.assigned)
        out.partitions(value.pending_revocation)
    out.tagged_fields()
    return bytes(out.out)


def _decode_value(record_type: int, data: bytes) -> ConsumerValue:
    reader = _In(data, f"consumer group record value of type {record_type}")
    version = reader.int16()
    if version != _VALUE_VERSION:
        raise OffsetsSchemaError(f"{reader.what} has version {version}, not 0")
    reader.flexible = True
    value: ConsumerValue
    if record_type == GROUP_EPOCH:
        value = GroupEpochValue(reader.int32())
    elif record_type == ASSIGNMENT_EPOCH:
        value = AssignmentEpochValue(reader.int32())
    elif record_type == SUBSCRIPTION_METADATA:
        topics = []
        for _ in range(reader.array_length()):
            topic_id = reader.topic_id()
            name = reader.string()
            partitions = reader.int32()
            for _ in range(reader.array_length()):  # PartitionMetadata: read past it
                reader.int32()
                reader.strings()
                reader.tagged_fields()
            reader.tagged_fields()
            topics.append(TopicMetadata(name, topic_id, partitions))
        value = SubscriptionMetadataValue(tuple(sorted(topics)))
    elif record_type == MEMBER_SUBSCRIPTION:
        value = MemberSubscriptionValue(
            instance_id=reader.nullable_string(),
            rack_id=reader.nullable_string(),
            client_id=reader.string(),
            client_host=reader.string(),
            subscribed_topic_names=tuple(sorted(reader.strings())),
            subscribed_topic_regex=reader.nullable_string() or None,
            rebalance_timeout_ms=reader.int32(),
            server_assignor=reader.nullable_string(),
        )
    elif record_type == TARGET_ASSIGNMENT:
        value = TargetAssignmentValue(reader.partitions())
    else:
        value = CurrentAssignmentValue(
            member_epoch=reader.int32(),
            previous_member_epoch=reader.int32(),
            state=reader.int8(),
            assigned=reader.partitions(),
            pending_revocation=reader.partitions(),
        )
    reader.tagged_fields()
    reader.end()
    return value


def encode_consumer_record(record: ConsumerRecord) -> Record:
    """The (key, value) bytes of a typed record; the value must match the key's type. O(its size)."""
    key, value = record
    if value is not None:
        assert _VALUE_TYPES[type(value)] == key.type, f"a {type(value).__name__} under a type-{key.type} key"
    return key.encode(), None if value is None else _encode_value(value)


def consumer_record_type(key: bytes | bytearray | memoryview) -> int | None:
    """The record type of a key if it is a consumer group record (3-8), else None. O(1)."""
    if len(key) < 2:
        return None
    record_type = int.from_bytes(bytes(key[:2]), "big", signed=True)
    return record_type if record_type in CONSUMER_RECORD_TYPES else None


def decode_consumer_record(
    key: bytes | bytearray | memoryview, value: bytes | bytearray | memoryview | None
) -> ConsumerRecord | None:
    """The typed record of a consumer group key (types 3-8), or None for any other key.

    O(size of the record). Bytes that do not decode raise
    :class:`~logstore.coordinator.record_codec.OffsetsSchemaError`.
    """
    record_type = consumer_record_type(key)
    if record_type is None:
        return None
    reader = _In(key, f"consumer group record key of type {record_type}")
    reader.int16()
    group = reader.string()
    member = reader.string() if record_type in _MEMBER_TYPES else None
    reader.end()
    typed_key = ConsumerGroupKey(record_type, group, member)
    return typed_key, None if value is None else _decode_value(record_type, bytes(value))
