"""The group coordinator on a manual clock: the state machine, rebalances, sessions, offsets, load."""

from __future__ import annotations

import asyncio
import functools
import itertools
import re
import struct
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from logstore.coordinator.clock import ManualClock
from logstore.coordinator.group.classic_group import (
    GroupMetadata,
    GroupState,
    InvalidTransitionError,
    JoinResult,
    MemberMetadata,
    SyncResult,
)
from logstore.coordinator.group.coordinator_config import CoordinatorConfig
from logstore.coordinator.group.group_coordinator import GroupCoordinator
from logstore.coordinator.group.offsets_schemas import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
)
from logstore.coordinator.group.persistence import WriteError
from logstore.coordinator.internal_topics import partition_for
from logstore.coordinator.record_codec import OffsetsSchemaError, Record

pytestmark = pytest.mark.unit

E = ErrorCode
S = GroupState
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"


def run(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """Run an async test body in a fresh event loop (pytest-asyncio is not installed)."""

    @functools.wraps(test)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))  # type: ignore[arg-type]

    return wrapper


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: version, topics, null user data."""
    body = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        body += struct.pack(">h", len(topic)) + topic.encode()
    return body + struct.pack(">i", -1)


class Env:
    """A coordinator on a manual clock, recording what it writes."""

    def __init__(self, **config: int) -> None:
        config.setdefault("group_initial_rebalance_delay_ms", 0)
        self.clock = ManualClock(1_000_000)
        self.records: list[Record] = []
        self.fail_writes = False
        self.coordinator = GroupCoordinator(CoordinatorConfig(**config), clock=self.clock, writer=self.write)

    def write(self, group_id: str, records: list[Record]) -> None:
        assert all(decode_key(key).group == group_id for key, _ in records)
        if self.fail_writes:
            raise WriteError(E.not_coordinator)
        self.records.extend(records)

    def join(
        self,
        member_id: str = "",
        *,
        group: str = "g",
        instance: str | None = None,
        client: str = "c",
        session: int = 10_000,
        rebalance: int = 30_000,
        protocols: Sequence[tuple[str, bytes]] | None = None,
        topics: Sequence[str] = ("t",),
        require_known: bool = False,
        protocol_type: str = "consumer",
    ) -> asyncio.Future[JoinResult]:
        chosen = protocols if protocols is not None else [("range", subscription(*topics))]
        return self.coordinator.join_group(
            group,
            member_id,
            instance,
            client,
            "/127.0.0.1",
            session,
            rebalance,
            protocol_type,
            chosen,
            require_known,
        )

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        group: str = "g",
        instance: str | None = None,
    ) -> asyncio.Future[SyncResult]:
        return self.coordinator.sync_group(group, generation, member_id, instance, assignments or {})

    def state(self, group: str = "g") -> GroupState | None:
        found = self.coordinator.group(group)
        return None if found is None else found.state

    def form(self, count: int = 2, **join: Any) -> list[JoinResult]:
        """``count`` members join and sync; the group is Stable. Each is assigned its own id."""
        futures = [self.join(client=f"c{i}", **join) for i in range(count)]
        self.clock.advance(0)
        results = [done(future) for future in futures]
        generation = results[0].generation_id
        ids = [result.member_id for result in results]
        syncs = [
            self.sync(member_id, generation, {m: m.encode() for m in ids} if i == 0 else None)
            for i, member_id in enumerate(ids)
        ]
        assert [done(sync).error for sync in syncs] == [E.none] * count
        assert self.state() is S.STABLE
        return results

    def offset_records(self) -> list[tuple[OffsetCommitKey | GroupMetadataKey, bytes | None]]:
        return [(decode_key(key), value) for key, value in self.records]


def done(future: asyncio.Future[Any]) -> Any:
    assert future.done(), "expected the call to have completed"
    return future.result()


# -- the state machine ---------------------------------------------------------------

LEGAL = {
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.STABLE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.STABLE),
    (S.PREPARING_REBALANCE, S.EMPTY),
    *((state, S.DEAD) for state in S),
}


@pytest.mark.parametrize(("source", "target"), list(itertools.product(S, S)))
def test_state_transitions_follow_kafka(source: GroupState, target: GroupState) -> None:
    group = GroupMetadata("g", lambda: 7, source)
    if (source, target) in LEGAL:
        group.transition_to(target)
        assert group.state is target
    else:
        with pytest.raises(InvalidTransitionError):
            group.transition_to(target)
        assert group.state is source


@run
async def test_first_rebalance_walks_empty_preparing_completing_stable() -> None:
    env = Env(group_initial_rebalance_delay_ms=3000)
    join = env.join()
    assert env.state() is S.PREPARING_REBALANCE
    env.clock.advance(2999)
    assert not join.done()
    env.clock.advance(1)
    result = done(join)
    assert result.error == E.none
    assert re.fullmatch(f"c-{UUID}", result.member_id)
    assert (result.generation_id, result.leader_id, result.protocol_name) == (1, result.member_id, "range")
    assert [m.member_id for m in result.members] == [result.member_id]
    assert result.members[0].metadata == subscription("t")
    assert env.state() is S.COMPLETING_REBALANCE
    sync = done(env.sync(result.member_id, 1, {result.member_id: b"A"}))
    assert (sync.error, sync.assignment, sync.protocol_name) == (E.none, b"A", "range")
    assert env.state() is S.STABLE
    [(key, value)] = env.offset_records()
    assert key == GroupMetadataKey("g") and value is not None
    stored = GroupMetadataValue.decode(value)
    assert (stored.generation, stored.protocol, stored.leader) == (1, "range", result.member_id)
    assert stored.members[0].assignment == b"A"


@run
async def test_initial_delay_is_extended_by_joining_members_up_to_the_rebalance_timeout() -> None:
    env = Env(group_initial_rebalance_delay_ms=3000)
    first = env.join(rebalance=10_000)
    env.clock.advance(1000)
    second = env.join(rebalance=10_000)  # joined during the delay: wait another 3000 at t=3000
    env.clock.advance(4999)  # t=5999
    assert not first.done() and not second.done()
    env.clock.advance(1)  # t=6000
    assert done(first).generation_id == done(second).generation_id == 1

    capped = Env(group_initial_rebalance_delay_ms=3000)
    a = capped.join(group="h", rebalance=5000)  # delay 3000, then at most 2000 more
    capped.clock.advance(1000)
    capped.join(group="h", rebalance=5000)
    capped.clock.advance(3000)  # t=4000: extended to t=5000 with nothing left
    capped.join(group="h", rebalance=5000)
    capped.clock.advance(999)
    assert not a.done()
    capped.clock.advance(1)
    assert len(done(a).members) == 3


@run
async def test_followers_wait_for_the_leaders_assignment() -> None:
    env = Env()
    futures = [env.join(client="a"), env.join(client="b"), env.join(client="c")]
    env.clock.advance(0)
    leader, follower, other = (done(f) for f in futures)
    assert leader.leader_id == follower.leader_id == leader.member_id
    assert len(leader.members) == 3 and follower.members == () and other.members == ()
    waiting = env.sync(follower.member_id, 1)
    assert not waiting.done()
    done(env.sync(leader.member_id, 1, {leader.member_id: b"L", follower.member_id: b"F"}))
    assert done(waiting).assignment == b"F"
    assert done(env.sync(other.member_id, 1)).assignment == b""  # left out: empty assignment
    assert env.state() is S.STABLE


@run
async def test_a_new_member_rebalances_a_stable_group() -> None:
    env = Env()
    [a] = env.form(1)
    newcomer = env.join(client="n")
    assert env.state() is S.PREPARING_REBALANCE
    assert env.coordinator.heartbeat("g", 1, a.member_id) == E.rebalance_in_progress
    assert done(env.sync(a.member_id, 1)).error == E.rebalance_in_progress
    rejoin = env.join(a.member_id)  # every member has rejoined: completes at once
    assert env.state() is S.COMPLETING_REBALANCE
    assert done(rejoin).generation_id == done(newcomer).generation_id == 2
    assert done(rejoin).leader_id == a.member_id  # the leader stays the leader


@run
async def test_leaving_rebalances_and_the_last_leave_empties_the_group() -> None:
    env = Env()
    a, b = env.form(2)
    left = env.coordinator.leave_group("g", [(b.member_id, None), ("nobody", None)])
    assert [m.error for m in left.members] == [E.none, E.unknown_member_id]
    assert env.state() is S.PREPARING_REBALANCE
    rejoin = env.join(a.member_id)
    assert done(rejoin).generation_id == 2 and env.state() is S.COMPLETING_REBALANCE
    done(env.sync(a.member_id, 2, {a.member_id: b""}))
    env.coordinator.leave_group("g", [(a.member_id, None)])
    assert env.state() is S.EMPTY
    group = env.coordinator.group("g")
    assert group is not None and group.generation_id == 3 and group.leader_id is None
    key, value = env.offset_records()[-1]
    assert key == GroupMetadataKey("g")
    assert value is not None and GroupMetadataValue.decode(value).members == ()


@run
async def test_session_expiry_expels_a_silent_member() -> None:
    env = Env()
    a, b = env.form(2, session=10_000)
    env.clock.advance(6000)
    assert env.coordinator.heartbeat("g", 1, a.member_id) == E.none
    env.clock.advance(3999)
    assert env.state() is S.STABLE
    env.clock.advance(1)  # b's session ends
    assert env.state() is S.PREPARING_REBALANCE
    assert env.coordinator.heartbeat("g", 1, a.member_id) == E.rebalance_in_progress
    assert env.coordinator.heartbeat("g", 1, b.member_id) == E.unknown_member_id
    result = done(env.join(a.member_id))
    assert result.generation_id == 2 and [m.member_id for m in result.members] == [a.member_id]


@run
async def test_rebalance_timeout_drops_dynamic_members_that_did_not_rejoin() -> None:
    env = Env()
    a, b = env.form(2, session=60_000, rebalance=10_000)
    rejoin = env.join(a.member_id, session=60_000, rebalance=10_000)
    assert env.state() is S.PREPARING_REBALANCE
    env.clock.advance(9999)
    assert not rejoin.done()
    env.clock.advance(1)
    result = done(rejoin)
    assert [m.member_id for m in result.members] == [a.member_id]
    assert env.coordinator.heartbeat("g", 2, b.member_id) == E.unknown_member_id


@run
async def test_the_leader_moves_to_a_member_that_rejoined() -> None:
    env = Env()
    a, b = env.form(2, session=60_000, rebalance=10_000)
    rejoin = env.join(b.member_id, topics=("t", "u"), session=60_000, rebalance=10_000)  # new metadata
    env.clock.advance(10_000)
    result = done(rejoin)
    assert result.leader_id == b.member_id and len(result.members) == 1
    assert env.coordinator.heartbeat("g", 2, a.member_id) == E.unknown_member_id


@run
async def test_members_that_never_sync_are_expelled_after_the_rebalance_timeout() -> None:
    env = Env()
    futures = [env.join(client="a", session=60_000, rebalance=10_000), env.join(client="b", session=60_000)]
    env.clock.advance(0)
    leader, follower = (done(f) for f in futures)
    parked = env.sync(follower.member_id, 1)
    env.clock.advance(29_999)  # the group's rebalance timeout is the largest: 30000
    assert not parked.done()
    env.clock.advance(1)  # the leader never synced
    assert done(parked).error == E.rebalance_in_progress
    assert env.state() is S.PREPARING_REBALANCE
    assert env.coordinator.heartbeat("g", 1, leader.member_id) == E.unknown_member_id
    rejoin = done(env.join(follower.member_id, session=60_000))
    assert rejoin.leader_id == follower.member_id and rejoin.generation_id == 2


@run
async def test_member_id_required_then_rejoin_with_the_given_id() -> None:
    env = Env()
    first = done(env.join(require_known=True, client="cli"))
    assert first.error == E.member_id_required
    assert re.fullmatch(f"cli-{UUID}", first.member_id)
    assert env.state() is S.EMPTY
    second = env.join(first.member_id, require_known=True, client="cli")
    env.clock.advance(0)
    assert done(second).error == E.none and done(second).member_id == first.member_id


@run
async def test_a_pending_member_holds_the_join_until_it_returns_or_expires() -> None:
    env = Env()
    [a] = env.form(1)
    pending = done(env.join(require_known=True, client="p", session=8000)).member_id
    assert env.state() is S.STABLE  # handing out an id does not rebalance
    rejoin = env.join(a.member_id)
    assert env.state() is S.PREPARING_REBALANCE and not rejoin.done()
    late = env.join(pending, require_known=True, client="p", session=8000)
    assert done(rejoin).generation_id == done(late).generation_id == 2

    env2 = Env()
    [b] = env2.form(1)
    forgotten = done(env2.join(require_known=True, client="p", session=8000)).member_id
    rejoin2 = env2.join(b.member_id)
    env2.clock.advance(7999)
    assert not rejoin2.done()
    env2.clock.advance(1)  # the pending member's session ends
    assert len(done(rejoin2).members) == 1
    assert env2.coordinator.leave_group("g", [(forgotten, None)]).members[0].error == E.unknown_member_id


@run
async def test_static_member_rejoining_with_a_new_id_fences_the_old_one() -> None:
    env = Env()
    a, s = env.form(1)[0], None
    joining = env.join(instance="i1", client="s")
    assert env.state() is S.PREPARING_REBALANCE
    done(env.join(a.member_id))
    s = done(joining)
    assert re.fullmatch(f"i1-{UUID}", s.member_id)
    done(env.sync(a.member_id, 2, {a.member_id: b"A", s.member_id: b"S"}))
    done(env.sync(s.member_id, 2, instance="i1"))
    writes = len(env.records)

    restarted = done(env.join(instance="i1", client="s"))  # a restart: no member id
    assert restarted.error == E.none and restarted.member_id != s.member_id
    assert restarted.generation_id == 2 and env.state() is S.STABLE  # no rebalance
    assert restarted.leader_id == a.member_id
    assert env.coordinator.heartbeat("g", 2, s.member_id, "i1") == E.fenced_instance_id
    assert env.coordinator.heartbeat("g", 2, s.member_id) == E.unknown_member_id
    assert env.coordinator.heartbeat("g", 2, restarted.member_id, "i1") == E.none
    assert done(env.sync(restarted.member_id, 2, instance="i1")).assignment == b"S"
    assert done(env.sync(s.member_id, 2, instance="i1")).error == E.fenced_instance_id
    results = env.coordinator.commit_offsets("g", 2, s.member_id, {("t", 0): (1, None, None)}, "i1")
    assert results == {("t", 0): E.fenced_instance_id}
    [(key, value)] = env.offset_records()[writes:]
    assert key == GroupMetadataKey("g") and value is not None
    assert [m.member_id for m in GroupMetadataValue.decode(value).members] == [
        a.member_id,
        restarted.member_id,
    ]


@run
async def test_static_member_rejoin_during_sync_fences_the_parked_sync_and_rebalances() -> None:
    env = Env()
    futures = [env.join(client="a"), env.join(instance="i1", client="s")]
    env.clock.advance(0)
    a, s = (done(f) for f in futures)
    parked = env.sync(s.member_id, 1, instance="i1")
    again = env.join(instance="i1", client="s")
    assert done(parked).error == E.fenced_instance_id
    assert env.state() is S.PREPARING_REBALANCE
    done(env.join(a.member_id))
    assert done(again).generation_id == 2


@run
async def test_static_members_outlive_the_rebalance_timeout() -> None:
    env = Env()
    futures = [
        env.join(client="a", rebalance=10_000, session=60_000),
        env.join(instance="i1", session=60_000),
    ]
    env.clock.advance(0)
    a, s = (done(f) for f in futures)
    done(env.sync(a.member_id, 1, {}))
    done(env.sync(s.member_id, 1, instance="i1"))
    rejoin = env.join(a.member_id, rebalance=10_000, session=60_000)
    env.clock.advance(30_000)  # the largest rebalance timeout
    members = [m.member_id for m in done(rejoin).members]
    assert members == [a.member_id, s.member_id]  # kept, though it did not rejoin


# -- protocol selection --------------------------------------------------------------------


def java_hash(text: str) -> int:
    """Java's String.hashCode, written out independently of the code under test."""
    value = 0
    for char in text:  # these test strings are all BMP
        value = (value * 31 + ord(char)) % 2**32
    return value - 2**32 if value >= 2**31 else value


