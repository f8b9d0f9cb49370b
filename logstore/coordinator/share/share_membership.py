"""Share groups' membership: ShareGroupHeartbeat's join, heartbeat and leave (KIP-932).

A share group is a set of members, each subscribed to topic names, and a
target assignment the coordinator computes with the share assignor
(:mod:`~logstore.coordinator.share.share_assignor`). Unlike a consumer
group's, a share group's partitions may be shared, so nothing is revoked
before it is assigned elsewhere: a member takes the group's epoch and the
target assignment at its next heartbeat (no reconciliation states).

Epochs: the group epoch moves up by one when a member joins, leaves, changes
its subscription, or a subscribed topic's partition count changes; the
target assignment is recomputed then (``assignment_epoch`` = group epoch).
A member's epoch is the group epoch of its last heartbeat. A heartbeat
whose epoch is not the member's answers FENCED_MEMBER_EPOCH; a member id the
group does not know, UNKNOWN_MEMBER_ID; epoch 0 joins (or rejoins), -1
leaves. A member that does not heartbeat within ``session_timeout_ms`` is
removed (:meth:`expire`).

Group states as Kafka names them: Empty (no members), Stable; a deleted
group is gone (Dead).

In memory: Kafka writes ShareGroupMemberMetadata and friends to
``__consumer_offsets``; here the membership is rebuilt by the members'
heartbeats after a restart (they rejoin with epoch 0 when fenced or
unknown). Not thread-safe: the owner serializes calls.

Invariants (:meth:`ShareGroup.check`): every member's epoch <= the group
epoch; assignment_epoch <= group epoch; every assigned partition is one a
member subscribes to.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from logstore.coordinator.group.consumer_membership import TopicCatalog
from logstore.coordinator.share.share_assignor import assign
from logstore.coordinator.share.share_config import ShareConfig

EMPTY, STABLE = "Empty", "Stable"
ASSIGNOR_NAME = "simple"


@dataclass
class ShareMember:
    """One member: who it is, what it subscribes to, what it is assigned (topic -> partitions)."""

    member_id: str
    epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed: frozenset[str]
    assignment: dict[str, list[int]] = field(default_factory=dict)
    sent: dict[str, list[int]] | None = None  # the assignment last sent to it
    deadline_ms: int = 0


@dataclass
class ShareGroup:
    """A share group's members, epochs and the subscribed topics' partition counts."""

    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    partition_counts: dict[str, int] = field(default_factory=dict)

    @property
    def state(self) -> str:
        return STABLE if self.members else EMPTY

    def check(self) -> None:
        assert self.assignment_epoch <= self.epoch
        for member in self.members.values():
            assert member.epoch <= self.epoch
            assert set(member.assignment) <= member.subscribed, (member.assignment, member.subscribed)


@dataclass(frozen=True)
class HeartbeatAnswer:
    """ShareGroupHeartbeat's answer; ``assignment`` (topic id -> partitions) is None when unchanged."""

    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: dict[uuid.UUID, list[int]] | None = None
    assigned: dict[str, list[int]] = field(default_factory=dict)  # topic name -> partitions, for the caller


