"""The consumer-protocol groups (KIP-848) of one coordinator, as the group coordinator sees them.

:class:`ConsumerGroupManager` is the consumer-group half of Kafka's
``GroupMetadataManager`` and what
:class:`~logstore.coordinator.group.group_coordinator.GroupCoordinator` calls
for a consumer group:

- its heartbeats go to
  :class:`~logstore.coordinator.group.consumer_membership.ConsumerMembershipManager`
  (members, epochs, the target assignment, sessions);
- its committed offsets, deletion, expiry and ConsumerGroupDescribe are here;
- the groups and their records are
  :class:`~logstore.coordinator.group.consumer_group_store.ConsumerGroupStore`'s.

A group id names a classic group or a consumer group, never both (see
:mod:`~logstore.coordinator.group.consumer_membership` for the conversions).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from logstore.coordinator.clock import Clock, Repeating
from logstore.coordinator.group.classic_group import TopicPartition
from logstore.coordinator.group.classic_membership import MembershipManager
from logstore.coordinator.group.consumer_group import ConsumerGroup, ConsumerGroupError, ConsumerGroupState
from logstore.coordinator.group.consumer_group_store import ConsumerGroupStore
from logstore.coordinator.group.consumer_membership import (
    ConsumerMembershipManager,
    HeartbeatRequest,
    HeartbeatResult,
    TopicCatalog,
)
from logstore.coordinator.group.consumer_records import EMPTY_ASSIGNMENT, Assignment, ConsumerRecord
from logstore.coordinator.group.coordinator_config import CoordinatorConfig
from logstore.coordinator.group.group_configs import GroupConfigs
from logstore.coordinator.group.offsets import (
    DeleteOffsetsResult,
    FetchedOffset,
    FetchOffsetsResult,
    OffsetCommit,
    PreparedCommit,
    commit_values,
)
from logstore.coordinator.group.offsets_schemas import OffsetCommitValue
from logstore.coordinator.group.persistence import GroupMetadataManager, offset_records, tombstones
from logstore.coordinator.record_codec import Record

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DescribedPartitions:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class DescribedMember:
    """A member as ConsumerGroupDescribe shows it."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[DescribedPartitions, ...]
    target_assignment: tuple[DescribedPartitions, ...]


@dataclass(frozen=True)
class DescribedConsumerGroup:
    """A group as ConsumerGroupDescribe shows it (an error leaves the rest empty)."""

    group_id: str
    error: ErrorCode
    message: str | None = None
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedMember, ...] = ()


class ConsumerGroupCommit(PreparedCommit):
    """An OffsetCommit of a consumer group: :class:`PreparedCommit`, applied to the group's offsets."""

    def __init__(
        self,
        errors: dict[TopicPartition, ErrorCode],
        records: list[Record] | None = None,
        group: ConsumerGroup | None = None,
        values: dict[TopicPartition, OffsetCommitValue] | None = None,
    ) -> None:
        super().__init__(errors, records, None, values)
        self._consumer_group = group

    def _offsets(self, applying: bool) -> dict[TopicPartition, OffsetCommitValue] | None:
        """The consumer group's offsets (None if there is none, or it was deleted since, when applying)."""
        group = self._consumer_group
        if group is None or (applying and group.dead):
            return None
        return group.offsets


