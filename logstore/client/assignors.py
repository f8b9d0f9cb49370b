"""The consumer's partition assignors, as pure functions of the members' subscriptions and the topics.

Each mirrors the Java client's class of the same ``partition.assignment.strategy`` name (and
librdkafka's), so a group whose leader is any of them hands out the same kind of assignment:

* ``range``: ``org.apache.kafka.clients.consumer.RangeAssignor`` (without rack awareness: the
  partitions' replica racks are not an input here).
* ``roundrobin``: ``RoundRobinAssignor``.
* ``sticky``: ``StickyAssignor`` over ``internals.AbstractStickyAssignor``, both of its builders:
  the constrained one when every member subscribes to the same topics, the general one otherwise.
* ``cooperative-sticky``: ``CooperativeStickyAssignor``: the sticky result, less every partition
  that another member still owns (it is first revoked; the next rebalance hands it over).

Members are ordered as Java orders them (``MemberInfo``: static members by ``group.instance.id``
first; strings compared by UTF-16 code units, as ``String.compareTo``). Where Java iterates a
``HashMap`` (whose order no other client reproduces either, librdkafka included) this module uses
member-id order, so a result is deterministic: the same input always gives the same assignment.

Checked against Kafka's Java classes on thousands of random groups: range and round robin agree
always, the sticky assignors whenever Java's hash orders do not decide a tie (which member keeps
one partition more; which of equally good partitions moves). Where Java mishandles its input this
module departs from it: claims on partitions that do not exist are dropped, and a claim repeated
within one member counts once; a partition goes back to its previous owner only if that member
still subscribes to its topic and takes part (Java may give it to a member not subscribed, or
fail); cooperative-sticky withholds a partition from a member whose own claim to it lost (to a
higher generation, or a tie) while another member still claims it, in both builders (Java does
so only in the constrained one).
"""

from __future__ import annotations

import abc
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from sortedcontainers import SortedList

from logstore.client.consumer_protocol import (
    DEFAULT_GENERATION,
    Subscription,
    TopicPartition,
    decode_sticky_user_data,
    encode_sticky_user_data,
)

__all__ = [
    "ASSIGNORS",
    "Assignor",
    "CooperativeStickyAssignor",
    "Member",
    "RangeAssignor",
    "RoundRobinAssignor",
    "StickyAssignor",
    "TopicPartition",
    "assign",
    "get_assignor",
]

Result = dict[str, list[TopicPartition]]


@dataclass(frozen=True)
class Member:
    """One group member as the leader sees it in the JoinGroup response."""

    member_id: str
    subscription: Subscription
    group_instance_id: str | None = None


def _java_order(s: str) -> bytes:
    """A sort key that orders strings as Java's ``String.compareTo`` (UTF-16 code units)."""
    return s.encode("utf-16-be", "surrogatepass")


def _member_info_order(m: Member) -> tuple[int, bytes, bytes]:
    """Java's ``MemberInfo`` order: static members by instance id first, then the rest by member id."""
    if m.group_instance_id is not None:
        return 0, _java_order(m.group_instance_id), _java_order(m.member_id)
    return 1, _java_order(m.member_id), b""


def _all_partitions(counts: Mapping[str, int]) -> list[TopicPartition]:
    """Every partition of ``counts``, topics in Java's string order, each topic's partitions ascending."""
    return [(t, p) for t in sorted(counts, key=_java_order) for p in range(counts[t])]


class Assignor(abc.ABC):
    """A partition assignor: its protocol name, rebalance protocol, the assignment, and its user data."""

    name: ClassVar[str]
    protocol: ClassVar[str] = "EAGER"
    """Kafka's ``RebalanceProtocol``: "EAGER" (revoke everything, then join) or "COOPERATIVE"."""

    def assign(
        self,
        members: Sequence[Member] | Mapping[str, Subscription],
        partitions_per_topic: Mapping[str, int],
    ) -> Result:
        """Each member id's partitions (sorted); a member with none maps to an empty list.

        Topics no member subscribes to, or absent from ``partitions_per_topic``, or with no
        partitions, take no part (as in Java's ``AbstractPartitionAssignor``).
        """
        ms = _members(members)
        if not ms:
            return {}
        subscribed = {t for m in ms for t in m.subscription.topics}
        counts = {t: n for t, n in partitions_per_topic.items() if t in subscribed and n > 0}
        result: Result = {m.member_id: [] for m in ms}
        result.update(self._assign(ms, counts))
        for partitions in result.values():
            partitions.sort()
        assert _valid(result, ms, counts, complete=self.protocol == "EAGER")
        return result

    @abc.abstractmethod
    def _assign(self, members: list[Member], counts: dict[str, int]) -> Result: ...

    def user_data(self, assignment: Iterable[TopicPartition] | None, generation: int) -> bytes | None:
        """The user data a member puts in its next subscription, given its current assignment
        (None before its first one) and that assignment's generation."""
        return None


