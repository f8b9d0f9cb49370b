"""A consumer-protocol group (KIP-848): members, epochs, target and current assignments.

The state of Kafka's ``ConsumerGroup``, ``ConsumerGroupMember`` and
``CurrentAssignmentBuilder``. It knows nothing of time or the log: the
:class:`~logstore.coordinator.group.consumer_membership.ConsumerMembershipManager`
drives it, and the
:class:`~logstore.coordinator.group.consumer_group_store.ConsumerGroupStore` changes
it only by replaying records
(:mod:`~logstore.coordinator.group.consumer_records`), so what a restarted
coordinator loads is what the running one held.

Epochs. The *group epoch* moves when the membership or the subscribed topics
change; the *assignment epoch* is the group epoch the target assignment was
computed for (it never runs ahead of the group epoch); a member's *epoch* is
the assignment epoch it has reconciled to. A member moves to a new epoch only
once it has revoked what it must give up (KIP-848's member-side reconciliation,
:class:`Reconciliation`):

- partitions leave a member first: while it still reports owning a partition
  it must revoke, it stays in its epoch (UNREVOKED_PARTITIONS);
- a partition reaches a member only when no other member holds it (at any
  epoch): until then the member waits in the new epoch (UNRELEASED_PARTITIONS);
- otherwise the member is STABLE at the assignment epoch.

Group states (Kafka's names): Empty (no members), Assigning (the group epoch is
ahead of the assignment epoch), Reconciling (a member is not yet stable at the
assignment epoch), Stable, and Dead (deleted).

>>> t = uuid.UUID(int=1)
>>> member = ConsumerGroupMember("m", member_epoch=1, previous_member_epoch=0, assigned={t: frozenset({0, 1})})
>>> moved = Reconciliation(member, 2, {t: frozenset({1})}, lambda topic, p: -1, owned={t: frozenset({0, 1})}).next()
>>> moved.state.name, moved.member_epoch, sorted(moved.pending_revocation[t])
('UNREVOKED_PARTITIONS', 1, [0])
>>> done = Reconciliation(moved, 2, {t: frozenset({1})}, lambda topic, p: -1, owned={t: frozenset({1})}).next()
>>> done.state.name, done.member_epoch, done.previous_member_epoch
('STABLE', 2, 1)
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from logstore.coordinator.group.consumer_records import (
    EMPTY_ASSIGNMENT,
    Assignment,
    CurrentAssignmentValue,
    MemberSubscriptionValue,
    TopicMetadata,
)
from logstore.coordinator.group.offsets_schemas import OffsetCommitValue
from logstore.coordinator.java_strings import java_hashmap_order

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
NO_OWNER = -1
"""What :meth:`ConsumerGroup.partition_epoch` answers for a partition no member holds."""

TopicIdPartition = tuple[uuid.UUID, int]


class ConsumerGroupError(Exception):
    """A heartbeat (or other call) answered with a Kafka error code and message."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


class MemberState(enum.IntEnum):
    """Kafka's MemberState; the value is the byte its records carry."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @classmethod
    def of(cls, value: int) -> MemberState:
        """The state of a record's byte; UNKNOWN for a byte this version does not know. O(1)."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class ConsumerGroupState(enum.Enum):
    """Kafka's consumer group states; the value is the name Kafka reports."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


def is_subset(owned: Assignment | None, target: Assignment) -> bool:
    """Whether every partition in ``owned`` (None: not reported) is in ``target``. O(owned)."""
    if owned is None:
        return False
    return all(parts <= target.get(topic_id, frozenset()) for topic_id, parts in owned.items())


def _owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    """Kafka's ``ownsRevokedPartitions``: True if ``owned`` is unknown or holds one of ``partitions``."""
    if owned is None:
        return True
    return any(parts & partitions.get(topic_id, frozenset()) for topic_id, parts in owned.items())


