"""Transactional offset commits (KIP-98's TxnOffsetCommit, KIP-447's unstable offsets).

A transactional producer commits a consumer group's offsets inside its
transaction: the coordinator writes them to the group's ``__consumer_offsets``
partition as a *transactional* batch of the producer, and keeps them
*pending* here, invisible to OffsetFetch, until the transaction's marker on
that partition says how it ended: COMMIT makes them the group's offsets,
ABORT drops them. Meanwhile OffsetFetch with ``require_stable`` answers
UNSTABLE_OFFSET_COMMIT for those partitions (KIP-447).

Loading a partition (:func:`replay`) does the same in log order, so offsets
committed by a transaction come back after a restart, and a transaction
still open keeps its offsets pending.

Complexity: :meth:`PendingTxnOffsets.add` O(partitions), :meth:`complete`
O(offsets of the producer), :meth:`is_pending` O(producers with pending
offsets in the group).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from logstore.coordinator.group.classic_group import TopicPartition
from logstore.coordinator.group.offsets_schemas import OffsetCommitValue
from logstore.coordinator.record_codec import Record

GroupOffsets = dict[str, dict[TopicPartition, OffsetCommitValue]]


class PendingTxnOffsets:
    """Offsets of open transactions, by producer id and group (see the module doc)."""

    def __init__(self) -> None:
        self.by_producer: dict[int, GroupOffsets] = {}

    def add(self, producer_id: int, group_id: str, values: dict[TopicPartition, OffsetCommitValue]) -> None:
        self.by_producer.setdefault(producer_id, {}).setdefault(group_id, {}).update(values)

    def complete(self, producer_id: int, commit: bool, groups: Callable[[str], bool] | None = None) -> GroupOffsets:
        """The producer's transaction ended: its pending offsets of the groups ``groups`` accepts
        (all when None) leave; returned when ``commit``, else dropped."""
        pending = self.by_producer.get(producer_id)
        if pending is None:
            return {}
        taken = {g: v for g, v in pending.items() if groups is None or groups(g)}
        for group_id in taken:
            del pending[group_id]
        if not pending:
            del self.by_producer[producer_id]
        return taken if commit else {}

    def is_pending(self, group_id: str, partition: TopicPartition) -> bool:
        return any(partition in groups.get(group_id, ()) for groups in self.by_producer.values())

    def forget(self, groups: Callable[[str], bool]) -> None:
        """Drop the pending offsets of the groups ``groups`` accepts (their partition moved away)."""
        for producer_id in list(self.by_producer):
            pending = self.by_producer[producer_id]
            for group_id in [g for g in pending if groups(g)]:
                del pending[group_id]
            if not pending:
                del self.by_producer[producer_id]


Batch = tuple[int, bool, int, list[Record]]
"""One batch of ``__consumer_offsets`` as :func:`replay` reads it: producer id (-1: none),
transactional, control type (-1: not a control batch, 0 abort, 1 commit), its records."""


def replay(
    batches: Iterable[Batch],
    pending: PendingTxnOffsets,
    decode: Callable[[list[Record]], dict[str, dict[TopicPartition, OffsetCommitValue]]],
) -> Iterator[Record]:
    """The records of ``batches`` in log order as loading should see them: plain records as they
    are, a transaction's records where its COMMIT marker is (none for an ABORT). Records of a
    transaction with no marker yet stay in ``pending`` (``decode`` makes their offsets)."""
    open_records: dict[int, list[Record]] = {}
    for producer_id, transactional, control, records in batches:
        if control >= 0:
            held = open_records.pop(producer_id, [])
            if control == 1:
                yield from held
            continue
        if transactional:
            open_records.setdefault(producer_id, []).extend(records)
            continue
        yield from records
    for producer_id, records in open_records.items():
        for group_id, values in decode(records).items():
            pending.add(producer_id, group_id, values)