class ShareMembership:
    """Every share group's members on this coordinator.

    ``on_member_gone(group_id, member_id)`` is called for a member that left,
    was removed or expired (its acquired records go back, its share session
    ends). Heartbeats are O(members + partitions) when the group epoch moves,
    else O(subscribed topics).
    """

    def __init__(
        self,
        config: ShareConfig,
        catalog: TopicCatalog,
        on_member_gone: Callable[[str, str], None] = lambda group, member: None,
    ) -> None:
        self.config = config
        self.catalog = catalog
        self.groups: dict[str, ShareGroup] = {}
        self._on_member_gone = on_member_gone

    def heartbeat(
        self,
        now_ms: int,
        group_id: str,
        member_id: str,
        member_epoch: int,
        *,
        subscribed: Iterable[str] | None,
        rack_id: str | None = None,
        client_id: str = "",
        client_host: str = "",
    ) -> HeartbeatAnswer:
        """One ShareGroupHeartbeat (see the module doc)."""
        if not group_id:
            return HeartbeatAnswer(ErrorCode.invalid_request, "GroupId can't be empty.")
        if not member_id:
            return HeartbeatAnswer(ErrorCode.invalid_request, "MemberId can't be empty.")
        group = self.groups.get(group_id)
        if member_epoch == -1:
            if group is not None and member_id in group.members:
                self._remove(group, member_id)
            return HeartbeatAnswer(ErrorCode.none, None, member_id, -1, self.config.heartbeat_interval_ms)
        if member_epoch < -1:
            return HeartbeatAnswer(ErrorCode.invalid_request, f"MemberEpoch {member_epoch} is invalid.")
        member = group.members.get(member_id) if group is not None else None
        changed = False  # the group epoch moves once per heartbeat that changes anything
        if member_epoch == 0:
            if subscribed is None or not list(subscribed):
                return HeartbeatAnswer(
                    ErrorCode.invalid_request, "SubscribedTopicNames must be set in first request."
                )
            if group is None:
                group = self.groups[group_id] = ShareGroup(group_id)
            if member is None and len(group.members) >= self.config.max_size:
                return HeartbeatAnswer(
                    ErrorCode.group_max_size_reached,
                    f"The share group has reached its maximum capacity of {self.config.max_size} members.",
                )
            if member is not None:  # a rejoin: it starts over
                self._on_member_gone(group_id, member_id)
            member = group.members[member_id] = ShareMember(
                member_id, 0, client_id, client_host, rack_id, frozenset(subscribed)
            )
            changed = True  # a member joined (or rejoined)
        elif member is None or group is None:
            return HeartbeatAnswer(
                ErrorCode.unknown_member_id, f"Member {member_id} is not a member of group {group_id}."
            )
        elif member_epoch != member.epoch:
            return HeartbeatAnswer(
                ErrorCode.fenced_member_epoch,
                f"The share group member has a smaller or larger member epoch ({member_epoch}) than the one "
                f"known by the group coordinator ({member.epoch}).",
            )
        elif subscribed is not None and frozenset(subscribed) != member.subscribed:
            member.subscribed = frozenset(subscribed)
            changed = True
        if rack_id is not None:
            member.rack_id = rack_id
        counts = self._partition_counts(group)
        if counts != group.partition_counts:
            group.partition_counts = counts
            changed = True
        if changed:
            group.epoch += 1
        if group.assignment_epoch != group.epoch:
            self._assign(group)
        member.epoch = group.epoch
        member.deadline_ms = now_ms + self.config.session_timeout_ms
        send = member_epoch == 0 or member.sent != member.assignment
        if send:
            member.sent = {topic: list(parts) for topic, parts in member.assignment.items()}
        group.check()
        return HeartbeatAnswer(
            ErrorCode.none,
            None,
            member_id,
            member.epoch,
            self.config.heartbeat_interval_ms,
            self._by_id(member.assignment) if send else None,
            {topic: list(parts) for topic, parts in member.assignment.items()},
        )

    def expire(self, now_ms: int) -> list[tuple[str, str]]:
        """Remove the members whose session timed out by ``now_ms``; returns (group, member)
        of each. O(members)."""
        gone = []
        for group in list(self.groups.values()):
            for member in list(group.members.values()):
                if member.deadline_ms <= now_ms:
                    self._remove(group, member.member_id)
                    gone.append((group.group_id, member.member_id))
        return gone

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and member_id in group.members

    def delete_group(self, group_id: str) -> ErrorCode:
        """Delete an Empty share group: NON_EMPTY_GROUP with members, GROUP_ID_NOT_FOUND if none."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found
        if group.members:
            return ErrorCode.non_empty_group
        del self.groups[group_id]
        return ErrorCode.none

    # -- inside ------------------------------------------------------------------

    def _remove(self, group: ShareGroup, member_id: str) -> None:
        del group.members[member_id]
        group.epoch += 1
        self._assign(group)
        self._on_member_gone(group.group_id, member_id)

    def _partition_counts(self, group: ShareGroup) -> dict[str, int]:
        counts = {}
        for topic in sorted({t for m in group.members.values() for t in m.subscribed}):
            described = self.catalog.describe_topic(topic)
            if described is not None and described[1] > 0:
                counts[topic] = described[1]
        return counts

    def _assign(self, group: ShareGroup) -> None:
        group.partition_counts = self._partition_counts(group)
        target = assign(
            {m.member_id: set(m.subscribed) for m in group.members.values()},
            group.partition_counts,
            {m.member_id: m.assignment for m in group.members.values()},
        )
        for member_id, assigned in target.items():
            group.members[member_id].assignment = assigned
        group.assignment_epoch = group.epoch

    def _by_id(self, assignment: dict[str, list[int]]) -> dict[uuid.UUID, list[int]]:
        result = {}
        for topic, partitions in assignment.items():
            described = self.catalog.describe_topic(topic)
            if described is not None:
                result[described[0]] = sorted(partitions)
        return result
