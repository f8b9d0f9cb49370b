"""The group coordinator: Kafka's classic consumer-group protocol, minus the wire.

:class:`GroupCoordinator` answers JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups,
DeleteGroups and OffsetDelete with plain results; the broker turns requests
into calls and results into responses. It follows Kafka's classic
``GroupCoordinator``:

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
- Offsets and group metadata are appended through ``writer`` as
  ``__consumer_offsets`` records (:mod:`logstore.coordinator.schemas`), and
  :meth:`GroupCoordinator.load` rebuilds the state from them.

Time comes from a :class:`Clock`: :class:`LoopClock` on the running asyncio
loop, or :class:`ManualClock`, which tests advance by hand.

>>> partition_for("group")
47
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import heapq
import itertools
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from logstore.coordinator.group import (
    GroupMetadata,
    GroupState,
    JoinCallback,
    JoinMember,
    JoinResult,
    MemberMetadata,
    Protocols,
    SyncCallback,
    SyncResult,
    TopicPartition,
    java_string_hash,
    java_string_length,
)
from logstore.coordinator.schemas import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    UnknownKeyError,
    decode_key,
    group_metadata_record,
    offset_commit_record,
)
from logstore.errors import InvalidConfigError

log = logging.getLogger(__name__)

INT_MAX = 2**31 - 1
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
"""How long a new member's first join may stay parked before it is dropped (Kafka's value)."""

OFFSETS_TOPIC = "__consumer_offsets"

Writer = Callable[[str, list[Record]], None]
"""Appends records to ``__consumer_offsets``: ``writer(group_id, records)``, all of one group.

It returns once they are durable, or raises: :class:`WriteError` to choose
the error the request gets, anything else for COORDINATOR_NOT_AVAILABLE.
"""


@functools.lru_cache(maxsize=65_536)  # a group is placed on every commit
def partition_for(group_id: str, partitions: int = 50) -> int:
    """The ``__consumer_offsets`` partition of a group: ``Utils.abs(hashCode) % partitions``.

    ``Utils.abs`` is ``x & 0x7fffffff``, so Integer.MIN_VALUE maps to 0:

    >>> partition_for("polygenelubricants")
    0
    """
    return (java_string_hash(group_id) & 0x7FFFFFFF) % partitions


class WriteError(Exception):
    """Raised by a writer to fail a write with a chosen Kafka error."""

    def __init__(self, error: ErrorCode, message: str = "") -> None:
        super().__init__(message or error.name)
        self.error = error


# -- time -----------------------------------------------------------------


class TimerHandle(Protocol):
    """A scheduled callback; ``cancel`` is idempotent."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    """Milliseconds since the epoch and one-shot timers."""

    def now_ms(self) -> int: ...

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle: ...


class LoopClock:
    """Wall-clock time; timers on the running asyncio loop (so call it from the loop)."""

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, callback)


@dataclass(order=True)
class _ManualTimer:
    deadline: int
    sequence: int
    callback: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock that moves only when told: :meth:`advance` runs the timers that come due.

    Timers fire in deadline order (ties in scheduling order), with
    :meth:`now_ms` at their deadline; timers they schedule fire in the same
    call if due.

    >>> clock = ManualClock()
    >>> fired = []
    >>> _ = clock.call_later(10, lambda: fired.append(clock.now_ms()))
    >>> clock.advance(9); fired
    []
    >>> clock.advance(1); fired
    [10]
    """

    def __init__(self, start_ms: int = 0) -> None:
        self._now = start_ms
        self._timers: list[_ManualTimer] = []
        self._sequence = itertools.count()

    def now_ms(self) -> int:
        return self._now

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        timer = _ManualTimer(self._now + max(delay_ms, 0), next(self._sequence), callback)
        heapq.heappush(self._timers, timer)
        return timer

    def advance(self, delta_ms: int) -> None:
        """Move time forward by ``delta_ms``, firing every timer due by then."""
        target = self._now + delta_ms
        while self._timers and self._timers[0].deadline <= target:
            timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                self._now = max(self._now, timer.deadline)
                timer.callback()
        self._now = target

    def pending(self) -> int:
        """How many timers are scheduled and not cancelled."""
        return sum(1 for timer in self._timers if not timer.cancelled)


