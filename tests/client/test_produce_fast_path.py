"""produce()'s C fast path (``logstore._speedups.FastProduce``) against the general Python path.

A producer here has no broker: its sender thread is stopped before the first
record and topics are registered by hand, so batches stay in the accumulator
where the tests look at them. The differential test drives two such producers
with the same random calls, one through ``producer.produce`` (the fast path,
falling back to the general one) and one through ``Producer.produce`` (the
general path only), and requires the same outcome for each call and the same
batches after it.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from logstore._speedups import FastProduce, Lock
from logstore.client.accumulator import BATCH_HEADER, RECORD_OVERHEAD, ProducerBatch, RecordAccumulator
from logstore.client.errors import KafkaException
from logstore.client.partitioner import get_partitioner, murmur2_partition
from logstore.client.producer import Producer

pytestmark = pytest.mark.unit

SMALL = {
    "message.max.bytes": 4000,  # records over 3939 bytes are refused
    "batch.size": 1500,
    "batch.num.messages": 7,
    "buffer.memory": 6000,
    "queue.buffering.max.messages": 40,
    "max.block.ms": 0,  # a full buffer raises BufferError at once
}


@contextlib.contextmanager
def idle_producer(seed: int = 7, topics: dict[str, int] | None = None, **config: Any) -> Iterator[Producer]:
    """A Producer whose sender is stopped, with ``topics`` (name -> partitions) known and a
    seeded sticky partitioner."""
    p = Producer({"bootstrap.servers": "127.0.0.1:9", "acks": "1", "linger.ms": 60_000, **config})
    p._sender.stop(force=True)
    p._sender.join(10)
    assert not p._sender.is_alive()
    p._partitioner = p._acc.partitioner = get_partitioner("murmur2_random", rng=random.Random(seed))
    for name, n in (topics or {"t": 4}).items():
        p._acc.topic_state(name, n)
    try:
        yield p
    finally:
        p.close(0)


def reserved(p: Producer) -> tuple[int, int]:
    """(records, bytes) counted for records waiting for their topic's metadata."""
    waiting = [r for records in p._pending.waiting.values() for r in records]
    return len(waiting), sum(r.size for r in waiting)


def snapshot(acc: RecordAccumulator) -> dict[tuple[str, int], list[tuple[Any, ...]]]:
    """Every queued batch's contents. ``closed`` is left out: the general path closes a
    batch as it fills, the fast path leaves that to the next record (or the sender)."""
    return {
        (name, p): [(list(b.records), b.size, [(i, id(cb)) for i, cb in b.callbacks or ()]) for b in queue]
        for name, state in sorted(acc.topics.items())
        for p, queue in enumerate(state.queues)
    }


def outcome(call: Callable[[], Any]) -> tuple[str, str]:
    try:
        call()
    except (BufferError, KafkaException, TypeError) as e:
        return type(e).__name__, str(e)
    return "ok", ""


def on_delivery_a(err: Any, msg: Any) -> None: ...


def on_delivery_b(err: Any, msg: Any) -> None: ...


