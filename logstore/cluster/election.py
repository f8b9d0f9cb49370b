"""Leader election rules (Kafka's ``PartitionLeaderElectionAlgorithms``).

Each function takes a partition's assignment (its replicas, the first the
preferred leader), its ISR and the live brokers, and returns the new leader
and ISR, or None when no replica may lead. Pure functions, O(replicas).

- **offline partition** (its leader died): the first replica, in assignment
  order, that is alive and in the ISR; with ``unclean.leader.election.enable``
  (off by default) the first live replica if none in the ISR is alive, which
  may lose acknowledged records. The new ISR is the old one's live members
  (the new leader alone after an unclean election).
- **preferred replica**: the first replica, if it is alive and in the ISR.
- **controlled shutdown**: the first replica in the ISR that is alive and not
  shutting down; the shutting-down broker leaves the ISR.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence


def offline_partition_leader(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int], unclean: bool = False
) -> tuple[int, tuple[int, ...]] | None:
    """(leader, ISR) after the leader went, or None if no replica may lead (see the module doc)."""
    in_sync = tuple(b for b in isr if b in live)
    for broker in assignment:
        if broker in live and broker in in_sync:
            return broker, in_sync
    if unclean:
        for broker in assignment:
            if broker in live:
                return broker, (broker,)
    return None


def preferred_replica_leader(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int]
) -> tuple[int, tuple[int, ...]] | None:
    """(preferred replica, ISR) if the preferred replica is alive and in sync, else None."""
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0], tuple(isr)
    return None


def controlled_shutdown_leader(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int], shutting_down: Collection[int]
) -> tuple[int, tuple[int, ...]] | None:
    """(leader, ISR) with the shutting-down brokers out of the ISR, or None if no other replica may lead."""
    in_sync = tuple(b for b in isr if b in live and b not in shutting_down)
    for broker in assignment:
        if broker in in_sync:
            return broker, in_sync
    return None
