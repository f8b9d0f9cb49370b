"""The producer's partitioners: which partition of a topic a record goes to.

Keyed records are hashed; keyless ones are spread by KIP-480 sticky
partitioning. The names are librdkafka's ``partitioner`` config values, and
each partitioner places keyed records exactly where librdkafka (and, for the
murmur2 ones, the Java client) puts them:

- ``murmur2_random`` (the default): murmur2 of the key, an empty key included;
  ``key=None``: the sticky partition.
- ``murmur2``: murmur2 of the key; ``key=None`` is hashed as ``b""``, so all
  keyless records go to one fixed partition.
- ``consistent_random``: CRC-32 of the key; a None *or empty* key: the sticky
  partition.
- ``consistent``: CRC-32 of the key; None and empty keys: partition 0 (the
  CRC-32 of nothing is 0).
- ``random``: a uniformly random partition per keyed record; ``key=None``: the
  sticky partition.

``murmur2_random`` is the Java producer's default (``DefaultPartitioner``,
Kafka 2.4-3.2) and is the default here. librdkafka's own default is
``consistent_random``, so a confluent-kafka producer left at its default places
keyed records differently from this one; set ``"partitioner":
"murmur2_random"`` there (or ``"consistent_random"`` here) to agree.
librdkafka's ``fnv1a`` and ``fnv1a_random`` are not provided.

How the producer calls a partitioner (Kafka's ``KafkaProducer.doSend``, 2.4-3.2)::

    p = partitioner.partition(topic, key, n)      # n: the topic's partition count
    if the accumulator would open a new batch for (topic, p):
        partitioner.on_new_batch(topic, n, p)     # the sticky partition moves on
        p = partitioner.partition(topic, key, n)  # ask again, then append
    append the record to (topic, p)

``on_new_batch`` is called whenever a record, keyed or not, would start a new
batch; it moves the topic's sticky partition only when ``p`` is the sticky
partition, so keyless records fill one batch at a time and then move to another
partition. (Kafka 3.3+ replaced this with KIP-794's uniform sticky partitioner,
which switches by bytes produced; librdkafka switches by time,
``sticky.partitioning.linger.ms``. Where a keyless record lands is not part of
either contract, so all three interoperate.)

A user partitioner is a callable ``(topic, key, num_partitions) -> partition``
(``PartitionerCallable``); ``get_partitioner`` wraps it and checks each answer.
Kafka's ``Partitioner.partition(topic, key, keyBytes, value, valueBytes,
cluster)`` reduces to this: the key as serialized bytes (or None) and the
partition count.

>>> murmur2(b"foobar"), murmur2_partition(b"foobar", 7)
(-790332482, 0)
>>> p = get_partitioner("murmur2_random")
>>> p.partition("t", b"foobar", 7)
0
>>> sticky = p.partition("t", None, 7)
>>> p.partition("t", None, 7) == sticky      # keyless: the same until a batch fills
True
>>> p.on_new_batch("t", 7, sticky)
>>> p.partition("t", None, 7) != sticky
True
"""

from __future__ import annotations

import random
import threading
import zlib
from collections.abc import Callable, Sequence
from typing import Final, Protocol, runtime_checkable

from logstore import _speedups
from logstore.errors import InvalidConfigError, LogstoreError

__all__ = [
    "DEFAULT_PARTITIONER",
    "PARTITIONER_NAMES",
    "BasePartitioner",
    "CallablePartitioner",
    "ConsistentPartitioner",
    "ConsistentRandomPartitioner",
    "Murmur2Partitioner",
    "Murmur2RandomPartitioner",
    "Partitioner",
    "PartitionerCallable",
    "PartitionerError",
    "RandomPartitioner",
    "StickyPartitionCache",
    "get_partitioner",
    "murmur2",
    "murmur2_partition",
    "murmur2_partition_py",
    "murmur2_partitions",
    "murmur2_py",
    "to_positive",
]

# ---------------------------------------------------------------------------
# Hashes. The C functions are bound directly (no Python frame per call);
# their argument checks and errors are those of logstore._speedups.

