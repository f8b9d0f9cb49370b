"""The "consumer" protocol's bytes: JoinGroup's member metadata and SyncGroup's member assignment.

Mirrors Kafka's ``org.apache.kafka.clients.consumer.internals.ConsumerProtocol`` with the schemas
``ConsumerProtocolSubscription.json`` and ``ConsumerProtocolAssignment.json`` (versions 0-3, never
flexible), and the ``StickyAssignor``'s user data (``StickyAssignorUserData.json``, versions 0-1)
that eager sticky members carry inside their subscription.

On the wire each message is an int16 version followed by that version's struct. As Kafka does, a
reader takes a version above 3 for 3 (later versions may only append fields) and ignores bytes past
the fields it knows. Encoding sorts a subscription's topics and owned partitions, as Java's
``serializeSubscription`` does, so our bytes equal a Java consumer's for the same subscription.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

TopicPartition = tuple[str, int]
"""A topic and a partition number."""

VERSIONS = range(4)
"""The versions of both messages this module writes (Kafka's ``validVersions: 0-3``)."""

DEFAULT_GENERATION = -1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_T = TypeVar("_T")


class ConsumerProtocolError(ValueError):
    """Bytes that are not a consumer-protocol subscription or assignment; the message says which field broke."""


@dataclass(frozen=True)
class Subscription:
    """What a member sends in JoinGroup: its topics, its assignor's user data, and (v1+) what it owns.

    Sequences are stored as tuples, so two subscriptions with the same fields compare equal.
    ``generation_id`` is -1 when unknown (always so below v2); ``rack_id`` is None when unset or empty.
    """

    topics: Sequence[str]
    user_data: bytes | None = None
    owned_partitions: Sequence[TopicPartition] = ()
    generation_id: int = DEFAULT_GENERATION
    rack_id: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.topics, str):
            raise TypeError("Subscription.topics is a sequence of topic names, not one string")
        object.__setattr__(self, "topics", tuple(self.topics))
        object.__setattr__(self, "owned_partitions", tuple((t, p) for t, p in self.owned_partitions))


@dataclass(frozen=True)
class Assignment:
    """What the leader gives a member in SyncGroup: its partitions and the assignor's user data."""

    partitions: Sequence[TopicPartition] = ()
    user_data: bytes | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "partitions", tuple((t, p) for t, p in self.partitions))


# -- writing ---------------------------------------------------------------------------------------


