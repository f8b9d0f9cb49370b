"""The consumer groups (KIP-848) of one coordinator, by id, and their records on ``__consumer_offsets``.

:class:`ConsumerGroupStore` holds the groups and changes them only by
replaying records (:mod:`~logstore.coordinator.group.consumer_records`) once
they are written (through the classic groups'
:class:`~logstore.coordinator.group.persistence.GroupMetadataManager`, which
owns the writer): :meth:`ConsumerGroupStore.write` appends and then replays,
:meth:`ConsumerGroupStore.load` replays what a partition holds, so a restarted
coordinator holds the groups, members and epochs the old one held. It knows
nothing of heartbeats or timers
(:mod:`~logstore.coordinator.group.consumer_membership`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection, Iterable, Iterator, Sequence

from kio.schema.errors import ErrorCode

from logstore.coordinator.group.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupError,
    ConsumerGroupMember,
)
from logstore.coordinator.group.consumer_records import (
    ASSIGNMENT_EPOCH,
    CURRENT_ASSIGNMENT,
    EMPTY_ASSIGNMENT,
    GROUP_EPOCH,
    MEMBER_SUBSCRIPTION,
    SUBSCRIPTION_METADATA,
    TARGET_ASSIGNMENT,
    AssignmentEpochValue,
    ConsumerGroupKey,
    ConsumerRecord,
    CurrentAssignmentValue,
    GroupEpochValue,
    MemberSubscriptionValue,
    SubscriptionMetadataValue,
    TargetAssignmentValue,
    encode_consumer_record,
)
from logstore.coordinator.group.persistence import GroupMetadataManager
from logstore.coordinator.record_codec import Record

log = logging.getLogger(__name__)

_WRITE_ERRORS = {
    ErrorCode.not_coordinator,
    ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_load_in_progress,
}


def group_not_found(group_id: str) -> ConsumerGroupError:
    return ConsumerGroupError(ErrorCode.group_id_not_found, f"Consumer group {group_id} not found.")


def not_consumer_group(group_id: str) -> ConsumerGroupError:
    return ConsumerGroupError(ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group.")


class ConsumerGroupStore:
    """The consumer groups by id; they change only by :meth:`replay` of records written first.

    Invariant: a group id is registered here or with the classic
    :class:`GroupMetadataManager`, not both (a conversion writes its
    tombstones and moves the group in one call).
    """

    def __init__(self, classic: GroupMetadataManager) -> None:
        self._classic = classic
        self._groups: dict[str, ConsumerGroup] = {}

    # -- the registry -------------------------------------------------------------------

    def get(self, group_id: str) -> ConsumerGroup | None:
        """The consumer group of that id, if any. O(1)."""
        return self._groups.get(group_id)

    def __iter__(self) -> Iterator[ConsumerGroup]:
        """The groups (copy before changing the registry while iterating). O(1)."""
        return iter(self._groups.values())

    def __contains__(self, group_id: object) -> bool:
        return group_id in self._groups

    def consumer_group(self, group_id: str) -> ConsumerGroup:
        """The consumer group of that id; GROUP_ID_NOT_FOUND if none (or it is classic). O(1)."""
        group = self._groups.get(group_id)
        if group is not None:
            return group
        classic = self._classic.get(group_id)
        raise not_consumer_group(group_id) if classic is not None else group_not_found(group_id)

    def in_states(self, states: Collection[str] | None = None) -> list[ConsumerGroup]:
        """The groups in one of ``states`` (Kafka's names, any case), or all. O(groups)."""
        wanted = {state.strip().lower() for state in states} if states else None
        return [g for g in self._groups.values() if wanted is None or str(g.state).lower() in wanted]

    def clear(self) -> None:
        """Forget every group (their timers are the caller's). O(groups)."""
        self._groups.clear()

    # -- writing and replaying ------------------------------------------------------------

    def write(
        self, group_id: str, records: Sequence[ConsumerRecord], raw: Sequence[Record] = ()
    ) -> ErrorCode:
        """Write ``raw`` then ``records`` in one append; once written, replay ``records``. O(records)."""
        if not records and not raw:
            return ErrorCode.none
        encoded = [*raw, *(encode_consumer_record(record) for record in records)]
        error = self._classic.write(group_id, encoded)
        if error != ErrorCode.none:
            return error if error in _WRITE_ERRORS else ErrorCode.unknown_server_error
        for record in records:
            self.replay(record)
        return ErrorCode.none

    def replay(self, record: ConsumerRecord) -> None:
        """Apply one record to the groups (Kafka's ``replay`` per record type). O(the record's partitions).

        A value creates its group if need be; a tombstone of an unknown group or
        member does nothing. The group epoch's tombstone deletes the group.
        """
        key, value = record
        group = self._groups.get(key.group)
        if group is None:
            if value is None:
                return
            group = self._groups[key.group] = ConsumerGroup(key.group)
        member_id = key.member
        if key.type == GROUP_EPOCH:
            if isinstance(value, GroupEpochValue):
                group.set_group_epoch(value.epoch)
            else:
                if group.members or group.target_assignment:
                    log.warning("group %s deleted with members %s", key.group, sorted(group.members))
                group.dead = True
                del self._groups[key.group]
        elif key.type == SUBSCRIPTION_METADATA:
            group.set_subscription_metadata(
                value.topics if isinstance(value, SubscriptionMetadataValue) else ()
            )
        elif key.type == ASSIGNMENT_EPOCH:
            group.set_assignment_epoch(value.epoch if isinstance(value, AssignmentEpochValue) else -1)
        elif key.type == TARGET_ASSIGNMENT:
            assert member_id is not None
            group.set_target(
                member_id, value.partitions if isinstance(value, TargetAssignmentValue) else None
            )
        elif key.type == MEMBER_SUBSCRIPTION:
            assert member_id is not None
            if isinstance(value, MemberSubscriptionValue):
                old = group.members.get(member_id) or ConsumerGroupMember(member_id)
                group.update_member(old.with_subscription(value))
            elif member_id in group.members:
                group.remove_member(member_id)
        elif key.type == CURRENT_ASSIGNMENT:
            assert member_id is not None
            if isinstance(value, CurrentAssignmentValue):
                old = group.members.get(member_id) or ConsumerGroupMember(member_id)
                group.update_member(old.with_current_assignment(value))
            elif member_id in group.members:
                group.update_member(
                    dataclasses.replace(
                        group.members[member_id],
                        member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                        previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                        assigned=EMPTY_ASSIGNMENT,
                        pending_revocation=EMPTY_ASSIGNMENT,
                    )
                )

    def load(self, records: Iterable[ConsumerRecord]) -> list[ConsumerGroup]:
        """Replay records of a partition in log order (their members' timers are the caller's).

        Returns the groups the records touched that are live. O(records + their members).
        """
        touched: dict[str, None] = {}
        for record in records:
            self.replay(record)
            touched[record[0].group] = None
        loaded = [self._groups[group_id] for group_id in touched if group_id in self._groups]
        for group in loaded:
            log.info("loaded consumer group %s (epoch %d, %d members)", group.group_id, group.group_epoch,
                     len(group.members))  # fmt: skip
        return loaded

    def discard(self, group: ConsumerGroup) -> None:
        """Forget a group if it is the one registered under its id (its timers are the caller's). O(1)."""
        if self._groups.get(group.group_id) is group:
            del self._groups[group.group_id]

    # -- tombstones -----------------------------------------------------------------------

    def member_tombstones(self, group_id: str, member_id: str) -> list[ConsumerRecord]:
        """A member's tombstones, in Kafka's order. O(1)."""
        return [
            (ConsumerGroupKey(CURRENT_ASSIGNMENT, group_id, member_id), None),
            (ConsumerGroupKey(TARGET_ASSIGNMENT, group_id, member_id), None),
            (ConsumerGroupKey(MEMBER_SUBSCRIPTION, group_id, member_id), None),
        ]

    def group_tombstones(self, group: ConsumerGroup) -> list[ConsumerRecord]:
        """Kafka's ``createGroupTombstoneRecords``, in its order. O(members)."""
        group_id = group.group_id
        members = sorted(set(group.members) | set(group.target_assignment))
        records: list[ConsumerRecord] = [(ConsumerGroupKey(CURRENT_ASSIGNMENT, group_id, m), None) for m in members]
        records += [(ConsumerGroupKey(TARGET_ASSIGNMENT, group_id, m), None) for m in members]
        records.append((ConsumerGroupKey(ASSIGNMENT_EPOCH, group_id), None))
        records += [(ConsumerGroupKey(MEMBER_SUBSCRIPTION, group_id, m), None) for m in members]
        records.append((ConsumerGroupKey(SUBSCRIPTION_METADATA, group_id), None))
        records.append((ConsumerGroupKey(GROUP_EPOCH, group_id), None))
        return records

    def delete_for_classic_join(self, group: ConsumerGroup) -> ErrorCode:
        """An Empty consumer group gives way to a classic group (a JoinGroup): its tombstones are
        written and it is forgotten; the caller moves its offsets. O(records of the group)."""
        assert not group.members, f"{group} is not empty"
        error = self.write(group.group_id, self.group_tombstones(group))
        if error == ErrorCode.none:
            log.info("group %s: the empty consumer group is now a classic group", group.group_id)
        return error
