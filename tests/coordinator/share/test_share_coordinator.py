"""The share coordinator without sockets: membership epochs, share sessions, acquisition and
Kafka's error codes for bad acknowledgements (KIP-932)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import pytest
from kio.schema.errors import ErrorCode

from logstore.coordinator.share.share_config import ShareConfig
from logstore.coordinator.share.share_coordinator import ShareCoordinator, next_epoch
from logstore.coordinator.share.share_partition import AcknowledgeType, RecordState
from logstore.errors import InvalidConfigError

pytestmark = pytest.mark.unit

ACCEPT, RELEASE, REJECT = int(AcknowledgeType.ACCEPT), int(AcknowledgeType.RELEASE), int(AcknowledgeType.REJECT)


class Topics:
    """A topic catalog and log offsets the test changes."""

    def __init__(self, **partitions: int) -> None:
        self.partitions = dict(partitions)
        self.ids = {name: uuid.uuid4() for name in partitions}
        self.offsets: dict[tuple[str, int], tuple[int, int]] = {}

    def describe_topic(self, name: str) -> tuple[uuid.UUID, int] | None:
        if name not in self.partitions:
            return None
        return self.ids[name], self.partitions[name]

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return next((n for n, i in self.ids.items() if i == topic_id), None)

    def topic_names(self) -> Iterable[str]:
        return list(self.partitions)

    def log_offsets(self, topic: str, partition: int) -> tuple[int, int] | None:
        if partition >= self.partitions.get(topic, 0):
            return None
        return self.offsets.get((topic, partition), (0, 0))


def make(config: ShareConfig | None = None, **partitions: int) -> tuple[ShareCoordinator, Topics, list[tuple]]:
    topics = Topics(**(partitions or {"t": 1}))
    woken: list[tuple] = []
    coordinator = ShareCoordinator(
        config or ShareConfig(record_lock_duration_ms=1_000), topics, topics.log_offsets,
        lambda *key: woken.append(key),
    )  # fmt: skip
    return coordinator, topics, woken


def join(coordinator: ShareCoordinator, member: str, now: int = 0, topics: tuple[str, ...] = ("t",)) -> int:
    answer = coordinator.heartbeat(now, "g", member, 0, topics)
    assert answer.error == ErrorCode.none, answer
    return answer.member_epoch


def session(coordinator: ShareCoordinator, member: str, parts: Iterable[tuple[str, int]] = (("t", 0),)) -> int:
    opened = coordinator.fetch_session("g", member, 0, list(parts), [], False)
    assert opened.error == ErrorCode.none and opened.session is not None, opened
    return opened.session.epoch


def test_members_join_heartbeat_and_are_fenced_with_a_stale_epoch() -> None:
    coordinator, topics, _ = make(t=2)
    first = coordinator.heartbeat(0, "g", "a", 0, ["t"])
    assert (first.error, first.member_epoch) == (ErrorCode.none, 1)
    assert first.assignment == {topics.ids["t"]: [0, 1]}
    second = coordinator.heartbeat(0, "g", "b", 0, ["t"])
    assert second.member_epoch == 2 and second.assignment is not None
    again = coordinator.heartbeat(10, "g", "a", 1, None)  # a catches up: one partition each
    assert again.member_epoch == 2 and again.assignment is not None
    assert sorted(again.assignment[topics.ids["t"]] + second.assignment[topics.ids["t"]]) == [0, 1]
    quiet = coordinator.heartbeat(20, "g", "a", 2, None)
    assert quiet.error == ErrorCode.none and quiet.assignment is None  # unchanged: not sent again
    stale = coordinator.heartbeat(30, "g", "a", 1, None)
    assert stale.error == ErrorCode.fenced_member_epoch
    unknown = coordinator.heartbeat(30, "g", "zz", 2, None)
    assert unknown.error == ErrorCode.unknown_member_id
    assert coordinator.heartbeat(30, "g", "c", 0, None).error == ErrorCode.invalid_request  # no topics
    left = coordinator.heartbeat(40, "g", "b", -1, None)
    assert (left.error, left.member_epoch) == (ErrorCode.none, -1)
    group = coordinator.group("g")
    assert group is not None and list(group.members) == ["a"] and group.state == "Stable"
    group.check()


def test_more_members_than_partitions_share_them() -> None:
    coordinator, _topics, _ = make(t=1)
    for member in ("a", "b", "c"):
        join(coordinator, member)
    group = coordinator.group("g")
    assert group is not None
    assert all(m.assignment == {"t": [0]} for m in group.members.values())


def test_a_new_partition_moves_the_group_epoch() -> None:
    coordinator, topics, _ = make(t=1)
    epoch = join(coordinator, "a")
    topics.partitions["t"] = 3
    answer = coordinator.heartbeat(5, "g", "a", epoch, None)
    assert answer.member_epoch == epoch + 1 and answer.assignment == {topics.ids["t"]: [0, 1, 2]}


def test_share_auto_offset_reset_latest_and_earliest() -> None:
    coordinator, topics, _ = make(t=1)
    topics.offsets[("t", 0)] = (3, 10)
    join(coordinator, "a")
    latest = coordinator.partitions[("g", "t", 0)]
    assert latest.start_offset == 10
    coordinator.group_configs["h"] = {"share.auto.offset.reset": "earliest"}
    assert coordinator.heartbeat(0, "h", "a", 0, ["t"]).error == ErrorCode.none
    assert coordinator.partitions[("h", "t", 0)].start_offset == 3


def test_share_session_epochs() -> None:
    coordinator, _, _ = make()
    join(coordinator, "a")
    assert coordinator.fetch_session("g", "zz", 0, [("t", 0)], [], False).error == ErrorCode.unknown_member_id
    assert coordinator.fetch_session("g", "a", 1, [], [], False).error == ErrorCode.share_session_not_found
    assert coordinator.fetch_session("g", "a", 0, [], [], True).error == ErrorCode.invalid_request  # acks on open
    epoch = session(coordinator, "a")
    assert epoch == 1
    assert coordinator.fetch_session("g", "a", 5, [], [], False).error == ErrorCode.invalid_share_session_epoch
    assert coordinator.fetch_session("g", "a", 1, [], [], False).session is not None
    assert coordinator.acknowledge_session("g", "a", 1).error == ErrorCode.invalid_share_session_epoch
    assert coordinator.acknowledge_session("g", "a", 0).error == ErrorCode.invalid_share_session_epoch
    assert coordinator.acknowledge_session("g", "a", 2).error == ErrorCode.none
    final = coordinator.fetch_session("g", "a", -1, [], [], True)
    assert final.error == ErrorCode.none and final.final
    assert coordinator.fetch_session("g", "a", -1, [("t", 0)], [], False).error == ErrorCode.invalid_request
    assert next_epoch(2**31 - 1) == 1


def test_bad_acknowledgements_answer_invalid_record_state_and_change_nothing() -> None:
    coordinator, _, woken = make()
    join(coordinator, "a")
    join(coordinator, "b")
    got = coordinator.acquire(0, "g", "a", "t", 0, [(0, 4)], 3)
    assert [(r.first, r.last, r.delivery_count) for r in got] == [(0, 2, 1)]
    share_partition = coordinator.partitions[("g", "t", 0)]
    # not acquired (offset 3 was never handed out), and held by another member
    assert coordinator.acknowledge(1, "g", "a", "t", 0, [(2, 3, (ACCEPT,))])[0] == ErrorCode.invalid_record_state
    assert coordinator.acknowledge(1, "g", "b", "t", 0, [(0, 0, (ACCEPT,))])[0] == ErrorCode.invalid_record_state
    assert share_partition.state_of(2) == (RecordState.ACQUIRED, 1)  # all or nothing
    assert coordinator.acknowledge(1, "g", "a", "t", 0, [(0, 0, (ACCEPT,))]) == (ErrorCode.none, None)
    assert coordinator.acknowledge(1, "g", "a", "t", 0, [(0, 0, (ACCEPT,))])[0] == ErrorCode.invalid_record_state
    assert coordinator.acknowledge(1, "g", "a", "t", 0, [(1, 1, (9,))])[0] == ErrorCode.invalid_request
    # after the lock: the record went back, and the late acknowledgement is refused
    assert coordinator.acknowledge(1_000, "g", "a", "t", 0, [(1, 1, (ACCEPT,))])[0] == ErrorCode.invalid_record_state
    assert share_partition.state_of(1) == (RecordState.AVAILABLE, 1)
    again = coordinator.acquire(1_001, "g", "b", "t", 0, [(0, 4)], 10)
    assert [(r.first, r.last, r.delivery_count) for r in again] == [(1, 2, 2), (3, 4, 1)]
    assert coordinator.acknowledge(1_002, "g", "b", "t", 0, [(1, 4, (ACCEPT, RELEASE, REJECT, ACCEPT))])[0] == (
        ErrorCode.none
    )
    assert share_partition.state_of(2) == (RecordState.AVAILABLE, 2)
    assert share_partition.start_offset == 2
    assert ("g", "t", 0) in woken


def test_tick_expires_locks_and_members_releasing_their_records() -> None:
    config = ShareConfig(record_lock_duration_ms=1_000, session_timeout_ms=5_000, heartbeat_interval_ms=1_000)
    coordinator, _, woken = make(config)
    join(coordinator, "a")
    join(coordinator, "b")
    session(coordinator, "a")
    coordinator.acquire(0, "g", "a", "t", 0, [(0, 1)], 10)
    coordinator.tick(999)
    assert not woken
    coordinator.tick(1_000)
    assert woken == [("g", "t", 0)]
    share_partition = coordinator.partitions[("g", "t", 0)]
    assert share_partition.state_of(0) == (RecordState.AVAILABLE, 1)
    coordinator.acquire(1_000, "g", "a", "t", 0, [(0, 1)], 10)
    coordinator.heartbeat(3_000, "g", "b", coordinator.group("g").members["b"].epoch, None)  # type: ignore[union-attr]
    coordinator.tick(5_001)  # a's session timed out (b heartbeat at 3 s): its records go back at once
    group = coordinator.group("g")
    assert group is not None and list(group.members) == ["b"]
    assert share_partition.state_of(0) == (RecordState.AVAILABLE, 2)
    assert ("g", "a") not in coordinator.sessions


def test_closing_a_session_releases_and_the_limit_archives() -> None:
    coordinator, _, _ = make(ShareConfig(record_lock_duration_ms=1_000, delivery_count_limit=2))
    join(coordinator, "a")
    for delivery in (1, 2):
        session(coordinator, "a")
        got = coordinator.acquire(delivery, "g", "a", "t", 0, [(0, 0)], 10)
        assert [(r.first, r.delivery_count) for r in got] == [(0, delivery)]
        session(coordinator, "a")  # a new session (epoch 0 again) keeps what the member holds
        assert coordinator.acquire(delivery, "g", "a", "t", 0, [(0, 0)], 10) == []
        assert coordinator.close_session("g", "a") == 1  # its end releases it
    share_partition = coordinator.partitions[("g", "t", 0)]
    assert share_partition.start_offset == 1  # archived at the limit: done
    assert coordinator.acquire(5, "g", "a", "t", 0, [(0, 0)], 10) == []


def test_delete_groups_only_when_empty() -> None:
    coordinator, _, _ = make()
    join(coordinator, "a")
    assert coordinator.delete_group("g") == ErrorCode.non_empty_group
    assert coordinator.delete_group("nope") == ErrorCode.group_id_not_found
    coordinator.heartbeat(0, "g", "a", -1, None)
    assert coordinator.delete_group("g") == ErrorCode.none
    assert coordinator.group("g") is None and not coordinator.partitions


def test_config_bounds() -> None:
    with pytest.raises(InvalidConfigError):
        ShareConfig(delivery_count_limit=11)
    with pytest.raises(InvalidConfigError):
        ShareConfig(heartbeat_interval_ms=50_000)
    assert ShareConfig.from_properties({"group.share.delivery.count.limit": "3"}).delivery_count_limit == 3
