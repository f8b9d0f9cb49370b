"""Membership: JoinGroup, SyncGroup, Heartbeat and LeaveGroup driving the group state machine.

:class:`MembershipManager` is the membership half of Kafka's classic
``GroupCoordinator``: it moves a :class:`~logstore.coordinator.group.classic_group.GroupMetadata`
through its states as the APIs arrive and as its timers fire:

- A join parks until every known member has rejoined (and every member id
  handed out by MEMBER_ID_REQUIRED has come back or expired), or until the
  largest rebalance timeout of the members passes; dynamic members that did
  not rejoin are then dropped. The first rebalance of an Empty group instead
  waits ``group.initial.rebalance.delay.ms``, again each time a member joined
  during the wait, never longer in all than the rebalance timeout.
- The leader's JoinGroup result carries every member's metadata; its
  SyncGroup hands each member its assignment (members left out get an empty
  one) and makes the group Stable; followers' syncs park until then.
- A member that sends no heartbeat for its session timeout is expelled and
  the group rebalances; members that do not sync within the rebalance
  timeout after a join completes are expelled too.
- A static member (with a ``group.instance.id``) that rejoins with no member
  id takes over its old entry, fencing the old id; in a Stable group whose
  protocol would not change, without a rebalance.

Its timers, per group: one join timer (while PreparingRebalance), one sync
timer (after a join completes, until every member synced), and one session
timer per member or pending member.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from logstore.coordinator.clock import Clock, TimerHandle
from logstore.coordinator.group.classic_group import (
    GroupMetadata,
    GroupState,
    JoinCallback,
    JoinMember,
    JoinResult,
    MemberMetadata,
    Protocols,
    SyncCallback,
    SyncResult,
)
from logstore.coordinator.group.coordinator_config import CoordinatorConfig
from logstore.coordinator.group.persistence import GroupMetadataManager
from logstore.coordinator.internal_topics import OFFSETS_TOPIC

log = logging.getLogger(__name__)

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
"""How long a new member's first join may stay parked before it is dropped (Kafka's value)."""


# -- results --------------------------------------------------------------------


@dataclass(frozen=True)
class LeaveMemberResult:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(frozen=True)
class LeaveResult:
    """A top-level error (then ``members`` is empty) or one result per leaving member."""

    error: ErrorCode
    members: tuple[LeaveMemberResult, ...] = ()


# -- internals ------------------------------------------------------------------


@dataclass
class _PendingJoin:
    """The timer of a parked rebalance; an initial one only ends by its timer."""

    handle: TimerHandle
    initial: bool

    def cancel(self) -> None:
        self.handle.cancel()


@dataclass(frozen=True)
class _JoinRequest:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool
    supports_skip_assignment: bool
    respond: JoinCallback


_K = TypeVar("_K")


def _cancel(timers: dict[_K, Any], key: _K) -> None:
    """Cancel and forget the timer under ``key`` in ``timers``, if any."""
    handle = timers.pop(key, None)
    if handle is not None:
        handle.cancel()


def _check_stable(group: GroupMetadata) -> None:
    """Assert what a group that became Stable holds. O(members), once per rebalance."""
    assert group.members and group.protocol_name is not None and group.leader_id in group.members, (
        f"{group} is Stable without members, a protocol or a leader"
    )
    assert not any(m.is_awaiting_join or m.is_awaiting_sync for m in group.members.values()), (
        f"{group} is Stable with members still parked in a join or a sync"
    )


def _future_setter(future: asyncio.Future[Any]) -> Callable[[Any], None]:
    def resolve(result: Any) -> None:
        if not future.done():
            future.set_result(result)

    return resolve


# -- the manager ------------------------------------------------------------------


class MembershipManager:
    """Members joining, syncing, heartbeating and leaving; rebalances and sessions on a :class:`Clock`.

    Complexities count a member's protocols as O(1) (a consumer offers one
    or two assignors).

    Invariants: a group has a join timer only while PreparingRebalance, and
    a sync timer only for the generation whose join completed (asserted as
    they are set); a join phase completes only in PreparingRebalance
    (asserted); a group that becomes Stable has members, a selected
    protocol and a leader among them, and none of its members is still
    parked in a join or a sync: each has been handed its assignment, empty
    if the leader left it out (asserted, O(members) once per rebalance).
    Session timers are kept per group (forgetting a group cancels its
    timers in O(its timers)); a timer that fires for a group no longer
    registered, or Dead, does nothing.
    """

    def __init__(self, config: CoordinatorConfig, clock: Clock, groups: GroupMetadataManager) -> None:
        self.config = config
        self.clock = clock
        self._groups = groups
        self._joins: dict[str, _PendingJoin] = {}
        self._syncs: dict[str, TimerHandle] = {}
        self._sessions: dict[str, dict[str, TimerHandle]] = {}

    # -- JoinGroup -----------------------------------------------------------

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
        """Join (or rejoin) a group; resolves when the rebalance completes or the join fails.

        O(members). ``member_id`` is "" for a new member.
        ``require_known_member_id`` (JoinGroup v4+) makes a new dynamic
        member's first join answer MEMBER_ID_REQUIRED with its new id
        ``client_id-<uuid4>``, to rejoin with. A negative
        ``rebalance_timeout_ms`` (JoinGroup v0) means the session timeout.
        ``supports_skip_assignment`` (v9+) lets a static leader that rejoins
        a Stable group skip running the assignor.
        """
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        respond: JoinCallback = _future_setter(future)
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        request = _JoinRequest(
            member_id,
            group_instance_id,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms,
            protocol_type,
            list(protocols),
            require_known_member_id,
            supports_skip_assignment,
            respond,
        )
        self._handle_join(group_id, request)
        return future

    def _handle_join(self, group_id: str, request: _JoinRequest) -> None:
        config = self.config
        if not group_id:
            request.respond(JoinResult.failed(request.member_id, ErrorCode.invalid_group_id))
            return
        if not (
            config.group_min_session_timeout_ms
            <= request.session_timeout_ms
            <= config.group_max_session_timeout_ms
        ):
            request.respond(JoinResult.failed(request.member_id, ErrorCode.invalid_session_timeout))
            return
        is_unknown = request.member_id == ""
        group = self._groups.get(group_id)
        if group is None:
            if not is_unknown:
                request.respond(JoinResult.failed(request.member_id, ErrorCode.unknown_member_id))
                return
            group = self._groups.create(group_id)
        if not self._accept_joining_member(group, request.member_id):
            self._remove_member(group, request.member_id)
            request.respond(JoinResult.failed("", ErrorCode.group_max_size_reached))
        elif (error := self._join_error(group, request)) is not None:
            request.respond(JoinResult.failed(request.member_id, error))
        elif is_unknown:
            self._new_member_join(group, request)
        else:
            self._current_member_join(group, request)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        """Whether ``group.max.size`` leaves room (counting parked joins while preparing)."""
        limit = self.config.group_max_size
        if group.is_in(GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_in(GroupState.PREPARING_REBALANCE):
            known = group.has_member(member_id) and group.member(member_id).is_awaiting_join
            return known or group.num_awaiting_join() < limit
        return group.has_member(member_id) or group.size < limit

    @staticmethod
    def _join_error(group: GroupMetadata, request: _JoinRequest) -> ErrorCode | None:
        """Why any join to ``group`` fails at once: it is Dead, or none of its protocols fit."""
        if group.is_in(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        if not group.supports_protocols(request.protocol_type, {name for name, _ in request.protocols}):
            return ErrorCode.inconsistent_group_protocol
        return None

    def _new_member_join(self, group: GroupMetadata, request: _JoinRequest) -> None:
        new_member_id = group.generate_member_id(request.client_id, request.group_instance_id)
        instance_id = request.group_instance_id
        if instance_id is not None:
            old_member_id = group.static_member_id(instance_id)
            if old_member_id is not None:
                self._update_static_member_and_rebalance(group, old_member_id, new_member_id, request)
            else:
                self._add_member_and_rebalance(group, new_member_id, request)
        elif request.require_known_member_id:
            group.add_pending_member(new_member_id)
            self._schedule_pending_member_expiration(group, new_member_id, request.session_timeout_ms)
            request.respond(JoinResult.failed(new_member_id, ErrorCode.member_id_required))
        else:
            self._add_member_and_rebalance(group, new_member_id, request)

    def _current_member_join(self, group: GroupMetadata, request: _JoinRequest) -> None:
        member_id = request.member_id
        if group.is_pending_member(member_id):
            if request.group_instance_id is not None:
                raise AssertionError(f"pending member {member_id} cannot be static")
            self._add_member_and_rebalance(group, member_id, request)
            return
        error = group.validate_member(member_id, request.group_instance_id)
        if error is not None:
            request.respond(JoinResult.failed(member_id, error))
            return
        member = group.member(member_id)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, request)
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            if member.matches(request.protocols):
                # A retry of a join whose answer was lost: answer it again.
                request.respond(self._join_result(group, member, with_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, request)
        elif group.is_in(GroupState.STABLE):
            if group.is_leader(member_id) or not member.matches(request.protocols):
                # The leader rejoins to have the assignment redone (e.g. new partitions).
                self._update_member_and_rebalance(group, member, request)
            else:
                request.respond(self._join_result(group, member, with_members=False))
        else:  # Empty cannot hold members; answer as Kafka does anyway.
            request.respond(JoinResult.failed(member_id, ErrorCode.unknown_member_id))

    def _join_result(self, group: GroupMetadata, member: MemberMetadata, with_members: bool) -> JoinResult:
        members: tuple[JoinMember, ...] = group.current_member_metadata() if with_members else ()
        return JoinResult(
            error=ErrorCode.none,
            member_id=member.member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=group.leader_id or "",
            members=members,
        )

    def _add_member_and_rebalance(self, group: GroupMetadata, member_id: str, request: _JoinRequest) -> None:
        member = MemberMetadata(
            member_id,
            request.group_instance_id,
            request.client_id,
            request.client_host,
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            request.protocol_type,
            request.protocols,
        )
        member.is_new = True
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True  # extends the initial rebalance delay
        group.add(member, request.respond)
        # A new member cannot heartbeat before its join answers; bound its wait instead.
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id}")

    def _update_member_and_rebalance(
        self, group: GroupMetadata, member: MemberMetadata, request: _JoinRequest
    ) -> None:
        group.update_member(
            member,
            request.protocols,
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            request.respond,
        )
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoining")

    def _update_static_member_and_rebalance(
        self, group: GroupMetadata, old_member_id: str, new_member_id: str, request: _JoinRequest
    ) -> None:
        """A static member came back with no member id: it takes over its old entry.

        In a Stable group whose protocol would not change, nothing rebalances:
        the group metadata is rewritten with the new id and the member gets
        the current generation (and, pre-v9, the old leader id so that it
        does not run the assignor). Otherwise the group rebalances.
        """
        instance_id = request.group_instance_id
        assert instance_id is not None
        old_leader = group.leader_id or ""
        member = self._replace_static_member(group, instance_id, old_member_id, new_member_id)
        old_protocols = list(member.protocols)
        old_timeouts = (member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(
            member,
            request.protocols,
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            request.respond,
        )
        if group.is_in(GroupState.STABLE):
            if group.select_protocol() != group.protocol_name:
                self._maybe_prepare_rebalance(group, f"static member {instance_id} changed the protocol")
                return
            assignment = {m.member_id: m.assignment for m in group.members.values()}
            error = self._groups.store_group(group, assignment)
            if error != ErrorCode.none:
                group.update_member(member, old_protocols, *old_timeouts, None)
                self._replace_static_member(group, instance_id, new_member_id, old_member_id)
                request.respond(
                    JoinResult(
                        error=error,
                        member_id="",
                        generation_id=group.generation_id,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader_id=old_leader,
                    )
                )
                return
            is_leader = group.is_leader(new_member_id)
            skip = request.supports_skip_assignment and is_leader
            result = self._join_result(group, member, with_members=skip)
            if skip:
                result = dataclasses.replace(result, skip_assignment=True)
            else:
                result = dataclasses.replace(result, leader_id=old_leader)
            group.maybe_invoke_join_callback(member, result)
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            # The leader may have assigned to the old id: redo the rebalance.
            self._prepare_rebalance(group, f"static member {instance_id} rejoined while awaiting sync")
        elif group.is_in(GroupState.EMPTY, GroupState.DEAD):
            raise AssertionError(f"group {group.group_id} in {group.state} cannot have static members")

    def _replace_static_member(
        self, group: GroupMetadata, instance_id: str, from_id: str, to_id: str
    ) -> MemberMetadata:
        """Move a static member from one member id to another, with its session timer."""
        self._cancel_heartbeat(group, from_id)
        member = group.replace_static_member(instance_id, from_id, to_id)
        self.renew_session(group, member)
        return member

    # -- rebalance machinery -------------------------------------------------

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        """Enter PreparingRebalance: parked syncs are told to rejoin, and the join is timed."""
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.rebalance_in_progress)
        self._remove_sync_expiration(group)
        initial = group.is_in(GroupState.EMPTY)
        group.transition_to(GroupState.PREPARING_REBALANCE)
        log.info(
            "preparing to rebalance group %s with old generation %d (%s-%d): %s",
            group.group_id,
            group.generation_id,
            OFFSETS_TOPIC,
            self._groups.partition_for(group.group_id),
            reason,
        )
        if initial:
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_initial_join(group, delay, remaining)
        else:
            self._schedule_join(group, group.rebalance_timeout_ms())

    def _schedule_initial_join(self, group: GroupMetadata, delay_ms: int, remaining_ms: int) -> None:
        assert group.is_in(GroupState.PREPARING_REBALANCE), f"{group} has no join to time"
        self._cancel_join(group)
        handle = self.clock.call_later(
            delay_ms, lambda: self._on_initial_join_expired(group, delay_ms, remaining_ms)
        )
        self._joins[group.group_id] = _PendingJoin(handle, initial=True)

    def _join_timer_fired(self, group: GroupMetadata) -> bool:
        """Forget the group's join timer, which fired; whether its rebalance is still on."""
        self._joins.pop(group.group_id, None)
        return self._groups.is_live(group) and group.is_in(GroupState.PREPARING_REBALANCE)

    def _on_initial_join_expired(self, group: GroupMetadata, delay_ms: int, remaining_ms: int) -> None:
        """Kafka's ``InitialDelayedJoin``: wait again while members keep arriving."""
        if not self._join_timer_fired(group):
            return
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            next_delay = min(self.config.group_initial_rebalance_delay_ms, remaining_ms)
            self._schedule_initial_join(group, next_delay, max(remaining_ms - delay_ms, 0))
        else:
            self._on_complete_join(group)

    def _schedule_join(self, group: GroupMetadata, timeout_ms: int) -> None:
        assert group.is_in(GroupState.PREPARING_REBALANCE), f"{group} has no join to time"
        self._cancel_join(group)
        handle = self.clock.call_later(timeout_ms, lambda: self._on_join_expired(group))
        self._joins[group.group_id] = _PendingJoin(handle, initial=False)
        self._try_complete_join(group)

    def _try_complete_join(self, group: GroupMetadata) -> None:
        """Complete a (non-initial) parked rebalance once every member has rejoined."""
        pending = self._joins.get(group.group_id)
        if pending is None or pending.initial or not group.has_all_members_joined():
            return
        self._cancel_join(group)
        self._on_complete_join(group)

    def _on_join_expired(self, group: GroupMetadata) -> None:
        if self._join_timer_fired(group):
            self._on_complete_join(group)

    def _on_complete_join(self, group: GroupMetadata) -> None:
        """End the join phase: drop dynamic members that did not rejoin, start a generation."""
        assert group.is_in(GroupState.PREPARING_REBALANCE), f"{group} has no join to complete"
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                self._remove_member(group, member.member_id)
        if group.is_in(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members are left and none rejoined: wait for them (or their sessions).
            self._schedule_join(group, group.rebalance_timeout_ms())
            return
        group.init_next_generation()
        if group.is_in(GroupState.EMPTY):
            error = self._groups.store_group(group, {})
            if error != ErrorCode.none:
                log.warning("could not write empty metadata of group %s: %s", group.group_id, error.name)
            return
        for member in list(group.members.values()):
            with_members = group.is_leader(member.member_id)
            group.maybe_invoke_join_callback(member, self._join_result(group, member, with_members))
            self.renew_session(group, member)
            member.is_new = False
            group.add_pending_sync_member(member.member_id)
        self._schedule_pending_sync(group)

    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        assert group.is_in(GroupState.COMPLETING_REBALANCE), f"{group} awaits no sync"
        self._cancel_sync(group)
        generation = group.generation_id
        handle = self.clock.call_later(
            group.rebalance_timeout_ms(), lambda: self._on_sync_expired(group, generation)
        )
        self._syncs[group.group_id] = handle

    def _on_sync_expired(self, group: GroupMetadata, generation: int) -> None:
        """Members that never synced after the join are expelled, and the group rebalances."""
        self._syncs.pop(group.group_id, None)
        if not self._groups.is_live(group) or generation != group.generation_id:
            return
        if not group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        if group.has_received_sync_from_all_members():
            return
        missing = sorted(group.pending_sync_members)
        for member_id in missing:
            self._remove_member(group, member_id)
        self._prepare_rebalance(group, f"members {missing} did not sync in time")

    def _remove_sync_expiration(self, group: GroupMetadata) -> None:
        group.pending_sync_members.clear()
        self._cancel_sync(group)

    def _maybe_complete_sync_expiration(self, group: GroupMetadata) -> None:
        if group.has_received_sync_from_all_members():
            self._cancel_sync(group)

    # -- heartbeats and sessions ----------------------------------------------

    def renew_session(self, group: GroupMetadata, member: MemberMetadata) -> None:
        """Start a new session timeout for ``member`` (none while it is parked). O(1)."""
        self._schedule_heartbeat(group, member, member.session_timeout_ms)

    def _schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int) -> None:
        """Kafka's ``completeAndScheduleNextExpiration``: a new session deadline for ``member``.

        No deadline is set while the member needs none (parked in a join or
        sync); a later reschedule sets one.
        """
        member_id = member.member_id
        timers = self._session_timers(group)
        _cancel(timers, member_id)
        member.heartbeat_satisfied = False
        if member.has_satisfied_heartbeat():
            return
        timers[member_id] = self.clock.call_later(
            timeout_ms, lambda: self._on_heartbeat_expired(group, member_id)
        )

    def _schedule_pending_member_expiration(
        self, group: GroupMetadata, member_id: str, timeout_ms: int
    ) -> None:
        timers = self._session_timers(group)
        _cancel(timers, member_id)
        timers[member_id] = self.clock.call_later(
            timeout_ms, lambda: self._on_pending_member_expired(group, member_id)
        )

    def _session_timers(self, group: GroupMetadata) -> dict[str, TimerHandle]:
        """The group's session timers by member id (made on first use, dropped by :meth:`forget`)."""
        timers = self._sessions.get(group.group_id)
        if timers is None:
            timers = self._sessions[group.group_id] = {}
        return timers

    def _session_timer_fired(self, group: GroupMetadata, member_id: str) -> None:
        timers = self._sessions.get(group.group_id)
        if timers is not None:
            timers.pop(member_id, None)

    def _on_heartbeat_expired(self, group: GroupMetadata, member_id: str) -> None:
        self._session_timer_fired(group, member_id)
        if not self._groups.is_live(group) or not group.has_member(member_id):
            return
        member = group.member(member_id)
        if not member.has_satisfied_heartbeat():
            log.info("member %s of group %s has failed; removing it", member_id, group.group_id)
            self._remove_member_and_update_group(group, member, f"session of {member_id} expired")

    def _on_pending_member_expired(self, group: GroupMetadata, member_id: str) -> None:
        self._session_timer_fired(group, member_id)
        if self._groups.is_live(group) and group.is_pending_member(member_id):
            self._remove_pending_member_and_update_group(group, member_id)

    def _cancel_heartbeat(self, group: GroupMetadata, member_id: str) -> None:
        timers = self._sessions.get(group.group_id)
        if timers is not None:
            _cancel(timers, member_id)

    def _remove_member(self, group: GroupMetadata, member_id: str) -> None:
        """Remove a member or pending member, and its session timer."""
        group.remove(member_id)
        self._cancel_heartbeat(group, member_id)

    def _remove_member_and_update_group(
        self, group: GroupMetadata, member: MemberMetadata, reason: str
    ) -> None:
        group.maybe_invoke_join_callback(member, JoinResult.failed("", ErrorCode.unknown_member_id))
        self._remove_member(group, member.member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_in(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        self._remove_member(group, member_id)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _current_member(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> GroupMetadata | ErrorCode:
        """The group, if ``member_id`` is its member at ``generation_id``; else the error to answer.

        Shared by SyncGroup and Heartbeat: INVALID_GROUP_ID, UNKNOWN_MEMBER_ID
        (no such group), COORDINATOR_NOT_AVAILABLE (Dead), then
        :meth:`GroupMetadata.validate_generation`.
        """
        if not group_id:
            return ErrorCode.invalid_group_id
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        if group.is_in(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        error = group.validate_generation(member_id, group_instance_id, generation_id)
        return group if error is None else error

    # -- SyncGroup --------------------------------------------------------------

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
        """Fetch this member's assignment; from the leader, also hand in everyone's.

        O(assignments); the leader's sync that completes a rebalance
        O(members). Resolves at once in a Stable group; during
        CompletingRebalance a follower waits for the leader's sync (or a new
        rebalance: REBALANCE_IN_PROGRESS). Errors: UNKNOWN_MEMBER_ID,
        FENCED_INSTANCE_ID, ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL
        (v5's type and name checks), REBALANCE_IN_PROGRESS while preparing.
        """
        future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        respond: SyncCallback = _future_setter(future)
        found = self._current_member(group_id, generation_id, member_id, group_instance_id)
        if isinstance(found, ErrorCode):
            respond(SyncResult(found))
        elif (protocol_type is not None and protocol_type != found.protocol_type) or (
            protocol_name is not None and protocol_name != found.protocol_name
        ):
            respond(SyncResult(ErrorCode.inconsistent_group_protocol))
        else:
            mapping = dict(assignments.items() if isinstance(assignments, Mapping) else assignments)
            self._do_sync(found, generation_id, member_id, mapping, respond)
        return future

    def _do_sync(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        assignments: dict[str, bytes],
        respond: SyncCallback,
    ) -> None:
        if group.is_in(GroupState.EMPTY):
            respond(SyncResult(ErrorCode.unknown_member_id))
        elif group.is_in(GroupState.PREPARING_REBALANCE):
            respond(SyncResult(ErrorCode.rebalance_in_progress))
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            group.member(member_id).awaiting_sync = respond
            group.remove_pending_sync_member(member_id)
            self._maybe_complete_sync_expiration(group)
            if group.is_leader(member_id):
                self._complete_sync_from_leader(group, generation_id, member_id, assignments)
        else:  # Stable
            group.remove_pending_sync_member(member_id)
            self._maybe_complete_sync_expiration(group)
            member = group.member(member_id)
            respond(SyncResult(ErrorCode.none, member.assignment, group.protocol_type, group.protocol_name))
            self.renew_session(group, member)

    def _complete_sync_from_leader(
        self, group: GroupMetadata, generation_id: int, leader_id: str, assignments: dict[str, bytes]
    ) -> None:
        """Persist the leader's assignment, hand it out, and make the group Stable."""
        assignment = {member_id: assignments.get(member_id, b"") for member_id in group.members}
        missing = [member_id for member_id in group.members if member_id not in assignments]
        if missing:
            log.warning("empty assignment for members %s of group %s", missing, group.group_id)
        error = self._groups.store_group(group, assignment)
        if not (group.is_in(GroupState.COMPLETING_REBALANCE) and generation_id == group.generation_id):
            return
        if error != ErrorCode.none:
            self._reset_and_propagate_assignment_error(group, error)
            self._maybe_prepare_rebalance(group, f"error {error.name} storing the assignment of {leader_id}")
            return
        for member in group.members.values():
            member.assignment = assignment[member.member_id]
        self._propagate_assignment(group, ErrorCode.none)
        group.transition_to(GroupState.STABLE)
        _check_stable(group)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        ok = error == ErrorCode.none
        for member in list(group.members.values()):
            result = SyncResult(
                error,
                member.assignment,
                group.protocol_type if ok else None,
                group.protocol_name if ok else None,
            )
            if group.maybe_invoke_sync_callback(member, result):
                # Its session may have lapsed while it waited; start it afresh.
                self.renew_session(group, member)

    # -- Heartbeat and LeaveGroup ------------------------------------------------

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None = None
    ) -> ErrorCode:
        """Renew a member's session. O(1).

        REBALANCE_IN_PROGRESS while the group prepares a rebalance (the
        member must rejoin); UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID or
        ILLEGAL_GENERATION for a member that is not current.
        """
        found = self._current_member(group_id, generation_id, member_id, group_instance_id)
        if isinstance(found, ErrorCode):
            return found
        if found.is_in(GroupState.EMPTY):
            return ErrorCode.unknown_member_id
        self.renew_session(found, found.member(member_id))
        if found.is_in(GroupState.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave_group(self, group_id: str, members: Sequence[tuple[str, str | None]]) -> LeaveResult:
        """Remove members, each given as (member id, group instance id or None).

        O(leaving members × members) at worst (each departure may complete a
        parked rebalance). A member id of "" with an instance id removes
        that static member (the admin path). The group rebalances, or
        becomes Empty when the last member leaves.
        """
        if not group_id:
            return LeaveResult(ErrorCode.invalid_group_id)
        group = self._groups.get(group_id)
        if group is None:
            return LeaveResult(
                ErrorCode.none,
                tuple(LeaveMemberResult(m, i, ErrorCode.unknown_member_id) for m, i in members),
            )
        if group.is_in(GroupState.DEAD):
            return LeaveResult(ErrorCode.coordinator_not_available)
        results = tuple(
            LeaveMemberResult(member_id, instance_id, self._leave_one(group, member_id, instance_id))
            for member_id, instance_id in members
        )
        return LeaveResult(ErrorCode.none, results)

    def _leave_one(self, group: GroupMetadata, member_id: str, instance_id: str | None) -> ErrorCode:
        if member_id == "":
            current = group.static_member_id(instance_id) if instance_id is not None else None
            if current is None:
                return ErrorCode.unknown_member_id
            member_id = current
        elif group.is_pending_member(member_id):
            self._remove_pending_member_and_update_group(group, member_id)
            return ErrorCode.none
        else:
            error = group.validate_member(member_id, instance_id)
            if error is not None:
                return error
        member = group.member(member_id)
        self._remove_member_and_update_group(group, member, f"member {member_id} left")
        return ErrorCode.none

    # -- groups coming and going -------------------------------------------------

    def on_loaded(self, group: GroupMetadata) -> None:
        """Kafka's ``onGroupLoaded``: start every member's session (rebalance if over size). O(members)."""
        if group.size > self.config.group_max_size:
            self._prepare_rebalance(group, "the loaded group is over group.max.size")
        for member in list(group.members.values()):
            self.renew_session(group, member)

    def forget(self, group: GroupMetadata) -> None:
        """Unregister a group and cancel its timers. O(its session timers)."""
        self._groups.discard(group)
        self._cancel_join(group)
        self._cancel_sync(group)
        for handle in self._sessions.pop(group.group_id, {}).values():
            handle.cancel()

    def unload(self, group: GroupMetadata) -> None:
        """Kafka's ``onGroupUnloaded``: the group goes Dead; parked calls answer NOT_COORDINATOR.

        O(members).
        """
        group.transition_to(GroupState.DEAD)
        for member in list(group.members.values()):
            group.maybe_invoke_join_callback(
                member, JoinResult.failed(member.member_id, ErrorCode.not_coordinator)
            )
            group.maybe_invoke_sync_callback(member, SyncResult(ErrorCode.not_coordinator))
        if self._groups.is_registered(group):
            self.forget(group)

    def _cancel_join(self, group: GroupMetadata) -> None:
        _cancel(self._joins, group.group_id)

    def _cancel_sync(self, group: GroupMetadata) -> None:
        _cancel(self._syncs, group.group_id)
