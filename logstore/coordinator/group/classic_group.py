"""A consumer group's state: members, Kafka's group state machine, offsets.

This is the bookkeeping of Kafka's classic ``GroupMetadata`` and
``MemberMetadata``; it knows nothing of time, timers or the log (the
:class:`~logstore.coordinator.group.classic_membership.MembershipManager` drives it, and
:mod:`~logstore.coordinator.group.persistence` turns it into records and back).

The states and their legal predecessors (anything else raises
:class:`InvalidTransitionError`):

======================  ==========================================
state                   entered from
======================  ==========================================
PreparingRebalance      Empty, Stable, CompletingRebalance
CompletingRebalance     PreparingRebalance
Stable                  CompletingRebalance
Empty                   PreparingRebalance
Dead                    every state (Dead -> Dead included)
======================  ==========================================

Protocol selection: the candidates are the protocols every member supports;
each member votes for the first candidate in its own preference order; the
most votes win. A tie goes to the protocol Kafka's ``HashMap`` of votes
iterates first (Java's ``Stream.max`` keeps the first of equal maxima),
which this module reproduces from Java's ``String.hashCode``:

>>> group = GroupMetadata("g", now_ms=lambda: 0)
>>> for name, protocols in [("a", ["range", "roundrobin"]), ("b", ["roundrobin", "range"])]:
...     group.add(MemberMetadata(name, None, name, "/h", 10, 10, "consumer", [(p, b"") for p in protocols]))
>>> group.select_protocol()  # one vote each: "range" hashes to an earlier bucket
'range'
"""

from __future__ import annotations

import enum
import struct
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from logstore.coordinator.group.offsets_schemas import OffsetCommitValue
from logstore.coordinator.java_strings import java_hashmap_order

TopicPartition = tuple[str, int]
Protocols = Sequence[tuple[str, bytes]]
"""A member's protocols: (name, metadata) pairs, most preferred first."""

CONSUMER_PROTOCOL_TYPE = "consumer"
MEMBER_ID_DELIMITER = "-"


class GroupState(enum.Enum):
    """Kafka's classic group states; the value is the name Kafka reports."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


_VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
}


class InvalidTransitionError(AssertionError):
    """A state change the group state machine does not allow (a coordinator bug)."""


@dataclass(frozen=True)
class JoinMember:
    """A member as the leader's JoinGroup response lists it."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinResult:
    """The outcome of a JoinGroup.

    On success ``members`` is every member's metadata for the selected
    protocol if this member is the leader, and empty otherwise. On error the
    other fields keep Kafka's defaults (generation -1, no leader).
    """

    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    members: tuple[JoinMember, ...] = ()

    @classmethod
    def failed(cls, member_id: str, error: ErrorCode) -> JoinResult:
        """A failed join's result, with Kafka's defaults for the rest. O(1)."""
        return cls(error=error, member_id=member_id)


@dataclass(frozen=True)
class SyncResult:
    """The outcome of a SyncGroup: this member's assignment from the leader."""

    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]


def parse_subscription_topics(metadata: bytes) -> list[str]:
    """The topics of a consumer protocol subscription, read with its version-0 prefix.

    Every version of ``ConsumerProtocolSubscription`` starts with an int16
    version and the topics (int32 count, int16-length strings); Kafka reads
    just that prefix. Raises ``ValueError`` for metadata that does not parse.
    O(length of ``metadata``).
    """
    try:
        (version, count) = struct.unpack_from(">hi", metadata, 0)
        if version < 0 or count < 0:
            raise ValueError(f"bad subscription header (version {version}, {count} topics)")
        position = 6
        topics = []
        for _ in range(count):
            (length,) = struct.unpack_from(">h", metadata, position)
            end = position + 2 + length
            if length < 0 or end > len(metadata):
                raise ValueError("a subscription topic runs past the metadata")
            topics.append(metadata[position + 2 : end].decode("utf-8"))
            position = end
        return topics
    except (struct.error, UnicodeDecodeError) as exc:
        raise ValueError(f"unreadable consumer subscription: {exc}") from exc


