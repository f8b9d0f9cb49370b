"""The server-side assignors of consumer-protocol groups (KIP-848): "uniform" and "range".

The group coordinator computes a group's *target assignment* with one of
these whenever the group epoch moves past the assignment epoch. An assignor
sees each member's subscription (the ids of the subscribed topics that
exist) and current target assignment, and the partition count of every
subscribed topic; it answers every member's new target. Whatever it
answers, each partition of a subscribed topic goes to exactly one member
that subscribes to its topic (asserted).

- :class:`UniformAssignor` ("uniform", Kafka's default): balanced first,
  sticky second. When every member subscribes to the same topics each member
  gets ``P // M`` or ``P // M + 1`` partitions, and a member keeps every
  partition its quota allows (the extra slots go to the members already
  holding the most). With different subscriptions it keeps what it can, hands
  out the rest most-constrained partition first, then moves partitions from a
  member to a subscriber with at least two fewer until no such move is left
  (Kafka's definition of balance for mixed subscriptions).
- :class:`RangeAssignor` ("range"): per topic, the subscribers in order
  (static members first by instance id, then the others by member id) take
  contiguous ranges, the first ``n % k`` one partition more; with equal
  subscriptions and partition counts members get the same partition numbers of
  every topic (co-partitioning). Not sticky, as Kafka's.

>>> t = uuid.UUID(int=1)
>>> spec = {m: MemberSpec(None, frozenset({t})) for m in ("a", "b")}
>>> {m: sorted(a[t]) for m, a in RangeAssignor().assign(spec, {t: 3}).items()}
{'a': [0, 1], 'b': [2]}
"""

from __future__ import annotations

import abc
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from logstore.coordinator.group.consumer_records import EMPTY_ASSIGNMENT, Assignment

TopicPartition = tuple[uuid.UUID, int]

UNIFORM = "uniform"
RANGE = "range"
_CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": UNIFORM,
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": RANGE,
}


@dataclass(frozen=True)
class MemberSpec:
    """What an assignor knows of a member: its instance id, subscribed topic ids, current target."""

    instance_id: str | None
    topic_ids: frozenset[uuid.UUID]
    assignment: Assignment = field(default_factory=lambda: EMPTY_ASSIGNMENT)


class AssignorError(Exception):
    """The assignor could not assign (Kafka's PartitionAssignorException)."""


class PartitionAssignor(abc.ABC):
    """A server-side assignor: members and topics in, every member's target out."""

    name: str

    def assign(
        self, members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, int]
    ) -> dict[str, Assignment]:
        """Every member's new target. ``topics``: partition count per subscribed topic id.

        Raises :class:`AssignorError` if a member subscribes to a topic missing from ``topics``.
        Complexity: see the subclass.
        """
        for member_id, spec in members.items():
            missing = spec.topic_ids - topics.keys()
            if missing:
                raise AssignorError(
                    f"member {member_id} subscribes to unknown topics {sorted(map(str, missing))}"
                )
        result = self._assign(members, topics) if members else {}
        _check(members, topics, result)
        return result

    @abc.abstractmethod
    def _assign(
        self, members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, int]
    ) -> dict[str, Assignment]:
        """The assignment of a non-empty group whose subscriptions are all in ``topics``."""


def _check(
    members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, int], result: Mapping[str, Assignment]
) -> None:
    """Assert the assignors' contract: every member answered; each subscribed partition has one owner
    among its topic's subscribers, and no other partition is assigned. O(partitions + members)."""
    assert result.keys() == members.keys(), "the assignor must answer every member"
    subscribed = set().union(*(spec.topic_ids for spec in members.values())) if members else set()
    owners: dict[TopicPartition, str] = {}
    for member_id, target in result.items():
        for topic_id, partitions in target.items():
            assert partitions, f"{member_id} got an empty set of {topic_id}"
            assert topic_id in members[member_id].topic_ids, (
                f"{member_id} got {topic_id} it does not subscribe to"
            )
            for partition in partitions:
                assert 0 <= partition < topics[topic_id], f"{topic_id}-{partition} does not exist"
                previous = owners.setdefault((topic_id, partition), member_id)
                assert previous == member_id, f"{topic_id}-{partition} went to {previous} and {member_id}"
    expected = sum(topics[topic_id] for topic_id in subscribed)
    assert len(owners) == expected, f"{expected - len(owners)} subscribed partitions left unassigned"


