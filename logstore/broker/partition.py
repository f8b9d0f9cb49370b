"""A Partition: one topic-partition as this broker holds it (Kafka's ``Partition``).

It owns the partition's :class:`~logstore.storage.log.Log`, the producer
state of its idempotent producers (rebuilt from the log on first use), and
its leadership: leader epoch, replica set and ISR, as the MetadataCache last
said. The high watermark is the Log's: on a single broker (this broker the
only replica, alone in the ISR) it is the log end offset.

Invariant, asserted at each append: ``log_start_offset <= high_watermark <=
log_end_offset``. Crash policy: a Partition keeps nothing on disk of its own;
the Log recovers itself and the producer state is rebuilt from the Log.
"""

from __future__ import annotations

from logstore.broker.metadata_cache import PartitionState
from logstore.broker.producers import PartitionProducers
from logstore.storage.log import Log


class Partition:
    """One topic-partition on this broker (see the module doc). Not thread-safe: the event loop's."""

    __slots__ = ("_producers", "index", "log", "producer_id_expiration_ms", "state", "topic")

    def __init__(
        self, topic: str, index: int, log: Log, state: PartitionState, producer_id_expiration_ms: int
    ) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.state = state
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: PartitionProducers | None = None

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index}, epoch {self.state.leader_epoch}, isr {self.state.isr})"

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def producers(self) -> PartitionProducers:
        """The idempotence state, rebuilt from the log on first use. O(log's producer batches) once."""
        if self._producers is None:
            self._producers = PartitionProducers.rebuild(self.log, self.producer_id_expiration_ms)
        return self._producers

    def check_offsets(self) -> None:
        """Assert ``log_start_offset <= high_watermark <= log_end_offset``."""
        start, hw, end = self.log.log_start_offset, self.log.high_watermark, self.log.log_end_offset
        assert start <= hw <= end, f"{self.topic}-{self.index}: log start {start}, HW {hw}, LEO {end}"