def bucket(text: str) -> int:
    """The bucket of a 16-slot java.util.HashMap: (h ^ (h >>> 16)) & 15."""
    unsigned = java_hash(text) % 2**32
    return (unsigned ^ (unsigned >> 16)) & 15


def vote_group(*preferences: Sequence[str]) -> GroupMetadata:
    group = GroupMetadata("g", lambda: 0)
    for i, names in enumerate(preferences):
        member = MemberMetadata(f"m{i}", None, "c", "h", 1, 1, "consumer", [(n, b"") for n in names])
        group.add(member)
    return group


def test_each_member_votes_for_its_first_common_protocol() -> None:
    # Seed 001: the candidates are the strategies every member supports; each votes for the
    # first candidate in its own list; the most votes win.
    group = vote_group(["range", "roundrobin"], ["roundrobin", "range"], ["roundrobin", "sticky", "range"])
    assert group.candidate_protocols() == {"range", "roundrobin"}
    assert group.select_protocol() == "roundrobin"
    # "sticky" is preferred by the first member but not supported by all.
    assert vote_group(["sticky", "range"], ["range"]).select_protocol() == "range"


def test_tied_votes_go_to_the_first_protocol_in_java_hashmap_order() -> None:
    assert (java_hash("range"), java_hash("roundrobin")) == (108280125, -128548644)
    assert (bucket("range"), bucket("roundrobin"), bucket("cooperative-sticky")) == (9, 10, 15)
    assert vote_group(["range", "roundrobin"], ["roundrobin", "range"]).select_protocol() == "range"
    assert vote_group(["roundrobin", "range"], ["range", "roundrobin"]).select_protocol() == "range"
    tie = vote_group(["cooperative-sticky", "roundrobin"], ["roundrobin", "cooperative-sticky"])
    assert tie.select_protocol() == "roundrobin"


