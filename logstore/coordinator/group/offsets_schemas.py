"""The ``__consumer_offsets`` records, in Kafka's own byte layouts.

Every key and value starts with a big-endian int16 *version*; the fields
follow as Kafka's generated message classes write them
(:mod:`~logstore.coordinator.record_codec`):

- versions that are not flexible: int16-length strings (-1 = null),
  int32-length bytes, int32-count arrays, no tagged fields;
- flexible versions (4+ for both values, per the JSON schemas): unsigned
  varint length + 1 for strings, bytes and arrays (0 = null), and an empty
  tagged-field section (one zero byte) after every struct.

Keys (the version doubles as the record type):

==========  =====================================================
version     layout
==========  =====================================================
0, 1        OffsetCommitKey: group, topic, partition (int32)
2           GroupMetadataKey: group
==========  =====================================================

Kafka writes OffsetCommitKey with version 1 and GroupMetadataKey with 2;
3+ are the records of the newer (KIP-848) coordinator: :func:`decode_key`
answers :class:`UnknownKeyError` for them, and
:mod:`~logstore.coordinator.group.consumer_records` reads those of consumer groups
(3-8).

Values:

- OffsetCommitValue v0 and v2: offset, metadata, commit_timestamp; v1 adds
  expire_timestamp; v3 (what Kafka writes) puts leader_epoch after offset;
  v4 is v3 made flexible.
- GroupMetadataValue v0: protocol_type, generation, protocol?, leader?,
  members[member_id, client_id, client_host, session_timeout, subscription,
  assignment]; v1 adds each member's rebalance_timeout (before
  session_timeout); v2 adds current_state_timestamp (before members); v3
  (what Kafka writes) adds group_instance_id? (after member_id); v4 is v3
  made flexible.

A value of ``None`` is a tombstone: it deletes the key (compaction keeps the
latest record per key).

>>> key = OffsetCommitKey("g", "t", 0).encode()
>>> key.hex()  # version 1, "g", "t", partition 0
'000100016700017400000000'
>>> decode_key(key)
OffsetCommitKey(group='g', topic='t', partition=0)
>>> OffsetCommitValue.decode(OffsetCommitValue(5, -1, "", 1000).encode())
OffsetCommitValue(offset=5, leader_epoch=-1, metadata='', commit_timestamp=1000, expire_timestamp=None)
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from typing import NamedTuple

from logstore.coordinator.record_codec import OffsetsSchemaError, Record, RecordReader, RecordWriter

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3
FLEXIBLE_VALUE_VERSION = 4

_VALUE_V3_HEAD = struct.Struct(">hqih")  # version, offset, leader epoch, metadata length
_COMMIT_TIMESTAMP = struct.Struct(">q")


class UnknownKeyError(OffsetsSchemaError):
    """A key whose version (record type) this package does not read."""


def _version_in(version: int, low: int, high: int, what: str) -> int:
    if not low <= version <= high:
        raise OffsetsSchemaError(f"{what} version {version} is not in {low}..{high}")
    return version


@dataclass(frozen=True)
class OffsetCommitKey:
    """The key of a committed offset: the group and the partition it is for."""

    group: str
    topic: str
    partition: int

    def encode(self, version: int = OFFSET_COMMIT_KEY_VERSION) -> bytes:
        """Version 1 as Kafka writes it (0, the legacy key, has the same layout). O(size of the key)."""
        writer = RecordWriter(_version_in(version, 0, 1, "OffsetCommitKey"), flexible=False)
        writer.string(self.group)
        writer.string(self.topic)
        writer.int32(self.partition)
        return bytes(writer.out)


@dataclass(frozen=True)
class GroupMetadataKey:
    """The key of a group's metadata record."""

    group: str

    def encode(self) -> bytes:
        """Version 2, as Kafka writes it. O(size of the key)."""
        writer = RecordWriter(GROUP_METADATA_KEY_VERSION, flexible=False)
        writer.string(self.group)
        return bytes(writer.out)


def decode_key(data: bytes | bytearray | memoryview) -> OffsetCommitKey | GroupMetadataKey:
    """The key in ``data``; :class:`UnknownKeyError` for a record type other than 0-2. O(len(data))."""
    reader = RecordReader(data, "key")
    version = reader.int16()
    if version in (0, 1):
        return OffsetCommitKey(reader.string(), reader.string(), reader.int32())
    if version == GROUP_METADATA_KEY_VERSION:
        return GroupMetadataKey(reader.string())
    raise UnknownKeyError(f"key version {version} is not an offset commit or group metadata key")


