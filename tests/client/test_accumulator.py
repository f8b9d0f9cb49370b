"""The producer's RecordAccumulator: batching, readiness, linger, memory bounds."""

from __future__ import annotations

import itertools
import random
import threading
import time

import numpy as np
import pytest

from logstore.client.accumulator import BATCH_HEADER, RECORD_OVERHEAD, ProducerBatch, RecordAccumulator
from logstore.client.partitioner import get_partitioner
from logstore.records import build_batch, parse_batches

pytestmark = pytest.mark.unit


def make(**overrides: object) -> RecordAccumulator:
    args: dict[str, object] = {
        "batch_size": 10_000,
        "batch_records": 1_000,
        "linger": 0.05,
        "buffer_memory": 1 << 30,
        "max_records": 1_000_000,
        "max_block": 0.2,
        "partitioner": get_partitioner("murmur2_random", rng=random.Random(7)),
    }
    args.update(overrides)
    return RecordAccumulator(**args)  # type: ignore[arg-type]


def leader_zero(topic: str, partition: int) -> int:
    return 0


def size_of(value: bytes) -> int:
    return RECORD_OVERHEAD + len(value)


def test_records_wait_for_linger_then_become_ready() -> None:
    acc = make(linger=0.05)
    state = acc.topic_state("t", 1)
    acc.append(state, 0, b"v", size_of(b"v"), None, None, False)
    ready, wait, unknown = acc.ready(time.monotonic(), leader_zero)
    assert ready == {} and 0 < wait <= 0.05 and not unknown
    ready, wait, _ = acc.ready(time.monotonic() + 0.06, leader_zero)
    assert ready == {0: [("t", 0)]}
    [batch] = acc.drain(ready[0])
    assert batch.closed and batch.records == [b"v"] and state.open[0] is None
    assert acc.records == 1  # counted until completed
    acc.check_invariants(in_flight=[batch])
    acc.complete(batch)
    assert acc.records == 0 and acc.bytes == 0
    acc.check_invariants()


def test_a_full_batch_is_ready_at_once_and_the_next_record_opens_another() -> None:
    value = b"x" * 100
    acc = make(batch_size=BATCH_HEADER + 5 * size_of(value), linger=60)
    state = acc.topic_state("t", 1)
    for _ in range(5):
        acc.append(state, 0, value, size_of(value), None, None, False)
    ready, _, _ = acc.ready(time.monotonic(), leader_zero)
    assert ready == {0: [("t", 0)]}, "a batch at batch.size is ready without waiting for linger"
    acc.append(state, 0, value, size_of(value), None, None, False)
    assert len(state.queues[0]) == 2
    first, second = state.queues[0]
    assert len(first.records) == 5 and first.closed and second.records == [value]
    assert first.size <= acc.batch_size
    encoded = build_batch(first.records)
    assert len(encoded) <= first.size, "the size estimate bounds the encoding"
    acc.check_invariants()


def test_batch_num_messages_closes_a_batch() -> None:
    acc = make(batch_records=3, linger=60)
    state = acc.topic_state("t", 1)
    for i in range(7):
        acc.append(state, 0, b"%d" % i, size_of(b"0"), None, None, False)
    assert [len(b.records) for b in state.queues[0]] == [3, 3, 1]
    acc.check_invariants()
    ready, _, _ = acc.ready(time.monotonic(), leader_zero)
    assert ready == {0: [("t", 0)]}
    [drained] = acc.drain(ready[0])
    assert drained.records == [b"0", b"1", b"2"]
    acc.check_invariants(in_flight=[drained])


def test_flush_makes_every_batch_ready_and_unknown_leaders_are_reported() -> None:
    acc = make(linger=60)
    state = acc.topic_state("t", 2)
    acc.append(state, 0, b"a", size_of(b"a"), None, None, False)
    acc.append(state, 1, b"b", size_of(b"b"), None, None, False)
    assert acc.ready(time.monotonic(), leader_zero)[0] == {}
    acc.flushing += 1
    ready, _, unknown = acc.ready(time.monotonic(), lambda t, p: 3 if p == 0 else -1)
    assert ready == {3: [("t", 0)]} and unknown == {"t"}