@run
async def test_the_coordinator_selects_by_vote_and_rejects_unsupported_protocols() -> None:
    env = Env()
    futures = [
        env.join(protocols=[("range", b"1"), ("roundrobin", b"2")]),
        env.join(protocols=[("roundrobin", b"3"), ("range", b"4")]),
        env.join(protocols=[("roundrobin", b"5"), ("sticky", b""), ("range", b"6")]),
    ]
    stranger = done(env.join(protocols=[("sticky", b"")]))
    assert stranger.error == E.inconsistent_group_protocol
    assert done(env.join(protocols=[("range", b"")], protocol_type="connect")).error == (
        E.inconsistent_group_protocol
    )
    env.clock.advance(0)
    leader = done(futures[0])
    assert leader.protocol_name == "roundrobin"
    assert [m.metadata for m in leader.members] == [b"2", b"3", b"5"]


# -- errors of heartbeat, sync and commit -----------------------------------------------------


@run
async def test_illegal_generation_and_unknown_member() -> None:
    env = Env()
    a, b = env.form(2)
    hb = env.coordinator.heartbeat
    assert hb("g", 0, a.member_id) == E.illegal_generation
    assert hb("g", 1, "ghost") == E.unknown_member_id
    assert hb("nope", 1, a.member_id) == E.unknown_member_id
    assert hb("", 1, a.member_id) == E.invalid_group_id
    assert done(env.sync(a.member_id, 7)).error == E.illegal_generation
    assert done(env.sync("ghost", 1)).error == E.unknown_member_id
    assert done(env.sync(a.member_id, 1, group="nope")).error == E.unknown_member_id
    commit = env.coordinator.commit_offsets
    offsets = {("t", 0): (5, 1, "")}
    assert commit("g", 0, a.member_id, offsets) == {("t", 0): E.illegal_generation}
    assert commit("g", 1, "ghost", offsets) == {("t", 0): E.unknown_member_id}
    assert commit("g", -1, "", offsets) == {("t", 0): E.unknown_member_id}  # the group has members
    assert commit("nope", 3, "x", offsets) == {("t", 0): E.illegal_generation}
    assert commit("g", 1, b.member_id, offsets) == {("t", 0): E.none}
    # Rejoining with an unknown id: UNKNOWN_MEMBER_ID; into an unknown group too.
    assert done(env.join("ghost")).error == E.unknown_member_id
    assert done(env.join("ghost", group="nope")).error == E.unknown_member_id