def _members(members: Sequence[Member] | Mapping[str, Subscription]) -> list[Member]:
    ms = [Member(k, v) for k, v in members.items()] if isinstance(members, Mapping) else list(members)
    ids = [m.member_id for m in ms]
    if len(set(ids)) != len(ids):
        raise ValueError(f"duplicate member ids in {sorted(ids)}")
    return ms


def _valid(result: Result, members: list[Member], counts: dict[str, int], complete: bool) -> bool:
    """The invariant of every assignor: each partition goes to at most one member, which subscribes
    to its topic; eager assignors also give out every partition."""
    topics = {m.member_id: set(m.subscription.topics) for m in members}
    given = [(tp, mid) for mid, tps in result.items() for tp in tps]
    owners = dict(given)
    assert len(owners) == len(given), "a partition was assigned twice"
    assert all(t in topics[mid] and 0 <= p < counts.get(t, 0) for (t, p), mid in given)
    assert not complete or len(owners) == sum(counts.values()), "a partition was left out"
    return True


# -- range and round robin -------------------------------------------------------------------------


class RangeAssignor(Assignor):
    """Per topic, the subscribers in ``MemberInfo`` order each take a contiguous range of partitions;
    the first ``partitions % subscribers`` take one more.

    Time O(M log M + T·M + P) and space O(P + M) for T topics, M members and P partitions.
    """

    name = "range"

    def _assign(self, members: list[Member], counts: dict[str, int]) -> Result:
        result: Result = defaultdict(list)
        ordered = [(m.member_id, set(m.subscription.topics)) for m in sorted(members, key=_member_info_order)]
        for topic, n in counts.items():
            subscribers = [member_id for member_id, topics in ordered if topic in topics]
            per, extra = divmod(n, len(subscribers))
            start = 0
            for i, member_id in enumerate(subscribers):
                end = start + per + (i < extra)
                result[member_id].extend((topic, p) for p in range(start, end))
                start = end
        return result


class RoundRobinAssignor(Assignor):
    """All subscribed partitions, sorted by topic then partition, dealt to the members in
    ``MemberInfo`` order in a circle; a member not subscribed to a partition's topic is passed over.

    Time O(M log M + P·M) (O(M log M + P) when all subscribe to the same topics), space O(P + M).
    """

    name = "roundrobin"

    def _assign(self, members: list[Member], counts: dict[str, int]) -> Result:
        result: Result = defaultdict(list)
        ordered = sorted(members, key=_member_info_order)
        topics = [set(m.subscription.topics) for m in ordered]
        at = 0
        for tp in _all_partitions(counts):
            while tp[0] not in topics[at]:
                at = (at + 1) % len(ordered)
            result[ordered[at].member_id].append(tp)
            at = (at + 1) % len(ordered)
        return result


# -- the sticky assignors --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Claims:
    """Who owned what before this rebalance, resolved as ``AbstractStickyAssignor.allSubscriptionsEqual`` does."""

    raw: dict[str, list[TopicPartition]]
    """Each member's own claim: its member data's partitions."""
    generation: dict[str, int]
    owned: dict[str, list[TopicPartition]]
    """Each member's claims that survive: existing partitions, not won by a higher generation."""
    contested: set[TopicPartition]
    """Partitions claimed by two members of one generation: Kafka invalidates them for both."""

    @property
    def max_generation(self) -> int:
        return max(self.generation.values(), default=DEFAULT_GENERATION)