# -- configuration ----------------------------------------------------------

_CONFIG_NAMES = {
    "group.min.session.timeout.ms": "group_min_session_timeout_ms",
    "group.max.session.timeout.ms": "group_max_session_timeout_ms",
    "group.initial.rebalance.delay.ms": "group_initial_rebalance_delay_ms",
    "group.max.size": "group_max_size",
    "offsets.retention.minutes": "offsets_retention_minutes",
    "offsets.retention.check.interval.ms": "offsets_retention_check_interval_ms",
    "offset.metadata.max.bytes": "offset_metadata_max_bytes",
    "offsets.topic.num.partitions": "offsets_topic_num_partitions",
}


@dataclass(frozen=True)
class CoordinatorConfig:
    """The coordinator's broker settings; defaults are Kafka's."""

    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = INT_MAX
    offsets_retention_minutes: int = 10_080
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4_096
    offsets_topic_num_partitions: int = 50

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if not isinstance(value, int) or value < 0:
                raise InvalidConfigError(f"{item.name} must be an integer >= 0, not {value!r}")
        if self.group_max_size < 1 or self.offsets_topic_num_partitions < 1:
            raise InvalidConfigError("group.max.size and offsets.topic.num.partitions must be >= 1")

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> CoordinatorConfig:
        """The config from Kafka's names (``group.max.size`` ...); other keys are ignored."""
        values = {}
        for name, attribute in _CONFIG_NAMES.items():
            if name in properties:
                try:
                    values[attribute] = int(properties[name])
                except (TypeError, ValueError) as exc:
                    raise InvalidConfigError(f"{name} must be an integer, not {properties[name]!r}") from exc
        return cls(**values)

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000


# -- results ------------------------------------------------------------------


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


@dataclass(frozen=True)
class FetchedOffset:
    """A committed offset; -1 offset and leader epoch when there is none."""

    offset: int
    leader_epoch: int
    metadata: str
    error: ErrorCode = ErrorCode.none


NO_OFFSET = FetchedOffset(-1, -1, "")


class PreparedCommit:
    """A checked offset commit: its records, and the change it makes once they are written.

    ``errors`` holds the partitions that are not written (with why); every
    other partition of the request is in ``records`` and takes the write's
    outcome. ``apply`` makes the offsets visible; ``revert`` undoes an
    ``apply`` whose write then failed, where the offset is still this
    commit's (reverts of one partition's batch run in reverse order, so the
    offsets before the batch come back).
    """

    def __init__(
        self,
        errors: dict[TopicPartition, ErrorCode],
        records: list[Record] | None = None,
        group: GroupMetadata | None = None,
        values: dict[TopicPartition, OffsetCommitValue] | None = None,
    ) -> None:
        self.errors = errors
        self.records = records or []
        self._group = group
        self._values = values or {}
        self._previous: dict[TopicPartition, OffsetCommitValue | None] = {}

    def apply(self) -> None:
        group = self._group
        if group is None or group.is_in(GroupState.DEAD):
            return
        self._previous = {partition: group.offsets.get(partition) for partition in self._values}
        group.offsets.update(self._values)

    def revert(self) -> None:
        """Undo :meth:`apply` where the offset is still this commit's.

        An offset changed since (deleted by OffsetDelete or expiry, or
        committed again) keeps its newer state.
        """
        group = self._group
        if group is None:
            return
        for partition, value in self._previous.items():
            if group.offsets.get(partition) is not self._values[partition]:
                continue
            if value is None:
                del group.offsets[partition]
            else:
                group.offsets[partition] = value
        self._previous = {}

    def answers(self, write_error: ErrorCode) -> dict[TopicPartition, ErrorCode]:
        """Each partition's error: its own, or the write's."""
        answers = dict.fromkeys(self._values, write_error)
        answers.update(self.errors)
        return answers


@dataclass(frozen=True)
class FetchOffsetsResult:
    error: ErrorCode
    offsets: dict[TopicPartition, FetchedOffset] = field(default_factory=dict)


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