@run
async def test_commits_while_awaiting_sync_answer_rebalance_in_progress() -> None:
    env = Env()
    join = env.join()
    env.clock.advance(0)
    a = done(join)
    assert env.state() is S.COMPLETING_REBALANCE
    assert env.coordinator.heartbeat("g", 1, a.member_id) == E.none
    results = env.coordinator.commit_offsets("g", 1, a.member_id, {("t", 0): (5, None, None)})
    assert results == {("t", 0): E.rebalance_in_progress}


@run
async def test_join_validation() -> None:
    env = Env(group_max_size=1)
    assert done(env.join(session=5999)).error == E.invalid_session_timeout
    assert done(env.join(session=1_800_001)).error == E.invalid_session_timeout
    assert done(env.join(group="")).error == E.invalid_group_id
    env.form(1)
    full = done(env.join(client="late"))
    assert (full.error, full.member_id) == (E.group_max_size_reached, "")


# -- offsets -------------------------------------------------------------------------------------


@run
async def test_simple_commits_and_fetches() -> None:
    env = Env(offset_metadata_max_bytes=3)
    results = env.coordinator.commit_offsets(
        "solo", -1, "", {("t", 0): (42, 5, "abc"), ("t", 1): (7, None, None), ("u", 0): (1, 1, "abcd")}
    )
    assert results == {("t", 0): E.none, ("t", 1): E.none, ("u", 0): E.offset_metadata_too_large}
    assert env.state("solo") is S.EMPTY
    fetched = env.coordinator.fetch_offsets("solo", [("t", 0), ("t", 1), ("t", 2)]).offsets
    assert (fetched[("t", 0)].offset, fetched[("t", 0)].leader_epoch, fetched[("t", 0)].metadata) == (
        42,
        5,
        "abc",
    )
    assert (fetched[("t", 1)].offset, fetched[("t", 1)].leader_epoch, fetched[("t", 1)].metadata) == (
        7,
        -1,
        "",
    )
    assert fetched[("t", 2)].offset == -1
    assert set(env.coordinator.fetch_offsets("solo").offsets) == {("t", 0), ("t", 1)}
    assert env.coordinator.fetch_offsets("other", [("t", 0)]).offsets[("t", 0)].offset == -1
    stored = {decode_key(k): OffsetCommitValue.decode(v) for k, v in env.records if v is not None}
    assert stored[OffsetCommitKey("solo", "t", 0)] == OffsetCommitValue(42, 5, "abc", 1_000_000)
    assert env.coordinator.commit_offsets("solo", -1, "", {("u", 0): (1, 1, "∑∑∑∑")}) == {
        ("u", 0): E.offset_metadata_too_large
    }


