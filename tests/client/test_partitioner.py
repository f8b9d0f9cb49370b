"""The producer's partitioners: Kafka's murmur2 in C against a Python oracle and
Kafka's own vectors, librdkafka's CRC-32 partitioners, KIP-480 sticky
partitioning, and argument checks."""

from __future__ import annotations

import random
import threading
import zlib
from collections import Counter

import pytest

from logstore import _speedups
from logstore.client.partitioner import (
    DEFAULT_PARTITIONER,
    PARTITIONER_NAMES,
    CallablePartitioner,
    ConsistentPartitioner,
    ConsistentRandomPartitioner,
    Murmur2Partitioner,
    Murmur2RandomPartitioner,
    Partitioner,
    PartitionerError,
    RandomPartitioner,
    StickyPartitionCache,
    get_partitioner,
    murmur2,
    murmur2_partition,
    murmur2_partition_py,
    murmur2_partitions,
    murmur2_py,
    to_positive,
)
from logstore.errors import InvalidConfigError

pytestmark = pytest.mark.unit

# apache/kafka clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java,
# testMurmur2 (checked against the source at commit f55581dc).
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


# --- murmur2 -----------------------------------------------------------------


@pytest.mark.parametrize(("key", "expected"), KAFKA_VECTORS.items(), ids=[k.decode() for k in KAFKA_VECTORS])
def test_murmur2_matches_kafka_utils_test(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected
    assert murmur2_py(key) == expected
    assert murmur2_partition(key, 7) == (expected & 0x7FFFFFFF) % 7


def test_murmur2_c_equals_python_for_10000_random_keys() -> None:
    rng = random.Random(20240480)
    # Every length 0..100, so every tail length (0-3) and word count, many times.
    keys = [rng.randbytes(rng.randrange(101)) for _ in range(10_000)]
    keys += [bytes([b]) * n for b in (0, 0x7F, 0x80, 0xFF) for n in range(9)]  # sign-bit bytes in the tail
    assert {len(k) % 4 for k in keys} == {0, 1, 2, 3}
    for key in keys:
        expected = murmur2_py(key)
        assert murmur2(key) == expected, key
        for n in (1, 7, 100, 2**31 - 1):
            assert murmur2_partition(key, n) == to_positive(expected) % n == murmur2_partition_py(key, n)
    # Both signs occur: the result is read as Java's signed int.
    assert min(murmur2(k) for k in keys) < 0 < max(murmur2(k) for k in keys)


def test_murmur2_of_empty_and_other_buffers() -> None:
    assert murmur2(b"") == murmur2_py(b"") == 275646681
    data = b"xxfoobar"
    assert murmur2(bytearray(b"foobar")) == murmur2(memoryview(data)[2:]) == KAFKA_VECTORS[b"foobar"]
    assert murmur2_partition(memoryview(data)[2:], 7) == murmur2_partition(b"foobar", 7)


def test_to_positive_clears_the_sign_bit() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0
    assert to_positive(5) == 5


def test_partition_for_keys_matches_one_at_a_time() -> None:
    rng = random.Random(7)
    keys: list[bytes | None] = [rng.randbytes(rng.randrange(20)) for _ in range(500)]
    keys[::7] = [None] * len(keys[::7])
    got = murmur2_partitions(keys, 13)
    assert got == [-1 if k is None else murmur2_partition(k, 13) for k in keys]
    assert murmur2_partitions((b"foobar", None, bytearray(b"abc")), 7) == [
        murmur2_partition(b"foobar", 7),
        -1,
        murmur2_partition(b"abc", 7),
    ]
    assert murmur2_partitions(iter([b"21"]), 3) == [murmur2_partition(b"21", 3)]
    assert murmur2_partitions([], 3) == []


# --- argument checks -----------------------------------------------------------


@pytest.mark.parametrize("n", [0, -1, -(2**31), 2**31, 2**64])
def test_bad_partition_counts_raise_value_error(n: int) -> None:
    with pytest.raises(ValueError, match="num_partitions must be between 1 and 2147483647"):
        murmur2_partition(b"k", n)
    with pytest.raises(ValueError, match="num_partitions"):
        murmur2_partitions([b"k"], n)
    with pytest.raises(ValueError, match="num_partitions"):
        murmur2_partition_py(b"k", n)
    for name in PARTITIONER_NAMES:  # keyless (sticky) and keyed paths alike
        for key in (None, b"k"):
            with pytest.raises(ValueError, match="num_partitions"):
                get_partitioner(name).partition("t", key, n)


@pytest.mark.parametrize("n", [7.0, "7", None, True])
def test_non_int_partition_counts_raise_type_error(n: object) -> None:
    with pytest.raises(TypeError, match="num_partitions must be an int"):
        murmur2_partition(b"k", n)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="num_partitions must be an int"):
        murmur2_partitions([b"k"], n)  # type: ignore[arg-type]