@dataclass(frozen=True)
class ConsumerGroupMember:
    """One member, immutable: a change is a new member (``dataclasses.replace``).

    ``assigned`` are the partitions it may consume now; ``pending_revocation``
    those it must give up before it moves to a new epoch. Invariant: the two
    do not overlap (asserted).
    """

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assigned: Assignment = field(default_factory=lambda: EMPTY_ASSIGNMENT)
    pending_revocation: Assignment = field(default_factory=lambda: EMPTY_ASSIGNMENT)

    def __post_init__(self) -> None:
        for topic_id, parts in self.pending_revocation.items():
            assert not parts & self.assigned.get(topic_id, frozenset()), (
                f"member {self.member_id} both owns and revokes partitions of {topic_id}"
            )

    def is_reconciled_to(self, assignment_epoch: int) -> bool:
        """Stable at ``assignment_epoch``. O(1)."""
        return self.state is MemberState.STABLE and self.member_epoch == assignment_epoch

    def subscription(self) -> MemberSubscriptionValue:
        """The member's subscription record value. O(its topics)."""
        return MemberSubscriptionValue(
            instance_id=self.instance_id,
            rack_id=self.rack_id,
            client_id=self.client_id,
            client_host=self.client_host,
            subscribed_topic_names=self.subscribed_topic_names,
            subscribed_topic_regex=self.subscribed_topic_regex,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            server_assignor=self.server_assignor,
        )

    def current_assignment(self) -> CurrentAssignmentValue:
        """The member's current assignment record value. O(1)."""
        return CurrentAssignmentValue(
            self.member_epoch,
            self.previous_member_epoch,
            int(self.state),
            self.assigned,
            self.pending_revocation,
        )

    def with_subscription(self, value: MemberSubscriptionValue) -> ConsumerGroupMember:
        """This member with a replayed subscription record. O(1)."""
        return dataclasses.replace(
            self,
            instance_id=value.instance_id,
            rack_id=value.rack_id,
            client_id=value.client_id,
            client_host=value.client_host,
            subscribed_topic_names=value.subscribed_topic_names,
            subscribed_topic_regex=value.subscribed_topic_regex,
            rebalance_timeout_ms=value.rebalance_timeout_ms,
            server_assignor=value.server_assignor,
        )

    def with_current_assignment(self, value: CurrentAssignmentValue) -> ConsumerGroupMember:
        """This member with a replayed current assignment record. O(1)."""
        return dataclasses.replace(
            self,
            member_epoch=value.member_epoch,
            previous_member_epoch=value.previous_member_epoch,
            state=MemberState.of(value.state),
            assigned=value.assigned,
            pending_revocation=value.pending_revocation,
        )

    def moved_to(
        self, epoch: int, state: MemberState, assigned: Assignment, revoking: Assignment
    ) -> ConsumerGroupMember:
        """This member at ``epoch``; its previous epoch becomes its current one (Kafka's
        ``updateMemberEpoch``, even when the epoch stays). O(1)."""
        return dataclasses.replace(
            self,
            member_epoch=epoch,
            previous_member_epoch=self.member_epoch,
            state=state,
            assigned=assigned,
            pending_revocation=revoking,
        )


class Reconciliation:
    """One step of a member toward its target (Kafka's ``CurrentAssignmentBuilder``).

    ``partition_epoch(topic, partition)`` is the epoch of the member holding a
    partition, or :data:`NO_OWNER`; ``owned`` is what the member reported in its
    heartbeat (None: not reported). :meth:`next` answers the member as it
    should be now, or the member itself when it cannot move. O(partitions of
    the member and of its target).

    Invariants (of the answer): assigned partitions are in the target or were
    already the member's; a partition new to the member is one no other member
    holds; the epoch only moves forward, and only to the target epoch or (after a
    completed revocation) one past the member's.
    """

    def __init__(
        self,
        member: ConsumerGroupMember,
        target_epoch: int,
        target: Assignment,
        partition_epoch: Callable[[uuid.UUID, int], int],
        owned: Assignment | None,
    ) -> None:
        self.member = member
        self.target_epoch = target_epoch
        self.target = target
        self.partition_epoch = partition_epoch
        self.owned = owned

    def next(self) -> ConsumerGroupMember:
        member = self.member
        state = member.state
        if state is MemberState.STABLE:
            if member.member_epoch == self.target_epoch:
                return member
            result = self._compute(member.member_epoch)
        elif state is MemberState.UNREVOKED_PARTITIONS:
            if _owns_any(self.owned, member.pending_revocation):
                return member
            result = self._compute(member.member_epoch + 1)
        elif state is MemberState.UNRELEASED_PARTITIONS:
            result = self._compute(member.member_epoch)
        else:  # UNKNOWN: a state from a newer version; start the member over
            if self.owned is None or self.owned:
                raise ConsumerGroupError(
                    ErrorCode.fenced_member_epoch,
                    "The consumer group member is in a unknown state. "
                    "The member must abandon all its partitions and rejoin.",
                )
            result = self._compute(self.target_epoch)
        assert result.member_epoch >= member.member_epoch or member.member_epoch < 0, (
            f"member {member.member_id} went from epoch {member.member_epoch} back to {result.member_epoch}"
        )
        return result

    def _compute(self, member_epoch: int) -> ConsumerGroupMember:
        member = self.member
        assigned: dict[uuid.UUID, frozenset[int]] = {}
        revoking: dict[uuid.UUID, frozenset[int]] = {}
        adding: dict[uuid.UUID, frozenset[int]] = {}
        unreleased = False
        for topic_id in sorted(set(self.target) | set(member.assigned)):
            target = self.target.get(topic_id, frozenset())
            current = member.assigned.get(topic_id, frozenset())
            kept = current & target
            new = frozenset(p for p in target - kept if self.partition_epoch(topic_id, p) == NO_OWNER)
            unreleased = unreleased or len(new) < len(target - kept)
            if kept:
                assigned[topic_id] = kept
            if current - kept:
                revoking[topic_id] = current - kept
            if new:
                adding[topic_id] = new
        if revoking and _owns_any(self.owned, revoking):
            # Revocations first: the member stays in its epoch until it has let them go.
            return member.moved_to(member_epoch, MemberState.UNREVOKED_PARTITIONS, assigned, revoking)
        for topic_id, parts in adding.items():
            assigned[topic_id] = assigned.get(topic_id, frozenset()) | parts
        state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        return member.moved_to(self.target_epoch, state, assigned, EMPTY_ASSIGNMENT)