class OffsetCommitValue(NamedTuple):
    """A committed offset (Kafka's ``OffsetAndMetadata``); a tuple, made on every commit.

    ``leader_epoch`` is -1 when unknown; ``commit_timestamp`` is the
    coordinator's clock at commit time; ``expire_timestamp`` is only carried
    by version 1 (offset commits with an explicit retention) and is ``None``
    otherwise.
    """

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int | None = None

    def encode(self, version: int = OFFSET_COMMIT_VALUE_VERSION) -> bytes:
        """The value at ``version`` (0-4); fields the version lacks are dropped. O(size of the value)."""
        if version == 3:  # what the coordinator writes on every commit: one pack
            metadata = self.metadata.encode("utf-8")
            head = _VALUE_V3_HEAD.pack(3, self.offset, self.leader_epoch, len(metadata))
            return head + metadata + _COMMIT_TIMESTAMP.pack(self.commit_timestamp)
        _version_in(version, 0, FLEXIBLE_VALUE_VERSION, "OffsetCommitValue")
        writer = RecordWriter(version, flexible=version >= FLEXIBLE_VALUE_VERSION)
        writer.int64(self.offset)
        if version >= 3:
            writer.int32(self.leader_epoch)
        writer.string(self.metadata)
        writer.int64(self.commit_timestamp)
        if version == 1:
            writer.int64(-1 if self.expire_timestamp is None else self.expire_timestamp)
        writer.tagged_fields()
        return bytes(writer.out)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> OffsetCommitValue:
        """A value of any version 0-4 (an expire timestamp of -1 reads as ``None``). O(len(data))."""
        reader = RecordReader(data, "OffsetCommitValue")
        version = _version_in(reader.int16(), 0, FLEXIBLE_VALUE_VERSION, "OffsetCommitValue")
        reader.flexible = version >= FLEXIBLE_VALUE_VERSION
        offset = reader.int64()
        leader_epoch = reader.int32() if version >= 3 else -1
        metadata = reader.string()
        commit_timestamp = reader.int64()
        expire = reader.int64() if version == 1 else -1
        reader.tagged_fields()
        return cls(offset, leader_epoch, metadata, commit_timestamp, None if expire == -1 else expire)


@dataclass(frozen=True)
class MemberMetadataValue:
    """One member in a group metadata record.

    ``subscription`` is the member's metadata for the group's selected
    protocol; ``assignment`` is what the leader assigned it.
    """

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes

    def _encode(self, writer: RecordWriter, version: int) -> None:
        writer.string(self.member_id)
        if version >= 3:
            writer.string(self.group_instance_id)
        writer.string(self.client_id)
        writer.string(self.client_host)
        if version >= 1:
            writer.int32(self.rebalance_timeout)
        writer.int32(self.session_timeout)
        writer.bytes_(self.subscription)
        writer.bytes_(self.assignment)
        writer.tagged_fields()

    @classmethod
    def _decode(cls, reader: RecordReader, version: int) -> MemberMetadataValue:
        member_id = reader.string()
        instance_id = reader.nullable_string() if version >= 3 else None
        client_id = reader.string()
        client_host = reader.string()
        rebalance_timeout = reader.int32() if version >= 1 else None
        session_timeout = reader.int32()
        subscription = reader.bytes_()
        assignment = reader.bytes_()
        reader.tagged_fields()
        # Version 0 had one timeout; Kafka reads it as both.
        rebalance = session_timeout if rebalance_timeout is None else rebalance_timeout
        return cls(
            member_id,
            instance_id,
            client_id,
            client_host,
            rebalance,
            session_timeout,
            subscription,
            assignment,
        )


@dataclass(frozen=True)
class GroupMetadataValue:
    """A group's membership after a rebalance (or its emptiness).

    ``protocol`` and ``leader`` are ``None`` for an Empty group;
    ``current_state_timestamp`` (-1 when unknown) is when the group entered
    its state, which dates the expiry of an Empty group's offsets.
    """

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberMetadataValue, ...] = ()

    def encode(self, version: int = GROUP_METADATA_VALUE_VERSION) -> bytes:
        """The value at ``version`` (0-4); fields the version lacks are dropped. O(size of the value).

        That is O(members), each with its subscription and assignment.
        """
        _version_in(version, 0, FLEXIBLE_VALUE_VERSION, "GroupMetadataValue")
        writer = RecordWriter(version, flexible=version >= FLEXIBLE_VALUE_VERSION)
        writer.string(self.protocol_type)
        writer.int32(self.generation)
        writer.string(self.protocol)
        writer.string(self.leader)
        if version >= 2:
            writer.int64(self.current_state_timestamp)
        writer.array_length(len(self.members))
        for member in self.members:
            member._encode(writer, version)
        writer.tagged_fields()
        return bytes(writer.out)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> GroupMetadataValue:
        """A value of any version 0-4. O(len(data))."""
        reader = RecordReader(data, "GroupMetadataValue")
        version = _version_in(reader.int16(), 0, FLEXIBLE_VALUE_VERSION, "GroupMetadataValue")
        reader.flexible = version >= FLEXIBLE_VALUE_VERSION
        protocol_type = reader.string()
        generation = reader.int32()
        protocol = reader.nullable_string()
        leader = reader.nullable_string()
        timestamp = reader.int64() if version >= 2 else -1
        members = tuple(MemberMetadataValue._decode(reader, version) for _ in range(reader.array_length()))
        reader.tagged_fields()
        return cls(protocol_type, generation, protocol, leader, timestamp, members)


def offset_commit_record(group: str, topic: str, partition: int, value: OffsetCommitValue | None) -> Record:
    """The record of a commit (``value``) or of its deletion (``None``). O(size of the record)."""
    key = _offset_commit_key(group, topic, partition)
    return key, None if value is None else value.encode()


@functools.lru_cache(maxsize=65_536)
def _offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """A group commits the same partitions again and again: their keys are cached."""
    return OffsetCommitKey(group, topic, partition).encode()


def group_metadata_record(group: str, value: GroupMetadataValue | None) -> Record:
    """The record of a group's metadata (``value``) or of the group's deletion (``None``).

    O(size of the record): O(members).
    """
    return GroupMetadataKey(group).encode(), None if value is None else value.encode()