def test_index_ints_are_accepted() -> None:
    class Seven:
        def __index__(self) -> int:
            return 7

    assert murmur2_partition(b"foobar", Seven()) == murmur2_partition(b"foobar", 7)  # type: ignore[arg-type]


@pytest.mark.parametrize("key", ["foobar", 12, None, [1, 2], memoryview(b"abcdef")[::2]])
def test_non_bytes_keys_raise_type_error(key: object) -> None:
    with pytest.raises(TypeError, match="bytes-like"):
        murmur2(key)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bytes-like"):
        murmur2_partition(key, 3)  # type: ignore[arg-type]


def test_wrong_arity_and_bad_sequences() -> None:
    with pytest.raises(TypeError, match="takes 2 arguments"):
        _speedups.partition_for_key(b"k")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="takes 2 arguments"):
        _speedups.partition_for_keys([b"k"], 3, 4)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        murmur2_partitions(5, 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bytes-like"):
        murmur2_partitions([b"ok", "not bytes"], 3)  # type: ignore[list-item]


# --- sticky partitioning (KIP-480) ----------------------------------------------


def test_sticky_stays_until_a_new_batch_then_moves() -> None:
    cache = StickyPartitionCache(random.Random(1))
    first = cache.partition("t", 5)
    assert all(cache.partition("t", 5) == first for _ in range(100))
    assert cache.get("t") == first
    moved = cache.next_partition("t", 5, first)
    assert moved != first
    assert cache.partition("t", 5) == moved
    for _ in range(200):  # always a different one when there are several
        prev = cache.partition("t", 5)
        assert cache.next_partition("t", 5, prev) != prev


def test_sticky_new_batch_of_another_partition_does_not_move_it() -> None:
    """Kafka's nextPartition: only a new batch of the sticky partition itself moves it
    (a keyed record's new batch elsewhere must not)."""
    cache = StickyPartitionCache(random.Random(2))
    sticky = cache.partition("t", 9)
    for other in range(9):
        if other != sticky:
            assert cache.next_partition("t", 9, other) == sticky
    assert cache.partition("t", 9) == sticky


def test_sticky_topics_are_independent_and_one_partition_stays() -> None:
    cache = StickyPartitionCache(random.Random(3))
    a = cache.partition("a", 50)
    cache.partition("b", 50)
    cache.next_partition("b", 50, cache.partition("b", 50))
    assert cache.partition("a", 50) == a
    assert cache.partition("single", 1) == 0
    assert cache.next_partition("single", 1, 0) == 0


def test_sticky_first_next_partition_picks_and_unknown_topic_is_none() -> None:
    cache = StickyPartitionCache(random.Random(4))
    assert cache.get("t") is None
    p = cache.next_partition("t", 4, -1)  # Kafka: oldPart == null picks
    assert 0 <= p < 4
    assert cache.partition("t", 4) == p


def test_sticky_visits_every_partition_uniformly() -> None:
    cache = StickyPartitionCache(random.Random(5))
    seen: Counter[int] = Counter()
    for _ in range(7000):
        p = cache.partition("t", 7)
        seen[p] += 1
        cache.next_partition("t", 7, p)
    assert set(seen) == set(range(7))
    assert min(seen.values()) > 800  # 1000 expected each


def test_sticky_chooses_among_available_partitions() -> None:
    cache = StickyPartitionCache(random.Random(6))
    available = [2, 5]
    p = cache.partition("t", 8, available=available)
    assert p in available
    for _ in range(20):
        q = cache.next_partition("t", 8, p, available=available)
        assert q in available and q != p
        p = q
    assert cache.next_partition("t", 8, p, available=[6]) == 6
    assert cache.next_partition("t", 8, 6, available=[6]) == 6  # the only one: stays
    with pytest.raises(ValueError, match=r"not in range\(8\)"):
        cache.next_partition("t", 8, 6, available=[1, 8])


def test_sticky_repicks_past_a_smaller_count() -> None:
    cache = StickyPartitionCache(random.Random(7))
    cache.partition("t", 100)
    while cache.partition("t", 100) < 10:
        cache.next_partition("t", 100, cache.partition("t", 100))
    assert cache.partition("t", 10) < 10


def test_sticky_is_thread_safe_on_first_choice() -> None:
    cache = StickyPartitionCache()
    results: list[int] = []
    barrier = threading.Barrier(8)

    def run() -> None:
        barrier.wait()
        results.extend(cache.partition("t", 1000) for _ in range(100))

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(results) == 800 and len(set(results)) == 1


# --- the partitioners ---------------------------------------------------------------


def test_default_is_murmur2_random_keyed_and_sticky() -> None:
    assert DEFAULT_PARTITIONER == "murmur2_random"
    p = get_partitioner(rng=random.Random(8))
    assert isinstance(p, Murmur2RandomPartitioner)
    for key in KAFKA_VECTORS:
        assert p.partition("t", key, 7) == murmur2_partition(key, 7)
    assert p.partition("t", b"", 7) == 275646681 % 7  # an empty key is a key
    sticky = p.partition("t", None, 7)
    assert p.partition("t", None, 7) == sticky
    p.on_new_batch("t", 7, sticky)
    assert p.partition("t", None, 7) != sticky


def test_murmur2_maps_null_keys_to_one_partition() -> None:
    p = get_partitioner("murmur2")
    assert isinstance(p, Murmur2Partitioner)
    assert {p.partition("t", None, 7) for _ in range(50)} == {275646681 % 7}
    p.on_new_batch("t", 7, 275646681 % 7)
    assert p.partition("t", None, 7) == 275646681 % 7
    assert p.partition("t", b"foobar", 7) == murmur2_partition(b"foobar", 7)


def test_consistent_is_crc32_with_null_and_empty_keys_on_partition_0() -> None:
    p = get_partitioner("consistent")
    assert isinstance(p, ConsistentPartitioner)
    assert p.partition("t", None, 7) == p.partition("t", b"", 7) == 0
    for key in KAFKA_VECTORS:
        assert p.partition("t", key, 7) == zlib.crc32(key) % 7


def test_consistent_random_sends_null_and_empty_keys_to_the_sticky_partition() -> None:
    p = get_partitioner("consistent_random", rng=random.Random(9))
    assert isinstance(p, ConsistentRandomPartitioner)
    sticky = p.partition("t", None, 50)
    assert p.partition("t", b"", 50) == sticky
    p.on_new_batch("t", 50, sticky)
    assert p.partition("t", b"", 50) != sticky
    assert p.partition("t", b"foobar", 50) == zlib.crc32(b"foobar") % 50


def test_random_spreads_keyed_records_and_sticks_keyless_ones() -> None:
    p = get_partitioner("random", rng=random.Random(10))
    assert isinstance(p, RandomPartitioner)
    assert {p.partition("t", b"same key", 5) for _ in range(300)} == set(range(5))
    assert {p.partition("t", b"k", 5, available=[1, 3]) for _ in range(100)} == {1, 3}
    assert len({p.partition("t", None, 5) for _ in range(100)}) == 1


def test_seeded_rng_makes_choices_reproducible() -> None:
    def run(seed: int) -> list[int]:
        p = get_partitioner("murmur2_random", rng=random.Random(seed))
        out = []
        for _ in range(20):
            out.append(p.partition("t", None, 100))
            p.on_new_batch("t", 100, out[-1])
        return out

    assert run(11) == run(11) != run(12)


def test_each_builtin_has_its_own_sticky_state() -> None:
    a, b = get_partitioner("murmur2_random"), get_partitioner("murmur2_random")
    assert a is not b
    assert isinstance(a, Murmur2RandomPartitioner) and isinstance(b, Murmur2RandomPartitioner)
    assert a.sticky is not b.sticky


# --- user partitioners and get_partitioner -------------------------------------------


def test_callable_partitioner_gets_topic_key_and_count() -> None:
    calls: list[tuple[str, bytes | None, int]] = []

    def last_byte(topic: str, key: bytes | None, n: int) -> int:
        calls.append((topic, key, n))
        return key[-1] % n if key else 0

    p = get_partitioner(last_byte)
    assert isinstance(p, CallablePartitioner)
    assert p.partition("orders", b"\x05", 3) == 2
    assert p.partition("orders", None, 3) == 0
    p.on_new_batch("orders", 3, 2)  # nothing to do
    assert calls == [("orders", b"\x05", 3), ("orders", None, 3)]


@pytest.mark.parametrize("bad", [-1, 3, 100, 1.0, "1", None, True])
def test_callable_partitioner_out_of_range_or_non_int_raises(bad: object) -> None:
    def broken(topic: str, key: bytes | None, n: int) -> int:
        return bad  # type: ignore[return-value]

    p = get_partitioner(broken)
    with pytest.raises(PartitionerError, match=r"broken returned .* for topic 'orders'") as info:
        p.partition("orders", b"k", 3)
    assert isinstance(info.value, ValueError)


def test_callable_partitioner_errors_propagate() -> None:
    def fails(topic: str, key: bytes | None, n: int) -> int:
        raise KeyError("no route")

    with pytest.raises(KeyError, match="no route"):
        get_partitioner(fails).partition("t", b"k", 3)


def test_partitioner_objects_pass_through() -> None:
    class Fixed:
        def partition(
            self, topic: str, key: bytes | None, num_partitions: int, *, available: object = None
        ) -> int:
            return 1

        def on_new_batch(
            self, topic: str, num_partitions: int, prev_partition: int, *, available: object = None
        ) -> None:
            pass

    fixed = Fixed()
    assert isinstance(fixed, Partitioner)
    assert get_partitioner(fixed) is fixed
    builtin = get_partitioner("murmur2")
    assert get_partitioner(builtin) is builtin


def test_unknown_names_list_the_valid_ones() -> None:
    with pytest.raises(InvalidConfigError) as info:
        get_partitioner("murmur3")
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    for name in ("murmur2_random", "murmur2", "consistent_random", "consistent", "random"):
        assert name in message
    with pytest.raises(ValueError, match="librdkafka partitioner logstore does not provide"):
        get_partitioner("fnv1a_random")
    with pytest.raises(TypeError, match="partitioner must be one of"):
        get_partitioner(42)  # type: ignore[arg-type]


def test_names_are_librdkafkas() -> None:
    assert set(PARTITIONER_NAMES) == {
        "murmur2_random",
        "murmur2",
        "consistent_random",
        "consistent",
        "random",
    }
    for name in PARTITIONER_NAMES:
        assert getattr(get_partitioner(name), "name", None) == name