class ConsumerGroupManager:
    """Consumer-protocol groups on one coordinator: heartbeats (delegated), offsets, describing, load.

    All calls run on the thread of the clock's event loop. Invariant: a group
    id is registered here or with the classic :class:`GroupMetadataManager`,
    not both.
    """

    def __init__(
        self,
        config: CoordinatorConfig,
        clock: Clock,
        classic: GroupMetadataManager,
        membership: MembershipManager,
        catalog: TopicCatalog | None = None,
        group_configs: GroupConfigs | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self._classic = classic
        self._store = ConsumerGroupStore(classic)
        self._members = ConsumerMembershipManager(
            config, clock, self._store, classic, membership, catalog, group_configs
        )
        self._expiry = Repeating(clock, config.offsets_retention_check_interval_ms, self._expire_and_log)

    # -- the registry -------------------------------------------------------------------

    def get(self, group_id: str) -> ConsumerGroup | None:
        """The consumer group of that id, if any. O(1)."""
        return self._store.get(group_id)

    def __iter__(self) -> Iterator[ConsumerGroup]:
        """The groups (copy before changing the registry while iterating). O(1)."""
        return iter(self._store)

    def __contains__(self, group_id: object) -> bool:
        return group_id in self._store

    def in_states(self, states: Collection[str] | None = None) -> list[ConsumerGroup]:
        """The groups in one of ``states`` (Kafka's names, any case), or all. O(groups)."""
        return self._store.in_states(states)

    # -- ConsumerGroupHeartbeat ---------------------------------------------------------

    def heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        """Serve a ConsumerGroupHeartbeat: see :meth:`ConsumerMembershipManager.heartbeat`."""
        return self._members.heartbeat(request)

    # -- loading ------------------------------------------------------------------------

    def load(self, records: Iterable[ConsumerRecord]) -> list[ConsumerGroup]:
        """Replay records of a partition in log order; start the loaded members' timers.

        Returns the groups the records touched that are live. O(records + their members).
        """
        loaded = self._store.load(records)
        for group in loaded:
            self._members.start_member_timers(group)
        return loaded

    def unload(self, group: ConsumerGroup) -> None:
        """Forget a group (another coordinator serves it now) and cancel its timers. O(its members)."""
        self._store.discard(group)
        self._members.cancel_member_timers(group)

    def delete_for_classic_join(self, group: ConsumerGroup) -> ErrorCode:
        """An Empty consumer group gives way to a classic group: see
        :meth:`ConsumerGroupStore.delete_for_classic_join`."""
        return self._store.delete_for_classic_join(group)

    # -- offsets ------------------------------------------------------------------------

    def prepare_commit(
        self,
        group: ConsumerGroup,
        member_id: str,
        member_epoch: int,
        offsets: Mapping[TopicPartition, OffsetCommit],
        api_version: int,
    ) -> PreparedCommit:
        """OffsetCommit to a consumer group (Kafka's ``ConsumerGroup.validateOffsetCommit``). O(partitions).

        An epoch below 0 commits for a group without members (admin tools);
        otherwise the member must exist (UNKNOWN_MEMBER_ID), commit with
        OffsetCommit v9+ (UNSUPPORTED_VERSION) and at its current epoch
        (STALE_MEMBER_EPOCH).
        """
        try:
            if not (member_epoch < 0 and not group.members):
                member = group.member(member_id)
                if api_version < 9:
                    raise ConsumerGroupError(
                        ErrorCode.unsupported_version,
                        "OffsetCommit version 9 or above must be used by members using the consumer group protocol",
                    )
                if member_epoch != member.member_epoch:
                    raise ConsumerGroupError(
                        ErrorCode.stale_member_epoch,
                        f"The received member epoch {member_epoch} does not match the expected member epoch "
                        f"{member.member_epoch}.",
                    )
        except ConsumerGroupError as e:
            return PreparedCommit(dict.fromkeys(offsets, e.error))
        values, errors = commit_values(offsets, self.clock.now_ms(), self.config.offset_metadata_max_bytes)
        return ConsumerGroupCommit(errors, offset_records(group.group_id, values), group, values)

    def fetch_offsets(
        self,
        group: ConsumerGroup,
        partitions: Iterable[TopicPartition] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> FetchOffsetsResult:
        """OffsetFetch of a consumer group; from v9 a member's fetch names it and its epoch
        (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH). O(partitions), or O(offsets) for all."""
        if not (member_id is None and member_epoch < 0):
            member = group.members.get(member_id or "")
            if member is None:
                return FetchOffsetsResult(ErrorCode.unknown_member_id)
            if member_epoch != member.member_epoch:
                return FetchOffsetsResult(ErrorCode.stale_member_epoch)
        if partitions is None:
            return FetchOffsetsResult(
                ErrorCode.none, {tp: FetchedOffset.of(value) for tp, value in group.offsets.items()}
            )
        return FetchOffsetsResult(
            ErrorCode.none, {tp: FetchedOffset.of(group.offsets.get(tp)) for tp in partitions}
        )

    def delete_offsets(
        self, group: ConsumerGroup, partitions: Iterable[TopicPartition]
    ) -> DeleteOffsetsResult:
        """OffsetDelete: partitions of subscribed topics answer GROUP_SUBSCRIBED_TO_TOPIC; the others'
        offsets are deleted (tombstones). O(partitions + topics)."""
        subscribed = self._members.group_topics(group)
        errors: dict[TopicPartition, ErrorCode] = {}
        removed = []
        for tp in partitions:
            if tp[0] in subscribed:
                errors[tp] = ErrorCode.group_subscribed_to_topic
            else:
                errors[tp] = ErrorCode.none
                if tp in group.offsets:
                    removed.append(tp)
        if removed:
            error = self._classic.write(group.group_id, tombstones(group.group_id, removed, group_too=False))
            if error != ErrorCode.none:
                return DeleteOffsetsResult(error)
            for tp in removed:
                group.offsets.pop(tp, None)
        return DeleteOffsetsResult(ErrorCode.none, errors)

    def delete_group(self, group: ConsumerGroup) -> ErrorCode:
        """DeleteGroups: an Empty group goes with its offsets; NON_EMPTY_GROUP otherwise. O(offsets + members)."""
        if group.state is not ConsumerGroupState.EMPTY:
            return ErrorCode.non_empty_group
        offsets = tombstones(group.group_id, sorted(group.offsets), group_too=False)
        error = self._store.write(group.group_id, self._store.group_tombstones(group), offsets)
        if error == ErrorCode.none:
            group.offsets.clear()
        return error

    def expire_offsets(self, now_ms: int | None = None) -> int:
        """Expire the offsets of topics a group no longer subscribes to, ``offsets.retention.minutes``
        after their commit (or at their explicit expiry); an Empty group left without offsets is
        deleted. Returns how many offsets went. O(groups + offsets + topics)."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        retention = self.config.offsets_retention_ms
        removed = 0
        for group in list(self._store):
            subscribed = self._members.group_topics(group)
            expired = sorted(
                tp for tp, value in group.offsets.items()
                if tp[0] not in subscribed and (
                    now >= value.expire_timestamp if value.expire_timestamp is not None
                    else now - value.commit_timestamp >= retention
                )
            )  # fmt: skip
            records: list[ConsumerRecord] = []
            if group.state is ConsumerGroupState.EMPTY and len(expired) == len(group.offsets):
                records = self._store.group_tombstones(group)
            if not expired and not records:
                continue
            error = self._store.write(group.group_id, records, tombstones(group.group_id, expired, group_too=False))
            if error != ErrorCode.none:
                log.warning("could not expire the offsets of group %s: %s", group.group_id, error.name)
                continue
            for tp in expired:
                group.offsets.pop(tp, None)
            removed += len(expired)
        return removed

    def start(self) -> None:
        """Expire offsets every ``offsets.retention.check.interval.ms`` from now on. O(1)."""
        self._expiry.start()

    def _expire_and_log(self) -> None:
        removed = self.expire_offsets()
        if removed:
            log.info("expired %d offsets of consumer groups", removed)

    def close(self) -> None:
        """Stop every timer and forget every group. O(groups + members)."""
        self._expiry.stop()
        self._members.close()
        self._store.clear()

    # -- describing -----------------------------------------------------------------------

    def describe(self, group_id: str) -> DescribedConsumerGroup:
        """ConsumerGroupDescribe of one group; GROUP_ID_NOT_FOUND if it is not a consumer group.

        O(members × their partitions).
        """
        try:
            group = self._store.consumer_group(group_id)
        except ConsumerGroupError as e:
            return DescribedConsumerGroup(group_id, e.error, e.message)
        members = tuple(
            DescribedMember(
                member.member_id,
                member.instance_id,
                member.rack_id,
                member.member_epoch,
                member.client_id,
                member.client_host,
                member.subscribed_topic_names,
                member.subscribed_topic_regex,
                self._described(member.assigned),
                self._described(group.target_assignment.get(member.member_id, EMPTY_ASSIGNMENT)),
            )
            for member in group.members.values()
        )
        return DescribedConsumerGroup(
            group_id,
            ErrorCode.none,
            None,
            str(group.state),
            group.group_epoch,
            group.assignment_epoch,
            group.preferred_assignor() or self._members.default_assignor,
            members,
        )

    def _described(self, partitions: Assignment) -> tuple[DescribedPartitions, ...]:
        """Kafka's ``topicPartitionsFromMap``: topics no longer known are left out. O(partitions)."""
        result = []
        for topic_id in sorted(partitions):
            name = self._members.catalog.topic_name(topic_id)
            if name is not None:
                result.append(DescribedPartitions(topic_id, name, tuple(sorted(partitions[topic_id]))))
        return tuple(result)