@run
async def test_member_commits_renew_the_session() -> None:
    env = Env()
    [a] = env.form(1, session=10_000)
    env.clock.advance(9000)
    assert env.coordinator.commit_offsets("g", 1, a.member_id, {("t", 0): (3, 0, "")}) == {("t", 0): E.none}
    env.clock.advance(9000)  # past the first deadline, within the renewed one
    assert env.state() is S.STABLE
    assert env.coordinator.fetch_offsets("g", [("t", 0)]).offsets[("t", 0)].offset == 3


@run
async def test_a_failed_write_fails_the_commit_and_the_sync() -> None:
    env = Env()
    env.fail_writes = True
    assert env.coordinator.commit_offsets("g", -1, "", {("t", 0): (1, 0, "")}) == {
        ("t", 0): E.not_coordinator
    }
    assert env.coordinator.fetch_offsets("g", [("t", 0)]).offsets[("t", 0)].offset == -1
    join = env.join()
    env.clock.advance(0)
    a = done(join)
    assert done(env.sync(a.member_id, 1, {a.member_id: b"x"})).error == E.not_coordinator
    assert env.state() is S.PREPARING_REBALANCE


@run
async def test_delete_offsets_refuses_subscribed_topics() -> None:
    env = Env()
    [a] = env.form(1, topics=("t1",))
    env.coordinator.commit_offsets("g", 1, a.member_id, {("t1", 0): (1, 0, ""), ("t2", 0): (2, 0, "")})
    result = env.coordinator.delete_offsets("g", [("t1", 0), ("t2", 0)])
    assert result.error == E.none
    assert result.partitions == {("t1", 0): E.group_subscribed_to_topic, ("t2", 0): E.none}
    assert set(env.coordinator.fetch_offsets("g").offsets) == {("t1", 0)}
    assert env.offset_records()[-1] == (OffsetCommitKey("g", "t2", 0), None)
    assert env.coordinator.delete_offsets("nope", [("t", 0)]).error == E.group_id_not_found
    other = Env()
    other.form(1, protocol_type="connect")
    assert other.coordinator.delete_offsets("g", [("t", 0)]).error == E.non_empty_group