def random_call(rng: random.Random) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """produce() arguments: mostly plain records, some of everything the fast path hands over."""
    topic = rng.choices(["t", "u", "unknown"], [80, 18, 2])[0]
    length = rng.choice([0, 1, 10, 100, 300, 300, 2000, 5000]) if rng.random() < 0.1 else rng.randrange(200)
    value: Any = rng.choice(
        [None, bytes(rng.randrange(256) for _ in range(length)), "v\u00e9" * (length // 3), bytearray(length)]
    )
    if rng.random() < 0.01:
        value = 12345  # TypeError on both paths
    key: Any = rng.choice([None, None, b"", b"k%d" % rng.randrange(50), f"k\u00e9{rng.randrange(50)}",
                           bytearray(b"kb")])  # fmt: skip
    kwargs: dict[str, Any] = {}
    if key is not None or rng.random() < 0.2:
        kwargs["key"] = key
    if rng.random() < 0.3:
        kwargs["partition"] = rng.randrange(5)  # 4: no such partition of "t"; 1..4 of "u"
    roll = rng.random()
    if roll < 0.2:
        kwargs["on_delivery"] = on_delivery_a
    elif roll < 0.3:
        kwargs["callback"] = on_delivery_b
    elif roll < 0.35:
        kwargs["on_delivery"], kwargs["callback"] = on_delivery_a, on_delivery_b
    elif roll < 0.37:
        kwargs["on_delivery"], kwargs["callback"] = None, on_delivery_b
    if rng.random() < 0.03:
        kwargs["headers"] = [("h", b"x")]
    if rng.random() < 0.03:
        kwargs["timestamp"] = rng.choice([0, 1_700_000_000_000])
    if rng.random() < 0.3:  # some as positional arguments
        return (topic, value), kwargs
    return (topic,), {"value": value, **kwargs}


def drain_some(rng: random.Random, producers: list[Producer], in_flight: list[list[ProducerBatch]]) -> None:
    """The sender's part, the same on every producer: drain some partitions, complete some batches."""
    partitions = sorted(producers[0]._acc.nonempty)
    assert all(sorted(p._acc.nonempty) == partitions for p in producers)
    chosen = [tp for tp in partitions if rng.random() < 0.5]
    for p, flying in zip(producers, in_flight, strict=True):
        flying.extend(p._acc.drain(chosen))
    done = [i for i in range(len(in_flight[0])) if rng.random() < 0.7]
    for p, flying in zip(producers, in_flight, strict=True):
        for i in reversed(done):
            p._acc.complete(flying.pop(i))


@pytest.mark.parametrize("seed", range(6))
def test_the_fast_path_and_the_general_path_make_the_same_batches(seed: int) -> None:
    rng = random.Random(seed)
    topics = {"t": 4, "u": 1}
    with idle_producer(seed, topics, **SMALL) as fast, idle_producer(seed, topics, **SMALL) as slow:
        in_flight: list[list[ProducerBatch]] = [[], []]
        outcomes: dict[str, int] = {}
        for step in range(1500):
            args, kwargs = random_call(rng)
            got = outcome(lambda a=args, k=kwargs: fast.produce(*a, **k))
            want = outcome(lambda a=args, k=kwargs: Producer.produce(slow, *a, **k))
            assert got == want, (step, args, kwargs)
            outcomes[got[0]] = outcomes.get(got[0], 0) + 1
            assert snapshot(fast._acc) == snapshot(slow._acc), (step, args, kwargs)
            assert (fast._acc.records, fast._acc.bytes) == (slow._acc.records, slow._acc.bytes)
            for p, flying in ((fast, in_flight[0]), (slow, in_flight[1])):
                p._acc.check_invariants(flying, reserved(p))
            if rng.random() < 0.08:
                drain_some(rng, [fast, slow], in_flight)
        assert fast._fast.appended > 250, "a record that needs no new batch takes the fast path"
        assert slow._fast.appended == 0
        assert outcomes.keys() >= {"ok", "BufferError", "KafkaException", "TypeError"}, outcomes


def test_plain_records_are_appended_in_c_and_others_are_handed_over() -> None:
    with idle_producer(topics={"t": 4}) as p:
        p.produce("t", b"first", partition=2)  # opens the batch: general path
        assert p._fast.appended == 0
        p.produce("t", b"v", partition=2)
        p.produce("t", "v\u00e9", b"k", 2, on_delivery_a)
        p.produce("t", value=None, key="k", partition=2, callback=on_delivery_b)
        assert p._fast.appended == 3
        for kwargs in ({"headers": {"h": b"x"}}, {"timestamp": 5}, {"key": bytearray(b"k")}):
            p.produce("t", b"v", partition=2, **kwargs)
        p.produce("t", memoryview(b"v"), partition=2)
        assert p._fast.appended == 3
        [batch] = p._acc.topics["t"].queues[2]
        assert batch.records[:4] == [b"first", b"v", (b"k", "v\u00e9".encode()), (b"k", None)]
        assert batch.callbacks == [(2, on_delivery_a), (3, on_delivery_b)]
        # Key and value bytes per record; the header adds 10 + 1 + 1, the timestamp 9.
        payloads = (5, 1, 1 + 3, 1, 1 + 12, 1 + 9, 1 + 1, 1)
        assert batch.size == BATCH_HEADER + sum(RECORD_OVERHEAD + n for n in payloads)
        p._acc.check_invariants()


def test_keyed_records_go_where_murmur2_puts_them_and_keyless_ones_stick() -> None:
    with idle_producer(topics={"t": 5}, **{"batch.num.messages": 1000}) as p:
        keys = [b"key-%d" % i for i in range(200)]
        for key in keys:
            p.produce("t", b"v", key)
        sticky = p._acc.topics["t"].keyless
        for _ in range(100):
            p.produce("t", b"w")
        for partition, queue in enumerate(p._acc.topics["t"].queues):
            records = [r for b in queue for r in b.records]
            assert [r[0] for r in records if isinstance(r, tuple)] == [
                k for k in keys if murmur2_partition(k, 5) == partition
            ]
            assert records.count(b"w") == (100 if partition == sticky else 0)
        assert p._fast.appended >= 300 - 5 - 1, "only each partition's first record opened a batch"


def test_a_new_batch_moves_the_sticky_partition_as_the_general_path_does() -> None:
    with idle_producer(topics={"t": 6}, **{"batch.num.messages": 10}) as p:
        for i in range(60):
            p.produce("t", b"%d" % i)
        state = p._acc.topics["t"]
        runs = [(b.partition, len(b.records)) for q in state.queues for b in q]
        assert sorted(n for _, n in runs) == [10] * 6
        order = sorted((int(b.records[0]), b.partition) for q in state.queues for b in q)
        assert all(a[1] != b[1] for a, b in itertools.pairwise(order)), (
            "each batch moved the sticky partition"
        )
        p._acc.check_invariants()


def test_a_full_buffer_raises_buffer_error_and_drained_room_is_reused() -> None:
    with idle_producer(topics={"t": 1}, **SMALL) as p:
        sent = 0
        with pytest.raises(BufferError):
            for sent in range(1000):  # noqa: B007
                p.produce("t", b"x" * 100)
        assert p._acc.records == sent and p._acc.bytes <= p._acc.buffer_memory
        for batch in p._acc.drain([("t", 0)]):
            p._acc.complete(batch)
        p.produce("t", b"x" * 100)
        p._acc.check_invariants(p._acc.queued()[:0])


def test_bad_arguments_raise_as_the_general_path_does() -> None:
    with idle_producer() as p:
        with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
            p.produce("t", b"v", bogus=1)
        with pytest.raises(TypeError, match="multiple values for argument 'value'"):
            p.produce("t", b"v", value=b"w")
        with pytest.raises(TypeError):
            p.produce()  # type: ignore[call-arg]
        with pytest.raises(TypeError):
            p.produce("t", b"v", None, -1, None, 0, None, None, "extra")  # type: ignore[call-arg]
        with pytest.raises(TypeError, match="topic must be a non-empty str"):
            p.produce(b"t", b"v")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="partition must be an int"):
            p.produce("t", b"v", partition="0")  # type: ignore[arg-type]
        with pytest.raises(KafkaException, match=r"partitions 0\.\.3"):
            p.produce("t", b"v", partition=4)
        with pytest.raises(UnicodeEncodeError):
            p.produce("t", "\ud800")
        with pytest.raises(KafkaException, match=r"message\.max\.bytes"):
            p.produce("t", b"x" * 2_000_000)
        p._acc.check_invariants()


def test_after_close_or_a_fatal_error_every_call_takes_the_general_path() -> None:
    with idle_producer() as p:
        p.produce("t", b"a", partition=0)
        p.produce("t", b"b", partition=0)
        assert p._fast.appended == 1 and p._fast.plain
        p.close(0)
        assert not p._fast.plain
        with pytest.raises(KafkaException, match="closed"):
            p.produce("t", b"c", partition=0)


def test_while_another_thread_holds_the_lock_produce_waits_for_it_on_the_general_path() -> None:
    with idle_producer(topics={"t": 1}) as p:
        p.produce("t", b"a")
        acc = p._acc
        held, release = threading.Event(), threading.Event()

        def hold() -> None:
            with acc.lock:
                held.set()
                release.wait(5)

        holder = threading.Thread(target=hold)
        holder.start()
        held.wait(5)
        threading.Timer(0.1, release.set).start()
        started = time.monotonic()
        p.produce("t", b"b")  # the try fails: the general path blocks (GIL released) until released
        assert time.monotonic() - started >= 0.05
        holder.join(5)
        assert p._fast.appended == 0 and acc.topics["t"].queues[0][0].records == [b"a", b"b"]
        p.produce("t", b"c")
        assert p._fast.appended == 1
        acc.check_invariants()


def test_concurrent_producers_and_a_draining_sender_keep_every_record_once_in_order() -> None:
    """Two threads produce (partition per thread, so each partition's order is one thread's)
    while a third drains and completes batches; GIL switches are forced every microsecond."""
    count = 20_000
    with idle_producer(topics={"t": 2}, **{"batch.num.messages": 50, "queue.buffering.max.messages": 500,
                                           "max.block.ms": 10_000}) as p:  # fmt: skip
        acc = p._acc
        drained: list[ProducerBatch] = []
        stop = threading.Event()
        errors: list[BaseException] = []

        def produce(partition: int) -> None:
            try:
                for i in range(count):
                    p.produce(
                        "t", b"%d" % i, partition=partition, on_delivery=on_delivery_a if i % 3 else None
                    )
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)

        def sender() -> None:
            while not stop.is_set() or acc.has_queued():
                for batch in acc.drain(sorted(acc.nonempty)):
                    drained.append(batch)
                    acc.complete(batch)
                time.sleep(0)

        old = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        try:
            threads = [threading.Thread(target=produce, args=(i,)) for i in range(2)]
            drainer = threading.Thread(target=sender)
            for t in [*threads, drainer]:
                t.start()
            for t in threads:
                t.join(120)
            stop.set()
            drainer.join(120)
        finally:
            sys.setswitchinterval(old)
        assert not errors, errors
        assert acc.records == 0 and acc.bytes == 0
        for partition in range(2):
            batches = [b for b in drained if b.partition == partition]
            assert [r for b in batches for r in b.records] == [b"%d" % i for i in range(count)]
            for b in batches:
                expected = [(i, on_delivery_a) for i, r in enumerate(b.records) if int(r) % 3]
                assert (b.callbacks or []) == expected
                assert b.size == BATCH_HEADER + sum(RECORD_OVERHEAD + len(r) for r in b.records)
        assert p._fast.appended > count, "most records took the fast path"
        acc.check_invariants()


