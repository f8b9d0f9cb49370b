"""Java's ``String`` as Kafka's coordinators see it: its hash, its length, its order in a ``HashMap``.

Kafka places a group or a transactional id on a partition by ``String.hashCode``,
breaks ties between protocols and assignors by a ``HashMap``'s iteration order,
and measures offset metadata in UTF-16 units; these reproduce that.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence


def java_string_hash(value: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 units, in int32.

    O(length of ``value``).

    >>> java_string_hash("group")
    98629247
    >>> java_string_hash("polygenelubricants")
    -2147483648
    """
    units = value.encode("utf-16-be")
    result = 0
    for (unit,) in struct.iter_unpack(">H", units):
        result = (31 * result + unit) & 0xFFFFFFFF
    return result - (1 << 32) if result & 0x80000000 else result


def java_hashmap_order(keys: Sequence[str]) -> list[str]:
    """The order a ``java.util.HashMap`` iterates ``keys`` inserted in this order.

    Buckets ascend (``hash ^ hash >>> 16`` masked by the table size, which
    starts at 16 and doubles past a 0.75 load); keys in one bucket keep their
    insertion order. O(keys × log(keys)).
    """
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: str) -> int:
        h = java_string_hash(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(keys, key=bucket)  # sorted() is stable: insertion order within a bucket


def java_string_length(value: str) -> int:
    """Java's ``String.length()``: UTF-16 code units (what ``offset.metadata.max.bytes`` counts).

    O(length of ``value``).
    """
    return len(value.encode("utf-16-le")) // 2