murmur2: Final = _speedups.murmur2
"""``murmur2(key) -> int``: Kafka's ``Utils.murmur2``, a signed 32-bit int as Java
returns it. Key: bytes-like (TypeError otherwise). O(len(key)), in C."""

murmur2_partition: Final = _speedups.partition_for_key
"""``murmur2_partition(key, num_partitions) -> int``: ``to_positive(murmur2(key)) %
num_partitions``, the partition the Java client and librdkafka's ``murmur2*``
partitioners give a keyed record. ValueError unless ``1 <= num_partitions <
2**31``. O(len(key)), in C."""

murmur2_partitions: Final = _speedups.partition_for_keys
"""``murmur2_partitions(keys, num_partitions) -> list[int]``: ``murmur2_partition``
of each key in one call, -1 for each None key (for the sticky partitioner to
fill). O(total key bytes), in C."""

_MASK32: Final = 0xFFFFFFFF
_M: Final = 0x5BD1E995
_SEED: Final = 0x9747B28C


def to_positive(n: int) -> int:
    """Java's ``Utils.toPositive``: clears the sign bit (it does not negate). O(1)."""
    return n & 0x7FFFFFFF


def murmur2_py(data: bytes) -> int:
    """Pure-Python ``Utils.murmur2``: the test oracle of the C version, O(len(data)).

    MurmurHash2 over little-endian 4-byte words with seed 0x9747b28c, Java's int
    arithmetic done on Python ints masked to 32 bits, and the result read as a
    signed int as Java returns it.
    """
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    rest = length % 4
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def murmur2_partition_py(key: bytes, num_partitions: int) -> int:
    """Pure-Python ``murmur2_partition``, the oracle in tests. O(len(key))."""
    _check_count(num_partitions)
    return to_positive(murmur2_py(key)) % num_partitions


def _check_count(num_partitions: int) -> None:
    # The same rule and error type as the C functions, so keyed and keyless
    # records fail alike.
    if not isinstance(num_partitions, int) or isinstance(num_partitions, bool):
        raise TypeError(f"num_partitions must be an int, not {type(num_partitions).__name__}")
    if not 0 < num_partitions <= 0x7FFFFFFF:
        raise ValueError(f"num_partitions must be between 1 and 2147483647, got {num_partitions!r}")


# ---------------------------------------------------------------------------
# KIP-480 sticky partitioning.


def _random_partition(
    rng: random.Random, num_partitions: int, avoid: int | None, available: Sequence[int] | None
) -> int:
    """A random partition of ``available`` (None or empty: all), other than
    ``avoid`` when there is another. O(1), or O(len(available))."""
    _check_count(num_partitions)
    if available:
        bad = [p for p in available if type(p) is not int or not 0 <= p < num_partitions]
        if bad:
            raise ValueError(f"available partitions {bad[:5]!r} are not in range({num_partitions})")
        choices = [p for p in available if p != avoid] or list(available)
        return choices[rng.randrange(len(choices))]
    if avoid is None or not 0 <= avoid < num_partitions or num_partitions == 1:
        return rng.randrange(num_partitions)
    # One draw among the n - 1 others, stepping over avoid, instead of Kafka's
    # redraw-until-different loop: the same distribution in bounded time.
    pick = rng.randrange(num_partitions - 1)
    return pick + 1 if pick >= avoid else pick