def _resolve_claims(
    order: list[str], data: dict[str, tuple[list[TopicPartition], int]], counts: dict[str, int]
) -> _Claims:
    """Each partition goes to its claimant of the highest generation; two claimants of one generation
    both lose it (and it stays contested, even if a later claimant of a higher generation wins it)."""
    generation = {m: max(data[m][1], DEFAULT_GENERATION) for m in order}
    owned: dict[str, list[TopicPartition]] = {}
    holder: dict[TopicPartition, str] = {}
    contested: set[TopicPartition] = set()
    for member in order:
        owned[member] = []
        for tp in dict.fromkeys(data[member][0]):
            if not 0 <= tp[1] < counts.get(tp[0], 0):
                continue
            other = holder.get(tp)
            if other is not None:
                if generation[member] < generation[other]:
                    continue
                if tp in owned[other]:
                    owned[other].remove(tp)
            if other is not None and generation[member] == generation[other]:
                contested.add(tp)
            else:
                owned[member].append(tp)
            holder[tp] = member
    return _Claims({m: data[m][0] for m in order}, generation, owned, contested)


def _constrained(order: list[str], counts: dict[str, int], claims: _Claims) -> Result:
    """``ConstrainedAssignmentBuilder``: when all subscribe to the same topics, each member keeps up
    to its quota of what it owned, then the members under quota are filled round robin.

    Time O(P log P + M²), space O(P + M).
    """
    total = sum(counts.values())
    min_quota, expected_over = divmod(total, len(order))
    max_quota = min_quota + (expected_over > 0)
    result: Result = {m: [] for m in order}
    under: list[str] = []
    at_min: list[str] = []
    over = 0
    for member in order:
        owned = sorted(
            (tp for tp in claims.owned[member] if tp not in claims.contested), key=lambda tp: (tp[1], tp[0])
        )
        if len(owned) < min_quota:
            result[member] = owned
            under.append(member)
        elif len(owned) >= max_quota and over < expected_over:
            over += 1
            if over == expected_over:
                at_min.clear()
            result[member] = owned[:max_quota]
        else:
            result[member] = owned[:min_quota]
            if over < expected_over:
                at_min.append(member)
    kept = {tp for tps in result.values() for tp in tps}
    unassigned = [tp for tp in _all_partitions(counts) if tp not in kept]
    under.sort(key=_java_order)
    at_min.sort(key=_java_order)
    _fill_round_robin(result, unassigned, under, at_min, min_quota)
    return result


def _fill_round_robin(
    result: Result, unassigned: list[TopicPartition], under: list[str], at_min: list[str], min_quota: int
) -> None:
    """``assignRoundRobin``: deal to the members under ``min_quota`` in turn (one reaching it leaves
    the turn), and once none is left, one each to the members at ``min_quota``, first come first."""
    turn = 0
    for tp in unassigned:
        if not under:
            assert at_min, "no member left to take a partition"
            result[at_min.pop(0)].append(tp)
            continue
        turn %= len(under)
        member = under[turn]
        result[member].append(tp)
        if len(result[member]) == min_quota:
            at_min.append(under.pop(turn))
        else:
            turn += 1
    assert not under, "a member was left under its quota"


class _Movements:
    """``PartitionMovements``: which partitions moved between which members during the balancing, so
    that a move back along a path undoes an earlier move instead of adding a second one."""

    def __init__(self) -> None:
        self._by_topic: dict[str, dict[tuple[str, str], set[TopicPartition]]] = {}
        self._moves: dict[TopicPartition, tuple[str, str]] = {}

    def _remove(self, tp: TopicPartition) -> tuple[str, str]:
        pair = self._moves.pop(tp)
        pairs = self._by_topic[tp[0]]
        pairs[pair].discard(tp)
        if not pairs[pair]:
            del pairs[pair]
        if not pairs:
            del self._by_topic[tp[0]]
        return pair

    def _add(self, tp: TopicPartition, pair: tuple[str, str]) -> None:
        self._moves[tp] = pair
        self._by_topic.setdefault(tp[0], {}).setdefault(pair, set()).add(tp)

    def move(self, tp: TopicPartition, old: str, new: str) -> None:
        if tp not in self._moves:
            self._add(tp, (old, new))
            return
        src, dst = self._remove(tp)
        assert dst == old
        if src != new:
            self._add(tp, (src, new))

    def partition_to_move(self, tp: TopicPartition, old: str, new: str) -> TopicPartition:
        """The partition of ``tp``'s topic to move from ``old`` to ``new``: one that earlier moved the
        other way, if any (Java takes any such; this takes the least, to be deterministic)."""
        pairs = self._by_topic.get(tp[0])
        if pairs is None:
            return tp
        if tp in self._moves:
            old = self._moves[tp][0]
        back = pairs.get((new, old))
        return min(back) if back else tp


