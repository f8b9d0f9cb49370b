"""The server-side assignors of consumer-protocol groups (KIP-848): "uniform" and "range".

Written after the cases of Kafka's UniformAssignorTest, UniformHeterogeneousAssignmentBuilderTest
and RangeAssignorTest (our own code and numbers), plus randomized checks of the contract: every
subscribed partition has exactly one owner among its topic's subscribers.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping

import pytest

from logstore.coordinator.group.consumer_records import Assignment
from logstore.coordinator.group.server_assignors import (
    AssignorError,
    MemberSpec,
    RangeAssignor,
    UniformAssignor,
    assignor_name,
    make_assignors,
)

pytestmark = pytest.mark.unit

T1, T2, T3 = (uuid.UUID(int=n) for n in (1, 2, 3))


def spec(*topics: uuid.UUID, instance: str | None = None, current: Assignment | None = None) -> MemberSpec:
    return MemberSpec(instance, frozenset(topics), current or {})


def parts(result: Mapping[str, Assignment], member: str, topic: uuid.UUID) -> list[int]:
    return sorted(result[member].get(topic, frozenset()))


def sizes(result: Mapping[str, Assignment]) -> dict[str, int]:
    return {m: sum(len(p) for p in a.values()) for m, a in result.items()}


def moved(before: Mapping[str, Assignment], after: Mapping[str, Assignment]) -> int:
    """How many partitions changed owner (or lost one) between two assignments."""
    owner = {(t, p): m for m, a in before.items() for t, ps in a.items() for p in ps}
    return sum(1 for m, a in after.items() for t, ps in a.items() for p in ps if owner.get((t, p)) != m)


# -- uniform ---------------------------------------------------------------------------


def test_uniform_one_member_gets_everything() -> None:
    result = UniformAssignor().assign({"a": spec(T1, T2)}, {T1: 3, T2: 2})
    assert parts(result, "a", T1) == [0, 1, 2]
    assert parts(result, "a", T2) == [0, 1]


def test_uniform_no_members_and_no_topics() -> None:
    assert UniformAssignor().assign({}, {T1: 3}) == {}
    assert UniformAssignor().assign({"a": spec()}, {}) == {"a": {}}


def test_uniform_unknown_topic_is_an_assignor_error() -> None:
    with pytest.raises(AssignorError):
        UniformAssignor().assign({"a": spec(T3)}, {T1: 3})


@pytest.mark.parametrize(("partitions", "members"), [(6, 3), (7, 3), (2, 5), (1, 1), (100, 7)])
def test_uniform_homogeneous_is_balanced(partitions: int, members: int) -> None:
    specs = {f"m{i}": spec(T1) for i in range(members)}
    counts = sorted(sizes(UniformAssignor().assign(specs, {T1: partitions})).values())
    assert counts[-1] - counts[0] <= 1
    assert sum(counts) == partitions


def test_uniform_is_sticky_when_a_member_joins() -> None:
    assignor = UniformAssignor()
    before = assignor.assign({"a": spec(T1, T2), "b": spec(T1, T2)}, {T1: 6, T2: 6})
    specs = {m: spec(T1, T2, current=before[m]) for m in ("a", "b")}
    specs["c"] = spec(T1, T2)
    after = assignor.assign(specs, {T1: 6, T2: 6})
    assert sorted(sizes(after).values()) == [4, 4, 4]
    assert moved(before, after) == 4  # only what the new member needs moves
    for member in ("a", "b"):  # the old members keep a subset of what they had
        for topic, kept in after[member].items():
            assert kept <= before[member][topic]


def test_uniform_is_sticky_when_a_member_leaves() -> None:
    assignor = UniformAssignor()
    first = assignor.assign({m: spec(T1) for m in "abc"}, {T1: 9})
    after = assignor.assign({m: spec(T1, current=first[m]) for m in "ab"}, {T1: 9})
    assert sorted(sizes(after).values()) == [4, 5]
    for member in "ab":
        assert first[member][T1] <= after[member][T1]


def test_uniform_extra_slots_go_to_members_keeping_the_most() -> None:
    # 7 partitions, 3 members: a keeps 3, b 2, c joins: a keeps its 3rd (the extra slot), b keeps 2.
    current = {"a": {T1: frozenset({0, 1, 2})}, "b": {T1: frozenset({3, 4})}}
    specs = {"a": spec(T1, current=current["a"]), "b": spec(T1, current=current["b"]), "c": spec(T1)}
    after = UniformAssignor().assign(specs, {T1: 7})
    assert parts(after, "a", T1) == [0, 1, 2]
    assert parts(after, "b", T1) == [3, 4]
    assert parts(after, "c", T1) == [5, 6]


def test_uniform_drops_partitions_of_unsubscribed_or_shrunk_topics() -> None:
    current = {T1: frozenset({0, 1, 5}), T2: frozenset({0})}
    after = UniformAssignor().assign({"a": spec(T1, current=current)}, {T1: 3})
    assert after == {"a": {T1: frozenset({0, 1, 2})}}


def test_uniform_heterogeneous_respects_subscriptions_and_balances() -> None:
    # a: T1 only; b: T1 and T2; c: T2 and T3. Kafka's "no move to a subscriber with 2 fewer" balance.
    specs = {"a": spec(T1), "b": spec(T1, T2), "c": spec(T2, T3)}
    topics = {T1: 3, T2: 3, T3: 2}
    result = UniformAssignor().assign(specs, topics)
    _check_balanced_heterogeneous(specs, result)
    assert sum(sizes(result).values()) == 8
    assert not result["a"].keys() - {T1}
    assert not result["c"].keys() - {T2, T3}
    assert parts(result, "c", T3) == [0, 1]  # only c subscribes to T3


def test_uniform_heterogeneous_lone_subscriber_takes_its_topic() -> None:
    specs = {"a": spec(T1), "b": spec(T2)}
    result = UniformAssignor().assign(specs, {T1: 5, T2: 1})
    assert parts(result, "a", T1) == [0, 1, 2, 3, 4]
    assert parts(result, "b", T2) == [0]


def test_uniform_heterogeneous_is_sticky() -> None:
    assignor = UniformAssignor()
    topics = {T1: 4, T2: 4}
    before = assignor.assign({"a": spec(T1, T2), "b": spec(T1)}, topics)
    after = assignor.assign(
        {"a": spec(T1, T2, current=before["a"]), "b": spec(T1, current=before["b"]), "c": spec(T2)}, topics
    )
    assert max(sizes(after).values()) - min(sizes(after).values()) <= 1
    assert moved(before, after) <= 3  # c needs about a third of 8


def _check_balanced_heterogeneous(specs: Mapping[str, MemberSpec], result: Mapping[str, Assignment]) -> None:
    """No partition can move to a subscriber of its topic holding at least 2 fewer."""
    count = sizes(result)
    for member, assignment in result.items():
        for topic in assignment:
            for other, other_spec in specs.items():
                if topic in other_spec.topic_ids:
                    assert count[other] >= count[member] - 1, (member, other, topic, count)


@pytest.mark.parametrize("seed", range(25))
def test_uniform_randomized_contract_balance_and_stickiness(seed: int) -> None:
    rng = random.Random(seed)
    topics = {uuid.UUID(int=100 + t): rng.randint(1, 12) for t in range(rng.randint(1, 4))}
    ids = list(topics)
    assignor = UniformAssignor()
    homogeneous = rng.random() < 0.5
    members = {f"m{i}": spec(*(ids if homogeneous else rng.sample(ids, rng.randint(1, len(ids)))))
               for i in range(rng.randint(1, 8))}  # fmt: skip
    result = assignor.assign(members, topics)  # the contract is asserted inside assign()
    _check_balanced_heterogeneous(members, result)
    # Run again from its own output: nothing moves (a stable assignment is a fixed point).
    again = assignor.assign(
        {m: MemberSpec(s.instance_id, s.topic_ids, result[m]) for m, s in members.items()}, topics
    )
    assert again == result


# -- range -------------------------------------------------------------------------------


def test_range_contiguous_ranges_per_topic() -> None:
    # Kafka's example: two members, two topics of 3 partitions: co-partitioned ranges.
    result = RangeAssignor().assign({"m0": spec(T1, T2), "m1": spec(T1, T2)}, {T1: 3, T2: 3})
    assert (parts(result, "m0", T1), parts(result, "m0", T2)) == ([0, 1], [0, 1])
    assert (parts(result, "m1", T1), parts(result, "m1", T2)) == ([2], [2])


def test_range_more_members_than_partitions() -> None:
    result = RangeAssignor().assign({m: spec(T1) for m in "abc"}, {T1: 2})
    assert [parts(result, m, T1) for m in "abc"] == [[0], [1], []]
    assert result["c"] == {}


def test_range_heterogeneous_subscriptions() -> None:
    # a: T1, T2; b: T1; c: T2, T3 (Kafka's RangeAssignorTest shape).
    specs = {"a": spec(T1, T2), "b": spec(T1), "c": spec(T2, T3)}
    result = RangeAssignor().assign(specs, {T1: 3, T2: 3, T3: 2})
    assert parts(result, "a", T1) == [0, 1] and parts(result, "b", T1) == [2]
    assert parts(result, "a", T2) == [0, 1] and parts(result, "c", T2) == [2]
    assert parts(result, "c", T3) == [0, 1]


def test_range_orders_static_members_first_by_instance_id() -> None:
    specs = {"z-dynamic": spec(T1), "b": spec(T1, instance="i2"), "a": spec(T1, instance="i1")}
    result = RangeAssignor().assign(specs, {T1: 6})
    assert parts(result, "a", T1) == [0, 1]  # instance i1 first
    assert parts(result, "b", T1) == [2, 3]
    assert parts(result, "z-dynamic", T1) == [4, 5]


def test_range_is_deterministic_across_member_order() -> None:
    topics = {T1: 7, T2: 5}
    one = RangeAssignor().assign({m: spec(T1, T2) for m in "xyz"}, topics)
    two = RangeAssignor().assign({m: spec(T1, T2) for m in "zyx"}, topics)
    assert one == two
    assert [parts(one, m, T1) for m in "xyz"] == [[0, 1, 2], [3, 4], [5, 6]]


# -- names ---------------------------------------------------------------------------------


def test_assignor_names_short_and_kafka_class_names() -> None:
    assert assignor_name("org.apache.kafka.coordinator.group.assignor.UniformAssignor") == "uniform"
    assignors = make_assignors(["range", "org.apache.kafka.coordinator.group.assignor.UniformAssignor"])
    assert list(assignors) == ["range", "uniform"]
    with pytest.raises(ValueError, match="unknown"):
        make_assignors(["sticky"])
