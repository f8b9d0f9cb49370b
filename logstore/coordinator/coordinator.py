"""The group coordinator: Kafka's classic consumer-group protocol, minus the wire.

:class:`GroupCoordinator` answers JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups,
DeleteGroups and OffsetDelete with plain results; the broker turns requests
into calls and results into responses. It follows Kafka's classic
``GroupCoordinator``, and is a facade over three parts that share the
groups:

- :class:`~logstore.coordinator.membership.MembershipManager`: joins,
  syncs, heartbeats, leaves, rebalances and sessions (the group state
  machine as the APIs drive it);
- :class:`~logstore.coordinator.offsets.OffsetsManager`: commits, fetches,
  deletes and expiry of offsets;
- :class:`~logstore.coordinator.persistence.GroupMetadataManager`: the groups
  by id, and their ``__consumer_offsets`` records (written through
  ``writer``; :meth:`GroupCoordinator.load` rebuilds the state from them).

Time comes from a :class:`~logstore.coordinator.clock.Clock`:
:class:`~logstore.coordinator.clock.LoopClock` on the running asyncio loop,
or :class:`~logstore.coordinator.clock.ManualClock`, which tests advance by
hand.

Complexities are stated per call in terms of a group's *members*, the
*partitions* of a request, the group's committed *offsets* and the
coordinator's *groups*; a member's protocols count as O(1).

>>> partition_for("group")
47
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from kio.schema.errors import ErrorCode

from logstore.coordinator.clock import Clock, LoopClock, ManualClock, TimerHandle
from logstore.coordinator.config import INT_MAX, CoordinatorConfig
from logstore.coordinator.group import (
    GroupMetadata,
    GroupState,
    JoinResult,
    Protocols,
    SyncResult,
    TopicPartition,
)
from logstore.coordinator.membership import (
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    LeaveMemberResult,
    LeaveResult,
    MembershipManager,
)
from logstore.coordinator.offsets import (
    NO_OFFSET,
    DeleteOffsetsResult,
    FetchedOffset,
    FetchOffsetsResult,
    OffsetCommit,
    OffsetsManager,
    PreparedCommit,
)
from logstore.coordinator.persistence import (
    OFFSETS_TOPIC,
    GroupMetadataManager,
    Unreadable,
    WriteError,
    Writer,
    partition_for,
)
from logstore.coordinator.schemas import Record

_T = TypeVar("_T")

__all__ = [
    "INT_MAX",
    "NEW_MEMBER_JOIN_TIMEOUT_MS",
    "NO_OFFSET",
    "OFFSETS_TOPIC",
    "Clock",
    "CoordinatorConfig",
    "DeleteOffsetsResult",
    "FetchOffsetsResult",
    "FetchedOffset",
    "GroupCoordinator",
    "GroupDescription",
    "GroupOverview",
    "LeaveMemberResult",
    "LeaveResult",
    "LoopClock",
    "ManualClock",
    "MemberDescription",
    "OffsetCommit",
    "PreparedCommit",
    "TimerHandle",
    "WriteError",
    "Writer",
    "partition_for",
]


@dataclass(frozen=True)
class MemberDescription:
    """A member as DescribeGroups shows it (metadata and assignment only when Stable)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupDescription:
    error: ErrorCode
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...] = ()


@dataclass(frozen=True)
class GroupOverview:
    group_id: str
    protocol_type: str
    state: str