class _General:
    """``GeneralAssignmentBuilder``: keep every surviving ownership, give each unowned partition to the
    least loaded subscriber, then move partitions from members with 2+ more than another subscriber
    of the topic until balanced, first back to a previous (lower generation) owner if that helps.
    The result is kept only if it is more balanced than before the moves (unless nothing was owned).

    Time O((R + 1)·P·M) for R partition moves (at most R + 2 passes over the partitions, each
    O(P·M); re-checking the balance after a move is O(P + M·T)). Space O(P + M·T).
    """

    def __init__(
        self, members: list[Member], order: list[str], counts: dict[str, int], claims: _Claims
    ) -> None:
        self.order = order
        self.rank = {m: i for i, m in enumerate(order)}
        self.topics = {m.member_id: set(m.subscription.topics) & counts.keys() for m in members}
        self.subscribers = {t: [m for m in order if t in self.topics[m]] for t in counts}
        self.capacity = {m: sum(counts[t] for t in ts) for m, ts in self.topics.items()}
        self.assignment: dict[str, set[TopicPartition]] = {m: set() for m in order}
        self.owner: dict[TopicPartition, str] = {}
        self.per_topic: dict[str, defaultdict[str, int]] = {t: defaultdict(int) for t in counts}
        self.by_load = SortedList((0, self.rank[m]) for m in order)
        self.movements = _Movements()
        self.changes = 0
        self.balanced_at: tuple[int, bool] = (-1, False)
        by_subscribers = sorted(counts, key=lambda t: (len(self.subscribers[t]), _java_order(t)))
        self.all_partitions = [(t, p) for t in by_subscribers for p in range(counts[t])]
        self.revocation_required = False
        self.previous = self._previous_owners(order, claims)
        for member in order:
            for tp in claims.owned[member]:
                if tp[0] in self.topics[member]:
                    self._give(tp, member)
                else:
                    self.revocation_required = True

    @staticmethod
    def _previous_owners(order: list[str], claims: _Claims) -> dict[TopicPartition, tuple[str, int]]:
        """``prepopulateCurrentAssignments``: for each partition, its claimant of the highest
        generation among the members behind the group's latest generation."""
        top = claims.max_generation
        previous: dict[TopicPartition, tuple[str, int]] = {}
        for member in order:
            generation = claims.generation[member]
            if generation >= top:
                continue
            for tp in claims.raw[member]:
                if tp not in previous or generation > previous[tp][1]:
                    previous[tp] = (member, generation)
        return previous

    # -- the state: who holds what, and the members ordered by load --

    def _load(self, member: str) -> int:
        return len(self.assignment[member])

    def _give(self, tp: TopicPartition, member: str) -> None:
        self.by_load.remove((self._load(member), self.rank[member]))
        self.assignment[member].add(tp)
        self.by_load.add((self._load(member), self.rank[member]))
        self.owner[tp] = member
        self.per_topic[tp[0]][member] += 1
        self.changes += 1

    def _take(self, tp: TopicPartition) -> str:
        member = self.owner.pop(tp)
        self.by_load.remove((self._load(member), self.rank[member]))
        self.assignment[member].remove(tp)
        self.by_load.add((self._load(member), self.rank[member]))
        self.per_topic[tp[0]][member] -= 1
        if not self.per_topic[tp[0]][member]:
            del self.per_topic[tp[0]][member]
        return member

    def _members_by_load(self) -> Iterable[str]:
        return (self.order[rank] for _, rank in self.by_load)

    def _least_loaded(self, topic: str) -> str:
        return next(m for m in self._members_by_load() if topic in self.topics[m])

    # -- the algorithm --

    def build(self) -> Result:
        unassigned = [tp for tp in self.all_partitions if tp not in self.owner]
        initializing = self.by_load[-1][0] == 0
        for tp in unassigned:
            self._give(tp, self._least_loaded(tp[0]))
        movable = {t for t, subs in self.subscribers.items() if len(subs) >= 2}
        self.all_partitions = [tp for tp in self.all_partitions if tp[0] in movable]
        unassigned = [tp for tp in unassigned if tp[0] in movable]
        fixed = {m: self.assignment.pop(m) for m in list(self.assignment) if not self._can_move(m, movable)}
        for member, held in fixed.items():
            self.by_load.remove((len(held), self.rank[member]))
        before = {m: set(tps) for m, tps in self.assignment.items()}
        if not self.revocation_required:
            self._reassign_all(unassigned)
        moved = self._reassign_all(self.all_partitions)
        if not initializing and moved and _balance_score(self.assignment) >= _balance_score(before):
            self.assignment = before
        return {m: list(tps) for m, tps in (self.assignment | fixed).items()}

    def _can_move(self, member: str, movable: set[str]) -> bool:
        """``canConsumerParticipateInReassignment``: it may take more, or holds a movable partition."""
        held = self.assignment[member]
        return len(held) < self.capacity[member] or any(tp[0] in movable for tp in held)

    def _reassign_all(self, partitions: list[TopicPartition]) -> bool:
        """``performReassignments``: passes over ``partitions`` until a pass moves nothing."""
        moved_any = False
        moved = True
        while moved:
            moved = False
            for tp in partitions:
                if self._is_balanced():
                    break
                target = self._target(tp)
                if target is not None:
                    self._move(tp, target)
                    moved = moved_any = True
        return moved_any

    def _target(self, tp: TopicPartition) -> str | None:
        """Where ``tp`` should go: its previous owner, or else the topic's least loaded subscriber,
        if that member holds at least two fewer partitions than ``tp``'s owner."""
        load = self._load(self.owner[tp])
        prev = self.previous.get(tp, ("", 0))[0]
        # Java does not check that the previous owner still takes part and subscribes to the topic.
        if prev in self.assignment and tp[0] in self.topics[prev] and load > self._load(prev) + 1:
            return prev
        if any(load > self._load(m) + 1 for m in self.subscribers[tp[0]]):
            return self._least_loaded(tp[0])
        return None

    def _move(self, tp: TopicPartition, new: str) -> None:
        actual = self.movements.partition_to_move(tp, self.owner[tp], new)
        old = self._take(actual)
        self.movements.move(actual, old, new)
        self._give(actual, new)

    def _is_balanced(self) -> bool:
        """``isBalanced``: loads differ by at most one, or no member short of its capacity could take a
        partition of its topics from a member holding two or more than it. Cached until the next move."""
        if self.balanced_at[0] == self.changes:
            return self.balanced_at[1]
        lowest, highest = self.by_load[0][0], self.by_load[-1][0]
        balanced = lowest >= highest - 1 or not self._any_unfair_holder()
        self.balanced_at = (self.changes, balanced)
        return balanced

    def _any_unfair_holder(self) -> bool:
        """Whether a member short of its capacity subscribes to a topic of which another member, with
        two or more partitions than it, holds a partition (per topic: its two most loaded holders)."""
        top: dict[str, tuple[int, str, int]] = {}
        for topic, holders in self.per_topic.items():
            loads = sorted(((self._load(m), m) for m in holders if m in self.assignment), reverse=True)
            if loads:
                top[topic] = (loads[0][0], loads[0][1], loads[1][0] if len(loads) > 1 else -1)
        for member in self._members_by_load():
            load = self._load(member)
            if load == self.capacity[member]:
                continue
            for topic in self.topics[member] & top.keys():
                best, holder, second = top[topic]
                if (best if holder != member else second) > load + 1:
                    return True
        return False


