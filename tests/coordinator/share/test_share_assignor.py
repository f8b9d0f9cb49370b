"""The share group's assignor: every partition covered, every member busy, even, sticky."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logstore.coordinator.share.share_assignor import assign

pytestmark = pytest.mark.unit


def test_fewer_members_than_partitions_each_partition_has_one_member() -> None:
    got = assign({"a": {"t"}, "b": {"t"}}, {"t": 5})
    assert got == {"a": {"t": [0, 1, 2]}, "b": {"t": [3, 4]}}


def test_more_members_than_partitions_share_them_evenly() -> None:
    got = assign({m: {"t"} for m in "abcde"}, {"t": 2})
    members_of = {p: sorted(m for m, a in got.items() if p in a.get("t", [])) for p in (0, 1)}
    assert sorted(len(v) for v in members_of.values()) == [2, 3]
    assert all(len(a["t"]) == 1 for a in got.values())


def test_a_new_member_takes_only_what_evening_out_needs() -> None:
    before = assign({"a": {"t"}, "b": {"t"}}, {"t": 4})
    after = assign({"a": {"t"}, "b": {"t"}, "c": {"t"}}, {"t": 4}, before)
    assert set(after["a"]["t"]) <= set(before["a"]["t"]) and set(after["b"]["t"]) <= set(before["b"]["t"])
    assert len(after["c"]["t"]) == 1
    # and when members outnumber partitions, each keeps its partition where room allows
    crowd = assign({m: {"t"} for m in "abc"}, {"t": 2})
    grown = assign({m: {"t"} for m in "abcd"}, {"t": 2}, crowd)
    assert all(grown[m] == crowd[m] for m in "abc")


def test_members_are_assigned_topic_by_topic_and_missing_topics_wait() -> None:
    got = assign({"a": {"x", "y"}, "b": {"y"}, "c": {"gone"}}, {"x": 2, "y": 2})
    assert got == {"a": {"x": [0, 1], "y": [0]}, "b": {"y": [1]}, "c": {}}


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 12), st.integers(1, 12), st.integers(0, 10**6))
def test_every_partition_covered_every_member_busy_and_even(members: int, partitions: int, seed: int) -> None:
    names = [f"m{i:02d}" for i in range(members)]
    first = assign({m: {"t"} for m in names}, {"t": partitions})
    # a member leaves (picked by seed) and the assignment is recomputed from the current one
    gone = names[seed % members]
    rest = [m for m in names if m != gone]
    for got, present in ((first, names), (assign({m: {"t"} for m in rest}, {"t": partitions}, first), rest)):
        if not present:
            continue
        held = [got[m].get("t", []) for m in present]
        covered = {p for h in held for p in h}
        assert covered == set(range(partitions))
        assert all(h for h in held)
        loads = [len(h) for h in held]
        assert max(loads) - min(loads) <= 1
        sharing = [sum(p in h for h in held) for p in range(partitions)]
        assert max(sharing) - min(sharing) <= 1