class MemberMetadata:
    """One member of a group.

    Invariants: ``protocols`` holds no duplicate names (the first of a
    repeated name is kept); ``awaiting_join`` / ``awaiting_sync`` are set
    only while the member has a JoinGroup / SyncGroup parked.
    """

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
        assignment: bytes = b"",
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols: list[tuple[str, bytes]] = _dedupe(protocols)
        self.assignment = assignment
        self.awaiting_join: JoinCallback | None = None
        self.awaiting_sync: SyncCallback | None = None
        self.is_new = False
        self.heartbeat_satisfied = False

    def __repr__(self) -> str:
        return (
            f"MemberMetadata({self.member_id!r}, instance={self.group_instance_id!r}, "
            f"protocols={[name for name, _ in self.protocols]})"
        )

    @property
    def is_static(self) -> bool:
        """Whether the member has a ``group.instance.id``. O(1)."""
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        """Whether the member has a JoinGroup parked. O(1)."""
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        """Whether the member has a SyncGroup parked. O(1)."""
        return self.awaiting_sync is not None

    @property
    def protocol_names(self) -> set[str]:
        """The names of the member's protocols. O(protocols)."""
        return {name for name, _ in self.protocols}

    def metadata(self, protocol: str) -> bytes:
        """This member's metadata for ``protocol`` (``KeyError`` if it does not support it). O(protocols)."""
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: Protocols) -> bool:
        """Whether ``protocols`` equals this member's, in the same order with the same metadata.

        O(protocols).
        """
        return _dedupe(protocols) == self.protocols

    def vote(self, candidates: set[str]) -> str:
        """This member's most preferred protocol among ``candidates``. O(protocols)."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} does not support any of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        """Whether the pending session deadline is met.

        A new member must have heartbeated (it may expire while its first
        join is parked); an old member parked in a join or sync is alive by
        definition; otherwise the member must have heartbeated. O(1).
        """
        if self.is_new:
            return self.heartbeat_satisfied
        if self.is_awaiting_join or self.is_awaiting_sync:
            return True
        return self.heartbeat_satisfied


def _dedupe(protocols: Protocols) -> list[tuple[str, bytes]]:
    seen: set[str] = set()
    result = []
    for name, metadata in protocols:
        if name not in seen:
            seen.add(name)
            result.append((name, bytes(metadata)))
    return result


class GroupMetadata:
    """A group: members in join order, state, generation, leader, committed offsets.

    Invariants: ``leader_id`` is a member's id, or ``None`` iff there are no
    members (asserted after every change of members or leader);
    ``static_members`` maps each static member's instance id to its current
    member id; ``supported_protocols[p]`` counts the members that support
    ``p``; a pending member (given an id by MEMBER_ID_REQUIRED, not yet
    rejoined) is never a member; states change only as
    ``_VALID_PREVIOUS_STATES`` allows (:class:`InvalidTransitionError`);
    the generation only increases, by one per completed join phase
    (asserted). What a Stable group holds is the coordinator's to keep (see
    :class:`~logstore.coordinator.group.classic_membership.MembershipManager`).
    """

    def __init__(
        self,
        group_id: str,
        now_ms: Callable[[], int],
        state: GroupState = GroupState.EMPTY,
        *,
        generation_id: int = 0,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        leader_id: str | None = None,
        current_state_timestamp: int | None = None,
    ) -> None:
        self.group_id = group_id
        self._now_ms = now_ms
        self._state = state
        self.current_state_timestamp: int | None = (
            now_ms() if current_state_timestamp is None else current_state_timestamp
        )
        self.generation_id = generation_id
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.leader_id = leader_id
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}
        self.pending_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.supported_protocols: Counter[str] = Counter()
        self.offsets: dict[TopicPartition, OffsetCommitValue] = {}
        self.subscribed_topics: frozenset[str] | None = None
        self.new_member_added = False

    def __repr__(self) -> str:
        return (
            f"GroupMetadata({self.group_id!r}, {self._state}, generation={self.generation_id}, "
            f"members={list(self.members)})"
        )

    # -- state ------------------------------------------------------------

    @property
    def state(self) -> GroupState:
        """The group's state. O(1)."""
        return self._state

    def is_in(self, *states: GroupState) -> bool:
        """Whether the group is in one of ``states``. O(len(states))."""
        return self._state in states

    def can_rebalance(self) -> bool:
        """Whether the group may enter PreparingRebalance from its state. O(1)."""
        return self._state in _VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    def transition_to(self, state: GroupState) -> None:
        """Enter ``state`` and stamp the time; raises :class:`InvalidTransitionError` if illegal. O(1)."""
        if self._state not in _VALID_PREVIOUS_STATES[state]:
            raise InvalidTransitionError(
                f"group {self.group_id} cannot move from {self._state} to {state}; "
                f"it must be in one of {sorted(map(str, _VALID_PREVIOUS_STATES[state]))}"
            )
        self._state = state
        self.current_state_timestamp = self._now_ms()

    def _check_leader(self) -> None:
        """Assert the leader invariant: a member's id, or None iff there are no members. O(1)."""
        leader = self.leader_id
        assert (leader in self.members) if leader is not None else not self.members, (
            f"{self} has leader {leader!r}"
        )

    # -- members ----------------------------------------------------------

    @property
    def size(self) -> int:
        """How many members the group has. O(1)."""
        return len(self.members)

    def has_member(self, member_id: str) -> bool:
        """Whether ``member_id`` is a member (pending members are not). O(1)."""
        return member_id in self.members

    def member(self, member_id: str) -> MemberMetadata:
        """The member of that id (``KeyError`` if none). O(1)."""
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        """Whether ``member_id`` leads the group. O(1)."""
        return self.leader_id == member_id

    def add(self, member: MemberMetadata, callback: JoinCallback | None = None) -> None:
        """Add ``member`` (parked in a join if ``callback`` is given); the first member leads. O(1)."""
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise InvalidTransitionError(
                    f"static member {member.group_instance_id} is already in group {self.group_id}"
                )
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type:
            raise InvalidTransitionError("the group's and the member's protocol types differ")
        if not self.supports_protocols(member.protocol_type, member.protocol_names):
            raise InvalidTransitionError("the group supports none of the member's protocols")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names)
        member.awaiting_join = callback
        self.pending_members.discard(member.member_id)
        self._check_leader()

    def remove(self, member_id: str) -> None:
        """Remove a member (or a pending member); a new leader is the first remaining member. O(1)."""
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(member.protocol_names)
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        self._check_leader()

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else lead with the first rejoined member.

        False if there is no leader (no members) or no member rejoined. O(members).
        """
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def replace_static_member(
        self, group_instance_id: str, old_member_id: str, new_member_id: str
    ) -> MemberMetadata:
        """Give a static member a new member id, in place, fencing the old id.

        A join or sync the old id has parked answers FENCED_INSTANCE_ID. The
        member keeps its position in join order, its leadership and assignment.
        O(members) (the members are rebuilt to keep their order).
        """
        old = self.members[old_member_id]
        self.maybe_invoke_join_callback(old, JoinResult.failed(old_member_id, ErrorCode.fenced_instance_id))
        self.maybe_invoke_sync_callback(old, SyncResult(ErrorCode.fenced_instance_id))
        new = MemberMetadata(
            new_member_id,
            old.group_instance_id,
            old.client_id,
            old.client_host,
            old.rebalance_timeout_ms,
            old.session_timeout_ms,
            old.protocol_type,
            old.protocols,
            old.assignment,
        )
        self.members = {
            (new_member_id if member_id == old_member_id else member_id): (new if member is old else member)
            for member_id, member in self.members.items()
        }
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        self.static_members[group_instance_id] = new_member_id
        self._check_leader()
        return new

    def update_member(
        self,
        member: MemberMetadata,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        callback: JoinCallback | None,
    ) -> None:
        """Replace a member's protocols and timeouts; park (or unpark) its join. O(protocols)."""
        self.supported_protocols.subtract(member.protocol_names)
        member.protocols = _dedupe(protocols)
        self.supported_protocols.update(member.protocol_names)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.awaiting_join = callback

    def maybe_invoke_join_callback(self, member: MemberMetadata, result: JoinResult) -> bool:
        """Answer the member's parked join, if any; True if there was one. O(1)."""
        callback = member.awaiting_join
        if callback is None:
            return False
        member.awaiting_join = None
        callback(result)
        return True

    def maybe_invoke_sync_callback(self, member: MemberMetadata, result: SyncResult) -> bool:
        """Answer the member's parked sync, if any; True if there was one. O(1)."""
        callback = member.awaiting_sync
        if callback is None:
            return False
        member.awaiting_sync = None
        callback(result)
        return True

    # -- pending members (MEMBER_ID_REQUIRED) and pending syncs -------------

    def is_pending_member(self, member_id: str) -> bool:
        """Whether ``member_id`` was handed out by MEMBER_ID_REQUIRED and has not rejoined. O(1)."""
        return member_id in self.pending_members

    def add_pending_member(self, member_id: str) -> None:
        """Record a member id handed out by MEMBER_ID_REQUIRED. O(1)."""
        if member_id in self.members:
            raise InvalidTransitionError(f"{member_id} is already a member of {self.group_id}")
        self.pending_members.add(member_id)

    def add_pending_sync_member(self, member_id: str) -> None:
        """Await a SyncGroup from ``member_id`` (after a join completes). O(1)."""
        self.pending_sync_members.add(member_id)

    def remove_pending_sync_member(self, member_id: str) -> None:
        """``member_id`` synced. O(1)."""
        self.pending_sync_members.discard(member_id)

    def has_received_sync_from_all_members(self) -> bool:
        """Whether no member's SyncGroup is still awaited. O(1)."""
        return not self.pending_sync_members

    # -- static members ---------------------------------------------------

    def static_member_id(self, group_instance_id: str) -> str | None:
        """The member id of the static member with that instance id, if any. O(1)."""
        return self.static_members.get(group_instance_id)

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode | None:
        """Kafka's ``validateCurrentMember``: a static id must map to ``member_id``, which must exist.

        FENCED_INSTANCE_ID if the instance id maps to another member id;
        UNKNOWN_MEMBER_ID if it maps to none or ``member_id`` is not a member.
        O(1).
        """
        if group_instance_id is not None:
            current = self.static_members.get(group_instance_id)
            if current is None:
                return ErrorCode.unknown_member_id
            if current != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in self.members:
            return ErrorCode.unknown_member_id
        return None

    def validate_generation(
        self, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode | None:
        """:meth:`validate_member`, then ILLEGAL_GENERATION unless ``generation_id`` is current. O(1).

        What SyncGroup, Heartbeat and a member's OffsetCommit check.
        """
        error = self.validate_member(member_id, group_instance_id)
        if error is not None:
            return error
        return ErrorCode.illegal_generation if generation_id != self.generation_id else None

    # -- rebalance --------------------------------------------------------

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        """The members with no join parked. O(members)."""
        return [member for member in self.members.values() if not member.is_awaiting_join]

    def num_awaiting_join(self) -> int:
        """How many members have a join parked. O(members)."""
        return sum(1 for member in self.members.values() if member.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        """Every member has a join parked and no MEMBER_ID_REQUIRED member is outstanding. O(members)."""
        return self.num_awaiting_join() == len(self.members) and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        """The largest rebalance timeout of the members (0 with none). O(members)."""
        return max((member.rebalance_timeout_ms for member in self.members.values()), default=0)

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        """``<group.instance.id or client.id>-<uuid4>``, as Kafka. O(1)."""
        prefix = client_id if group_instance_id is None else group_instance_id
        return f"{prefix}{MEMBER_ID_DELIMITER}{uuid.uuid4()}"

    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports. O(distinct protocols)."""
        return {name for name, count in self.supported_protocols.items() if count == len(self.members)}

    def supports_protocols(self, protocol_type: str, protocols: set[str]) -> bool:
        """Whether a member with these protocols may join.

        An Empty group takes any non-empty type and protocol list; otherwise
        the type must match and one protocol must be supported by every member.
        O(len(protocols)).
        """
        if self.is_in(GroupState.EMPTY):
            return bool(protocol_type) and bool(protocols)
        count = len(self.members)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols[name] == count for name in protocols
        )

    def select_protocol(self) -> str:
        """The protocol with the most member votes; ties go to Java ``HashMap`` order. O(members)."""
        if not self.members:
            raise InvalidTransitionError(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes = Counter(member.vote(candidates) for member in self.members.values())
        best = max(votes.values())
        return next(name for name in java_hashmap_order(list(votes)) if votes[name] == best)

    def init_next_generation(self) -> None:
        """Bump the generation; select a protocol and await sync, or become Empty with no members.

        O(members).
        """
        previous = self.generation_id
        self.generation_id += 1
        assert self.generation_id > previous, f"{self}: the generation went from {previous} back"
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY)
        self.pending_sync_members.clear()

    def current_member_metadata(self) -> tuple[JoinMember, ...]:
        """Every member's metadata for the selected protocol (what the leader is sent). O(members)."""
        if self.is_in(GroupState.DEAD, GroupState.PREPARING_REBALANCE) or self.protocol_name is None:
            raise InvalidTransitionError(f"group {self.group_id} in {self._state} has no member metadata")
        protocol = self.protocol_name
        return tuple(
            JoinMember(member.member_id, member.group_instance_id, member.metadata(protocol))
            for member in self.members.values()
        )

    # -- subscriptions ----------------------------------------------------

    @property
    def is_consumer_group(self) -> bool:
        """Whether the protocol type is "consumer". O(1)."""
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """The union of the members' subscribed topics, for a "consumer" group.

        ``None`` (unknown) for other protocol types, before a protocol is
        selected, or if a member's metadata does not parse. O(members × their
        subscriptions' size).
        """
        if not self.is_consumer_group:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(parse_subscription_topics(member.metadata(self.protocol_name)))
        except (ValueError, KeyError):
            return None
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Whether a member subscribes to ``topic``; True when unknown, to be safe. O(1)."""
        return True if self.subscribed_topics is None else topic in self.subscribed_topics

    # -- offsets ----------------------------------------------------------

    def has_offsets(self) -> bool:
        """Whether the group has committed offsets. O(1)."""
        return bool(self.offsets)

    def remove_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetCommitValue]:
        """Drop the offsets of ``partitions``; returns those that existed. O(len(partitions))."""
        removed = {}
        for partition in partitions:
            value = self.offsets.pop(partition, None)
            if value is not None:
                removed[partition] = value
        return removed

    def remove_all_offsets(self) -> dict[TopicPartition, OffsetCommitValue]:
        """Drop and return every offset. O(offsets)."""
        return self.remove_offsets(list(self.offsets))

    def remove_expired_offsets(
        self, now_ms: int, retention_ms: int
    ) -> dict[TopicPartition, OffsetCommitValue]:
        """Drop and return the offsets past retention, by Kafka's rules.

        - Empty group with a protocol type: every offset once ``retention_ms``
          has passed since the group became Empty (since its commit if that
          time is unknown);
        - Stable consumer group with known subscriptions: offsets of topics no
          member subscribes to, ``retention_ms`` after their commit;
        - no protocol type (offsets-only "simple" consumers): each offset
          ``retention_ms`` after its commit;
        - otherwise nothing expires.

        An offset with an explicit expire timestamp (value v1) expires at it.
        O(offsets).
        """
        subscribed: frozenset[str] = frozenset()
        base: Callable[[OffsetCommitValue], int]
        if self.protocol_type is not None and self.is_in(GroupState.EMPTY):
            base = self._since_empty
        elif self.is_consumer_group and self.subscribed_topics is not None and self.is_in(GroupState.STABLE):
            base, subscribed = _since_commit, self.subscribed_topics
        elif self.protocol_type is None:
            base = _since_commit
        else:
            return {}
        expired = [
            partition
            for partition, value in self.offsets.items()
            if partition[0] not in subscribed and _is_expired(value, base(value), now_ms, retention_ms)
        ]
        return self.remove_offsets(expired)

    def _since_empty(self, value: OffsetCommitValue) -> int:
        """When the group became Empty, or the commit time if that is unknown."""
        return (
            value.commit_timestamp if self.current_state_timestamp is None else self.current_state_timestamp
        )


def _since_commit(value: OffsetCommitValue) -> int:
    return value.commit_timestamp


def _is_expired(value: OffsetCommitValue, base_ms: int, now_ms: int, retention_ms: int) -> bool:
    if value.expire_timestamp is not None:
        return now_ms >= value.expire_timestamp
    return now_ms - base_ms >= retention_ms