def _balance_score(assignment: Mapping[str, set[TopicPartition]]) -> int:
    """``getBalanceScore``: the sum over pairs of members of the difference of their loads."""
    loads = sorted(len(tps) for tps in assignment.values())
    return sum(load * (2 * i - len(loads) + 1) for i, load in enumerate(loads))


class _AbstractSticky(Assignor):
    """``AbstractStickyAssignor``: balanced first, then as much of the previous ownership as possible."""

    def _assign(self, members: list[Member], counts: dict[str, int]) -> Result:
        result, _ = self._sticky(members, counts)
        return result

    def _sticky(self, members: list[Member], counts: dict[str, int]) -> tuple[Result, _Claims]:
        order = sorted((m.member_id for m in members), key=_java_order)
        subs = {m.member_id: m.subscription for m in members}
        claims = _resolve_claims(order, {m: self._member_data(subs[m]) for m in order}, counts)
        if len({frozenset(s.topics) for s in subs.values()}) <= 1:
            return _constrained(order, counts, claims), claims
        return _General(members, order, counts, claims).build(), claims

    @abc.abstractmethod
    def _member_data(self, sub: Subscription) -> tuple[list[TopicPartition], int]:
        """What the member owned and in which generation."""


class StickyAssignor(_AbstractSticky):
    """Kafka's eager ``StickyAssignor``: a balanced assignment (loads within one of each other among
    members of equal subscriptions) that keeps as many previous ownerships as possible.

    A member's previous ownership is its subscription's ``owned_partitions`` and ``generation_id``
    (librdkafka's sticky members send them), else the ``StickyAssignorUserData`` in its user data
    (what Java's StickyAssignor reads, as Java members revoke everything before they join).

    Time O(P log P + M²) when all subscriptions are equal; otherwise that of the general builder,
    O((R + 1)·P·M) for R partition moves. Space O(P + M·T).
    """

    name = "sticky"

    def _member_data(self, sub: Subscription) -> tuple[list[TopicPartition], int]:
        if sub.owned_partitions:
            return list(sub.owned_partitions), sub.generation_id
        return decode_sticky_user_data(sub.user_data)

    def user_data(self, assignment: Iterable[TopicPartition] | None, generation: int) -> bytes | None:
        """``StickyAssignorUserData`` v1 with the member's assignment, or None before its first one."""
        return None if assignment is None else encode_sticky_user_data(assignment, generation)