class _Writer:
    """Appends Kafka's non-flexible primitives; an out-of-range value raises naming its field."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def getvalue(self) -> bytes:
        return b"".join(self._parts)

    def int16(self, value: int, name: str) -> None:
        self._pack(_I16, value, name)

    def int32(self, value: int, name: str) -> None:
        self._pack(_I32, value, name)

    def _pack(self, fmt: struct.Struct, value: int, name: str) -> None:
        try:
            self._parts.append(fmt.pack(value))
        except struct.error:
            raise ValueError(f"{name} {value!r} does not fit an int{fmt.size * 8}") from None

    def string(self, value: str | None, name: str) -> None:
        if value is None:
            self.int16(-1, name)
            return
        raw = value.encode()
        if len(raw) > 0x7FFF:
            raise ValueError(f"{name} is {len(raw)} bytes long; a Kafka string holds at most 32767")
        self.int16(len(raw), name)
        self._parts.append(raw)

    def bytes_(self, value: bytes | None, name: str) -> None:
        if value is None:
            self.int32(-1, name)
            return
        self.int32(len(value), name)
        self._parts.append(bytes(value))

    def topic_partitions(self, groups: Sequence[tuple[str, Sequence[int]]], name: str) -> None:
        self.int32(len(groups), name)
        for topic, partitions in groups:
            self.string(topic, f"{name} topic")
            self.int32(len(partitions), f"{name} partitions")
            for partition in partitions:
                self.int32(partition, f"{name} partition")


def _grouped(partitions: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    """Partitions grouped by topic, topics in order of first appearance (Java's ``find`` then ``add``)."""
    groups: dict[str, list[int]] = {}
    for topic, partition in partitions:
        groups.setdefault(topic, []).append(partition)
    return list(groups.items())


def _check_version(version: int, what: str) -> None:
    if version not in VERSIONS:
        raise ValueError(f"cannot write {what} version {version}; versions 0-3 exist")


def encode_subscription(sub: Subscription, version: int = 3) -> bytes:
    """The JoinGroup member metadata for ``sub``; fields newer than ``version`` are left out, as Kafka's are."""
    _check_version(version, "a subscription")
    out = _Writer()
    out.int16(version, "version")
    out.int32(len(sub.topics), "topics")
    for topic in sorted(sub.topics):
        out.string(topic, "topic")
    out.bytes_(sub.user_data, "user_data")
    if version >= 1:
        out.topic_partitions(_grouped(sorted(sub.owned_partitions)), "owned_partitions")
    if version >= 2:
        out.int32(sub.generation_id, "generation_id")
    if version >= 3:
        out.string(sub.rack_id, "rack_id")
    return out.getvalue()


def encode_assignment(assignment: Assignment, version: int = 3) -> bytes:
    """The SyncGroup member assignment; partitions are grouped by topic in the order given."""
    _check_version(version, "an assignment")
    out = _Writer()
    out.int16(version, "version")
    out.topic_partitions(_grouped(assignment.partitions), "assigned_partitions")
    out.bytes_(assignment.user_data, "user_data")
    return out.getvalue()


# -- reading ---------------------------------------------------------------------------------------


class _Reader:
    """A cursor over one message; every read checks its bounds and names the field that runs short."""

    def __init__(self, data: bytes | bytearray | memoryview, what: str) -> None:
        self._data = bytes(data)
        self._at = 0
        self._what = what

    def error(self, problem: str) -> ConsumerProtocolError:
        return ConsumerProtocolError(f"{self._what}: {problem}")

    def _take(self, size: int, name: str) -> bytes:
        end = self._at + size
        if end > len(self._data):
            raise self.error(f"{name} runs past the end ({len(self._data)} bytes)")
        chunk = self._data[self._at : end]
        self._at = end
        return chunk

    def int16(self, name: str) -> int:
        value: int = _I16.unpack(self._take(2, name))[0]
        return value

    def int32(self, name: str) -> int:
        value: int = _I32.unpack(self._take(4, name))[0]
        return value

    def string(self, name: str, nullable: bool = False) -> str | None:
        size = self.int16(f"{name} length")
        if size < 0:
            if nullable and size == -1:
                return None
            raise self.error(f"{name} has length {size}")
        raw = self._take(size, name)
        try:
            return raw.decode()
        except UnicodeDecodeError:
            raise self.error(f"{name} is not UTF-8: {raw!r}") from None

    def name(self, name: str) -> str:
        value = self.string(name)
        assert value is not None
        return value

    def bytes_(self, name: str) -> bytes | None:
        size = self.int32(f"{name} length")
        if size < -1:
            raise self.error(f"{name} has length {size}")
        return None if size == -1 else self._take(size, name)

    def array(self, name: str, item: Callable[[], _T]) -> list[_T]:
        count = self.int32(f"{name} count")
        if count < 0:
            raise self.error(f"{name} has count {count}")
        return [item() for _ in range(count)]

    def topic_partitions(self, name: str) -> list[TopicPartition]:
        def group() -> list[TopicPartition]:
            topic = self.name(f"{name} topic")
            return [
                (topic, p) for p in self.array(f"{name} partitions", lambda: self.int32(f"{name} partition"))
            ]

        return [tp for tps in self.array(name, group) for tp in tps]

    def version(self) -> int:
        version = self.int16("version")
        if version < 0:
            raise self.error(f"version {version} is negative")
        return version


def decode_subscription(data: bytes | bytearray | memoryview) -> Subscription:
    """A member's JoinGroup metadata: any version from 0, reading a newer one as version 3."""
    r = _Reader(data, "consumer protocol subscription")
    version = r.version()
    topics = r.array("topics", lambda: r.name("topic"))
    user_data = r.bytes_("user_data")
    owned = r.topic_partitions("owned_partitions") if version >= 1 else []
    generation = r.int32("generation_id") if version >= 2 else DEFAULT_GENERATION
    rack = r.string("rack_id", nullable=True) if version >= 3 else None
    return Subscription(topics, user_data, owned, generation, rack or None)


def decode_assignment(data: bytes | bytearray | memoryview) -> Assignment:
    """A member's SyncGroup assignment; no bytes at all is an empty assignment (as Kafka clients read it)."""
    if not data:
        return Assignment()
    r = _Reader(data, "consumer protocol assignment")
    r.version()
    partitions = r.topic_partitions("assigned_partitions")
    return Assignment(partitions, r.bytes_("user_data"))


# -- the StickyAssignor's user data ----------------------------------------------------------------


def encode_sticky_user_data(partitions: Iterable[TopicPartition], generation: int) -> bytes:
    """``StickyAssignorUserData`` v1 (no version prefix): the member's last assignment and its generation."""
    out = _Writer()
    out.topic_partitions(_grouped(sorted(partitions)), "previous_assignment")
    out.int32(generation, "generation")
    return out.getvalue()


def decode_sticky_user_data(data: bytes | None) -> tuple[list[TopicPartition], int]:
    """The previous assignment and generation in a sticky member's user data, as Java's StickyAssignor reads it.

    v1 is tried, then v0 (no generation: -1); bytes that are neither give no partitions and generation -1.
    """
    if not data:
        return [], DEFAULT_GENERATION
    for with_generation in (True, False):
        r = _Reader(data, "sticky assignor user data")
        try:
            partitions = r.topic_partitions("previous_assignment")
            return partitions, r.int32("generation") if with_generation else DEFAULT_GENERATION
        except ConsumerProtocolError:
            continue
    return [], DEFAULT_GENERATION
