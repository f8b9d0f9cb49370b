"""Consumer-protocol groups (KIP-848) in the group coordinator, on a manual clock.

The reconciliation state machine (after Kafka's CurrentAssignmentBuilderTest), heartbeats and their
errors, timers, static members, offsets, the classic protocol meeting a consumer group, records and
their reload, and a randomized run of simulated members checking that no two ever own a partition
at once and that epochs only move forward.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import random
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from logstore.coordinator.clock import ManualClock
from logstore.coordinator.group.consumer_group import (
    ConsumerGroupError,
    ConsumerGroupMember,
    ConsumerGroupState,
    MemberState,
    Reconciliation,
)
from logstore.coordinator.group.consumer_membership import HeartbeatRequest, HeartbeatResult
from logstore.coordinator.group.consumer_records import (
    ASSIGNMENT_EPOCH,
    CURRENT_ASSIGNMENT,
    GROUP_EPOCH,
    MEMBER_SUBSCRIPTION,
    SUBSCRIPTION_METADATA,
    TARGET_ASSIGNMENT,
    Assignment,
    AssignmentEpochValue,
    ConsumerGroupKey,
    CurrentAssignmentValue,
    GroupEpochValue,
    MemberSubscriptionValue,
    SubscriptionMetadataValue,
    TargetAssignmentValue,
    TopicMetadata,
    consumer_record_type,
    decode_consumer_record,
    encode_consumer_record,
)
from logstore.coordinator.group.coordinator_config import CoordinatorConfig
from logstore.coordinator.group.group_configs import GroupConfigs
from logstore.coordinator.group.group_coordinator import GroupCoordinator
from logstore.coordinator.record_codec import OffsetsSchemaError, Record

pytestmark = pytest.mark.unit

E = ErrorCode
S = ConsumerGroupState
T = uuid.UUID(int=0xA)
U = uuid.UUID(int=0xB)
SESSION = 45_000


def run(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    @functools.wraps(test)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))  # type: ignore[arg-type]

    return wrapper


def tp(topic: uuid.UUID, *partitions: int) -> dict[uuid.UUID, frozenset[int]]:
    return {topic: frozenset(partitions)}


class Catalog:
    """Topics the tests change at will: name -> (id, partitions)."""

    def __init__(self, **topics: tuple[uuid.UUID, int]) -> None:
        self.topics = dict(topics)

    def describe_topic(self, name: str) -> tuple[uuid.UUID, int] | None:
        return self.topics.get(name)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return next((name for name, (tid, _) in self.topics.items() if tid == topic_id), None)

    def topic_names(self) -> list[str]:
        return sorted(self.topics)


class Env:
    """A coordinator on a manual clock over a catalog, recording what it writes."""

    def __init__(self, catalog: Catalog | None = None, **config: Any) -> None:
        config.setdefault("group_initial_rebalance_delay_ms", 0)
        self.config = CoordinatorConfig(**config)
        self.clock = ManualClock(1_000_000)
        self.catalog = catalog or Catalog(t=(T, 6))
        self.records: list[Record] = []
        self.fail_writes = False
        self.coordinator = self.make()

    def make(self) -> GroupCoordinator:
        return GroupCoordinator(
            self.config, clock=self.clock, writer=self.write, catalog=self.catalog,
            group_configs=GroupConfigs(self.config),
        )  # fmt: skip

    def write(self, group_id: str, records: list[Record]) -> None:
        if self.fail_writes:
            from logstore.coordinator.group.persistence import WriteError

            raise WriteError(E.not_coordinator)
        self.records.extend(records)

    def group(self, group_id: str = "g") -> Any:
        return self.coordinator.consumer_group(group_id)

    def typed(self) -> list[Any]:
        return [decode_consumer_record(k, v) for k, v in self.records if consumer_record_type(k) is not None]


class Client:
    """A simulated consumer: it applies each assignment it is sent (revoking what it leaves out)
    and reports what it owns; fenced, it drops everything and rejoins with epoch 0."""

    def __init__(self, env: Env, member_id: str, *, topics: tuple[str, ...] = ("t",),
                 regex: str | None = None, instance: str | None = None, assignor: str | None = None,
                 group: str = "g", rebalance_timeout_ms: int = 30_000) -> None:  # fmt: skip
        self.env = env
        self.member_id = member_id
        self.topics = topics
        self.regex = regex
        self.instance = instance
        self.assignor = assignor
        self.group = group
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.epoch = 0
        self.owned: Assignment = {}
        self.epochs: list[int] = []

    def request(
        self, epoch: int | None = None, *, full: bool = False, owned: Assignment | None = None
    ) -> HeartbeatRequest:
        epoch = self.epoch if epoch is None else epoch
        joining = epoch == 0 or full
        reported = self.owned if owned is None else owned
        return HeartbeatRequest(
            group_id=self.group,
            member_id=self.member_id,
            member_epoch=epoch,
            instance_id=self.instance,
            rebalance_timeout_ms=self.rebalance_timeout_ms if joining else -1,
            subscribed_topic_names=(self.topics if self.regex is None else None) if joining else None,
            subscribed_topic_regex=self.regex if joining else None,
            server_assignor=self.assignor if joining else None,
            owned=() if epoch == 0 else tuple((t, tuple(sorted(p))) for t, p in reported.items()),
            client_id=f"client-{self.member_id}",
            client_host="/127.0.0.1",
        )

    def heartbeat(self, **kwargs: Any) -> HeartbeatResult:
        result = self.env.coordinator.consumer_group_heartbeat(self.request(**kwargs))
        self.apply(result)
        return result

    def apply(self, result: HeartbeatResult) -> None:
        if result.error in (E.fenced_member_epoch, E.unknown_member_id):
            self.owned, self.epoch, self.epochs = {}, 0, []
        elif result.error == E.none:
            assert result.member_epoch >= self.epoch or result.member_epoch < 0, (self.epoch, result)
            self.epoch = result.member_epoch
            self.epochs.append(self.epoch)
            if result.assignment is not None:
                self.owned = dict(result.assignment)

    def leave(self, epoch: int = -1) -> HeartbeatResult:
        return self.env.coordinator.consumer_group_heartbeat(
            HeartbeatRequest(self.group, self.member_id, epoch, instance_id=self.instance)
        )

    def partitions(self) -> set[tuple[uuid.UUID, int]]:
        return {(t, p) for t, ps in self.owned.items() for p in ps}


def settle(clients: list[Client], rounds: int = 10) -> None:
    for _ in range(rounds):
        for client in clients:
            client.heartbeat()


def assert_disjoint(clients: list[Client]) -> None:
    seen: dict[tuple[uuid.UUID, int], str] = {}
    for client in clients:
        for partition in client.partitions():
            assert partition not in seen, f"{partition} owned by {seen[partition]} and {client.member_id}"
            seen[partition] = client.member_id


# -- reconciliation (Kafka's CurrentAssignmentBuilder) ------------------------------------------


def free(topic: uuid.UUID, partition: int) -> int:
    return -1


def test_reconciliation_stable_member_at_target_epoch_does_not_move() -> None:
    member = ConsumerGroupMember("m", member_epoch=10, previous_member_epoch=9, assigned=tp(T, 1, 2))
    assert Reconciliation(member, 10, tp(T, 1, 2), free, None).next() is member


def test_reconciliation_new_partitions_come_at_once_when_free() -> None:
    member = ConsumerGroupMember("m", member_epoch=10, previous_member_epoch=9, assigned=tp(T, 1, 2))
    moved = Reconciliation(member, 11, tp(T, 1, 2, 3), free, tp(T, 1, 2)).next()
    assert (moved.state, moved.member_epoch, moved.previous_member_epoch) == (MemberState.STABLE, 11, 10)
    assert moved.assigned == tp(T, 1, 2, 3)


def test_reconciliation_unreleased_partitions_wait_for_their_owner() -> None:
    member = ConsumerGroupMember("m", member_epoch=10, previous_member_epoch=9, assigned=tp(T, 1))
    owned_elsewhere = {(T, 2): 10}
    moved = Reconciliation(
        member, 11, tp(T, 1, 2), lambda t, p: owned_elsewhere.get((t, p), -1), tp(T, 1)
    ).next()
    assert (moved.state, moved.member_epoch) == (MemberState.UNRELEASED_PARTITIONS, 11)
    assert moved.assigned == tp(T, 1)
    released = Reconciliation(moved, 11, tp(T, 1, 2), free, tp(T, 1)).next()
    assert (released.state, released.member_epoch, released.assigned) == (MemberState.STABLE, 11, tp(T, 1, 2))


def test_reconciliation_revocation_first_then_next_epoch() -> None:
    member = ConsumerGroupMember("m", member_epoch=10, previous_member_epoch=9, assigned=tp(T, 1, 2, 3))
    step = Reconciliation(member, 12, tp(T, 3, 4), free, tp(T, 1, 2, 3)).next()
    assert (step.state, step.member_epoch) == (MemberState.UNREVOKED_PARTITIONS, 10)
    assert (step.assigned, step.pending_revocation) == (tp(T, 3), tp(T, 1, 2))
    # Still owning a revoked partition (or not saying): no progress.
    assert Reconciliation(step, 12, tp(T, 3, 4), free, tp(T, 2, 3)).next() is step
    assert Reconciliation(step, 12, tp(T, 3, 4), free, None).next() is step
    done = Reconciliation(step, 12, tp(T, 3, 4), free, tp(T, 3)).next()
    assert (done.state, done.member_epoch, done.previous_member_epoch) == (MemberState.STABLE, 12, 10)
    assert (done.assigned, done.pending_revocation) == (tp(T, 3, 4), {})


def test_reconciliation_revocation_already_done_by_the_member_skips_the_wait() -> None:
    member = ConsumerGroupMember("m", member_epoch=10, previous_member_epoch=9, assigned=tp(T, 1, 2))
    moved = Reconciliation(member, 11, tp(T, 2), free, tp(T, 2)).next()
    assert (moved.state, moved.member_epoch, moved.assigned) == (MemberState.STABLE, 11, tp(T, 2))


def test_reconciliation_unknown_state_fences_a_member_owning_partitions() -> None:
    member = ConsumerGroupMember("m", member_epoch=10, state=MemberState.UNKNOWN, assigned=tp(T, 1))
    with pytest.raises(ConsumerGroupError) as failure:
        Reconciliation(member, 11, tp(T, 1), free, tp(T, 1)).next()
    assert failure.value.error == E.fenced_member_epoch
    moved = Reconciliation(member, 11, tp(T, 1), free, {}).next()
    assert (moved.state, moved.member_epoch) == (MemberState.STABLE, 11)


# -- heartbeats -------------------------------------------------------------------------------


def test_first_member_takes_everything_and_the_records_follow_kafka() -> None:
    env = Env()
    a = Client(env, "a")
    result = a.heartbeat()
    assert (result.error, result.member_id, result.member_epoch, result.heartbeat_interval_ms) == (
        E.none,
        "a",
        1,
        5000,
    )
    assert result.assignment == tp(T, 0, 1, 2, 3, 4, 5)
    assert env.group().state is S.STABLE
    types = [key.type for key, _ in env.typed()]
    assert types == [MEMBER_SUBSCRIPTION, SUBSCRIPTION_METADATA, GROUP_EPOCH, TARGET_ASSIGNMENT, ASSIGNMENT_EPOCH,
                     CURRENT_ASSIGNMENT]  # fmt: skip
    # A heartbeat that changes nothing writes nothing and sends no assignment.
    count = len(env.records)
    again = a.heartbeat()
    assert (again.error, again.member_epoch, again.assignment, again.wrote) == (E.none, 1, None, False)
    assert len(env.records) == count


def test_second_member_waits_until_the_first_has_revoked() -> None:
    env = Env()
    a, b = Client(env, "a"), Client(env, "b")
    a.heartbeat()
    joined = b.heartbeat()
    assert (joined.member_epoch, joined.assignment) == (2, {})
    assert env.group().members["b"].state is MemberState.UNRELEASED_PARTITIONS
    assert env.group().state is S.RECONCILING
    told = a.heartbeat()  # a learns it must give up half: it stays in epoch 1 until it has
    assert told.member_epoch == 1 and len(told.assignment[T]) == 3
    assert env.group().members["a"].state is MemberState.UNREVOKED_PARTITIONS
    waiting = b.heartbeat(owned={})
    assert waiting.assignment is None and b.owned == {}
    assert_disjoint([a, b])
    acked = a.heartbeat()
    assert (acked.member_epoch, env.group().members["a"].state) == (2, MemberState.STABLE)
    got = b.heartbeat()
    assert got.assignment is not None and len(got.assignment[T]) == 3
    assert_disjoint([a, b])
    assert a.partitions() | b.partitions() == {(T, p) for p in range(6)}
    assert env.group().state is S.STABLE


def test_a_lost_response_is_forgiven_at_the_previous_epoch() -> None:
    env = Env()
    a, b = Client(env, "a"), Client(env, "b")
    a.heartbeat()
    b.heartbeat()
    a.heartbeat()
    a.heartbeat()  # a is now at epoch 2; pretend it never saw that answer
    retry = env.coordinator.consumer_group_heartbeat(a.request(epoch=1))
    assert retry.error == E.none and retry.member_epoch == 2
    stale = env.coordinator.consumer_group_heartbeat(a.request(epoch=1, owned=tp(T, 0, 1, 2, 3, 4, 5)))
    assert stale.error == E.fenced_member_epoch  # owns more than its assignment: fenced


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"member_id": ""}, "MemberId can't be empty."),
        ({"group_id": " "}, "GroupId can't be empty."),
        ({"instance_id": ""}, "InstanceId can't be empty."),
        ({"rack_id": " "}, "RackId can't be empty."),
        ({"rebalance_timeout_ms": -1}, "RebalanceTimeoutMs must be provided in first request."),
        ({"owned": None}, "TopicPartitions must be empty when (re-)joining."),
        ({"owned": ((T, (1,)),)}, "TopicPartitions must be empty when (re-)joining."),
        (
            {"subscribed_topic_names": None},
            "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null",
        ),
        ({"member_epoch": -2}, "InstanceId can't be null."),
        ({"member_epoch": -3}, "MemberEpoch is invalid."),
    ],
)
def test_invalid_requests(change: dict[str, Any], message: str) -> None:
    env = Env()
    request = dataclasses.replace(Client(env, "a").request(), **change)
    result = env.coordinator.consumer_group_heartbeat(request)
    assert result.error == E.invalid_request
    assert result.message is not None and result.message.startswith(message)
    assert env.records == []


def test_v0_lets_the_coordinator_choose_the_member_id() -> None:
    env = Env()
    request = dataclasses.replace(Client(env, "").request(), api_version=0)
    result = env.coordinator.consumer_group_heartbeat(request)
    assert result.error == E.none and result.member_id and len(result.member_id) == 36


def test_heartbeat_errors_with_kafkas_codes() -> None:
    env = Env(group_consumer_max_size=2)
    a = Client(env, "a")
    assert env.coordinator.consumer_group_heartbeat(a.request(epoch=3)).error == E.group_id_not_found
    a.heartbeat()
    unsupported = env.coordinator.consumer_group_heartbeat(
        dataclasses.replace(a.request(0), server_assignor="sticky")
    )
    assert unsupported.error == E.unsupported_assignor
    assert (
        unsupported.message == "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
    )
    assert env.coordinator.consumer_group_heartbeat(a.request(epoch=5)).error == E.fenced_member_epoch
    assert (
        env.coordinator.consumer_group_heartbeat(Client(env, "x").request(epoch=1)).error
        == E.unknown_member_id
    )
    bad_regex = dataclasses.replace(Client(env, "r").request(), subscribed_topic_regex="(")
    assert env.coordinator.consumer_group_heartbeat(bad_regex).error == E.invalid_regular_expression
    Client(env, "b").heartbeat()
    full = Client(env, "c").heartbeat()
    assert (full.error, full.message) == (E.group_max_size_reached,
                                          "The consumer group has reached its maximum capacity of 2 members.")  # fmt: skip
    env.fail_writes = True
    failed = Client(env, "d", group="other").heartbeat()
    assert failed.error == E.not_coordinator
    assert env.coordinator.consumer_group("other") is None  # nothing applied without its records


def test_not_coordinator_outside_owned_partitions() -> None:
    env = Env()
    env.coordinator.serve_partitions_taken_only()
    assert Client(env, "a").heartbeat().error == E.not_coordinator
    assert env.coordinator.consumer_group_describe("g").error == E.not_coordinator


# -- leaving, timers, static members ---------------------------------------------------------------


def test_leave_fences_at_once_and_bumps_the_epoch() -> None:
    env = Env()
    a, b = Client(env, "a"), Client(env, "b")
    settle([a, b])
    epoch = env.group().group_epoch
    left = b.leave()
    assert (left.error, left.member_id, left.member_epoch) == (E.none, "b", -1)
    assert list(env.group().members) == ["a"] and env.group().group_epoch == epoch + 1
    assert b.leave().error == E.unknown_member_id
    settle([a])
    assert a.partitions() == {(T, p) for p in range(6)}
    a.leave()
    assert env.group().state is S.EMPTY


def test_session_timeout_fences_a_silent_member() -> None:
    env = Env()
    a, b = Client(env, "a"), Client(env, "b")
    settle([a, b])
    for _ in range(5):
        env.clock.advance(SESSION // 3)
        a.heartbeat()
    assert list(env.group().members) == ["a"]  # b went silent for more than 45 s
    assert env.coordinator.consumer_group_heartbeat(b.request()).error == E.unknown_member_id
    settle([a])
    assert len(a.partitions()) == 6
    b.heartbeat()  # rejoins with epoch 0 after the error
    assert b.epoch == 0
    settle([a, b])
    assert_disjoint([a, b])
    assert len(a.partitions()) == len(b.partitions()) == 3


def test_group_config_session_timeout_and_heartbeat_interval() -> None:
    env = Env(group_consumer_min_session_timeout_ms=1000, group_consumer_min_heartbeat_interval_ms=100)
    configs = env.coordinator.group_configs
    ok = configs.incremental_alter("g", [("consumer.session.timeout.ms", 0, "2000"),
                                         ("consumer.heartbeat.interval.ms", 0, "200")], False)  # fmt: skip
    assert ok == (E.none, None)
    a = Client(env, "a")
    assert a.heartbeat().heartbeat_interval_ms == 200
    env.clock.advance(2001)
    assert env.group().members == {}


def test_rebalance_timeout_fences_a_member_that_does_not_revoke() -> None:
    env = Env()
    a, b = Client(env, "a", rebalance_timeout_ms=10_000), Client(env, "b")
    a.heartbeat()
    b.heartbeat()
    a.heartbeat()  # told to revoke 3
    for _ in range(4):  # a keeps heartbeating but never lets go
        env.clock.advance(3_000)
        env.coordinator.consumer_group_heartbeat(a.request(owned=tp(T, 0, 1, 2, 3, 4, 5)))
        b.heartbeat()
    assert "a" not in env.group().members
    settle([b])
    assert len(b.partitions()) == 6


def test_static_member_leaves_for_now_and_comes_back_without_a_rebalance() -> None:
    env = Env()
    a, b = Client(env, "a", instance="ia"), Client(env, "b")
    settle([a, b])
    rival = env.coordinator.consumer_group_heartbeat(Client(env, "a3", instance="ia").request())
    assert rival.error == E.unreleased_instance_id  # "ia" is in use
    epoch, owned = env.group().group_epoch, a.partitions()
    left = a.leave(-2)
    assert (left.error, left.member_epoch) == (E.none, -2)
    assert env.group().members["a"].member_epoch == -2  # still holds its partitions
    settle([b])
    assert len(b.partitions()) == 3
    back = Client(env, "a-new", instance="ia")
    result = back.heartbeat()
    assert result.error == E.none and back.partitions() == owned
    assert "a" not in env.group().members and env.group().members["a-new"].instance_id == "ia"
    assert env.group().group_epoch == epoch  # no rebalance
    assert_disjoint([back, b])
    assert Client(env, "a", instance="ia").heartbeat(epoch=epoch).error == E.fenced_instance_id
    assert Client(env, "zz", instance="iz").heartbeat(epoch=epoch).error == E.unknown_member_id


# -- randomized: simulated members never share a partition, epochs only move forward -------------


@pytest.mark.parametrize("seed", range(12))
def test_randomized_members_never_own_a_partition_together(seed: int) -> None:
    rng = random.Random(seed)
    catalog = Catalog(t=(T, 8), u=(U, 3))
    env = Env(catalog)
    clients: dict[str, Client] = {}
    group_epochs = [0]
    next_id = 0
    for _step in range(300):
        action = rng.random()
        if action < 0.12 or not clients:
            next_id += 1
            name = f"m{next_id}"
            topics = rng.choice([("t",), ("t", "u"), ("u",)])
            clients[name] = Client(env, name, topics=topics, assignor=rng.choice([None, "range", "uniform"]))
            clients[name].heartbeat()
        elif action < 0.18:
            name = rng.choice(sorted(clients))
            clients.pop(name).leave()
        elif action < 0.21:
            env.clock.advance(SESSION + 1)  # everyone's session lapses: all fenced
            clients.clear()
        elif action < 0.23:
            _, count = catalog.topics["t"]
            catalog.topics["t"] = (T, min(count + 1, 12))
        else:
            rng.choice(list(clients.values())).heartbeat()
        assert_disjoint(list(clients.values()))
        group = env.group()
        if group is not None:
            # What a member owns, the coordinator holds for it (assigned or being revoked).
            holders = group.holders()
            for client in clients.values():
                if client.member_id in group.members:
                    assert all(holders.get(tp, ("",))[0] == client.member_id for tp in client.partitions())
            assert group.assignment_epoch <= group.group_epoch
            assert group.group_epoch >= group_epochs[-1]
            group_epochs.append(group.group_epoch)
    live = list(clients.values())
    settle(live, rounds=12)
    assert_disjoint(live)
    group = env.group()
    if live:
        assert group.state is S.STABLE
        subscribed = {name for c in live for name in c.topics}
        every = {(catalog.topics[name][0], p) for name in subscribed for p in range(catalog.topics[name][1])}
        assert set().union(*(c.partitions() for c in live)) == every
        # The coordinator's view matches the members'.
        assert {c.member_id: c.owned for c in live} == {m: dict(x.assigned) for m, x in group.members.items()}


# -- offsets -------------------------------------------------------------------------------------


def test_offset_commits_check_the_member_epoch() -> None:
    env = Env()
    a = Client(env, "a")
    a.heartbeat()
    commit = env.coordinator.commit_offsets
    assert commit("g", 1, "a", {("t", 0): (5, None, None)}) == {("t", 0): E.none}
    assert commit("g", 0, "a", {("t", 0): (6, None, None)}) == {("t", 0): E.stale_member_epoch}
    assert commit("g", 1, "zz", {("t", 0): (6, None, None)}) == {("t", 0): E.unknown_member_id}
    assert commit("g", -1, "", {("t", 0): (6, None, None)}) == {("t", 0): E.unknown_member_id}  # not empty
    old = env.coordinator.prepare_commit("g", 1, "a", {("t", 1): (1, None, None)}, api_version=8)
    assert old.answers(E.none) == {("t", 1): E.unsupported_version}
    fetched = env.coordinator.fetch_offsets("g", [("t", 0)], member_id="a", member_epoch=1)
    assert (fetched.error, fetched.offsets[("t", 0)].offset) == (E.none, 5)
    assert (
        env.coordinator.fetch_offsets("g", None, member_id="a", member_epoch=0).error == E.stale_member_epoch
    )
    assert (
        env.coordinator.fetch_offsets("g", None, member_id="b", member_epoch=1).error == E.unknown_member_id
    )
    assert env.coordinator.fetch_offsets("g", None).offsets[("t", 0)].offset == 5  # an admin's fetch
    deleted = env.coordinator.delete_offsets("g", [("t", 0), ("gone", 0)])
    assert deleted.partitions == {("t", 0): E.group_subscribed_to_topic, ("gone", 0): E.none}
    assert env.coordinator.delete_groups(["g"]) == {"g": E.non_empty_group}
    a.leave()
    assert commit("g", -1, "", {("t", 2): (9, None, None)}) == {("t", 2): E.none}  # empty: admin commits
    assert env.coordinator.delete_groups(["g"]) == {"g": E.none}
    assert env.coordinator.consumer_group("g") is None and env.coordinator.group_type("g") is None
    assert env.coordinator.fetch_offsets("g", [("t", 0)]).offsets[("t", 0)].offset == -1


def test_commit_with_an_epoch_to_an_unknown_group_is_group_id_not_found_from_v9() -> None:
    env = Env()
    v9 = env.coordinator.prepare_commit("nope", 3, "m", {("t", 0): (1, None, None)}, api_version=9)
    v8 = env.coordinator.prepare_commit("nope", 3, "m", {("t", 0): (1, None, None)}, api_version=8)
    assert v9.answers(E.none) == {("t", 0): E.group_id_not_found}
    assert v8.answers(E.none) == {("t", 0): E.illegal_generation}


def test_offsets_of_unsubscribed_topics_expire_and_an_empty_group_goes() -> None:
    env = Env(offsets_retention_minutes=1)
    a = Client(env, "a")
    a.heartbeat()
    env.coordinator.commit_offsets("g", 1, "a", {("t", 0): (5, None, None), ("old", 0): (1, None, None)})
    for _ in range(4):
        env.clock.advance(15_001)
        a.heartbeat()
    assert env.coordinator.expire_offsets() == 1  # "old": no member subscribes to it
    a.leave()
    env.clock.advance(60_001)
    assert env.coordinator.expire_offsets() == 1
    assert env.coordinator.consumer_group("g") is None


# -- the classic protocol meets a consumer group ------------------------------------------------------


@run
async def test_classic_and_consumer_groups_share_the_id_space() -> None:
    env = Env()
    # An offsets-only (Empty) classic group becomes a consumer group, keeping its offsets.
    env.coordinator.commit_offsets("g", -1, "", {("t", 0): (42, None, None)})
    assert env.coordinator.group_type("g") == "classic"
    a = Client(env, "a")
    assert a.heartbeat().error == E.none
    assert env.coordinator.group_type("g") == "consumer" and env.coordinator.group("g") is None
    assert env.coordinator.fetch_offsets("g", [("t", 0)]).offsets[("t", 0)].offset == 42
    # Classic calls against a non-empty consumer group.
    join = await env.coordinator.join_group(
        "g", "", None, "c", "/h", 10_000, 10_000, "consumer", [("range", b"")], False
    )
    assert join.error == E.inconsistent_group_protocol
    assert env.coordinator.heartbeat("g", 1, "a") == E.unknown_member_id
    assert (await env.coordinator.sync_group("g", 1, "a", None, {})).error == E.unknown_member_id
    assert [m.error for m in env.coordinator.leave_group("g", [("a", None)]).members] == [E.unknown_member_id]
    # ... and the other way round: a non-empty classic group is not a consumer group.
    classic = env.coordinator.join_group(
        "c", "", None, "c", "/h", 10_000, 10_000, "consumer", [("range", b"")], False
    )
    env.clock.advance(0)
    assert (await classic).error == E.none
    refused = Client(env, "x", group="c").heartbeat()
    assert (refused.error, refused.message) == (E.group_id_not_found, "Group c is not a consumer group.")
    # An Empty consumer group gives way to a classic JoinGroup; the offsets stay.
    a.leave()
    rejoin = env.coordinator.join_group(
        "g", "", None, "c", "/h", 10_000, 10_000, "consumer", [("range", b"")], False
    )
    env.clock.advance(0)
    assert (await rejoin).error == E.none
    assert env.coordinator.group_type("g") == "classic"
    assert env.coordinator.fetch_offsets("g", [("t", 0)]).offsets[("t", 0)].offset == 42
    overview = {(o.group_id, o.group_type) for o in env.coordinator.list_groups()}
    assert overview == {("g", "classic"), ("c", "classic")}


def test_list_and_describe() -> None:
    env = Env(Catalog(t=(T, 4), u=(U, 2)))
    a, b = Client(env, "a", assignor="range"), Client(env, "b", topics=("t", "u"), assignor="range")
    settle([a, b])
    [listed] = env.coordinator.list_groups(types=["Consumer"])
    assert (listed.group_id, listed.protocol_type, listed.state, listed.group_type) == (
        "g",
        "consumer",
        "Stable",
        "consumer",
    )
    assert env.coordinator.list_groups(types=["classic"]) == []
    assert env.coordinator.list_groups(states=["reconciling"]) == []
    assert env.coordinator.list_groups(types=["share"]) == []
    described = env.coordinator.consumer_group_describe("g")
    assert (described.error, described.state, described.assignor_name) == (E.none, "Stable", "range")
    assert described.group_epoch == described.assignment_epoch == 2
    members = {m.member_id: m for m in described.members}
    assert [(p.topic_name, p.partitions) for p in members["a"].assignment] == [("t", (0, 1))]
    assert [(p.topic_name, p.partitions) for p in members["b"].target_assignment] == [
        ("t", (2, 3)),
        ("u", (0, 1)),
    ]
    missing = env.coordinator.consumer_group_describe("nope")
    assert (missing.error, missing.message) == (E.group_id_not_found, "Consumer group nope not found.")
    assert env.coordinator.describe_group("g").state == "Dead"  # not a classic group


def test_regex_subscriptions_follow_new_topics() -> None:
    catalog = Catalog(**{"orders-1": (T, 2)})
    env = Env(catalog)
    a = Client(env, "a", regex="orders-.*")
    a.heartbeat()
    assert a.partitions() == {(T, 0), (T, 1)}
    catalog.topics["orders-2"] = (U, 1)
    catalog.topics["other"] = (uuid.UUID(int=99), 1)
    settle([a], rounds=2)
    assert a.partitions() == {(T, 0), (T, 1), (U, 0)}
    assert env.group().members["a"].subscribed_topic_regex == "orders-.*"


def test_partitions_added_to_a_topic_bump_the_epoch() -> None:
    env = Env()
    a = Client(env, "a")
    a.heartbeat()
    env.catalog.topics["t"] = (T, 8)
    settle([a], rounds=2)
    assert env.group().group_epoch == 2 and len(a.partitions()) == 8


# -- records and reload ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "record",
    [
        (ConsumerGroupKey(GROUP_EPOCH, "g"), GroupEpochValue(3)),
        (ConsumerGroupKey(SUBSCRIPTION_METADATA, "g"), SubscriptionMetadataValue((TopicMetadata("t", T, 6),))),
        (ConsumerGroupKey(MEMBER_SUBSCRIPTION, "g", "m"),
         MemberSubscriptionValue("i", "r", "c", "/h", ("a", "b"), "x.*", 300, "range")),
        (ConsumerGroupKey(ASSIGNMENT_EPOCH, "g"), AssignmentEpochValue(3)),
        (ConsumerGroupKey(TARGET_ASSIGNMENT, "g", "m"), TargetAssignmentValue({T: frozenset({1, 2}), U: frozenset({0})})),
        (ConsumerGroupKey(CURRENT_ASSIGNMENT, "g", "m"), CurrentAssignmentValue(3, 2, 1, tp(T, 1), tp(U, 0))),
        (ConsumerGroupKey(CURRENT_ASSIGNMENT, "g", "m"), None),
    ],
)  # fmt: skip
def test_records_round_trip(record: Any) -> None:
    key, value = encode_consumer_record(record)
    assert int.from_bytes(key[:2], "big") == record[0].type
    assert decode_consumer_record(key, value) == record


def test_records_skip_unknown_tagged_fields_and_refuse_garbage() -> None:
    key, value = encode_consumer_record((ConsumerGroupKey(GROUP_EPOCH, "g"), GroupEpochValue(7)))
    assert value is not None
    tagged = value[:-1] + bytes([1, 5, 2, 0xAB, 0xCD])  # one tagged field (tag 5, 2 bytes)
    assert decode_consumer_record(key, tagged) == (ConsumerGroupKey(GROUP_EPOCH, "g"), GroupEpochValue(7))
    with pytest.raises(OffsetsSchemaError):
        decode_consumer_record(key, value[:-3])
    assert decode_consumer_record(b"\x00\x01\x00\x01g", None) is None  # a classic key: not ours


def test_a_restarted_coordinator_holds_the_same_groups_and_members_carry_on() -> None:
    env = Env()
    a, b = Client(env, "a"), Client(env, "b", instance="ib")
    settle([a, b])
    env.coordinator.commit_offsets("g", a.epoch, "a", {("t", 0): (7, None, None)})
    before = env.group()
    env.coordinator.close()
    env.coordinator = env.make()
    env.coordinator.load(env.records)
    after = env.group()
    assert (after.group_epoch, after.assignment_epoch, after.state) == (
        before.group_epoch,
        before.assignment_epoch,
        S.STABLE,
    )
    assert after.members == before.members and after.target_assignment == before.target_assignment
    assert env.coordinator.fetch_offsets("g", [("t", 0)]).offsets[("t", 0)].offset == 7
    result = a.heartbeat()
    assert (result.error, result.member_epoch) == (E.none, a.epoch)  # accepted at its epoch
    # Sessions restarted at load: b, silent, is fenced after the session timeout.
    for _ in range(4):
        env.clock.advance(SESSION // 3)
        a.heartbeat()
    assert list(env.group().members) == ["a"]
    settle([a])
    assert len(a.partitions()) == 6
    # Deleting the group leaves nothing behind on a reload.
    a.leave()
    env.coordinator.delete_groups(["g"])
    fresh = env.make()
    fresh.load(env.records)
    assert fresh.consumer_group("g") is None and fresh.list_groups() == []