@run
async def test_expiry_removes_offsets_of_empty_groups_after_retention() -> None:
    env = Env(offsets_retention_minutes=1)
    [a] = env.form(1, session=1_800_000)
    env.coordinator.commit_offsets("g", 1, a.member_id, {("t", 0): (9, 0, ""), ("old", 0): (1, 0, "")})
    env.clock.advance(120_000)  # a Stable group keeps offsets of subscribed topics only
    assert env.coordinator.expire_offsets() == 1
    assert set(env.coordinator.fetch_offsets("g").offsets) == {("t", 0)}
    env.coordinator.leave_group("g", [(a.member_id, None)])
    assert env.state() is S.EMPTY
    empty_since = env.clock.now_ms()
    assert env.coordinator.expire_offsets(empty_since + 59_999) == 0
    assert env.coordinator.expire_offsets(empty_since + 60_000) == 1
    assert env.coordinator.group("g") is None  # Dead and forgotten
    assert env.offset_records()[-2:] == [(OffsetCommitKey("g", "t", 0), None), (GroupMetadataKey("g"), None)]
    # Offsets-only groups expire by commit time, and write no group tombstone.
    env.coordinator.commit_offsets("solo", -1, "", {("t", 0): (1, 0, "")})
    env.clock.advance(30_000)
    env.coordinator.commit_offsets("solo", -1, "", {("t", 1): (1, 0, "")})
    env.clock.advance(30_000)
    assert env.coordinator.expire_offsets() == 1
    assert set(env.coordinator.fetch_offsets("solo").offsets) == {("t", 1)}
    env.clock.advance(30_000)
    assert env.coordinator.expire_offsets() == 1
    assert env.offset_records()[-1] == (OffsetCommitKey("solo", "t", 1), None)


