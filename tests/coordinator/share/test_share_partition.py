"""SharePartition: acquisition, acknowledgement, release, lock expiry, the delivery limit, the
start offset and snapshots, with worked cases and a property test of the invariants."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logstore.coordinator.share.share_partition import (
    AcknowledgeType,
    AcquiredRecords,
    InvalidRecordStateError,
    RecordState,
    SharePartition,
    Snapshot,
    StateBatch,
)
from logstore.errors import InvalidArgumentError

pytestmark = pytest.mark.unit

ACCEPT, RELEASE, REJECT, GAP = (int(t) for t in (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE,
                                                 AcknowledgeType.REJECT, AcknowledgeType.GAP))  # fmt: skip


def test_competing_members_get_disjoint_records_and_the_start_moves_over_acknowledged_ones() -> None:
    share = SharePartition(0, lock_duration_ms=1000)
    assert share.acquire("a", [(0, 9)], 4, now_ms=0) == [AcquiredRecords(0, 3, 1)]
    assert share.acquire("b", [(0, 9)], 10, now_ms=0) == [AcquiredRecords(4, 9, 1)]
    assert share.acquire("c", [(0, 9)], 10, now_ms=0) == []  # everything is locked
    share.acknowledge("b", [(4, 9, [ACCEPT])])
    assert share.start_offset == 0 and share.end_offset == 10  # 0-3 are still a's
    share.acknowledge("a", [(0, 3, [ACCEPT, REJECT, ACCEPT, ACCEPT])])
    assert share.start_offset == 10 and share.end_offset == 10
    share.check()


def test_a_released_record_is_delivered_again_with_its_count_until_the_limit_archives_it() -> None:
    share = SharePartition(5, delivery_count_limit=3)
    for delivery in (1, 2, 3):
        assert share.acquire(f"m{delivery}", [(5, 6)], 1, now_ms=0) == [AcquiredRecords(5, 5, delivery)]
        share.acknowledge(f"m{delivery}", [(5, 5, [RELEASE])])
    assert share.state_of(5) is None and share.start_offset == 6  # archived after 3 deliveries
    assert share.acquire("m", [(5, 6)], 5, now_ms=0) == [AcquiredRecords(6, 6, 1)]


def test_a_lock_that_runs_out_makes_the_record_available_to_others() -> None:
    share = SharePartition(0, lock_duration_ms=500)
    share.acquire("slow", [(0, 2)], 10, now_ms=1000)
    assert share.next_deadline() == 1500
    assert share.expire(1499) == 0
    assert share.expire(1500) == 3
    assert share.acquire("fast", [(0, 2)], 10, now_ms=1500) == [AcquiredRecords(0, 2, 2)]
    with pytest.raises(InvalidRecordStateError, match="not acquired by member slow"):
        share.acknowledge("slow", [(0, 0, [ACCEPT])])  # too late: the lock is fast's now


def test_a_member_that_leaves_gives_its_records_back() -> None:
    share = SharePartition(0)
    share.acquire("gone", [(0, 4)], 3, now_ms=0)
    share.acquire("here", [(0, 4)], 2, now_ms=0)
    assert share.release_member("gone") == 3
    assert share.next_fetch_offset() == 0
    assert share.acquire("here", [(0, 4)], 10, now_ms=0) == [AcquiredRecords(0, 2, 2)]


def test_acknowledgements_are_all_or_nothing() -> None:
    share = SharePartition(0)
    share.acquire("a", [(0, 3)], 10, now_ms=0)
    with pytest.raises(InvalidRecordStateError):
        share.acknowledge("a", [(0, 1, [ACCEPT]), (7, 7, [ACCEPT])])  # 7 was never delivered
    assert share.state_of(0) == (RecordState.ACQUIRED, 1)  # nothing of the batch applied
    with pytest.raises(InvalidArgumentError, match="one type, or one per offset"):
        share.acknowledge("a", [(0, 3, [ACCEPT, REJECT])])


def test_gaps_in_the_fetched_ranges_are_archived_and_do_not_hold_the_start() -> None:
    share = SharePartition(0)
    # Offsets 3-4 hold a transaction marker: the log read gives records 0-2 and 5-6.
    assert share.acquire("a", [(0, 2), (5, 6)], 10, now_ms=0) == [AcquiredRecords(0, 2, 1), AcquiredRecords(5, 6, 1)]
    assert share.state_of(3) == (RecordState.ARCHIVED, 0)
    share.acknowledge("a", [(0, 6, [ACCEPT, ACCEPT, ACCEPT, GAP, GAP, ACCEPT, ACCEPT])])
    assert share.start_offset == 7


def test_the_in_flight_limit_stops_new_acquisitions_until_the_start_moves() -> None:
    share = SharePartition(0, max_in_flight=4)
    assert share.acquire("a", [(0, 9)], 10, now_ms=0) == [AcquiredRecords(0, 3, 1)]
    assert not share.can_acquire()
    share.acknowledge("a", [(0, 1, [ACCEPT])])
    assert share.can_acquire()
    assert share.acquire("a", [(4, 9)], 10, now_ms=0) == [AcquiredRecords(4, 5, 1)]


def test_a_snapshot_restores_everything_but_the_locks() -> None:
    share = SharePartition(10, delivery_count_limit=4)
    share.acquire("a", [(10, 15)], 10, now_ms=0)
    share.acknowledge("a", [(11, 11, [ACCEPT]), (12, 12, [REJECT]), (13, 13, [RELEASE])])
    snapshot = share.snapshot()
    assert snapshot == Snapshot(10, (
        StateBatch(10, 10, RecordState.AVAILABLE, 1), StateBatch(11, 11, RecordState.ACKNOWLEDGED, 1),
        StateBatch(12, 12, RecordState.ARCHIVED, 1), StateBatch(13, 15, RecordState.AVAILABLE, 1),
    ))  # fmt: skip
    again = SharePartition.restore(snapshot, delivery_count_limit=4)
    assert again.acquire("b", [(10, 15)], 10, now_ms=0) == [AcquiredRecords(10, 10, 2), AcquiredRecords(13, 15, 2)]
    with pytest.raises(InvalidArgumentError, match="does not continue"):
        SharePartition.restore(Snapshot(0, (StateBatch(1, 2, RecordState.AVAILABLE, 0),)))


def test_moving_the_start_forward_finishes_what_lies_below_it() -> None:
    share = SharePartition(0)
    share.acquire("a", [(0, 5)], 10, now_ms=0)
    share.move_start(4)
    assert (share.start_offset, share.end_offset) == (4, 6)
    share.move_start(100)
    assert (share.start_offset, share.end_offset) == (100, 100)
    with pytest.raises(InvalidArgumentError):
        SharePartition(0).move_start(-1)


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("acquire"), st.sampled_from("abc"), st.integers(0, 30), st.integers(1, 8)),
        st.tuples(st.just("ack"), st.sampled_from("abc"), st.integers(0, 30), st.sampled_from([ACCEPT, RELEASE, REJECT])),
        st.tuples(st.just("leave"), st.sampled_from("abc"), st.just(0), st.just(0)),
        st.tuples(st.just("tick"), st.just(""), st.integers(0, 3000), st.just(0)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_random_operations_keep_the_invariants_and_never_lose_a_record(ops: list[tuple[str, str, int, int]]) -> None:
    limit = 3
    share = SharePartition(0, delivery_count_limit=limit, lock_duration_ms=1000, max_in_flight=12)
    now = 0
    done: set[int] = set()  # offsets accepted or archived
    for kind, member, a, b in ops:
        if kind == "acquire":
            for got in share.acquire(member, [(0, 40)], b, now):
                for offset in range(got.first, got.last + 1):
                    assert offset not in done and 1 <= got.delivery_count <= limit
        elif kind == "ack":
            held = share.holder(a) == member
            try:
                share.acknowledge(member, [(a, a, [b])])
            except InvalidRecordStateError:
                assert not held
            else:
                assert held
                if b != RELEASE:
                    done.add(a)
        elif kind == "leave":
            share.release_member(member)
        else:
            now += a
            share.expire(now)
        share.check()
        # Every offset below the start is done; none at or past the end was ever handed out.
        assert all(o < share.end_offset for o in done)
        for offset in range(share.start_offset, share.end_offset):
            state = share.state_of(offset)
            assert state is not None and state[1] <= limit
            if offset in done:
                assert state[0] in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
