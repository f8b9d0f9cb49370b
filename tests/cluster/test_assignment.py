"""Replica assignment against Kafka's own expected outputs (AdminUtilsTest) and its properties."""

from __future__ import annotations

import collections

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logstore.cluster.assignment import InvalidReplicationFactorError, assign_replicas, rack_alternated
from logstore.errors import InvalidArgumentError

pytestmark = pytest.mark.unit

RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_rack_unaware_matches_kafka() -> None:
    assert assign_replicas(range(5), 10, 3, start=0) == {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2],
    }  # fmt: skip


def test_rack_alternated_list_and_rack_aware_assignment_match_kafka() -> None:
    assert rack_alternated(RACKS) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated({b: r for b, r in RACKS.items() if b != 5}) == [0, 3, 1, 4, 2]
    assert assign_replicas(RACKS, 7, 3, start=0) == {
        0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3], 6: [0, 4, 2],
    }  # fmt: skip


def test_new_partitions_continue_the_leader_rotation() -> None:
    whole = assign_replicas(range(5), 10, 3, start=0)
    tail = assign_replicas(range(5), 4, 3, start=0, start_partition=6)
    assert sorted(tail) == [6, 7, 8, 9]
    assert [tail[p][0] for p in tail] == [whole[p][0] for p in range(6, 10)]
    # As Kafka: the shift restarts from the fixed start (it moves on only at a multiple of n).
    assert tail[6] == [1, 2, 3]


def test_bad_requests_say_what_to_change() -> None:
    with pytest.raises(InvalidReplicationFactorError, match="larger than the 3 available broker"):
        assign_replicas(range(3), 1, 4)
    with pytest.raises(InvalidReplicationFactorError, match="larger than 0"):
        assign_replicas(range(3), 1, 0)
    with pytest.raises(InvalidArgumentError, match="partitions must be larger than 0"):
        assign_replicas(range(3), 0, 1)
    with pytest.raises(
        InvalidArgumentError, match=r"not all brokers have rack information \(none for \[2\]\)"
    ):
        assign_replicas({0: "a", 1: "b", 2: None}, 3, 2)
    assert len(assign_replicas({0: "a", 1: "b", 2: None}, 3, 2, rack_aware=False)) == 3


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 9).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(st.sampled_from("abcd"), min_size=n, max_size=n),
            st.integers(1, n),
            st.integers(1, 40),
            st.integers(0, n - 1),
            st.booleans(),
        )
    )
)
def test_assignments_spread_leaders_and_racks(case: tuple[int, list[str], int, int, int, bool]) -> None:
    n, rack_names, factor, partitions, start, with_racks = case
    brokers = {b * 10: (rack_names[b] if with_racks else None) for b in range(n)}
    result = assign_replicas(brokers, partitions, factor, start=start)
    assert sorted(result) == list(range(partitions))
    for replicas in result.values():
        assert len(replicas) == factor and len(set(replicas)) == factor  # distinct brokers
        assert set(replicas) <= set(brokers)
        if with_racks:  # as many racks as can be: min(racks, replication factor)
            assert len({brokers[b] for b in replicas}) == min(len(set(rack_names)), factor)
    leaders = collections.Counter(replicas[0] for replicas in result.values())
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in brokers) <= 1  # leaders evenly spread
