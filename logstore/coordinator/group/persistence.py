"""Groups on ``__consumer_offsets``: what is written for them, and how they are read back.

Kafka's ``GroupMetadataManager``: :class:`GroupMetadataManager` holds the
coordinator's groups (the cache) and appends their records through a
:data:`Writer`; the functions here make those records and replay them.

- A completed rebalance (or a group becoming Empty) writes a group metadata
  record (:func:`group_metadata_value`): every member, its subscription for
  the selected protocol and its assignment.
- A commit writes one offset commit record per partition
  (:func:`offset_records`).
- A deleted or expired offset writes a tombstone of its key; a group that
  dies writes a tombstone of its metadata too, if it ever had a generation
  (:func:`tombstones`).
- :meth:`GroupMetadataManager.load` replays records in log order (the latest
  per key wins, tombstones delete) and rebuilds each group
  (:func:`group_from_value`).

A group's records all go to one partition of the topic
(:func:`~logstore.coordinator.internal_topics.partition_for`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping

from kio.schema.errors import ErrorCode

from logstore.coordinator.clock import Clock
from logstore.coordinator.group.classic_group import (
    GroupMetadata,
    GroupState,
    MemberMetadata,
    TopicPartition,
)
from logstore.coordinator.group.coordinator_config import CoordinatorConfig
from logstore.coordinator.group.offsets_schemas import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownKeyError,
    decode_key,
    group_metadata_record,
    offset_commit_record,
)
from logstore.coordinator.internal_topics import OFFSETS_TOPIC, partition_for
from logstore.coordinator.record_codec import OffsetsSchemaError, Record

log = logging.getLogger(__name__)

Writer = Callable[[str, list[Record]], None]
"""Appends records to ``__consumer_offsets``: ``writer(group_id, records)``, all of one group.