class StickyPartitionCache:
    """Each topic's sticky partition: where its keyless records go until a batch fills.

    Mirrors Kafka's ``org.apache.kafka.clients.producer.internals.StickyPartitionCache``
    (KIP-480, Kafka 2.4-3.2). A topic's first keyless record picks a partition
    at random among the available ones; it stays the topic's partition until
    ``next_partition`` is told that a batch of that partition was completed
    (Kafka's ``onNewBatch``), which picks another at random, different from the
    old one when there is a choice.

    ``available``, where taken, is the partitions with a known leader (Kafka's
    ``Cluster.availablePartitionsForTopic``); None or empty means all of
    ``range(num_partitions)``, as Kafka falls back to all partitions when none
    is available. A sticky partition that is past ``num_partitions`` (the
    caller's count went down) is picked again.

    Thread-safe: ``partition`` reads without a lock; choosing takes one.
    Memory: one int per topic seen.
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        """``rng``: the random source (a seeded ``random.Random`` makes picks reproducible)."""
        self._current: dict[str, int] = {}
        self._lock = threading.Lock()
        self._rng = rng if rng is not None else random.Random()

    def partition(self, topic: str, num_partitions: int, *, available: Sequence[int] | None = None) -> int:
        """The topic's sticky partition, chosen now if it has none. O(1); a first
        choice is O(len(available)). Kafka's ``StickyPartitionCache.partition``."""
        current = self._current.get(topic)
        if current is not None and current < num_partitions:
            return current
        with self._lock:
            current = self._current.get(topic)
            if current is not None and current < num_partitions:
                return current  # another thread chose meanwhile
            return self._move(topic, num_partitions, None, available)

    def next_partition(
        self, topic: str, num_partitions: int, prev_partition: int, *, available: Sequence[int] | None = None
    ) -> int:
        """Called when a batch of ``prev_partition`` was completed (a new one is
        starting): moves the topic's sticky partition if it is ``prev_partition``
        (or unset), else leaves it. Returns the topic's sticky partition.
        O(1) without ``available``, else O(len(available)).
        Kafka's ``StickyPartitionCache.nextPartition``."""
        with self._lock:
            current = self._current.get(topic)
            if current is not None and current != prev_partition and current < num_partitions:
                return current  # another partition's batch: not ours to move
            return self._move(topic, num_partitions, current, available)

    def get(self, topic: str) -> int | None:
        """The topic's sticky partition, or None if it has none yet. O(1)."""
        return self._current.get(topic)

    def _move(self, topic: str, num_partitions: int, old: int | None, available: Sequence[int] | None) -> int:
        new = _random_partition(self._rng, num_partitions, old, available)
        assert 0 <= new < num_partitions, (new, num_partitions)
        self._current[topic] = new
        return new


# ---------------------------------------------------------------------------
# Partitioners.


class PartitionerError(LogstoreError, ValueError):
    """A user partitioner returned something that is not a partition of the topic
    (librdkafka fails such a record with ``_UNKNOWN_PARTITION``)."""


PartitionerCallable = Callable[[str, bytes | None, int], int]
"""A user partitioner: ``fn(topic, key, num_partitions) -> int`` in
``range(num_partitions)``; ``key`` is the serialized key or None."""


@runtime_checkable
class Partitioner(Protocol):
    """What the producer calls (see the module docstring for when).

    ``partition(topic, key, num_partitions, *, available=None) -> int``
        The record's partition, in ``range(num_partitions)``. ``key``: the
        serialized key, or None. ``available``: the partitions with a known
        leader (None: all); only the random and sticky choices use it.
    ``on_new_batch(topic, num_partitions, prev_partition, *, available=None) -> None``
        The record just partitioned to ``prev_partition`` would start a new batch
        there (Kafka's ``Partitioner.onNewBatch``); call ``partition`` again after.

    Both may raise ValueError/TypeError for a bad ``num_partitions`` (not an int
    in 1..2**31-1) or key (not bytes-like), and a wrapped user function's
    errors. The built-ins also have a ``name``: their config value.
    """

    def partition(
        self, topic: str, key: bytes | None, num_partitions: int, *, available: Sequence[int] | None = None
    ) -> int: ...

    def on_new_batch(
        self, topic: str, num_partitions: int, prev_partition: int, *, available: Sequence[int] | None = None
    ) -> None: ...


