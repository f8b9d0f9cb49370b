"""Property tests of the partition assignors over random groups: 1-12 members, 1-5 topics of 0-20
partitions, random subscriptions (some naming a topic that does not exist), some static members.

Coverage: every subscribed partition goes to exactly one member subscribed to its topic. Balance:
equal subscriptions give loads within one (range: within one per topic). Stickiness: after a member
joins or leaves, sticky moves no more partitions than a balanced assignment must. Cooperation:
cooperative-sticky never gives a member a partition another member still owns, and converges.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logstore.client.assignors import ASSIGNORS, Member, TopicPartition, assign
from logstore.client.consumer_protocol import Subscription

pytestmark = pytest.mark.property

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
EAGER = [name for name, a in ASSIGNORS.items() if a.protocol == "EAGER"]
Result = dict[str, list[TopicPartition]]
Group = tuple[list[Member], dict[str, int]]

member_ids = st.lists(
    st.text("abcABC-_0123456789é", min_size=1, max_size=5), min_size=1, max_size=12, unique=True
)
partition_counts = st.lists(st.integers(0, 20), min_size=1, max_size=5).map(
    lambda ns: {f"t{i}": n for i, n in enumerate(ns)}
)


@st.composite
def groups(draw: st.DrawFn, equal: bool = False) -> Group:
    counts = draw(partition_counts)
    topics = [*counts, "absent"]
    ids = draw(member_ids)
    common = draw(st.lists(st.sampled_from(topics), min_size=1, unique=True))
    members = []
    for member_id in ids:
        subscribed = common if equal else draw(st.lists(st.sampled_from(topics), min_size=1, unique=True))
        instance = draw(st.none() | st.just(f"instance-{member_id}"))
        members.append(Member(member_id, Subscription(subscribed), instance))
    return members, counts


def subscribed_partitions(members: list[Member], counts: dict[str, int]) -> set[TopicPartition]:
    topics = {t for m in members for t in m.subscription.topics}
    return {(t, p) for t, n in counts.items() if t in topics for p in range(n)}


def loads(result: Result) -> list[int]:
    return sorted(len(tps) for tps in result.values())


def owner_of(result: Result) -> dict[TopicPartition, str]:
    return {tp: m for m, tps in result.items() for tp in tps}


def with_ownership(members: list[Member], result: Result, generation: int) -> list[Member]:
    """The members' next subscriptions, each owning what ``result`` gave it."""
    return [
        Member(
            m.member_id,
            Subscription(m.subscription.topics, None, result.get(m.member_id, []), generation),
            m.group_instance_id,
        )
        for m in members
    ]


@SETTINGS
@given(groups(), st.sampled_from(list(ASSIGNORS)))
def test_every_subscribed_partition_goes_to_exactly_one_subscriber(group: Group, strategy: str) -> None:
    members, counts = group
    result = assign(strategy, members, counts)
    assert set(result) == {m.member_id for m in members}
    given_out = [tp for tps in result.values() for tp in tps]
    assert len(given_out) == len(set(given_out))
    assert set(given_out) == subscribed_partitions(members, counts)
    topics = {m.member_id: set(m.subscription.topics) for m in members}
    assert all(t in topics[m] for m, tps in result.items() for t, _ in tps)
    assert all(tps == sorted(tps) for tps in result.values())


@SETTINGS
@given(groups(), st.sampled_from(list(ASSIGNORS)), st.randoms(use_true_random=False))
def test_the_result_does_not_depend_on_the_order_members_are_given_in(
    group: Group, strategy: str, rng: random.Random
) -> None:
    members, counts = group
    shuffled = list(members)
    rng.shuffle(shuffled)
    assert assign(strategy, shuffled, counts) == assign(strategy, members, counts)


@SETTINGS
@given(groups(equal=True), st.sampled_from(list(ASSIGNORS)))
def test_equal_subscriptions_give_loads_within_one(group: Group, strategy: str) -> None:
    members, counts = group
    result = assign(strategy, members, counts)
    if strategy == "range":  # balanced per topic only: the seed's C0 gets 4 of 6 partitions
        for topic in counts:
            per_topic = Counter(m for m, tps in result.items() for t, _ in tps if t == topic)
            spread = [per_topic[m.member_id] for m in members if topic in m.subscription.topics]
            assert not spread or max(spread) - min(spread) <= 1
    else:
        assert loads(result)[-1] - loads(result)[0] <= 1