def test_retries_go_back_to_the_head_and_wait_for_their_backoff() -> None:
    acc = make(linger=0)
    state = acc.topic_state("t", 1)
    acc.append(state, 0, b"a", size_of(b"a"), None, None, False)
    [first] = acc.drain([("t", 0)])
    acc.append(state, 0, b"b", size_of(b"b"), None, None, False)
    first.retry_at = time.monotonic() + 10
    acc.reenqueue([first])
    assert state.queues[0][0] is first
    ready, wait, _ = acc.ready(time.monotonic(), leader_zero)
    assert ready == {} and 9 < wait <= 10, "the head's backoff holds the partition (order is kept)"
    ready, _, _ = acc.ready(time.monotonic(), leader_zero, muted=[("t", 0)])
    assert ready == {}
    acc.check_invariants()


def test_buffer_memory_blocks_for_max_block_ms_then_raises_buffer_error() -> None:
    value = b"x" * 100
    acc = make(buffer_memory=3 * size_of(value), max_block=0.2)
    state = acc.topic_state("t", 1)
    for _ in range(3):
        acc.append(state, 0, value, size_of(value), None, None, False)
    started = time.monotonic()
    with pytest.raises(BufferError, match=r"max\.block\.ms=200"):
        acc.append(state, 0, value, size_of(value), None, None, False)
    assert 0.18 <= time.monotonic() - started < 2
    acc.check_invariants()


def test_a_blocked_append_goes_on_when_a_batch_completes() -> None:
    acc = make(max_records=2, max_block=5, linger=0)
    state = acc.topic_state("t", 1)
    acc.append(state, 0, b"a", size_of(b"a"), None, None, False)
    acc.append(state, 0, b"b", size_of(b"b"), None, None, False)
    [batch] = acc.drain([("t", 0)])
    timer = threading.Timer(0.1, acc.complete, args=(batch,))
    timer.start()
    started = time.monotonic()
    acc.append(state, 0, b"c", size_of(b"c"), None, None, False)  # queue.buffering.max.messages reached
    elapsed = time.monotonic() - started
    timer.join()
    assert 0.05 < elapsed < 4 and acc.records == 1


def test_a_record_that_can_never_fit_fails_at_once() -> None:
    acc = make(buffer_memory=100, max_block=10)
    state = acc.topic_state("t", 1)
    started = time.monotonic()
    with pytest.raises(BufferError, match="can never fit"):
        acc.append(state, 0, b"x" * 200, size_of(b"x" * 200), None, None, False)
    assert time.monotonic() - started < 1


def test_keyless_records_stick_to_a_partition_until_a_batch_fills() -> None:
    acc = make(batch_records=4, linger=60)
    state = acc.topic_state("t", 8)
    partitions = []
    for _ in range(12):
        p = state.keyless
        partitions.append(acc.append(state, p, b"v", size_of(b"v"), None, None, True))
    runs = [partitions[i : i + 4] for i in range(0, 12, 4)]
    assert all(len(set(run)) == 1 for run in runs), partitions
    assert runs[0][0] != runs[1][0] and runs[1][0] != runs[2][0], "a new batch moves the sticky partition"
    acc.check_invariants()


def test_expired_batches_leave_the_queue() -> None:
    acc = make(linger=60)
    state = acc.topic_state("t", 1)
    acc.append(state, 0, b"a", size_of(b"a"), None, None, False)
    assert acc.expired(time.monotonic(), 10) == []
    [old] = acc.expired(time.monotonic() + 11, 10)
    assert old.records == [b"a"] and not acc.has_queued()


