"""The share group's server-side assignor: which members fetch from which partitions (KIP-932).

A share group's members compete for records: any number of members may
share a partition (each record still goes to one member at a time, the
SharePartition's locks see to that). The assignor's aims, in order:

1. every subscribed partition has at least one member (nothing is left unread);
2. every member has at least one partition, when there are partitions
   (nobody idles while others work);
3. the load is even: members differ by at most one partition, and when
   members outnumber partitions, partitions differ by at most one member;
4. sticky: a member keeps the partitions it had where 1-3 allow (a moved
   partition costs the locks of the records in flight on it).

So with fewer members than partitions each partition has exactly one member
(like a consumer group's); with more, each member has one partition and the
partitions are shared as evenly as possible. Members subscribed to
different topics are assigned topic by topic among the members that want
each topic. Kafka's ``SimpleAssignor`` (4.x) has the same aims.

Pure and deterministic (sorted members and partitions): O((members +
partitions) x log) per topic.
"""

from __future__ import annotations

from collections.abc import Mapping

Assignment = dict[str, dict[str, list[int]]]  # member -> topic -> partitions


def assign(
    subscriptions: Mapping[str, frozenset[str] | set[str]],
    partition_counts: Mapping[str, int],
    current: Mapping[str, Mapping[str, list[int]]] | None = None,
) -> Assignment:
    """The target assignment. ``subscriptions``: member -> topics it subscribes to;
    ``partition_counts``: topic -> partitions (a topic missing or at 0 is skipped until it
    exists); ``current``: member -> topic -> partitions it holds now (for stickiness)."""
    result: Assignment = {member: {} for member in sorted(subscriptions)}
    current = current or {}
    topics = sorted({topic for wanted in subscriptions.values() for topic in wanted})
    for topic in topics:
        count = partition_counts.get(topic, 0)
        members = sorted(m for m, wanted in subscriptions.items() if topic in wanted)
        if count <= 0 or not members:
            continue
        held = {m: [p for p in current.get(m, {}).get(topic, []) if 0 <= p < count] for m in members}
        for member, partitions in _assign_topic(members, count, held).items():
            if partitions:
                result[member][topic] = partitions
    return result


def _assign_topic(members: list[str], count: int, held: dict[str, list[int]]) -> dict[str, list[int]]:
    if len(members) <= count:
        return _spread_partitions(members, count, held)
    return _share_partitions(members, count, held)


def _spread_partitions(members: list[str], count: int, held: dict[str, list[int]]) -> dict[str, list[int]]:
    """Each partition to one member, members within one partition of each other."""
    base, extra = divmod(count, len(members))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(members)}
    taken: set[int] = set()
    result: dict[str, list[int]] = {m: [] for m in members}
    for member in members:  # keep what each had, up to its quota
        for partition in sorted(held[member]):
            if len(result[member]) < quota[member] and partition not in taken:
                result[member].append(partition)
                taken.add(partition)
    free = iter(p for p in range(count) if p not in taken)
    for member in members:
        while len(result[member]) < quota[member]:
            result[member].append(next(free))
    for partitions in result.values():
        partitions.sort()
    return result


def _share_partitions(members: list[str], count: int, held: dict[str, list[int]]) -> dict[str, list[int]]:
    """Each member to one partition, partitions within one member of each other."""
    base, extra = divmod(len(members), count)
    room = {p: base + (1 if p < extra else 0) for p in range(count)}
    result: dict[str, list[int]] = {}
    waiting = []
    for member in members:  # keep one partition each had, while it has room
        kept = next((p for p in sorted(held[member]) if room[p] > 0), None)
        if kept is None:
            waiting.append(member)
        else:
            result[member] = [kept]
            room[kept] -= 1
    for member in waiting:
        partition = max(range(count), key=lambda p: (room[p], -p))
        result[member] = [partition]
        room[partition] -= 1
    assert all(left >= 0 for left in room.values()), room
    return {m: result[m] for m in members}