@dataclass(frozen=True)
class DeleteOffsetsResult:
    """A group error (then ``partitions`` is empty) or one error per partition."""

    error: ErrorCode
    partitions: dict[TopicPartition, ErrorCode] = field(default_factory=dict)


OffsetCommit = tuple[int, int | None, str | None]
"""What a member commits for a partition: (offset, leader epoch or None/-1, metadata or None)."""


# -- the coordinator ------------------------------------------------------------


@dataclass
class _PendingJoin:
    """The timer of a parked rebalance; an initial one only ends by its timer."""

    handle: TimerHandle
    initial: bool


def _future_setter(future: asyncio.Future[Any]) -> Callable[[Any], None]:
    def resolve(result: Any) -> None:
        if not future.done():
            future.set_result(result)

    return resolve


class GroupCoordinator:
    """Consumer groups and their committed offsets, on one broker.

    All calls must come from the thread running the event loop (and, with a
    :class:`LoopClock`, from inside the loop). Joins and syncs return futures
    that are already resolved when the answer is immediate; every state
    change happens during the call, not when the future is awaited.
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
        self._writer = writer
        self._groups: dict[str, GroupMetadata] = {}
        self._joins: dict[str, _PendingJoin] = {}
        self._syncs: dict[str, TimerHandle] = {}
        self._heartbeats: dict[tuple[str, str], TimerHandle] = {}
        self._expiry_timer: TimerHandle | None = None

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> None:
        """Expire offsets every ``offsets.retention.check.interval.ms`` from now on."""
        if self._expiry_timer is None:
            self._schedule_expiry()

    def close(self) -> None:
        """Stop all timers; parked joins and syncs answer NOT_COORDINATOR; forget every group."""
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None
        for group in list(self._groups.values()):
            self._unload(group)
        self._groups.clear()

    def partition_for(self, group_id: str) -> int:
        """The group's ``__consumer_offsets`` partition under this config."""
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def group(self, group_id: str) -> GroupMetadata | None:
        """The group's live state (for inspection; do not mutate)."""
        return self._groups.get(group_id)

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

        ``member_id`` is "" for a new member. ``require_known_member_id``
        (JoinGroup v4+) makes a new dynamic member's first join answer
        MEMBER_ID_REQUIRED with its new id ``client_id-<uuid4>``, to rejoin
        with. A negative ``rebalance_timeout_ms`` (JoinGroup v0) means the
        session timeout. ``supports_skip_assignment`` (v9+) lets a static
        leader that rejoins a Stable group skip running the assignor.
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
            group = self._add_group(GroupMetadata(group_id, self.clock.now_ms))
        if not self._accept_joining_member(group, request.member_id):
            if group.has_member(request.member_id):
                self._cancel_heartbeat(group, request.member_id)
            group.remove(request.member_id)
            request.respond(JoinResult.failed("", ErrorCode.group_max_size_reached))
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

    def _new_member_join(self, group: GroupMetadata, request: _JoinRequest) -> None:
        if group.is_in(GroupState.DEAD):
            request.respond(JoinResult.failed("", ErrorCode.coordinator_not_available))
            return
        if not group.supports_protocols(request.protocol_type, {name for name, _ in request.protocols}):
            request.respond(JoinResult.failed("", ErrorCode.inconsistent_group_protocol))
            return
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
        if group.is_in(GroupState.DEAD):
            request.respond(JoinResult.failed(member_id, ErrorCode.coordinator_not_available))
            return
        if not group.supports_protocols(request.protocol_type, {name for name, _ in request.protocols}):
            request.respond(JoinResult.failed(member_id, ErrorCode.inconsistent_group_protocol))
            return
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
        self._cancel_heartbeat(group, old_member_id)
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
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
            error = self._store_group(group, assignment)
            if error != ErrorCode.none:
                group.update_member(member, old_protocols, *old_timeouts, None)
                restored = group.replace_static_member(instance_id, new_member_id, old_member_id)
                self._cancel_heartbeat(group, new_member_id)
                self._schedule_heartbeat(group, restored, restored.session_timeout_ms)
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
            self.partition_for(group.group_id),
            reason,
        )
        if initial:
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_initial_join(group, delay, remaining)
        else:
            self._schedule_join(group, group.rebalance_timeout_ms())

    def _schedule_initial_join(self, group: GroupMetadata, delay_ms: int, remaining_ms: int) -> None:
        self._cancel_join(group)
        handle = self.clock.call_later(
            delay_ms, lambda: self._on_initial_join_expired(group, delay_ms, remaining_ms)
        )
        self._joins[group.group_id] = _PendingJoin(handle, initial=True)

    def _on_initial_join_expired(self, group: GroupMetadata, delay_ms: int, remaining_ms: int) -> None:
        """Kafka's ``InitialDelayedJoin``: wait again while members keep arriving."""
        self._joins.pop(group.group_id, None)
        if not self._is_live(group) or not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            next_delay = min(self.config.group_initial_rebalance_delay_ms, remaining_ms)
            self._schedule_initial_join(group, next_delay, max(remaining_ms - delay_ms, 0))
        else:
            self._on_complete_join(group)

    def _schedule_join(self, group: GroupMetadata, timeout_ms: int) -> None:
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
        self._joins.pop(group.group_id, None)
        if self._is_live(group) and group.is_in(GroupState.PREPARING_REBALANCE):
            self._on_complete_join(group)

    def _on_complete_join(self, group: GroupMetadata) -> None:
        """End the join phase: drop dynamic members that did not rejoin, start a generation."""
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                group.remove(member.member_id)
                self._cancel_heartbeat(group, member.member_id)
        if group.is_in(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members are left and none rejoined: wait for them (or their sessions).
            self._schedule_join(group, group.rebalance_timeout_ms())
            return
        group.init_next_generation()
        if group.is_in(GroupState.EMPTY):
            error = self._store_group(group, {})
            if error != ErrorCode.none:
                log.warning("could not write empty metadata of group %s: %s", group.group_id, error.name)
            return
        for member in list(group.members.values()):
            with_members = group.is_leader(member.member_id)
            group.maybe_invoke_join_callback(member, self._join_result(group, member, with_members))
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            member.is_new = False
            group.add_pending_sync_member(member.member_id)
        self._schedule_pending_sync(group)

    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        self._cancel_sync(group)
        generation = group.generation_id
        handle = self.clock.call_later(
            group.rebalance_timeout_ms(), lambda: self._on_sync_expired(group, generation)
        )
        self._syncs[group.group_id] = handle

    def _on_sync_expired(self, group: GroupMetadata, generation: int) -> None:
        """Members that never synced after the join are expelled, and the group rebalances."""
        self._syncs.pop(group.group_id, None)
        if not self._is_live(group) or generation != group.generation_id:
            return
        if not group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        if group.has_received_sync_from_all_members():
            return
        missing = sorted(group.pending_sync_members)
        for member_id in missing:
            group.remove(member_id)
            self._cancel_heartbeat(group, member_id)
        self._prepare_rebalance(group, f"members {missing} did not sync in time")

    def _remove_sync_expiration(self, group: GroupMetadata) -> None:
        group.pending_sync_members.clear()
        self._cancel_sync(group)

    def _maybe_complete_sync_expiration(self, group: GroupMetadata) -> None:
        if group.has_received_sync_from_all_members():
            self._cancel_sync(group)

    # -- heartbeats and sessions ----------------------------------------------

    def _schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int) -> None:
        """Kafka's ``completeAndScheduleNextExpiration``: a new session deadline for ``member``.

        No deadline is set while the member needs none (parked in a join or
        sync); a later reschedule sets one.
        """
        self._cancel_heartbeat(group, member.member_id)
        member.heartbeat_satisfied = False
        if member.has_satisfied_heartbeat():
            return
        member_id = member.member_id
        handle = self.clock.call_later(timeout_ms, lambda: self._on_heartbeat_expired(group, member_id))
        self._heartbeats[(group.group_id, member_id)] = handle

    def _schedule_pending_member_expiration(
        self, group: GroupMetadata, member_id: str, timeout_ms: int
    ) -> None:
        self._cancel_heartbeat(group, member_id)
        handle = self.clock.call_later(timeout_ms, lambda: self._on_pending_member_expired(group, member_id))
        self._heartbeats[(group.group_id, member_id)] = handle

    def _on_heartbeat_expired(self, group: GroupMetadata, member_id: str) -> None:
        self._heartbeats.pop((group.group_id, member_id), None)
        if not self._is_live(group) or not group.has_member(member_id):
            return
        member = group.member(member_id)
        if not member.has_satisfied_heartbeat():
            log.info("member %s of group %s has failed; removing it", member_id, group.group_id)
            self._remove_member_and_update_group(group, member, f"session of {member_id} expired")

    def _on_pending_member_expired(self, group: GroupMetadata, member_id: str) -> None:
        self._heartbeats.pop((group.group_id, member_id), None)
        if self._is_live(group) and group.is_pending_member(member_id):
            self._remove_pending_member_and_update_group(group, member_id)

    def _cancel_heartbeat(self, group: GroupMetadata, member_id: str) -> None:
        handle = self._heartbeats.pop((group.group_id, member_id), None)
        if handle is not None:
            handle.cancel()

    def _remove_member_and_update_group(
        self, group: GroupMetadata, member: MemberMetadata, reason: str
    ) -> None:
        group.maybe_invoke_join_callback(member, JoinResult.failed("", ErrorCode.unknown_member_id))
        group.remove(member.member_id)
        self._cancel_heartbeat(group, member.member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_in(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.remove(member_id)
        self._cancel_heartbeat(group, member_id)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

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

        Resolves at once in a Stable group; during CompletingRebalance a
        follower waits for the leader's sync (or a new rebalance:
        REBALANCE_IN_PROGRESS). Errors: UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
        ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL (v5's type and name
        checks), REBALANCE_IN_PROGRESS while preparing.
        """
        future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        respond: SyncCallback = _future_setter(future)
        group = self._groups.get(group_id)
        if not group_id:
            respond(SyncResult(ErrorCode.invalid_group_id))
        elif group is None:
            respond(SyncResult(ErrorCode.unknown_member_id))
        else:
            mapping = dict(assignments.items() if isinstance(assignments, Mapping) else assignments)
            check = (generation_id, member_id, group_instance_id, protocol_type, protocol_name)
            error = self._validate_sync(group, *check)
            if error is not None:
                respond(SyncResult(error))
            else:
                self._do_sync(group, generation_id, member_id, mapping, respond)
        return future

    def _validate_sync(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> ErrorCode | None:
        if group.is_in(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        error = group.validate_member(member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if protocol_type is not None and protocol_type != group.protocol_type:
            return ErrorCode.inconsistent_group_protocol
        if protocol_name is not None and protocol_name != group.protocol_name:
            return ErrorCode.inconsistent_group_protocol
        return None

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
            self._schedule_heartbeat(group, member, member.session_timeout_ms)

    def _complete_sync_from_leader(
        self, group: GroupMetadata, generation_id: int, leader_id: str, assignments: dict[str, bytes]
    ) -> None:
        """Persist the leader's assignment, hand it out, and make the group Stable."""
        assignment = {member_id: assignments.get(member_id, b"") for member_id in group.members}
        missing = [member_id for member_id in group.members if member_id not in assignments]
        if missing:
            log.warning("empty assignment for members %s of group %s", missing, group.group_id)
        error = self._store_group(group, assignment)
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
                self._schedule_heartbeat(group, member, member.session_timeout_ms)

    # -- Heartbeat and LeaveGroup ------------------------------------------------

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None = None
    ) -> ErrorCode:
        """Renew a member's session.

        REBALANCE_IN_PROGRESS while the group prepares a rebalance (the
        member must rejoin); UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID or
        ILLEGAL_GENERATION for a member that is not current.
        """
        if not group_id:
            return ErrorCode.invalid_group_id
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        if group.is_in(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        error = group.validate_member(member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if group.is_in(GroupState.EMPTY):
            return ErrorCode.unknown_member_id
        member = group.member(member_id)
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave_group(self, group_id: str, members: Sequence[tuple[str, str | None]]) -> LeaveResult:
        """Remove members, each given as (member id, group instance id or None).

        A member id of "" with an instance id removes that static member
        (the admin path). The group rebalances, or becomes Empty when the
        last member leaves.
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

    # -- offsets ---------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        offsets: Mapping[TopicPartition, OffsetCommit],
        group_instance_id: str | None = None,
    ) -> dict[TopicPartition, ErrorCode]:
        """Commit offsets; one error per partition.

        A member of the current generation commits in Stable or
        PreparingRebalance (REBALANCE_IN_PROGRESS while awaiting sync).
        Generation -1 with member id "" commits for a group with no members
        (creating it if need be: simple consumers, admin tools); a group with
        members answers UNKNOWN_MEMBER_ID. Metadata longer than
        ``offset.metadata.max.bytes`` (Java string length) answers
        OFFSET_METADATA_TOO_LARGE for its partition; the others commit.
        The records are written (the writer returns once they are durable)
        before the offsets are visible to :meth:`fetch_offsets`.
        """
        prepared = self.prepare_commit(group_id, generation_id, member_id, offsets, group_instance_id)
        if not prepared.records:
            return prepared.answers(ErrorCode.none)
        error = self._write(group_id, prepared.records)
        if error == ErrorCode.none:
            prepared.apply()
        return prepared.answers(error)

    def prepare_commit(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        offsets: Mapping[TopicPartition, OffsetCommit],
        group_instance_id: str | None = None,
    ) -> PreparedCommit:
        """Check a commit as :meth:`commit_offsets` does and make its records, without writing them.

        The caller writes ``records`` to the group's partition of
        ``__consumer_offsets``, then calls :meth:`PreparedCommit.apply` (or
        applies first and :meth:`PreparedCommit.revert` if the write fails:
        the broker's batched appends), and answers with
        :meth:`PreparedCommit.answers`. Renews a committing member's session.
        """
        group = self._groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return PreparedCommit(dict.fromkeys(offsets, ErrorCode.illegal_generation))
            group = self._add_group(GroupMetadata(group_id, self.clock.now_ms))
        state = group.state  # (read once: a commit is the hot path)
        error = self._validate_offset_commit(group, state, generation_id, member_id, group_instance_id)
        if error is None and state is GroupState.COMPLETING_REBALANCE:
            error = ErrorCode.rebalance_in_progress
        if error is not None:
            return PreparedCommit(dict.fromkeys(offsets, error))
        if state is GroupState.STABLE or state is GroupState.PREPARING_REBALANCE:
            member = group.member(member_id)
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
        now = self.clock.now_ms()
        limit = self.config.offset_metadata_max_bytes
        values = {}
        errors = {}
        for partition, (offset, leader_epoch, metadata) in offsets.items():
            text = metadata or ""
            if not text or java_string_length(text) <= limit:
                epoch = -1 if leader_epoch is None else leader_epoch
                values[partition] = OffsetCommitValue(offset, epoch, text, now)
            else:
                errors[partition] = ErrorCode.offset_metadata_too_large
        records = [offset_commit_record(group_id, t, p, value) for (t, p), value in values.items()]
        return PreparedCommit(errors, records, group, values)

    def _validate_offset_commit(
        self,
        group: GroupMetadata,
        state: GroupState,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
    ) -> ErrorCode | None:
        if state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if generation_id < 0 and state is GroupState.EMPTY:
            return None
        if generation_id >= 0 or member_id != "" or group_instance_id is not None:
            error = group.validate_member(member_id, group_instance_id)
            if error is not None:
                return error
            return ErrorCode.illegal_generation if generation_id != group.generation_id else None
        return None if state is GroupState.EMPTY else ErrorCode.unknown_member_id

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> FetchOffsetsResult:
        """The committed offsets of ``partitions`` (offset -1 where none), or all of the group's.

        Answers whatever the group's state: a group may use Kafka only to store offsets.
        """
        group = self._groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return FetchOffsetsResult(ErrorCode.none, dict.fromkeys(partitions or (), NO_OFFSET))
        if partitions is None:
            return FetchOffsetsResult(
                ErrorCode.none, {partition: _fetched(value) for partition, value in group.offsets.items()}
            )
        result = {}
        for partition in partitions:
            value = group.offsets.get(partition)
            result[partition] = NO_OFFSET if value is None else _fetched(value)
        return FetchOffsetsResult(ErrorCode.none, result)

    def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> DeleteOffsetsResult:
        """OffsetDelete: forget committed offsets the group no longer consumes.

        An Empty group may delete any; a consumer group with members may
        delete those of topics no member subscribes to (the others answer
        GROUP_SUBSCRIBED_TO_TOPIC); any other group answers NON_EMPTY_GROUP.
        """
        if not group_id:
            return DeleteOffsetsResult(ErrorCode.invalid_group_id)
        group = self._groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return DeleteOffsetsResult(ErrorCode.group_id_not_found)
        wanted = list(partitions)
        errors: dict[TopicPartition, ErrorCode] = {}
        if group.is_in(GroupState.EMPTY):
            eligible = wanted
        elif group.is_consumer_group:
            eligible = [tp for tp in wanted if not group.is_subscribed_to_topic(tp[0])]
            errors = {tp: ErrorCode.group_subscribed_to_topic for tp in wanted if tp not in eligible}
        else:
            return DeleteOffsetsResult(ErrorCode.non_empty_group)
        if eligible:
            self._cleanup_group(group, group.remove_offsets(eligible))
            errors.update(dict.fromkeys(eligible, ErrorCode.none))
        return DeleteOffsetsResult(ErrorCode.none, errors)

    def expire_offsets(self, now_ms: int | None = None) -> int:
        """Remove offsets past ``offsets.retention.minutes`` (Kafka's rules; see
        :meth:`GroupMetadata.remove_expired_offsets`), writing their tombstones.

        An Empty group left with no offsets dies and is forgotten (with a
        tombstone of its metadata if it ever had a generation). Returns how
        many offsets were removed.
        """
        now = self.clock.now_ms() if now_ms is None else now_ms
        retention = self.config.offsets_retention_ms
        removed = 0
        for group in list(self._groups.values()):
            removed += self._cleanup_group(group, group.remove_expired_offsets(now, retention))
        return removed

    def _schedule_expiry(self) -> None:
        def run() -> None:
            self._expiry_timer = None
            try:
                removed = self.expire_offsets()
                if removed:
                    log.info("expired %d offsets", removed)
            finally:
                self._schedule_expiry()

        self._expiry_timer = self.clock.call_later(self.config.offsets_retention_check_interval_ms, run)

    def _cleanup_group(
        self, group: GroupMetadata, removed: Mapping[TopicPartition, OffsetCommitValue]
    ) -> int:
        """Tombstone ``removed``; an Empty group with no offsets left becomes Dead and is dropped."""
        if group.is_in(GroupState.EMPTY) and not group.has_offsets():
            group.transition_to(GroupState.DEAD)
        records = [offset_commit_record(group.group_id, t, p, None) for (t, p) in removed]
        if group.is_in(GroupState.DEAD) and self._groups.get(group.group_id) is group:
            self._drop(group)
            if group.generation_id > 0:  # offsets-only groups never wrote metadata
                records.append(group_metadata_record(group.group_id, None))
        if records:
            error = self._write(group.group_id, records)
            if error != ErrorCode.none:
                log.warning("could not write tombstones of group %s: %s", group.group_id, error.name)
        return len(removed)

    # -- groups ------------------------------------------------------------------

    def describe_group(self, group_id: str) -> GroupDescription:
        """DescribeGroups for one group; an unknown group reads as Dead with no members."""
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
        """Every group, or those in ``states`` (matched case-insensitively)."""
        wanted = {state.lower() for state in states} if states else None
        return [
            GroupOverview(group.group_id, group.protocol_type or "", str(group.state))
            for group in self._groups.values()
            if wanted is None or str(group.state).lower() in wanted
        ]

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        """Delete Empty groups with their offsets; NON_EMPTY_GROUP or GROUP_ID_NOT_FOUND otherwise."""
        errors: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            group = self._groups.get(group_id)
            if group is None or group.is_in(GroupState.DEAD):
                errors[group_id] = ErrorCode.group_id_not_found
            elif group.is_in(GroupState.EMPTY):
                group.transition_to(GroupState.DEAD)
                self._cleanup_group(group, group.remove_all_offsets())
                errors[group_id] = ErrorCode.none
            else:
                errors[group_id] = ErrorCode.non_empty_group
        return errors

    # -- persistence --------------------------------------------------------------

    def load(self, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Rebuild groups and offsets from ``__consumer_offsets`` records in log order.

        The latest record per key wins and tombstones delete. Groups with
        members come back Stable (their sessions start now: members that do
        not heartbeat are expelled); groups without, Empty. Offsets whose
        group has no metadata record belong to an Empty group with no
        protocol type. Keys of other record types are skipped. A loaded
        group replaces a group of the same id.
        """
        offsets: dict[str, dict[TopicPartition, OffsetCommitValue]] = {}
        metadata: dict[str, GroupMetadataValue | None] = {}
        for key_bytes, value_bytes in records:
            try:
                key = decode_key(key_bytes)
            except UnknownKeyError:
                continue
            if isinstance(key, OffsetCommitKey):
                group_offsets = offsets.setdefault(key.group, {})
                partition = (key.topic, key.partition)
                if value_bytes is None:
                    group_offsets.pop(partition, None)
                else:
                    group_offsets[partition] = OffsetCommitValue.decode(value_bytes)
            elif isinstance(key, GroupMetadataKey):
                metadata[key.group] = None if value_bytes is None else GroupMetadataValue.decode(value_bytes)
        for group_id in dict.fromkeys([*metadata, *offsets]):
            self._load_group(group_id, metadata.get(group_id), offsets.get(group_id, {}))

    def _load_group(
        self,
        group_id: str,
        value: GroupMetadataValue | None,
        offsets: dict[TopicPartition, OffsetCommitValue],
    ) -> None:
        if value is None and not offsets:
            old = self._groups.get(group_id)
            if old is not None:
                self._unload(old)
            return
        if value is None:
            group = GroupMetadata(group_id, self.clock.now_ms)
        else:
            group = GroupMetadata.from_record_value(group_id, value, self.clock.now_ms)
        group.offsets.update(offsets)
        old = self._groups.get(group_id)
        if old is not None:
            self._unload(old)
        self._add_group(group)
        if group.size > self.config.group_max_size:
            self._prepare_rebalance(group, "the loaded group is over group.max.size")
        for member in list(group.members.values()):
            self._schedule_heartbeat(group, member, member.session_timeout_ms)

    def _store_group(self, group: GroupMetadata, assignment: Mapping[str, bytes]) -> ErrorCode:
        return self._write(
            group.group_id, [group_metadata_record(group.group_id, group.to_record_value(assignment))]
        )

    def _write(self, group_id: str, records: list[Record]) -> ErrorCode:
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

    # -- bookkeeping ----------------------------------------------------------------

    def _add_group(self, group: GroupMetadata) -> GroupMetadata:
        self._groups[group.group_id] = group
        return group

    def _is_live(self, group: GroupMetadata) -> bool:
        return self._groups.get(group.group_id) is group and not group.is_in(GroupState.DEAD)

    def _cancel_join(self, group: GroupMetadata) -> None:
        pending = self._joins.pop(group.group_id, None)
        if pending is not None:
            pending.handle.cancel()

    def _cancel_sync(self, group: GroupMetadata) -> None:
        handle = self._syncs.pop(group.group_id, None)
        if handle is not None:
            handle.cancel()

    def _drop(self, group: GroupMetadata) -> None:
        """Forget a group and cancel its timers."""
        del self._groups[group.group_id]
        self._cancel_join(group)
        self._cancel_sync(group)
        for key in [key for key in self._heartbeats if key[0] == group.group_id]:
            self._heartbeats.pop(key).cancel()

    def _unload(self, group: GroupMetadata) -> None:
        """Kafka's ``onGroupUnloaded``: the group goes Dead; parked calls answer NOT_COORDINATOR."""
        group.transition_to(GroupState.DEAD)
        for member in list(group.members.values()):
            group.maybe_invoke_join_callback(
                member, JoinResult.failed(member.member_id, ErrorCode.not_coordinator)
            )
            group.maybe_invoke_sync_callback(member, SyncResult(ErrorCode.not_coordinator))
        if self._groups.get(group.group_id) is group:
            self._drop(group)


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


def _fetched(value: OffsetCommitValue) -> FetchedOffset:
    return FetchedOffset(value.offset, value.leader_epoch, value.metadata)