@run
async def test_periodic_expiry_runs_on_the_clock() -> None:
    env = Env(offsets_retention_minutes=1, offsets_retention_check_interval_ms=10_000)
    env.coordinator.start()
    env.coordinator.commit_offsets("solo", -1, "", {("t", 0): (1, 0, "")})
    env.clock.advance(60_000)
    assert env.coordinator.group("solo") is None
    env.coordinator.close()
    assert env.clock.pending() == 0


# -- groups ----------------------------------------------------------------------------------------


@run
async def test_delete_groups_kills_only_empty_groups() -> None:
    env = Env()
    env.form(1)
    env.coordinator.commit_offsets("solo", -1, "", {("t", 0): (1, 0, "")})
    solo = env.coordinator.group("solo")
    errors = env.coordinator.delete_groups(["g", "solo", "nope"])
    assert errors == {"g": E.non_empty_group, "solo": E.none, "nope": E.group_id_not_found}
    assert solo is not None and solo.state is S.DEAD
    assert env.coordinator.describe_group("solo").state == "Dead"
    assert env.coordinator.fetch_offsets("solo", [("t", 0)]).offsets[("t", 0)].offset == -1
    assert env.offset_records()[-1] == (
        OffsetCommitKey("solo", "t", 0),
        None,
    )  # generation 0: no group tombstone
    assert env.coordinator.delete_groups(["solo"]) == {"solo": E.group_id_not_found}


@run
async def test_describe_and_list_groups() -> None:
    env = Env()
    a, b = env.form(2, topics=("t",))
    described = env.coordinator.describe_group("g")
    assert (described.state, described.protocol_type, described.protocol) == ("Stable", "consumer", "range")
    assert [(m.member_id, m.assignment) for m in described.members] == [
        (a.member_id, a.member_id.encode()),
        (b.member_id, b.member_id.encode()),
    ]
    assert described.members[0].metadata == subscription("t")
    env.join(client="n")
    preparing = env.coordinator.describe_group("g")
    assert preparing.state == "PreparingRebalance" and preparing.protocol == ""
    assert all(m.metadata == b"" and m.assignment == b"" for m in preparing.members)
    env.coordinator.commit_offsets("solo", -1, "", {("t", 0): (1, 0, "")})
    listed = {(g.group_id, g.protocol_type, g.state) for g in env.coordinator.list_groups()}
    assert listed == {("g", "consumer", "PreparingRebalance"), ("solo", "", "Empty")}
    assert [g.group_id for g in env.coordinator.list_groups(["empty"])] == ["solo"]


# -- persistence -------------------------------------------------------------------------------------


@run
async def test_load_restores_groups_and_offsets_from_records() -> None:
    env = Env()
    a, b = env.form(2, session=10_000)
    env.coordinator.commit_offsets("g", 1, a.member_id, {("t", 0): (5, 2, "x"), ("t", 1): (6, 2, "")})
    env.coordinator.delete_offsets("g", [("zzz", 0)])
    env.coordinator.commit_offsets("g", 1, a.member_id, {("t", 0): (8, 3, "y")})
    env.coordinator.commit_offsets("gone", -1, "", {("t", 0): (1, 0, "")})
    env.coordinator.delete_groups(["gone"])
    env.coordinator.commit_offsets("solo", -1, "", {("t", 0): (4, 0, "")})
    # A key of a record type this coordinator does not read (16: Kafka's regex resolution) is skipped.
    records = [*env.records, (OffsetCommitKey("g", "t", 1).encode(), None), (b"\x00\x10\x00\x01x", b"?")]

    fresh = Env()
    fresh.coordinator.load(records)
    group = fresh.coordinator.group("g")
    assert group is not None and group.state is S.STABLE
    assert (group.generation_id, group.protocol_name, group.leader_id) == (1, "range", a.member_id)
    assert list(group.members) == [a.member_id, b.member_id]
    assert group.member(b.member_id).assignment == b.member_id.encode()
    offsets = fresh.coordinator.fetch_offsets("g").offsets
    assert {tp: (o.offset, o.leader_epoch, o.metadata) for tp, o in offsets.items()} == {
        ("t", 0): (8, 3, "y")
    }
    assert fresh.coordinator.group("gone") is None
    assert fresh.state("solo") is S.EMPTY
    # The loaded members must heartbeat: a silent one is expelled after its session.
    fresh.clock.advance(5000)
    assert fresh.coordinator.heartbeat("g", 1, a.member_id) == E.none
    assert done(fresh.sync(a.member_id, 1)).assignment == a.member_id.encode()
    fresh.clock.advance(5000)
    assert fresh.state() is S.PREPARING_REBALANCE
    assert fresh.coordinator.heartbeat("g", 1, b.member_id) == E.unknown_member_id


