"""An idempotent producer's id, epoch and per-partition sequences (Kafka's ``TransactionManager``
state for idempotence; KIP-98, KIP-360).

The :class:`~logstore.client.sender.Sender` stamps each batch drained for the first time
(:meth:`IdempotenceState.assign`) and counts acknowledged ones; a new producer id or epoch
(InitProducerId, from the sender or the
:class:`~logstore.client.transactions.TransactionManager`) restarts every partition at
sequence 0 and re-stamps the batches still queued. Sequences count records and wrap at 2**31.
"""

from __future__ import annotations

from logstore.client.accumulator import ProducerBatch

SEQUENCE_MOD = 2**31


class IdempotenceState:
    """Producer id, epoch and per-partition sequences of an idempotent producer.

    ``next_sequence[tp]`` is the sequence the next new batch of ``tp`` gets;
    ``acked[tp]`` the sequence after the last acknowledged batch (the oldest
    unacknowledged batch starts there). Touched by the sender thread only.
    """

    def __init__(self) -> None:
        self.producer_id = -1
        self.epoch = -1
        self.next_sequence: dict[tuple[str, int], int] = {}
        self.acked: dict[tuple[str, int], int] = {}
        self.reset_needed = False

    @property
    def ready(self) -> bool:
        return self.producer_id >= 0 and not self.reset_needed

    def assign(self, batch: ProducerBatch) -> None:
        """Stamp a batch drained for the first time with the id, epoch and next sequence. O(1)."""
        tp = (batch.topic, batch.partition)
        sequence = self.next_sequence.get(tp, 0)
        batch.producer_id = self.producer_id
        batch.producer_epoch = self.epoch
        batch.base_sequence = sequence
        self.next_sequence[tp] = (sequence + len(batch.records)) % SEQUENCE_MOD

    def acknowledged(self, batch: ProducerBatch) -> None:
        if batch.producer_id == self.producer_id and batch.base_sequence >= 0:
            tp = (batch.topic, batch.partition)
            self.acked[tp] = (batch.base_sequence + len(batch.records)) % SEQUENCE_MOD

    def is_oldest(self, batch: ProducerBatch) -> bool:
        """Whether ``batch`` is its partition's oldest unacknowledged batch."""
        return batch.base_sequence == self.acked.get((batch.topic, batch.partition), 0)

    def restart(self, producer_id: int, epoch: int, queued: list[ProducerBatch]) -> None:
        """A new producer id: every partition starts at sequence 0; ``queued`` (head
        first per partition) are re-stamped and re-encoded when next drained."""
        self.producer_id = producer_id
        self.epoch = epoch
        self.next_sequence.clear()
        self.acked.clear()
        self.reset_needed = False
        for batch in queued:
            if batch.base_sequence >= 0:
                batch.encoded = None
                batch.base_sequence = -1
                batch.producer_id = -1
                batch.producer_epoch = -1
