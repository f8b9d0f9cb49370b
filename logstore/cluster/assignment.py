"""Replica assignment: which brokers hold each partition's replicas (Kafka's ``AdminUtils``).

The first replica of each partition is its *preferred leader*; the
algorithm spreads preferred leaders evenly over the brokers, and the other
replicas of a partition over the other brokers, shifting the gap between the
first and second replica each time every broker has led one partition, so
that followers spread as evenly as leaders (seed 003, "分区副本分配").

- **Rack-unaware** (no broker has ``broker.rack``): brokers in id order;
  partition ``p``'s first replica is broker ``(p + start) % n``; its replica
  ``j`` (``j >= 1``) is ``first + 1 + (shift + j - 1) % (n - 1)``, modulo n.
- **Rack-aware** (every broker has a rack): the brokers are listed
  alternating racks (rack order, each rack's brokers in id order); a
  replica goes to the next broker in that list unless its rack already holds
  one of the partition's replicas while some rack holds none, or the broker
  already holds one while some broker holds none. A partition then spans
  ``min(racks, replication factor)`` racks.

Some brokers with a rack and some without is an error (as in Kafka, unless
the caller asks for a rack-unaware assignment). ``start`` and ``shift`` are
random unless fixed (the tests fix them to compare with Kafka's own outputs).
Cost: O(partitions x replication factor x brokers) at worst (the rack-aware
skip loop), O(partitions x replication factor) rack-unaware.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from logstore.errors import InvalidArgumentError


class InvalidReplicationFactorError(InvalidArgumentError):
    """More replicas asked for than there are brokers, or fewer than one."""


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Broker ids taking turns by rack: the racks sorted, each rack's brokers in id order.

    >>> rack_alternated({0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"})
    [0, 3, 1, 5, 4, 2]
    """
    by_rack: dict[str, list[int]] = {}
    for broker, rack in racks.items():
        by_rack.setdefault(rack, []).append(broker)
    queues = [sorted(by_rack[rack]) for rack in sorted(by_rack)]
    result: list[int] = []
    for turn in range(max((len(q) for q in queues), default=0)):
        result.extend(q[turn] for q in queues if turn < len(q))
    return result


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_replicas(
    brokers: Mapping[int, str | None] | Sequence[int],
    partitions: int,
    replication_factor: int,
    *,
    start: int = -1,
    start_partition: int = 0,
    rack_aware: bool = True,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Replicas of partitions ``start_partition .. start_partition + partitions - 1``.

    ``brokers``: broker id -> rack (or None), or just the ids. ``start``: the
    fixed start index and first shift (Kafka's ``fixedStartIndex``); -1 picks
    them at random. Raises InvalidReplicationFactorError and
    InvalidArgumentError with what to change.
    """
    racks: dict[int, str | None] = dict(brokers) if isinstance(brokers, Mapping) else dict.fromkeys(brokers)
    if partitions <= 0:
        raise InvalidArgumentError(f"the number of partitions must be larger than 0, not {partitions}")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError(
            f"the replication factor must be larger than 0, not {replication_factor}"
        )
    if replication_factor > len(racks):
        raise InvalidReplicationFactorError(
            f"replication factor {replication_factor} is larger than the {len(racks)} available broker(s); "
            "start more brokers or ask for fewer replicas"
        )
    with_rack = {b: r for b, r in racks.items() if r is not None}
    if rack_aware and with_rack and len(with_rack) != len(racks):
        missing = sorted(b for b, r in racks.items() if r is None)
        raise InvalidArgumentError(
            f"not all brokers have rack information (none for {missing}); set broker.rack on every "
            "broker, or on none"
        )
    rng = rng or random.Random()
    ordered = rack_alternated(with_rack) if rack_aware and with_rack else sorted(racks)
    n = len(ordered)
    first_at = start if start >= 0 else rng.randrange(n)
    shift = start if start >= 0 else rng.randrange(n)
    result: dict[int, list[int]] = {}
    for partition in range(max(0, start_partition), max(0, start_partition) + partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + first_at) % n
        if rack_aware and with_rack:
            result[partition] = _rack_aware_replicas(ordered, with_rack, first, shift, replication_factor)
        else:
            result[partition] = [ordered[first]] + [
                ordered[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)
            ]
    return result


def _rack_aware_replicas(
    ordered: list[int], racks: Mapping[int, str], first: int, shift: int, replication_factor: int
) -> list[int]:
    n, rack_count = len(ordered), len(set(racks.values()))
    leader = ordered[first]
    replicas, used_racks, used = [leader], {racks[leader]}, {leader}
    k = 0
    for _ in range(replication_factor - 1):
        # Bounded: within n steps the walk meets every broker, and one of them fits.
        for _ in range(n * n + 1):
            broker = ordered[_replica_index(first, shift * rack_count, k, n)]
            k += 1
            rack = racks[broker]
            if (rack not in used_racks or len(used_racks) == rack_count) and (
                broker not in used or len(used) == n
            ):
                replicas.append(broker)
                used_racks.add(rack)
                used.add(broker)
                break
        else:  # pragma: no cover - the walk above always finds a broker
            raise AssertionError(f"no broker found for a replica of {replicas}")
    return replicas