It returns once they are durable, or raises: :class:`WriteError` to choose
the error the request gets, anything else for COORDINATOR_NOT_AVAILABLE.
"""

Replayed = dict[str, tuple[GroupMetadataValue | None, dict[TopicPartition, OffsetCommitValue]]]
"""What replaying records leaves per group: its metadata (None: none, or a tombstone), its offsets."""
Unreadable = Callable[[bytes, OffsetsSchemaError], None]
"""Told of a record that does not decode (its key bytes, why); the record is skipped."""


class WriteError(Exception):
    """Raised by a writer to fail a write with a chosen Kafka error."""

    def __init__(self, error: ErrorCode, message: str = "") -> None:
        super().__init__(message or error.name)
        self.error = error


# -- records ------------------------------------------------------------------------


def group_metadata_value(group: GroupMetadata, assignment: Mapping[str, bytes]) -> GroupMetadataValue:
    """The group metadata record Kafka writes, with ``assignment`` per member. O(members)."""
    protocol = group.protocol_name
    members = tuple(
        MemberMetadataValue(
            member_id=member.member_id,
            group_instance_id=member.group_instance_id,
            client_id=member.client_id,
            client_host=member.client_host,
            rebalance_timeout=member.rebalance_timeout_ms,
            session_timeout=member.session_timeout_ms,
            subscription=member.metadata(protocol) if protocol is not None else b"",
            assignment=assignment[member.member_id],
        )
        for member in group.members.values()
    )
    return GroupMetadataValue(
        protocol_type=group.protocol_type or "",
        generation=group.generation_id,
        protocol=protocol,
        leader=group.leader_id,
        current_state_timestamp=-1
        if group.current_state_timestamp is None
        else group.current_state_timestamp,
        members=members,
    )


def group_from_value(group_id: str, value: GroupMetadataValue, now_ms: Callable[[], int]) -> GroupMetadata:
    """A group as a metadata record left it: Stable with members, Empty without. O(members).

    The record's leader leads if it is one of the record's members; else the
    first member does.
    """
    state = GroupState.STABLE if value.members else GroupState.EMPTY
    group = GroupMetadata(
        group_id,
        now_ms,
        state,
        generation_id=value.generation,
        protocol_type=value.protocol_type or None,
        protocol_name=value.protocol,
        current_state_timestamp=value.current_state_timestamp,
    )
    if value.current_state_timestamp < 0:
        group.current_state_timestamp = None  # an old record (v0/v1) did not say
    for record in value.members:
        protocols = [(value.protocol, record.subscription)] if value.protocol is not None else []
        member = MemberMetadata(
            record.member_id,
            record.group_instance_id,
            record.client_id,
            record.client_host,
            record.rebalance_timeout,
            record.session_timeout,
            value.protocol_type,
            protocols,
            record.assignment,
        )
        group.add(member)  # the first one added leads
    if value.leader is not None and value.leader in group.members:
        group.leader_id = value.leader
    group.subscribed_topics = group.compute_subscribed_topics()
    return group


def offset_records(group_id: str, values: Mapping[TopicPartition, OffsetCommitValue]) -> list[Record]:
    """The records of a commit, one per partition. O(partitions)."""
    return [offset_commit_record(group_id, t, p, value) for (t, p), value in values.items()]


def tombstones(group_id: str, partitions: Iterable[TopicPartition], *, group_too: bool) -> list[Record]:
    """Tombstones of the offsets of ``partitions``, then of the group's metadata if ``group_too``.

    O(partitions).
    """
    records = [offset_commit_record(group_id, t, p, None) for (t, p) in partitions]
    if group_too:
        records.append(group_metadata_record(group_id, None))
    return records


def replay(records: Iterable[Record], on_unreadable: Unreadable | None = None) -> Replayed:
    """Each group's latest metadata and offsets after ``records``, in log order. O(records).

    Tombstones delete; keys of other record types are skipped. Groups with a
    metadata record (or its tombstone) come first, in the order they first
    appear, then offsets-only groups. Every record is decoded before this
    returns: one that does not decode raises
    :class:`~logstore.coordinator.record_codec.OffsetsSchemaError`, or, when
    ``on_unreadable`` is given, is handed to it (key bytes, the error) and skipped.

    >>> from logstore.coordinator.group.offsets_schemas import offset_commit_record as commit
    >>> replay([commit("g", "t", 0, OffsetCommitValue(5)), commit("g", "t", 1, OffsetCommitValue(7)),
    ...         commit("g", "t", 0, None)])
    {'g': (None, {('t', 1): OffsetCommitValue(offset=7, leader_epoch=-1, metadata='', commit_timestamp=-1, expire_timestamp=None)})}
    """
    offsets: dict[str, dict[TopicPartition, OffsetCommitValue]] = {}
    metadata: dict[str, GroupMetadataValue | None] = {}
    for key_bytes, value_bytes in records:
        try:
            key = decode_key(key_bytes)
            if isinstance(key, OffsetCommitKey):
                group_offsets = offsets.setdefault(key.group, {})
                partition = (key.topic, key.partition)
                if value_bytes is None:
                    group_offsets.pop(partition, None)
                else:
                    group_offsets[partition] = OffsetCommitValue.decode(value_bytes)
            elif isinstance(key, GroupMetadataKey):
                metadata[key.group] = None if value_bytes is None else GroupMetadataValue.decode(value_bytes)
        except UnknownKeyError:
            continue
        except OffsetsSchemaError as e:
            if on_unreadable is None:
                raise
            on_unreadable(key_bytes, e)
    return {
        group_id: (metadata.get(group_id), offsets.get(group_id, {}))
        for group_id in dict.fromkeys([*metadata, *offsets])
    }


# -- the groups ---------------------------------------------------------------------


class GroupMetadataManager:
    """The coordinator's groups, by id, and their writes to ``__consumer_offsets``.

    Invariants: a group is registered under its own id; a group is
    registered only while it is not Dead (checked as it is added; a group
    that dies is unregistered in the same call). With no writer every write
    succeeds and nothing is kept.
    """

    def __init__(self, config: CoordinatorConfig, clock: Clock, writer: Writer | None) -> None:
        self._config = config
        self._clock = clock
        self._writer = writer
        self._groups: dict[str, GroupMetadata] = {}

    # -- the cache ------------------------------------------------------------

    def get(self, group_id: str) -> GroupMetadata | None:
        """The group of that id, if registered. O(1)."""
        return self._groups.get(group_id)

    def add(self, group: GroupMetadata) -> GroupMetadata:
        """Register ``group`` (replacing any group of its id); returns it. O(1)."""
        assert not group.is_in(GroupState.DEAD), f"a Dead group {group.group_id} cannot be registered"
        self._groups[group.group_id] = group
        return group

    def create(self, group_id: str) -> GroupMetadata:
        """A new Empty group, registered under ``group_id``. O(1)."""
        return self.add(GroupMetadata(group_id, self._clock.now_ms))

    def discard(self, group: GroupMetadata) -> None:
        """Unregister ``group`` if it is the one registered under its id. O(1)."""
        if self._groups.get(group.group_id) is group:
            del self._groups[group.group_id]

    def is_registered(self, group: GroupMetadata) -> bool:
        """Whether ``group`` is the one registered under its id. O(1)."""
        return self._groups.get(group.group_id) is group

    def is_live(self, group: GroupMetadata) -> bool:
        """Registered and not Dead: timers of a group that is neither do nothing. O(1)."""
        return self.is_registered(group) and not group.is_in(GroupState.DEAD)

    def __iter__(self) -> Iterator[GroupMetadata]:
        """The registered groups (copy before changing the registry while iterating). O(1)."""
        return iter(self._groups.values())

    def clear(self) -> None:
        """Forget every group (their timers are the caller's). O(groups)."""
        self._groups.clear()

    def partition_for(self, group_id: str) -> int:
        """The group's ``__consumer_offsets`` partition under this config. O(1) when cached."""
        return partition_for(group_id, self._config.offsets_topic_num_partitions)

    # -- writes ---------------------------------------------------------------

    def write(self, group_id: str, records: list[Record]) -> ErrorCode:
        """Append one group's records; the error to answer (NONE once durable). O(records)."""
        if self._writer is None:
            return ErrorCode.none
        try:
            self._writer(group_id, records)
        except WriteError as exc:
            return exc.error
        except Exception:
            log.exception("appending to %s failed", OFFSETS_TOPIC)
            return ErrorCode.coordinator_not_available
        return ErrorCode.none

    def store_group(self, group: GroupMetadata, assignment: Mapping[str, bytes]) -> ErrorCode:
        """Write the group's metadata record with ``assignment`` per member. O(members)."""
        record = group_metadata_record(group.group_id, group_metadata_value(group, assignment))
        return self.write(group.group_id, [record])

    # -- loading --------------------------------------------------------------

    def load(
        self,
        records: Iterable[Record],
        *,
        on_loaded: Callable[[GroupMetadata], None],
        on_unloaded: Callable[[GroupMetadata], None],
        on_unreadable: Unreadable | None = None,
    ) -> None:
        """Rebuild groups and offsets from ``__consumer_offsets`` records in log order.

        O(records + members of the loaded groups). See :func:`replay`. Each
        loaded group replaces (``on_unloaded``, which must unregister it) a
        registered group of its id, is registered, then handed to
        ``on_loaded``. A group whose metadata was deleted and that has no
        offsets is only unloaded. Groups with members come back Stable;
        groups without, Empty; offsets with no metadata record belong to an
        Empty group with no protocol type.
        """
        for group_id, (value, offsets) in replay(records, on_unreadable).items():
            group: GroupMetadata | None = None
            if value is not None:
                group = group_from_value(group_id, value, self._clock.now_ms)
            elif offsets:
                group = GroupMetadata(group_id, self._clock.now_ms)
            if group is not None:
                group.offsets.update(offsets)
            old = self._groups.get(group_id)
            if old is not None:
                on_unloaded(old)
                assert not self.is_registered(old), f"unloading {group_id} did not unregister it"
            if group is not None:
                self.add(group)
                on_loaded(group)