def test_append_many_cuts_whole_batches_without_exceeding_batch_size() -> None:
    values = [b"%05d" % i for i in range(1000)]
    sizes = np.array([size_of(v) for v in values], dtype=np.int64)
    cumulative = np.concatenate(([0], np.cumsum(sizes)))
    acc = make(batch_size=BATCH_HEADER + 100 * size_of(b"00000"), batch_records=60)
    state = acc.topic_state("t", 1)
    batches = acc.append_many(state, 0, values, cumulative, None, 0)
    assert [len(b.records) for b in batches] == [60] * 16 + [40]
    assert [r for b in batches for r in b.records] == values
    assert all(b.closed and b.size <= acc.batch_size for b in batches)
    assert acc.records == 1000 and acc.bytes == int(cumulative[-1])
    acc.check_invariants()
    decoded = [
        r.value for b in batches for batch in parse_batches(build_batch(b.records)) for r in batch.records
    ]
    assert decoded == values


def test_append_many_spreads_keyless_batches_over_partitions() -> None:
    values = [b"v"] * 40
    cumulative = np.arange(0, 41, dtype=np.int64) * size_of(b"v")
    acc = make(batch_records=10)
    state = acc.topic_state("t", 4)
    batches = acc.append_many(state, None, values, cumulative, None, 0)
    partitions = [b.partition for b in batches]
    assert len(batches) == 4 and all(a != b for a, b in itertools.pairwise(partitions))


def test_a_batch_repr_and_len() -> None:
    batch = ProducerBatch("t", 3, time.monotonic(), 0)
    batch.records.extend([b"a", b"b"])
    assert len(batch) == 2 and "t-3" in repr(batch)


def test_check_invariants_finds_a_broken_counter_size_or_queue() -> None:
    acc = make(batch_records=2, linger=60)
    state = acc.topic_state("t", 2)
    for value in (b"a", b"bb", b"c"):
        acc.append(state, 0, value, size_of(value), None, None, False)
    acc.check_invariants()
    acc.records += 1
    with pytest.raises(AssertionError):
        acc.check_invariants()
    acc.check_invariants(reserved=(1, 0))  # unless reserved for a record waiting for metadata
    acc.records -= 1
    first, second = state.queues[0]
    first.size += 1
    with pytest.raises(AssertionError):
        acc.check_invariants()
    first.size -= 1
    first.closed = False
    with pytest.raises(AssertionError, match="an open batch before the last"):
        acc.check_invariants()
    first.closed = True
    state.open[0] = first
    with pytest.raises(AssertionError, match="open"):
        acc.check_invariants()
    state.open[0] = second
    acc.check_invariants()


def test_the_fields_of_the_c_base_classes_read_and_write_as_attributes() -> None:
    acc = make()
    assert acc.records == 0 and acc.bytes == 0 and acc.batch_size == 10_000 and acc.max_records == 1_000_000
    assert acc.topics == {} and not acc.lock.locked()
    with pytest.raises(AttributeError):
        acc.lock = threading.Lock()  # type: ignore[misc]
    with pytest.raises(AttributeError):
        acc.topics = {}  # type: ignore[misc]
    state = acc.topic_state("t", 3)
    assert acc.topics == {"t": state} and state.n == 3 and state.open == [None] * 3 and state.hashed
    assert 0 <= state.keyless < 3
    state.grow(5, acc.partitioner)
    assert state.n == 5 and len(state.open) == len(state.queues) == 5
    batch = ProducerBatch("t", 1, time.monotonic(), 0)
    assert (batch.records, batch.size, batch.callbacks, batch.closed) == ([], BATCH_HEADER, None, False)
    batch.size += 5
    batch.closed = True
    batch.callbacks = [(0, print)]
    assert (batch.size, batch.closed, batch.callbacks) == (BATCH_HEADER + 5, True, [(0, print)])
    with pytest.raises(TypeError):
        batch.size = "5"  # type: ignore[assignment]
    with pytest.raises(TypeError):
        batch.closed = 1  # type: ignore[assignment]