class BasePartitioner:
    """The built-ins' shared part: a sticky cache, and ``on_new_batch`` moving it."""

    name: str = ""

    def __init__(self, rng: random.Random | None = None) -> None:
        """``rng``: the random source of the sticky (and ``random``) choices."""
        self._rng = rng if rng is not None else random.Random()
        self.sticky = StickyPartitionCache(self._rng)

    def partition(
        self, topic: str, key: bytes | None, num_partitions: int, *, available: Sequence[int] | None = None
    ) -> int:
        raise NotImplementedError

    def on_new_batch(
        self, topic: str, num_partitions: int, prev_partition: int, *, available: Sequence[int] | None = None
    ) -> None:
        """Kafka's ``DefaultPartitioner.onNewBatch``: moves the sticky partition
        off ``prev_partition`` if it is that. O(1) / O(len(available))."""
        self.sticky.next_partition(topic, num_partitions, prev_partition, available=available)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class Murmur2RandomPartitioner(BasePartitioner):
    """``murmur2_random``, the default: ``murmur2_partition(key, n)`` for a keyed
    record (an empty key included), the sticky partition for ``key is None``.

    The Java client's ``DefaultPartitioner`` (Kafka 2.4-3.2) and librdkafka's
    ``rd_kafka_msg_partitioner_murmur2_random`` with sticky partitioning.
    O(len(key)) keyed (C), O(1) keyless.
    """

    name = "murmur2_random"

    def partition(
        self, topic: str, key: bytes | None, num_partitions: int, *, available: Sequence[int] | None = None
    ) -> int:
        if key is None:
            return self.sticky.partition(topic, num_partitions, available=available)
        return murmur2_partition(key, num_partitions)


class Murmur2Partitioner(BasePartitioner):
    """``murmur2``: ``murmur2_partition(key, n)``, and ``key is None`` hashed as
    ``b""``, so every keyless record goes to one partition (``275646681 % n``).

    librdkafka's ``rd_kafka_msg_partitioner_murmur2``, which librdkafka exempts
    from sticky partitioning. O(len(key)), in C.
    """

    name = "murmur2"

    def partition(
        self, topic: str, key: bytes | None, num_partitions: int, *, available: Sequence[int] | None = None
    ) -> int:
        return murmur2_partition(b"" if key is None else key, num_partitions)

    def on_new_batch(
        self, topic: str, num_partitions: int, prev_partition: int, *, available: Sequence[int] | None = None
    ) -> None:
        """Nothing: no record of this partitioner is placed at random."""


def _crc32_partition(key: bytes | None, num_partitions: int) -> int:
    # librdkafka: rd_crc32(key, keylen) % partition_cnt, the unsigned zlib CRC-32.
    _check_count(num_partitions)
    return zlib.crc32(b"" if key is None else key) % num_partitions


class ConsistentRandomPartitioner(BasePartitioner):
    """``consistent_random``: CRC-32 of the key modulo n; the sticky partition for
    a None *or empty* key.

    librdkafka's ``rd_kafka_msg_partitioner_consistent_random`` (librdkafka's
    default) with sticky partitioning. O(len(key)) keyed (zlib), O(1) keyless.
    """

    name = "consistent_random"

    def partition(
        self, topic: str, key: bytes | None, num_partitions: int, *, available: Sequence[int] | None = None
    ) -> int:
        if not key:
            return self.sticky.partition(topic, num_partitions, available=available)
        return _crc32_partition(key, num_partitions)


class ConsistentPartitioner(BasePartitioner):
    """``consistent``: CRC-32 of the key modulo n; None and empty keys go to
    partition 0 (CRC-32 of nothing is 0).

    librdkafka's ``rd_kafka_msg_partitioner_consistent``, exempt from sticky
    partitioning there. O(len(key)) (zlib).
    """

    name = "consistent"

    def partition(
        self, topic: str, key: bytes | None, num_partitions: int, *, available: Sequence[int] | None = None
    ) -> int:
        return _crc32_partition(key, num_partitions)

    def on_new_batch(
        self, topic: str, num_partitions: int, prev_partition: int, *, available: Sequence[int] | None = None
    ) -> None:
        """Nothing: no record of this partitioner is placed at random."""