class GroupCoordinator:
    """Consumer groups and their committed offsets, on one broker.

    All calls must come from the thread running the event loop (and, with a
    :class:`LoopClock`, from inside the loop). Joins and syncs return futures
    that are already resolved when the answer is immediate; every state
    change happens during the call, not when the future is awaited.

    Invariants: every registered group is live (not Dead) between calls;
    each group's state changes only as
    :class:`~logstore.coordinator.group.GroupState` allows, and its
    generation only increases.
    """

    def __init__(
        self,
        config: CoordinatorConfig | None = None,
        *,
        clock: Clock | None = None,
        writer: Writer | None = None,
    ) -> None:
        self.config = config or CoordinatorConfig()
        self.clock: Clock = clock or LoopClock()
        self._groups = GroupMetadataManager(self.config, self.clock, writer)
        self._membership = MembershipManager(self.config, self.clock, self._groups)
        self._offsets = OffsetsManager(self.config, self.clock, self._groups, self._membership)
        # The __consumer_offsets partitions whose groups this coordinator serves; None: all of them
        # (a broker alone). In a cluster, those this broker leads (take_partition/release_partition).
        self._owned: set[int] | None = None

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> None:
        """Expire offsets every ``offsets.retention.check.interval.ms`` from now on. O(1)."""
        self._offsets.start()

    def close(self) -> None:
        """Stop all timers; parked joins and syncs answer NOT_COORDINATOR; forget every group.

        O(groups + their members).
        """
        self._offsets.close()
        for group in list(self._groups):
            self._membership.unload(group)
        self._groups.clear()

    # -- ownership (a cluster: the groups of the __consumer_offsets partitions this broker leads) --

    def serve_partitions_taken_only(self) -> None:
        """From now on serve only the groups of partitions given with :meth:`take_partition`."""
        self._owned = set()

    def owns(self, group_id: str) -> bool:
        """Whether this coordinator serves ``group_id`` (else its calls answer NOT_COORDINATOR). O(1)."""
        return self._owned is None or self.partition_for(group_id) in self._owned

    def take_partition(
        self, partition: int, records: Iterable[Record], on_unreadable: Unreadable | None = None
    ) -> None:
        """Serve the groups of ``partition``, loaded from its records (this broker now leads it).
        O(records + members)."""
        self.release_partition(partition)  # a stale copy of its groups must not survive the load
        self.load(records, on_unreadable)
        assert self._owned is not None, "serve_partitions_taken_only() first"
        self._owned.add(partition)

    def release_partition(self, partition: int) -> None:
        """Stop serving ``partition``'s groups (another broker leads it now): parked joins and syncs
        answer NOT_COORDINATOR, and the groups are forgotten. O(groups)."""
        if self._owned is None:
            self._owned = set()
        self._owned.discard(partition)
        for group in [g for g in self._groups if self.partition_for(g.group_id) == partition]:
            self._membership.unload(group)
            self._groups.discard(group)

    def _refused(self, value: _T) -> asyncio.Future[_T]:
        future: asyncio.Future[_T] = asyncio.get_running_loop().create_future()
        future.set_result(value)
        return future

    def partition_for(self, group_id: str) -> int:
        """The group's ``__consumer_offsets`` partition under this config. O(1) when cached."""
        return self._groups.partition_for(group_id)

    def group(self, group_id: str) -> GroupMetadata | None:
        """The group's live state (for inspection; do not mutate). O(1)."""
        return self._groups.get(group_id)

    # -- membership ----------------------------------------------------------

    def join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
        require_known_member_id: bool,
        *,
        supports_skip_assignment: bool = False,
    ) -> asyncio.Future[JoinResult]:
        """JoinGroup: see :meth:`MembershipManager.join_group`. O(members)."""
        if not self.owns(group_id):
            return self._refused(JoinResult.failed(member_id, ErrorCode.not_coordinator))
        return self._membership.join_group(
            group_id,
            member_id,
            group_instance_id,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms,
            protocol_type,
            protocols,
            require_known_member_id,
            supports_skip_assignment=supports_skip_assignment,
        )

    def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        assignments: Mapping[str, bytes] | Iterable[tuple[str, bytes]],
        *,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> asyncio.Future[SyncResult]:
        """SyncGroup: see :meth:`MembershipManager.sync_group`. O(assignments); completing O(members)."""
        if not self.owns(group_id):
            return self._refused(SyncResult(ErrorCode.not_coordinator))
        return self._membership.sync_group(
            group_id,
            generation_id,
            member_id,
            group_instance_id,
            assignments,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
        )

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None = None
    ) -> ErrorCode:
        """Heartbeat: see :meth:`MembershipManager.heartbeat`. O(1)."""
        if not self.owns(group_id):
            return ErrorCode.not_coordinator
        return self._membership.heartbeat(group_id, generation_id, member_id, group_instance_id)

    def leave_group(self, group_id: str, members: Sequence[tuple[str, str | None]]) -> LeaveResult:
        """LeaveGroup: see :meth:`MembershipManager.leave_group`. O(leaving members × members) at worst."""
        if not self.owns(group_id):
            return LeaveResult(ErrorCode.not_coordinator)
        return self._membership.leave_group(group_id, members)

    # -- offsets ---------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        offsets: Mapping[TopicPartition, OffsetCommit],
        group_instance_id: str | None = None,
    ) -> dict[TopicPartition, ErrorCode]:
        """OffsetCommit, written at once: see :meth:`OffsetsManager.commit_offsets`. O(partitions)."""
        if not self.owns(group_id):
            return dict.fromkeys(offsets, ErrorCode.not_coordinator)
        return self._offsets.commit_offsets(group_id, generation_id, member_id, offsets, group_instance_id)

    def prepare_commit(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        offsets: Mapping[TopicPartition, OffsetCommit],
        group_instance_id: str | None = None,
    ) -> PreparedCommit:
        """OffsetCommit, for the caller to write: see :meth:`OffsetsManager.prepare_commit`. O(partitions)."""
        if not self.owns(group_id):
            return PreparedCommit(dict.fromkeys(offsets, ErrorCode.not_coordinator))
        return self._offsets.prepare_commit(group_id, generation_id, member_id, offsets, group_instance_id)

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> FetchOffsetsResult:
        """OffsetFetch: see :meth:`OffsetsManager.fetch_offsets`. O(partitions), or O(offsets) for all."""
        if not self.owns(group_id):
            return FetchOffsetsResult(ErrorCode.not_coordinator)
        return self._offsets.fetch_offsets(group_id, partitions)

    def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> DeleteOffsetsResult:
        """OffsetDelete: see :meth:`OffsetsManager.delete_offsets`. O(partitions)."""
        if not self.owns(group_id):
            return DeleteOffsetsResult(ErrorCode.not_coordinator)
        return self._offsets.delete_offsets(group_id, partitions)

    def expire_offsets(self, now_ms: int | None = None) -> int:
        """Expire offsets now: see :meth:`OffsetsManager.expire_offsets`. O(groups + offsets of all groups)."""
        return self._offsets.expire_offsets(now_ms)

    # -- groups ------------------------------------------------------------------

    def describe_group(self, group_id: str) -> GroupDescription:
        """DescribeGroups for one group; an unknown group reads as Dead with no members. O(members)."""
        if not self.owns(group_id):
            return GroupDescription(ErrorCode.not_coordinator, group_id, "", "", "")
        group = self._groups.get(group_id)
        if group is None:
            return GroupDescription(ErrorCode.none, group_id, str(GroupState.DEAD), "", "")
        stable = group.is_in(GroupState.STABLE) and group.protocol_name is not None
        protocol = group.protocol_name if stable and group.protocol_name else ""
        members = tuple(
            MemberDescription(
                member.member_id,
                member.group_instance_id,
                member.client_id,
                member.client_host,
                member.metadata(protocol) if stable else b"",
                member.assignment if stable else b"",
            )
            for member in group.members.values()
        )
        return GroupDescription(
            ErrorCode.none, group_id, str(group.state), group.protocol_type or "", protocol, members
        )

    def list_groups(self, states: Iterable[str] | None = None) -> list[GroupOverview]:
        """Every group, or those in ``states`` (matched case-insensitively). O(groups)."""
        wanted = {state.lower() for state in states} if states else None
        return [
            GroupOverview(group.group_id, group.protocol_type or "", str(group.state))
            for group in self._groups
            if wanted is None or str(group.state).lower() in wanted
        ]

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        """Delete Empty groups with their offsets; NON_EMPTY_GROUP or GROUP_ID_NOT_FOUND otherwise.

        O(groups in the request + their offsets).
        """
        errors: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            group = self._groups.get(group_id)
            if not self.owns(group_id):
                errors[group_id] = ErrorCode.not_coordinator
            elif group is None or group.is_in(GroupState.DEAD):
                errors[group_id] = ErrorCode.group_id_not_found
            elif group.is_in(GroupState.EMPTY):
                group.transition_to(GroupState.DEAD)
                self._offsets.cleanup_group(group, group.remove_all_offsets())
                errors[group_id] = ErrorCode.none
            else:
                errors[group_id] = ErrorCode.non_empty_group
        return errors

    # -- persistence --------------------------------------------------------------

    def load(self, records: Iterable[Record], on_unreadable: Unreadable | None = None) -> None:
        """Rebuild groups and offsets from ``__consumer_offsets`` records in log order.

        O(records + members of the loaded groups). The latest record per key
        wins and tombstones delete. Groups with members come back Stable
        (their sessions start now: members that do not heartbeat are
        expelled); groups without, Empty. Offsets whose group has no
        metadata record belong to an Empty group with no protocol type. Keys
        of other record types are skipped. A loaded group replaces a group
        of the same id. A record that does not decode raises OffsetsSchemaError, or is handed
        to ``on_unreadable`` and skipped.
        """
        self._groups.load(records, on_loaded=self._membership.on_loaded, on_unloaded=self._membership.unload,
                          on_unreadable=on_unreadable)  # fmt: skip
