"""The coordinators' internal topics, and the partition of each that holds a key's records.

A group's records all go to one partition of ``__consumer_offsets``, a
transactional id's to one of ``__transaction_state``; the coordinator of the
key is that partition's leader:

>>> partition_for("group")
47
"""

from __future__ import annotations

import functools

from logstore.coordinator.java_strings import java_string_hash

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_GROUP_STATE_TOPIC = "__share_group_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC})
"""The topics the brokers own (Metadata's is_internal; produce to them is refused)."""


@functools.lru_cache(maxsize=65_536)  # a group is placed on every commit
def partition_for(group_id: str, partitions: int = 50) -> int:
    """The partition of a key's records: ``Utils.abs(hashCode) % partitions`` (a group id's
    in ``__consumer_offsets``, a transactional id's in ``__transaction_state``).

    O(length of the id); O(1) when cached. ``Utils.abs`` is
    ``x & 0x7fffffff``, so Integer.MIN_VALUE maps to 0:

    >>> partition_for("polygenelubricants")
    0
    """
    return (java_string_hash(group_id) & 0x7FFFFFFF) % partitions