class CooperativeStickyAssignor(_AbstractSticky):
    """Kafka's ``CooperativeStickyAssignor``: the sticky assignment, less each partition that goes to a
    member which did not own it while another member claims it: that owner is first told to revoke
    it, rejoins, and the next rebalance gives it over. So no partition has two owners at once.

    A member's ownership is its subscription's ``owned_partitions``; its generation the subscription's
    ``generation_id`` (v2+), else the int32 in its user data (Java's v0/v1 subscriptions).

    Time and space as the sticky assignor's, plus O(P).
    """

    name = "cooperative-sticky"
    protocol = "COOPERATIVE"

    def _assign(self, members: list[Member], counts: dict[str, int]) -> Result:
        result, claims = self._sticky(members, counts)
        claimants: defaultdict[TopicPartition, set[str]] = defaultdict(set)
        for member, tps in claims.raw.items():
            for tp in tps:
                claimants[tp].add(member)
        for member, tps in result.items():
            kept = set(claims.owned[member]) - claims.contested
            result[member] = [tp for tp in tps if tp in kept or not claimants[tp] - {member}]
        return result

    def _member_data(self, sub: Subscription) -> tuple[list[TopicPartition], int]:
        generation, data = sub.generation_id, sub.user_data or b""
        if generation < 0 and len(data) >= 4:
            generation = int.from_bytes(data[:4], "big", signed=True)
        return list(sub.owned_partitions), generation

    def user_data(self, assignment: Iterable[TopicPartition] | None, generation: int) -> bytes:
        """The generation as an int32, as Java's CooperativeStickyAssignor sends (for v0/v1 readers)."""
        return generation.to_bytes(4, "big", signed=True)


ASSIGNORS: dict[str, Assignor] = {
    a.name: a for a in (RangeAssignor(), RoundRobinAssignor(), StickyAssignor(), CooperativeStickyAssignor())
}


def get_assignor(strategy: str) -> Assignor:
    """The assignor named ``strategy``; an unknown name raises ValueError listing the known ones."""
    try:
        return ASSIGNORS[strategy]
    except KeyError:
        raise ValueError(
            f"unknown partition assignment strategy {strategy!r}; valid: {', '.join(ASSIGNORS)}"
        ) from None


def assign(
    strategy: str,
    members: Sequence[Member] | Mapping[str, Subscription],
    partitions_per_topic: Mapping[str, int],
) -> Result:
    """Assign with the strategy named as in ``partition.assignment.strategy``; see ``Assignor.assign``."""
    return get_assignor(strategy).assign(members, partitions_per_topic)