def fewest_moves(previous: Result, members: list[str], total: int) -> int:
    """Partitions a balanced assignment must move: all but what the members can keep, when the
    members owning the most get the ``total % len(members)`` places of one partition more."""
    quota, extra = divmod(total, len(members))
    owned = sorted((len(previous.get(m, [])) for m in members), reverse=True)
    kept = sum(min(n, quota + (i < extra)) for i, n in enumerate(owned))
    return total - kept


@SETTINGS
@given(groups(equal=True), st.booleans(), st.booleans(), st.randoms(use_true_random=False))
def test_sticky_moves_only_what_balance_needs_when_a_member_joins_or_leaves(
    group: Group, joins: bool, in_user_data: bool, rng: random.Random
) -> None:
    members, counts = group
    sticky = ASSIGNORS["sticky"]
    previous = sticky.assign(members, counts)
    if joins:
        members = [*members, Member("joiner", members[0].subscription)]
    elif len(members) > 1:
        leaver = rng.choice(members)
        members = [m for m in members if m is not leaver]
    nxt = [
        Member(
            m.member_id, Subscription(m.subscription.topics, sticky.user_data(previous.get(m.member_id), 4))
        )
        if in_user_data
        else Member(m.member_id, Subscription(m.subscription.topics, None, previous.get(m.member_id, []), 4))
        for m in members
    ]
    result = sticky.assign(nxt, counts)
    assert loads(result)[-1] - loads(result)[0] <= 1
    before, after = owner_of(previous), owner_of(result)
    moves = sum(before.get(tp) != owner for tp, owner in after.items())
    assert moves <= fewest_moves(previous, [m.member_id for m in members], len(after))


@SETTINGS
@given(groups())
def test_sticky_keeps_its_own_assignment_when_nothing_changed(group: Group) -> None:
    members, counts = group
    first = assign("sticky", members, counts)
    assert assign("sticky", with_ownership(members, first, 1), counts) == first


@st.composite
def owned_groups(draw: st.DrawFn) -> Group:
    """A group whose members each own some partitions (no partition twice), in assorted generations,
    some of topics they no longer subscribe to; and a member that has just joined."""
    members, counts = draw(groups())
    members = [*members, Member("joiner", Subscription(list(counts)))]
    holder = {(t, p): draw(st.none() | st.sampled_from(members)) for t, n in counts.items() for p in range(n)}
    generation = draw(st.integers(1, 5))
    return [
        Member(
            m.member_id,
            Subscription(
                m.subscription.topics,
                None,
                [tp for tp, h in holder.items() if h is m],
                draw(st.sampled_from([generation, generation - 1, -1])),
            ),
            m.group_instance_id,
        )
        for m in members
    ], counts


def assert_cooperative(members: list[Member], result: Result, counts: dict[str, int]) -> None:
    owners = {tp: m.member_id for m in members for tp in m.subscription.owned_partitions}
    for member, tps in result.items():
        assert all(owners.get(tp, member) == member for tp in tps), (
            f"{member} got a partition another member owns"
        )
    missing = subscribed_partitions(members, counts) - set(owner_of(result))
    assert all(tp in owners for tp in missing), "a partition nobody owns was held back"


@SETTINGS
@given(owned_groups())
def test_cooperative_sticky_never_gives_a_member_a_partition_another_member_owns(group: Group) -> None:
    members, counts = group
    for generation in range(6, 12):
        result = assign("cooperative-sticky", members, counts)
        assert_cooperative(members, result, counts)
        if result == {m.member_id: sorted(m.subscription.owned_partitions) for m in members}:
            assert set(owner_of(result)) == subscribed_partitions(members, counts)
            return
        members = with_ownership(members, result, generation)
    raise AssertionError("cooperative rebalances did not settle in 6 rounds")