class ConsumerGroup:
    """A consumer-protocol group, changed only through its replay methods (one per record type).

    Invariants: every partition is held (assigned or being revoked) by at most
    one member, and ``partition_epoch`` answers that member's epoch (asserted
    as members change); ``static_members`` maps each static member's instance id
    to its member id; the state is recomputed after every change (O(1) to read).
    The group's committed offsets live in ``offsets`` (the classic groups keep
    theirs the same way).
    """

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.subscription_metadata: dict[str, TopicMetadata] = {}
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}
        self.target_assignment: dict[str, Assignment] = {}
        self.offsets: dict[tuple[str, int], OffsetCommitValue] = {}
        self.dead = False
        self._holders: dict[TopicIdPartition, tuple[str, int]] = {}  # partition -> (member, its epoch)
        self._topic_names: Counter[str] = Counter()
        self._regexes: Counter[str] = Counter()
        self._assignors: Counter[str] = Counter()
        self._unreconciled: set[str] = set()

    def __repr__(self) -> str:
        return (
            f"ConsumerGroup({self.group_id!r}, {self.state}, epoch={self.group_epoch}, "
            f"assignment_epoch={self.assignment_epoch}, members={list(self.members)})"
        )

    # -- reads -----------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        """Kafka's state of the group. O(1)."""
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if self._unreconciled:
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def member(self, member_id: str) -> ConsumerGroupMember:
        """The member of that id; UNKNOWN_MEMBER_ID if there is none. O(1)."""
        member = self.members.get(member_id)
        if member is None:
            raise ConsumerGroupError(
                ErrorCode.unknown_member_id, f"Member {member_id} is not a member of group {self.group_id}."
            )
        return member

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        """The member holding ``instance_id``, if any. O(1)."""
        member_id = self.static_members.get(instance_id) if instance_id is not None else None
        return None if member_id is None else self.members[member_id]

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The epoch of the member holding the partition, or :data:`NO_OWNER`. O(1)."""
        held = self._holders.get((topic_id, partition))
        return NO_OWNER if held is None else held[1]

    def target_of(self, member_id: str, instance_id: str | None = None) -> Assignment:
        """A member's target; a static member replacing another gets its predecessor's. O(1)."""
        if instance_id is not None:
            previous = self.static_members.get(instance_id)
            if previous is not None:
                return self.target_assignment.get(previous, EMPTY_ASSIGNMENT)
            return EMPTY_ASSIGNMENT
        return self.target_assignment.get(member_id, EMPTY_ASSIGNMENT)

    def topic_names(self) -> frozenset[str]:
        """The topic names the members subscribe to by name. O(distinct names)."""
        return frozenset(self._topic_names)

    def regexes(self) -> frozenset[str]:
        """The members' subscription regexes. O(distinct regexes)."""
        return frozenset(self._regexes)

    def subscribers(self, topic: str) -> int:
        """How many members subscribe to ``topic`` by name. O(1)."""
        return self._topic_names.get(topic, 0)

    def regex_subscribers(self, regex: str) -> int:
        """How many members subscribe with ``regex``. O(1)."""
        return self._regexes.get(regex, 0)

    def preferred_assignor(self, replacing: ConsumerGroupMember | None = None,
                           by: ConsumerGroupMember | None = None) -> str | None:  # fmt: skip
        """The server assignor most members name (Kafka's tie: the first in its HashMap order),
        counting ``by`` in place of ``replacing``; None if no member names one. O(distinct names)."""
        counts = Counter(self._assignors)
        if replacing is not None and replacing.server_assignor is not None:
            counts[replacing.server_assignor] -= 1
        if by is not None and by.server_assignor is not None:
            counts[by.server_assignor] += 1
        names = [name for name, count in counts.items() if count > 0]
        if not names:
            return None
        best = max(counts[name] for name in names)
        return next(name for name in java_hashmap_order(names) if counts[name] == best)

    # -- replay --------------------------------------------------------------------

    def set_group_epoch(self, epoch: int) -> None:
        """ConsumerGroupMetadataValue. O(1)."""
        self.group_epoch = epoch

    def set_subscription_metadata(self, topics: Iterable[TopicMetadata]) -> None:
        """ConsumerGroupPartitionMetadataValue (or its tombstone: no topics). O(topics)."""
        self.subscription_metadata = {topic.name: topic for topic in topics}

    def set_assignment_epoch(self, epoch: int) -> None:
        """ConsumerGroupTargetAssignmentMetadataValue (-1: its tombstone). O(members)."""
        self.assignment_epoch = epoch
        self._unreconciled = {m.member_id for m in self.members.values() if not m.is_reconciled_to(epoch)}

    def set_target(self, member_id: str, target: Assignment | None) -> None:
        """ConsumerGroupTargetAssignmentMemberValue (None: its tombstone). O(1)."""
        if target is None:
            self.target_assignment.pop(member_id, None)
        else:
            self.target_assignment[member_id] = target

    def update_member(self, member: ConsumerGroupMember) -> None:
        """Add or replace a member (its subscription or current assignment was replayed).

        O(partitions of the old and new member). Asserts that no partition
        ends up held by two members.
        """
        old = self.members.get(member.member_id)
        self._forget(old)
        self.members[member.member_id] = member
        for name in member.subscribed_topic_names:
            self._topic_names[name] += 1
        if member.subscribed_topic_regex:
            self._regexes[member.subscribed_topic_regex] += 1
        if member.server_assignor is not None:
            self._assignors[member.server_assignor] += 1
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        holder = (member.member_id, member.member_epoch)
        for partitions in (member.assigned, member.pending_revocation):
            for topic_id, parts in partitions.items():
                for partition in parts:
                    held = self._holders.setdefault((topic_id, partition), holder)
                    assert held == holder, (
                        f"{self.group_id}: {topic_id}-{partition} is held by {held[0]} at epoch {held[1]}; "
                        f"{member.member_id} cannot hold it too"
                    )
        if member.is_reconciled_to(self.assignment_epoch):
            self._unreconciled.discard(member.member_id)
        else:
            self._unreconciled.add(member.member_id)

    def remove_member(self, member_id: str) -> None:
        """Drop a member (its subscription tombstone). O(its partitions)."""
        old = self.members.pop(member_id, None)
        self._forget(old)
        self._unreconciled.discard(member_id)

    def _forget(self, old: ConsumerGroupMember | None) -> None:
        if old is None:
            return
        for name in old.subscribed_topic_names:
            self._topic_names[name] -= 1
            if not self._topic_names[name]:
                del self._topic_names[name]
        for counter, key in (
            (self._regexes, old.subscribed_topic_regex),
            (self._assignors, old.server_assignor),
        ):
            if key:
                counter[key] -= 1
                if not counter[key]:
                    del counter[key]
        if old.instance_id is not None and self.static_members.get(old.instance_id) == old.member_id:
            del self.static_members[old.instance_id]
        for partitions in (old.assigned, old.pending_revocation):
            for topic_id, parts in partitions.items():
                for partition in parts:
                    held = self._holders.pop((topic_id, partition), None)
                    assert held == (old.member_id, old.member_epoch), (
                        f"{self.group_id}: {topic_id}-{partition} was held by {held}, "
                        f"not by {old.member_id} at epoch {old.member_epoch}"
                    )

    # -- offsets ---------------------------------------------------------------------

    def has_offsets(self) -> bool:
        """Whether the group has committed offsets. O(1)."""
        return bool(self.offsets)

    def holders(self) -> Mapping[TopicIdPartition, tuple[str, int]]:
        """Every held partition with its holder and the holder's epoch (a read-only view). O(1)."""
        return self._holders
