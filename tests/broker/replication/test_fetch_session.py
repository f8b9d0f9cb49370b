"""Fetch sessions (KIP-227): the cache's rules, against requests made as clients make them."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from kio.schema.errors import ErrorCode

from logstore.broker.replication.fetch_session import FetchSessionCache, answer

pytestmark = pytest.mark.unit


@dataclass
class P:
    partition: int
    fetch_offset: int
    partition_max_bytes: int = 1000
    current_leader_epoch: int = -1


@dataclass
class T:
    topic: str
    partitions: list[P]


@dataclass
class F:
    topic: str
    partitions: list[int]


@dataclass
class Request:
    session_id: int
    session_epoch: int
    topics: list[T] = field(default_factory=list)
    forgotten_topics_data: list[F] = field(default_factory=list)


def keys(context: object) -> list[tuple[str, int, int]]:
    return [(i.topic, i.partition, i.fetch_offset) for i in context.items]  # type: ignore[attr-defined]


def test_sessionless_fetch() -> None:
    cache = FetchSessionCache()
    context = cache.resolve(Request(0, -1, [T("a", [P(0, 5)])]))
    assert (context.session_id, context.incremental, keys(context)) == (0, False, [("a", 0, 5)])
    assert len(cache) == 0


def test_incremental_fetches_keep_and_update_partitions() -> None:
    cache = FetchSessionCache()
    full = cache.resolve(Request(0, 0, [T("a", [P(0, 5), P(1, 7)])]))
    assert full.session_id > 0 and not full.incremental
    session = full.session_id
    nothing_new = cache.resolve(Request(session, 1))
    assert nothing_new.incremental and keys(nothing_new) == [("a", 0, 5), ("a", 1, 7)]
    moved = cache.resolve(Request(session, 2, [T("a", [P(1, 9)]), T("b", [P(0, 0)])], [F("a", [0])]))
    assert sorted(keys(moved)) == [("a", 1, 9), ("b", 0, 0)]
    assert cache.resolve(Request(session, 2)).error == ErrorCode.invalid_fetch_session_epoch
    assert cache.resolve(Request(12345, 1)).error == ErrorCode.fetch_session_id_not_found
    final = cache.resolve(Request(session, -1, [T("a", [P(0, 1)])]))  # closes it
    assert final.session_id == 0 and len(cache) == 0


def test_only_changed_partitions_are_answered() -> None:
    cache = FetchSessionCache()
    full = cache.resolve(Request(0, 0, [T("a", [P(0, 0), P(1, 0)])]))
    first, second = full.items
    assert answer(first, ErrorCode.none, 0, (0, 0, 0), full.incremental)  # a full fetch answers all
    assert answer(second, ErrorCode.none, 0, (0, 0, 0), full.incremental)
    again = cache.resolve(Request(full.session_id, 1))
    first, second = again.items
    assert not answer(first, ErrorCode.none, 0, (0, 0, 0), True)
    assert answer(second, ErrorCode.none, 0, (3, 3, 0), True)  # its HW moved
    assert answer(first, ErrorCode.none, 100, (0, 0, 0), True)  # records
    assert answer(first, ErrorCode.not_leader_or_follower, 0, (0, 0, 0), True)


def test_a_full_cache_evicts_the_least_recently_used() -> None:
    cache = FetchSessionCache(slots=2)
    one = cache.resolve(Request(0, 0, [T("a", [P(0, 0)])])).session_id
    two = cache.resolve(Request(0, 0, [T("a", [P(0, 0)])])).session_id
    cache.resolve(Request(one, 1))  # one is used again: two is now the oldest
    three = cache.resolve(Request(0, 0, [T("a", [P(0, 0)])])).session_id
    assert len(cache) == 2
    assert cache.resolve(Request(two, 1)).error == ErrorCode.fetch_session_id_not_found
    assert cache.resolve(Request(one, 2)).error == ErrorCode.none
    assert cache.resolve(Request(three, 1)).error == ErrorCode.none
    assert cache.resolve(Request(0, 0, [T("a", [P(0, 0)])])).session_id > 0


def test_no_slots_means_no_sessions() -> None:
    cache = FetchSessionCache(slots=0)
    context = cache.resolve(Request(0, 0, [T("a", [P(0, 0)])]))
    assert context.session_id == 0 and not context.incremental


def test_partitions_that_returned_records_rotate_to_the_end() -> None:
    cache = FetchSessionCache()
    full = cache.resolve(Request(0, 0, [T("a", [P(0, 0), P(1, 0), P(2, 0)])]))
    full.rotate([full.items[0]])
    assert [i.partition for i in cache.resolve(Request(full.session_id, 1)).items] == [1, 2, 0]