def _freeze(kept: Mapping[str, Iterable[TopicPartition]]) -> dict[str, Assignment]:
    result: dict[str, Assignment] = {}
    for member_id, partitions in kept.items():
        by_topic: dict[uuid.UUID, set[int]] = {}
        for topic_id, partition in partitions:
            by_topic.setdefault(topic_id, set()).add(partition)
        result[member_id] = {topic_id: frozenset(parts) for topic_id, parts in by_topic.items()}
    return result


def _keep_current(
    members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, int], order: list[str]
) -> tuple[dict[str, set[TopicPartition]], dict[TopicPartition, str]]:
    """Each member's current partitions that are still valid for it (subscribed, existing, not
    already kept by a member earlier in ``order``). O(partitions of the current targets)."""
    kept: dict[str, set[TopicPartition]] = {member_id: set() for member_id in order}
    owner: dict[TopicPartition, str] = {}
    for member_id in order:
        spec = members[member_id]
        for topic_id in sorted(spec.assignment):
            if topic_id not in spec.topic_ids:
                continue
            for partition in sorted(spec.assignment[topic_id]):
                tp = (topic_id, partition)
                if partition < topics[topic_id] and tp not in owner:
                    owner[tp] = member_id
                    kept[member_id].add(tp)
    return kept, owner


class UniformAssignor(PartitionAssignor):
    """Balanced, then sticky (see the module doc).

    Equal subscriptions: O(P log P + M log M) for P partitions and M members.
    Mixed subscriptions: O(P × S) to hand out (S: subscribers of a topic), plus
    O(P × S) per balancing move; each move lowers the sum of squared member sizes
    by at least 2, so there are fewer than P² / 2 of them (bounded, asserted).
    """

    name = UNIFORM

    def _assign(
        self, members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, int]
    ) -> dict[str, Assignment]:
        subscriptions = {spec.topic_ids for spec in members.values()}
        if len(subscriptions) == 1:
            return self._homogeneous(members, topics, next(iter(subscriptions)))
        return self._heterogeneous(members, topics)

    @staticmethod
    def _homogeneous(
        members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, int], topic_ids: frozenset[uuid.UUID]
    ) -> dict[str, Assignment]:
        order = sorted(members)
        every = [(topic_id, p) for topic_id in sorted(topic_ids) for p in range(topics[topic_id])]
        minimum, extra = divmod(len(every), len(order))
        kept, owner = _keep_current(members, topics, order)
        # The extra slots go to the members keeping the most: the fewest partitions move.
        ranked = sorted(order, key=lambda m: (-min(len(kept[m]), minimum + 1), m))
        quota = {member_id: minimum + (1 if rank < extra else 0) for rank, member_id in enumerate(ranked)}
        free = [tp for tp in every if tp not in owner]
        for member_id in order:
            over = len(kept[member_id]) - quota[member_id]
            if over > 0:
                revoked = sorted(kept[member_id])[-over:]
                kept[member_id].difference_update(revoked)
                free.extend(revoked)
        free.sort()
        position = 0
        for member_id in order:
            need = quota[member_id] - len(kept[member_id])
            kept[member_id].update(free[position : position + need])
            position += max(need, 0)
        assert position == len(free), f"{len(free) - position} partitions left over"
        return _freeze(kept)

    @staticmethod
    def _heterogeneous(
        members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, int]
    ) -> dict[str, Assignment]:
        order = sorted(members)
        subscribers: dict[uuid.UUID, list[str]] = {}
        for member_id in order:
            for topic_id in members[member_id].topic_ids:
                subscribers.setdefault(topic_id, []).append(member_id)
        kept, owner = _keep_current(members, topics, order)
        count = {member_id: len(kept[member_id]) for member_id in order}
        free = [(t, p) for t in subscribers for p in range(topics[t]) if (t, p) not in owner]
        free.sort(key=lambda tp: (len(subscribers[tp[0]]), tp))  # the most constrained first
        for tp in free:
            receiver = min(subscribers[tp[0]], key=lambda m: (count[m], m))
            kept[receiver].add(tp)
            count[receiver] += 1
        total = sum(count.values())
        budget = total * total // 2 + 1
        while budget > 0:
            move = UniformAssignor._find_move(order, kept, count, subscribers)
            if move is None:
                break
            donor, receiver, tp = move
            kept[donor].discard(tp)
            kept[receiver].add(tp)
            count[donor] -= 1
            count[receiver] += 1
            budget -= 1
        assert budget > 0, "balancing did not converge"
        return _freeze(kept)

    @staticmethod
    def _find_move(
        order: list[str],
        kept: Mapping[str, set[TopicPartition]],
        count: Mapping[str, int],
        subscribers: Mapping[uuid.UUID, list[str]],
    ) -> tuple[str, str, TopicPartition] | None:
        """A partition of the fullest possible donor that a subscriber with at least 2 fewer can take.

        O(P × S)."""
        for donor in sorted(order, key=lambda m: (-count[m], m)):
            best: tuple[int, str, TopicPartition] | None = None
            for tp in sorted(kept[donor]):
                for receiver in subscribers[tp[0]]:
                    if count[receiver] <= count[donor] - 2 and (
                        best is None or (count[receiver], receiver) < best[:2]
                    ):
                        best = (count[receiver], receiver, tp)
            if best is not None:
                return donor, best[1], best[2]
        return None