class RandomPartitioner(BasePartitioner):
    """``random``: a uniformly random partition (among ``available``) for each keyed
    record; the sticky partition for ``key is None``.

    librdkafka's ``rd_kafka_msg_partitioner_random``, which sends keyless records
    to the sticky partition like the others. O(1), or O(len(available)).
    """

    name = "random"

    def partition(
        self, topic: str, key: bytes | None, num_partitions: int, *, available: Sequence[int] | None = None
    ) -> int:
        if key is None:
            return self.sticky.partition(topic, num_partitions, available=available)
        return _random_partition(self._rng, num_partitions, None, available)


class CallablePartitioner:
    """A user's ``fn(topic, key, num_partitions) -> int``, with each answer checked.

    Kafka's ``Partitioner`` interface reduced to what a partition depends on.
    An answer that is not an int in ``range(num_partitions)`` raises
    ``PartitionerError`` naming the function, topic and answer; exceptions of
    ``fn`` itself propagate unchanged. ``on_new_batch`` does nothing. O(fn).
    """

    def __init__(self, fn: PartitionerCallable) -> None:
        self.fn = fn
        self.name = getattr(fn, "__qualname__", None) or repr(fn)

    def partition(
        self, topic: str, key: bytes | None, num_partitions: int, *, available: Sequence[int] | None = None
    ) -> int:
        _check_count(num_partitions)
        p = self.fn(topic, key, num_partitions)
        if type(p) is not int:  # bool and other int subclasses are almost surely mistakes
            raise PartitionerError(
                f"partitioner {self.name} returned {p!r} ({type(p).__name__}) for topic {topic!r}, "
                f"not an int partition in range({num_partitions})"
            )
        if not 0 <= p < num_partitions:
            raise PartitionerError(
                f"partitioner {self.name} returned partition {p} for topic {topic!r}, "
                f"which has partitions 0..{num_partitions - 1}"
            )
        return p

    def on_new_batch(
        self, topic: str, num_partitions: int, prev_partition: int, *, available: Sequence[int] | None = None
    ) -> None:
        """Nothing: the user's function decides every partition itself."""

    def __repr__(self) -> str:
        return f"<CallablePartitioner {self.name}>"


_BUILTINS: Final[dict[str, type[BasePartitioner]]] = {
    cls.name: cls
    for cls in (
        Murmur2RandomPartitioner,
        Murmur2Partitioner,
        ConsistentRandomPartitioner,
        ConsistentPartitioner,
        RandomPartitioner,
    )
}
PARTITIONER_NAMES: Final = tuple(sorted(_BUILTINS))
DEFAULT_PARTITIONER: Final = "murmur2_random"
_LIBRDKAFKA_ONLY: Final = frozenset({"fnv1a", "fnv1a_random"})


def get_partitioner(
    config_value: str | PartitionerCallable | Partitioner = DEFAULT_PARTITIONER,
    *,
    rng: random.Random | None = None,
) -> Partitioner:
    """The partitioner for a producer's ``partitioner`` config value.

    A name from ``PARTITIONER_NAMES`` gives a new built-in (its own sticky
    cache; ``rng`` seeds its random choices); an object with ``partition`` and
    ``on_new_batch`` is returned as it is; any other callable is wrapped as a
    ``CallablePartitioner``. An unknown name raises ``InvalidConfigError`` (a
    ValueError) listing the valid names; anything else, TypeError.
    """
    if isinstance(config_value, str):
        cls = _BUILTINS.get(config_value)
        if cls is None:
            hint = (
                " (a librdkafka partitioner logstore does not provide)"
                if config_value in _LIBRDKAFKA_ONLY
                else ""
            )
            raise InvalidConfigError(
                f"unknown partitioner {config_value!r}{hint}; valid names: {', '.join(PARTITIONER_NAMES)}, "
                "or a callable (topic, key, num_partitions) -> int"
            )
        return cls(rng)
    if isinstance(config_value, Partitioner):
        return config_value
    if callable(config_value):
        return CallablePartitioner(config_value)
    raise TypeError(
        f"partitioner must be one of {', '.join(PARTITIONER_NAMES)} or a callable "
        f"(topic, key, num_partitions) -> int, not {type(config_value).__name__}"
    )