@run
async def test_load_skips_records_that_do_not_decode_when_told_to() -> None:
    """An unreadable value raises by default; with ``on_unreadable`` it is reported and skipped,
    and every readable record still loads (the broker logs such records and goes on)."""
    env = Env()
    env.coordinator.commit_offsets("solo", -1, "", {("t", 0): (4, 0, ""), ("t", 1): (9, 0, "")})
    bad_key = OffsetCommitKey("solo", "t", 1).encode()
    records = [*env.records, (bad_key, b"\x00\x03garbage")]
    with pytest.raises(OffsetsSchemaError):
        Env().coordinator.load(records)
    skipped: list[bytes] = []
    fresh = Env()
    fresh.coordinator.load(records, on_unreadable=lambda key, error: skipped.append(key))
    assert skipped == [bad_key]
    offsets = fresh.coordinator.fetch_offsets("solo").offsets
    assert {tp: o.offset for tp, o in offsets.items()} == {("t", 0): 4, ("t", 1): 9}


@run
async def test_load_honours_group_tombstones_and_rebalance_records() -> None:
    env = Env()
    [a] = env.form(1)
    env.coordinator.leave_group("g", [(a.member_id, None)])
    env.coordinator.delete_groups(["g"])
    fresh = Env()
    fresh.coordinator.load(env.records)
    assert fresh.coordinator.group("g") is None
    fresh.coordinator.load(env.records[:-1])  # before the tombstone: Empty at generation 2
    group = fresh.coordinator.group("g")
    assert group is not None and group.state is S.EMPTY and group.generation_id == 2


@run
async def test_the_loop_clock_drives_a_real_rebalance() -> None:
    coordinator = GroupCoordinator(CoordinatorConfig(group_initial_rebalance_delay_ms=5))
    join = coordinator.join_group(
        "g", "", None, "c", "/h", 10_000, 10_000, "consumer", [("range", b"")], False
    )
    result = await asyncio.wait_for(join, 2)
    assert result.generation_id == 1
    sync = await coordinator.sync_group("g", 1, result.member_id, None, {result.member_id: b"a"})
    assert sync.assignment == b"a"
    coordinator.close()


def test_config_from_kafka_names() -> None:
    config = CoordinatorConfig.from_properties(
        {"group.initial.rebalance.delay.ms": "0", "offsets.retention.minutes": 1, "broker.id": "3"}
    )
    assert (config.group_initial_rebalance_delay_ms, config.offsets_retention_ms) == (0, 60_000)
    assert config.group_min_session_timeout_ms == 6000 and config.offset_metadata_max_bytes == 4096
    with pytest.raises(ValueError):
        CoordinatorConfig.from_properties({"group.max.size": "many"})
    with pytest.raises(ValueError):
        CoordinatorConfig(group_max_size=0)


# -- find coordinator ------------------------------------------------------------------------------------


def test_partition_for_is_kafkas_abs_hashcode_modulo() -> None:
    by_hand = ((((103 * 31 + 114) * 31 + 111) * 31 + 117) * 31) + 112  # "group": g r o u p
    assert by_hand == java_hash("group") == 98629247
    assert partition_for("group") == 98629247 % 50 == 47
    # hashCode overflows int32 for longer ids; Utils.abs is `& 0x7fffffff`, not Math.abs.
    for group_id in ["my-group", "console-consumer-12345", "test-group-with-a-long-name", ""]:
        assert partition_for(group_id) == (java_hash(group_id) & 0x7FFFFFFF) % 50
    assert java_hash("my-group") == -1906497762
    assert partition_for("my-group") == 36
    assert java_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert partition_for("polygenelubricants") == 0
    assert partition_for("group", 7) == 98629247 % 7
