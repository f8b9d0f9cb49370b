"""The group coordinator: Kafka's classic and consumer (KIP-848) group protocols, minus the wire.

:class:`GroupCoordinator` answers JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, ConsumerGroupHeartbeat, ConsumerGroupDescribe, OffsetCommit,
OffsetFetch, DescribeGroups, ListGroups, DeleteGroups and OffsetDelete with
plain results; the broker turns requests into calls and results into
responses. It follows Kafka's ``GroupCoordinator``, and is a facade over the
parts that share the groups:

- :class:`~logstore.coordinator.group.classic_membership.MembershipManager`: joins,
  syncs, heartbeats, leaves, rebalances and sessions (the group state
  machine as the APIs drive it);
- :class:`~logstore.coordinator.group.offsets.OffsetsManager`: commits, fetches,
  deletes and expiry of offsets;
- :class:`~logstore.coordinator.group.persistence.GroupMetadataManager`: the groups
  by id, and their ``__consumer_offsets`` records (written through
  ``writer``; :meth:`GroupCoordinator.load` rebuilds the state from them);
- :class:`~logstore.coordinator.group.consumer_group_manager.ConsumerGroupManager`: the
  consumer-protocol groups (KIP-848), their heartbeats, records and offsets.

A group id names a classic group or a consumer group, never both, as in
Kafka: a ConsumerGroupHeartbeat joining an Empty classic group converts it,
and a JoinGroup to an Empty consumer group converts that back (the offsets
stay with the id); a non-empty group of the other kind answers
GROUP_ID_NOT_FOUND (ConsumerGroupHeartbeat), INCONSISTENT_GROUP_PROTOCOL
(JoinGroup) or UNKNOWN_MEMBER_ID (SyncGroup, Heartbeat, LeaveGroup: a
consumer group has no classic members here; Kafka's mixed groups of classic
and consumer members are not implemented).

Time comes from a :class:`~logstore.coordinator.clock.Clock`:
:class:`~logstore.coordinator.clock.LoopClock` on the running asyncio loop,
or :class:`~logstore.coordinator.clock.ManualClock`, which tests advance by
hand.

Complexities are stated per call in terms of a group's *members*, the
*partitions* of a request, the group's committed *offsets* and the
coordinator's *groups*; a member's protocols count as O(1).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from kio.schema.errors import ErrorCode

from logstore.coordinator.clock import Clock, LoopClock
from logstore.coordinator.group.classic_group import (
    GroupMetadata,
    GroupState,
    JoinResult,
    Protocols,
    SyncResult,
    TopicPartition,
)
from logstore.coordinator.group.classic_membership import (
    LeaveMemberResult,
    LeaveResult,
    MembershipManager,
)
from logstore.coordinator.group.consumer_group import ConsumerGroup
from logstore.coordinator.group.consumer_group_manager import ConsumerGroupManager, DescribedConsumerGroup
from logstore.coordinator.group.consumer_membership import HeartbeatRequest, HeartbeatResult, TopicCatalog
from logstore.coordinator.group.consumer_records import (
    ConsumerRecord,
    consumer_record_type,
    decode_consumer_record,
)
from logstore.coordinator.group.coordinator_config import CoordinatorConfig
from logstore.coordinator.group.group_configs import GroupConfigs
from logstore.coordinator.group.offsets import (
    DeleteOffsetsResult,
    FetchOffsetsResult,
    OffsetCommit,
    OffsetsManager,
    PreparedCommit,
)
from logstore.coordinator.group.offsets_schemas import OffsetCommitValue
from logstore.coordinator.group.persistence import GroupMetadataManager, Unreadable, Writer
from logstore.coordinator.record_codec import OffsetsSchemaError, Record

_T = TypeVar("_T")


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


CLASSIC = "classic"
CONSUMER = "consumer"


@dataclass(frozen=True)
class GroupOverview:
    """A group as ListGroups shows it; ``group_type`` is "classic" or "consumer" (KIP-848)."""

    group_id: str
    protocol_type: str
    state: str
    group_type: str = CLASSIC


class GroupCoordinator:
    """Consumer groups and their committed offsets, on one broker.

    All calls must come from the thread running the event loop (and, with a
    :class:`LoopClock`, from inside the loop). Joins and syncs return futures
    that are already resolved when the answer is immediate; every state
    change happens during the call, not when the future is awaited.

    Invariants: every registered group is live (not Dead) between calls;
    each group's state changes only as
    :class:`~logstore.coordinator.group.classic_group.GroupState` allows, and its
    generation only increases.
    """

    def __init__(
        self,
        config: CoordinatorConfig | None = None,
        *,
        clock: Clock | None = None,
        writer: Writer | None = None,
        catalog: TopicCatalog | None = None,
        group_configs: GroupConfigs | None = None,
    ) -> None:
        """``catalog``: the topics consumer groups are assigned from (none by default);
        ``group_configs``: the groups' dynamic configs (in memory by default)."""
        self.config = config or CoordinatorConfig()
        self.clock: Clock = clock or LoopClock()
        self.group_configs = group_configs or GroupConfigs(self.config)
        self._groups = GroupMetadataManager(self.config, self.clock, writer)
        self._membership = MembershipManager(self.config, self.clock, self._groups)
        self._offsets = OffsetsManager(self.config, self.clock, self._groups, self._membership)
        self._consumer = ConsumerGroupManager(
            self.config, self.clock, self._groups, self._membership, catalog, self.group_configs
        )
        # The __consumer_offsets partitions whose groups this coordinator serves; None: all of them
        # (a broker alone). In a cluster, those this broker leads (take_partition/release_partition).
        self._owned: set[int] | None = None

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> None:
        """Expire offsets every ``offsets.retention.check.interval.ms`` from now on. O(1)."""
        self._offsets.start()
        self._consumer.start()

    def close(self) -> None:
        """Stop all timers; parked joins and syncs answer NOT_COORDINATOR; forget every group.

        O(groups + their members).
        """
        self._offsets.close()
        self._consumer.close()
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
        for consumer_group in [g for g in self._consumer if self.partition_for(g.group_id) == partition]:
            self._consumer.unload(consumer_group)

    def _refused(self, value: _T) -> asyncio.Future[_T]:
        future: asyncio.Future[_T] = asyncio.get_running_loop().create_future()
        future.set_result(value)
        return future

    def partition_for(self, group_id: str) -> int:
        """The group's ``__consumer_offsets`` partition under this config. O(1) when cached."""
        return self._groups.partition_for(group_id)

    def group(self, group_id: str) -> GroupMetadata | None:
        """The classic group's live state (for inspection; do not mutate). O(1)."""
        return self._groups.get(group_id)

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """The consumer group's live state (for inspection; do not mutate). O(1)."""
        return self._consumer.get(group_id)

    def group_type(self, group_id: str) -> str | None:
        """"classic", "consumer", or None for a group this coordinator does not know. O(1)."""
        if group_id in self._consumer:
            return CONSUMER
        group = self._groups.get(group_id)
        return CLASSIC if group is not None and not group.is_in(GroupState.DEAD) else None

    # -- the consumer group protocol (KIP-848) ----------------------------------------

    def consumer_group_heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        """ConsumerGroupHeartbeat: see :meth:`ConsumerGroupManager.heartbeat`.

        O(members + partitions + topics of the group), plus the assignor when its epoch moves.
        """
        if not self.owns(request.group_id):
            return HeartbeatResult(ErrorCode.not_coordinator, "This is not the correct coordinator.")
        return self._consumer.heartbeat(request)

    def consumer_group_describe(self, group_id: str) -> DescribedConsumerGroup:
        """ConsumerGroupDescribe of one group: see :meth:`ConsumerGroupManager.describe`. O(members)."""
        if not self.owns(group_id):
            return DescribedConsumerGroup(group_id, ErrorCode.not_coordinator)
        return self._consumer.describe(group_id)

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
        """JoinGroup: see :meth:`MembershipManager.join_group`. O(members).

        A non-empty consumer group of that id answers INCONSISTENT_GROUP_PROTOCOL; an Empty one
        becomes a classic group (its records deleted, its offsets kept).
        """
        if not self.owns(group_id):
            return self._refused(JoinResult.failed(member_id, ErrorCode.not_coordinator))
        consumer_group = self._consumer.get(group_id)
        if consumer_group is not None:
            if consumer_group.members:
                return self._refused(JoinResult.failed("", ErrorCode.inconsistent_group_protocol))
            error = self._consumer.delete_for_classic_join(consumer_group)
            if error != ErrorCode.none:
                return self._refused(JoinResult.failed(member_id, error))
            if consumer_group.offsets:
                self._groups.create(group_id).offsets.update(consumer_group.offsets)
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
        if group_id in self._consumer:  # a consumer group has no classic members
            return self._refused(SyncResult(ErrorCode.unknown_member_id))
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
        if group_id in self._consumer:
            return ErrorCode.unknown_member_id
        return self._membership.heartbeat(group_id, generation_id, member_id, group_instance_id)

    def leave_group(self, group_id: str, members: Sequence[tuple[str, str | None]]) -> LeaveResult:
        """LeaveGroup: see :meth:`MembershipManager.leave_group`. O(leaving members × members) at worst."""
        if not self.owns(group_id):
            return LeaveResult(ErrorCode.not_coordinator)
        if group_id in self._consumer:
            return LeaveResult(
                ErrorCode.none, tuple(LeaveMemberResult(m, i, ErrorCode.unknown_member_id) for m, i in members)
            )
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
        consumer_group = self._consumer.get(group_id)
        if consumer_group is None:
            return self._offsets.commit_offsets(group_id, generation_id, member_id, offsets, group_instance_id)
        prepared = self._consumer.prepare_commit(consumer_group, member_id, generation_id, offsets, 9)
        return prepared.write_through(lambda records: self._groups.write(group_id, records))

    def prepare_commit(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        offsets: Mapping[TopicPartition, OffsetCommit],
        group_instance_id: str | None = None,
        api_version: int | None = None,
    ) -> PreparedCommit:
        """OffsetCommit, for the caller to write: see :meth:`OffsetsManager.prepare_commit`
        (classic groups) and :meth:`ConsumerGroupManager.prepare_commit` (consumer groups, whose
        members commit with their member epoch in ``generation_id``). O(partitions).

        From ``api_version`` 9 a commit with a generation or epoch to a group that does not exist
        answers GROUP_ID_NOT_FOUND (Kafka's answer for both protocols); before, ILLEGAL_GENERATION.
        """
        if not self.owns(group_id):
            return PreparedCommit(dict.fromkeys(offsets, ErrorCode.not_coordinator))
        consumer_group = self._consumer.get(group_id)
        if consumer_group is not None:
            version = 9 if api_version is None else api_version
            return self._consumer.prepare_commit(consumer_group, member_id, generation_id, offsets, version)
        if api_version is not None and api_version >= 9 and generation_id >= 0 and self.group_type(group_id) is None:
            return PreparedCommit(dict.fromkeys(offsets, ErrorCode.group_id_not_found))
        return self._offsets.prepare_commit(group_id, generation_id, member_id, offsets, group_instance_id)

    def fetch_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> FetchOffsetsResult:
        """OffsetFetch: see :meth:`OffsetsManager.fetch_offsets` and, for a consumer group (whose
        members name themselves and their epoch from v9), :meth:`ConsumerGroupManager.fetch_offsets`.
        O(partitions), or O(offsets) for all."""
        if not self.owns(group_id):
            return FetchOffsetsResult(ErrorCode.not_coordinator)
        consumer_group = self._consumer.get(group_id)
        if consumer_group is not None:
            return self._consumer.fetch_offsets(consumer_group, partitions, member_id, member_epoch)
        return self._offsets.fetch_offsets(group_id, partitions)

    def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> DeleteOffsetsResult:
        """OffsetDelete: see :meth:`OffsetsManager.delete_offsets` and
        :meth:`ConsumerGroupManager.delete_offsets`. O(partitions)."""
        if not self.owns(group_id):
            return DeleteOffsetsResult(ErrorCode.not_coordinator)
        consumer_group = self._consumer.get(group_id)
        if consumer_group is not None:
            return self._consumer.delete_offsets(consumer_group, partitions)
        return self._offsets.delete_offsets(group_id, partitions)

    def expire_offsets(self, now_ms: int | None = None) -> int:
        """Expire offsets now: see :meth:`OffsetsManager.expire_offsets` and
        :meth:`ConsumerGroupManager.expire_offsets`. O(groups + offsets of all groups)."""
        return self._offsets.expire_offsets(now_ms) + self._consumer.expire_offsets(now_ms)

    # -- groups ------------------------------------------------------------------

    def describe_group(self, group_id: str) -> GroupDescription:
        """DescribeGroups for one group; an unknown group (or a consumer group: not a classic one)
        reads as Dead with no members. O(members)."""
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

    def list_groups(
        self, states: Iterable[str] | None = None, types: Iterable[str] | None = None
    ) -> list[GroupOverview]:
        """Every group, or those in ``states`` and of ``types`` ("classic", "consumer"; both
        matched case-insensitively; an unknown type matches nothing, as Kafka). O(groups)."""
        wanted = {state.strip().lower() for state in states} if states else None
        kinds = {kind.strip().lower() for kind in types} if types else {CLASSIC, CONSUMER}
        overviews = []
        if CLASSIC in kinds:
            overviews += [
                GroupOverview(group.group_id, group.protocol_type or "", str(group.state))
                for group in self._groups
                if wanted is None or str(group.state).lower() in wanted
            ]
        if CONSUMER in kinds:
            overviews += [
                GroupOverview(group.group_id, CONSUMER, str(group.state), CONSUMER)
                for group in self._consumer.in_states(wanted)
            ]
        return overviews

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        """Delete Empty groups with their offsets; NON_EMPTY_GROUP or GROUP_ID_NOT_FOUND otherwise.

        O(groups in the request + their offsets).
        """
        errors: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            group = self._groups.get(group_id)
            consumer_group = self._consumer.get(group_id)
            if not self.owns(group_id):
                errors[group_id] = ErrorCode.not_coordinator
            elif consumer_group is not None:
                errors[group_id] = self._consumer.delete_group(consumer_group)
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
        to ``on_unreadable`` and skipped. Consumer group records (key types 3-8) rebuild the
        consumer groups (:meth:`ConsumerGroupManager.load`); their offsets move to them.
        """
        consumer_records: list[ConsumerRecord] = []

        def classic_only() -> Iterator[Record]:
            for key, value in records:
                if consumer_record_type(key) is None:
                    yield key, value
                    continue
                try:
                    record = decode_consumer_record(key, value)
                except OffsetsSchemaError as e:
                    if on_unreadable is None:
                        raise
                    on_unreadable(bytes(key), e)
                    continue
                if record is not None:
                    consumer_records.append(record)

        self._groups.load(classic_only(), on_loaded=self._membership.on_loaded, on_unloaded=self._membership.unload,
                          on_unreadable=on_unreadable)  # fmt: skip
        for consumer_group in self._consumer.load(consumer_records):
            classic = self._groups.get(consumer_group.group_id)
            if classic is None:
                continue
            if classic.members or classic.protocol_type is not None:
                # Both kinds under one id: the classic group's records came last; it wins.
                self._consumer.unload(consumer_group)
                continue
            consumer_group.offsets.update(classic.offsets)  # offsets-only: they are the consumer group's
            self._membership.unload(classic)

    # -- transactional offset commits (txn_offsets.py) -----------------------------------

    def apply_committed_offsets(self, group_id: str, values: Mapping[TopicPartition, OffsetCommitValue]) -> None:
        """Offsets a transaction committed (its COMMIT marker is written): they become the group's,
        creating an Empty group if there is none. No write: the records are in the log. O(partitions)."""
        if not self.owns(group_id):
            return
        consumer_group = self._consumer.get(group_id)  # a consumer group (KIP-848) keeps its own offsets
        if consumer_group is not None:
            consumer_group.offsets.update(values)
            return
        group = self._groups.get(group_id) or self._groups.create(group_id)
        PreparedCommit({}, None, group, dict(values)).apply()