class RangeAssignor(PartitionAssignor):
    """Contiguous ranges per topic (see the module doc). O(M log M + T × M + P)."""

    name = RANGE

    def _assign(
        self, members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, int]
    ) -> dict[str, Assignment]:
        def rank(member_id: str) -> tuple[int, str, str]:
            instance_id = members[member_id].instance_id
            return (0, instance_id, member_id) if instance_id is not None else (1, member_id, member_id)

        order = sorted(members, key=rank)
        result: dict[str, dict[uuid.UUID, frozenset[int]]] = {member_id: {} for member_id in order}
        for topic_id in sorted(topics):
            subscribed = [member_id for member_id in order if topic_id in members[member_id].topic_ids]
            if not subscribed:
                continue
            minimum, extra = divmod(topics[topic_id], len(subscribed))
            start = 0
            for index, member_id in enumerate(subscribed):
                size = minimum + (1 if index < extra else 0)
                if size:
                    result[member_id][topic_id] = frozenset(range(start, start + size))
                start += size
            assert start == topics[topic_id]
        return dict(result)


def assignor_name(configured: str) -> str:
    """An assignor's name from ``group.consumer.assignors``: its short name or Kafka's class name.

    >>> assignor_name("org.apache.kafka.coordinator.group.assignor.RangeAssignor")
    'range'
    """
    name = configured.strip()
    return _CLASS_NAMES.get(name, name)


def make_assignors(names: Iterable[str]) -> dict[str, PartitionAssignor]:
    """The assignors named (short or class names), in order; ValueError for an unknown name. O(names)."""
    known: dict[str, type[PartitionAssignor]] = {UNIFORM: UniformAssignor, RANGE: RangeAssignor}
    result: dict[str, PartitionAssignor] = {}
    for configured in names:
        name = assignor_name(configured)
        if name not in known:
            raise ValueError(f"unknown consumer group assignor {configured!r}; known: {sorted(known)}")
        result.setdefault(name, known[name]())
    if not result:
        raise ValueError("group.consumer.assignors names no assignor")
    return result