def test_lock_behaves_like_threading_lock() -> None:
    lock = Lock()
    assert not lock.locked() and "unlocked" in repr(lock)
    assert lock.acquire() and lock.locked()
    assert not lock.acquire(False)
    started = time.monotonic()
    assert not lock.acquire(timeout=0.05)
    assert time.monotonic() - started >= 0.05
    lock.release()
    with pytest.raises(RuntimeError, match="release unlocked lock"):
        lock.release()
    with pytest.raises(ValueError):
        lock.acquire(False, 1)
    with pytest.raises(ValueError):
        lock.acquire(timeout=-2)
    with pytest.raises(ValueError):
        lock.acquire(timeout=float("nan"))
    with lock:
        assert lock.locked()
    assert not lock.locked()
    # A waiting thread releases the GIL, and a Condition works on it.
    condition = threading.Condition(lock)
    woken: list[bool] = []

    def waiter() -> None:
        with condition:
            woken.append(condition.wait(5))

    t = threading.Thread(target=waiter)
    t.start()
    deadline = time.monotonic() + 5
    while not woken and time.monotonic() < deadline:
        with condition:  # a no-op until the waiter waits (its wait releases the lock)
            condition.notify_all()
        time.sleep(0.001)
    t.join(5)
    assert woken == [True]


def test_fast_produce_checks_its_arguments_and_reference_cycles_are_collected() -> None:
    with pytest.raises(TypeError):
        FastProduce(object(), print, 100)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="callable"):
        FastProduce(RecordAccumulator(batch_size=100, batch_records=1, linger=0, buffer_memory=1, max_records=1,
                                      max_block=0, partitioner=get_partitioner("murmur2_random")), 5, 100)  # fmt: skip

    class Canary:
        collected = False

        def __del__(self) -> None:
            Canary.collected = True

    batch = ProducerBatch("t", 0, 0.0, 0)
    batch.records.extend([batch, Canary()])  # a cycle through the C field
    del batch
    gc.collect()
    assert Canary.collected
