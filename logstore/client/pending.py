"""Records waiting for their topic's first metadata, and topics known not to exist (the producer's).

``produce()`` to a topic with no metadata yet is never blocked on the network: the record
waits here (counted in the accumulator's buffer: reserved) and the sender is asked for
metadata. When metadata arrives (:meth:`PendingRecords.metadata_updated`, on the sender's
thread) the topic's records go into batches in the order they were produced. A topic the
metadata says does not exist (UNKNOWN_TOPIC_OR_PART after a refresh: the broker does not
create it) fails its records, and ``produce()`` to it raises that error for
``retry.backoff.max.ms`` (then the topic is looked up again); records that get no metadata
within ``max.block.ms`` or ``delivery.timeout.ms``, whichever is shorter, fail with
``_MSG_TIMED_OUT``, whether or not a broker was ever reached (librdkafka's
``message.timeout.ms``). The failed records are returned to
the producer, which reports them.

Thread-safe: one lock guards the waiting records and the creation of a waited-for topic's
state in the accumulator, so that no record to a topic overtakes one waiting for it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from logstore.client.accumulator import (
    ENQUEUE_TIME,
    DeliveryCallback,
    ProducerBatch,
    RecordAccumulator,
    TopicState,
)
from logstore.client.cluster import Cluster
from logstore.client.errors import KafkaError, KafkaException, local


def unknown_partition(topic: str, partition: int, n: int) -> KafkaError:
    """``_UNKNOWN_PARTITION``: ``topic`` has ``n`` partitions, not ``partition``."""
    return local("_UNKNOWN_PARTITION", f"topic {topic!r} has partitions 0..{n - 1}, not {partition}")


class PendingRecord:
    """A record waiting for its topic's first metadata (the partition may be -1: not chosen yet)."""

    __slots__ = ("callback", "created", "item", "key", "partition", "size")

    def __init__(self, partition: int, item: Any, size: int, callback: DeliveryCallback | None,
                 key: bytes | None, created: float) -> None:  # fmt: skip
        self.partition = partition
        self.item = item
        self.size = size
        self.callback = callback
        self.key = key
        self.created = created

    def as_batch(self, topic: str, now: float) -> ProducerBatch:
        """The record alone in a batch (to report it failed)."""
        batch = ProducerBatch(topic, self.partition, now, int(time.time() * 1000), ENQUEUE_TIME.pack(self.created))
        batch.done_at = now
        batch.records.append(self.item)
        batch.size += self.size
        if self.callback is not None:
            batch.callbacks = [(0, self.callback)]
        return batch


Failed = list[tuple[str, PendingRecord, KafkaError]]


class PendingRecords:
    """The producer's records waiting for metadata, by topic (see the module docstring).

    ``choose`` picks the partition of a record produced with none (the producer's
    partitioner, given the topic's state and the key).
    """

    def __init__(
        self,
        acc: RecordAccumulator,
        cluster: Cluster,
        choose: Callable[[TopicState, bytes | None], int],
        *,
        max_block: float,
        delivery_timeout: float,
        missing_for: float,
    ) -> None:
        self._acc = acc
        self._cluster = cluster
        self._choose = choose
        # How long a record may wait for metadata, and the setting that says so.
        self._max_block, self._bound = min(
            (max_block, "max.block.ms"), (delivery_timeout, "delivery.timeout.ms")
        )
        self._missing_for = missing_for
        self.lock = threading.Lock()
        self.waiting: dict[str, list[PendingRecord]] = {}
        self._missing: dict[str, tuple[float, KafkaError]] = {}

    def __contains__(self, topic: str) -> bool:
        return topic in self.waiting

    def __bool__(self) -> bool:
        return bool(self.waiting)

    def topics(self) -> set[str]:
        """The topics with records waiting."""
        return set(self.waiting)

    def state_or_wait(
        self, topic: str, partition: int, item: Any, size: int, callback: DeliveryCallback | None,
        key: bytes | None,
    ) -> TopicState | None:  # fmt: skip
        """The topic's state if its metadata is known now; else the record waits (None: the
        caller asks for metadata). Raises KafkaException for a topic known not to exist."""
        missing = self._missing.get(topic)
        if missing is not None:
            if time.monotonic() - missing[0] < self._missing_for:
                raise KafkaException(missing[1])
            del self._missing[topic]
        meta = self._cluster.topics.get(topic)
        if meta is not None and not meta.error and meta.partitions:
            with self.lock:
                if topic not in self.waiting:
                    return self._acc.topic_state(topic, len(meta.partitions))
        self._acc.reserve(1, size)
        with self.lock:
            state = self._acc.topics.get(topic)
            if state is None:
                self.waiting.setdefault(topic, []).append(
                    PendingRecord(partition, item, size, callback, key, time.monotonic())
                )
        if state is None:
            return None
        self._acc.release(1, size)  # the topic became known meanwhile
        return state

    def look_up(self, topic: str, auto_create: bool) -> None:
        """Look ``topic`` up now (``produce_batch``), unless records already wait for it; its
        state is in the accumulator after, if it exists. Raises KafkaException
        (UNKNOWN_TOPIC_OR_PART) if it does not."""
        if topic in self.waiting:
            return
        meta = self._cluster.topics.get(topic)
        if meta is None or meta.error:
            try:
                self._cluster.refresh([topic], auto_create=auto_create)
            except KafkaException:
                return  # the records wait for the sender's lookup
            meta = self._cluster.topics.get(topic)
        if meta is not None and meta.error == KafkaError.UNKNOWN_TOPIC_OR_PART:  # type: ignore[attr-defined]
            raise KafkaException(KafkaError(meta.error, f"topic {topic!r} does not exist"))
        if meta is not None and not meta.error and meta.partitions:
            with self.lock:
                if topic not in self.waiting:
                    self._acc.topic_state(topic, len(meta.partitions))

    def next_expiry(self) -> float | None:
        """When the oldest waiting record times out (``time.monotonic()``); None: none waits."""
        with self.lock:
            oldest = min((records[0].created for records in self.waiting.values() if records), default=None)
        return None if oldest is None else oldest + self._max_block

    def take_all(self) -> dict[str, list[PendingRecord]]:
        """Every waiting record, by topic; none waits after (they are the caller's to fail)."""
        with self.lock:
            waiting, self.waiting = self.waiting, {}
        return waiting

    def release_all(self) -> None:
        """Drop every waiting record and its room in the buffer (the producer is closing)."""
        for records in self.take_all().values():
            for record in records:
                self._acc.release(1, record.size)

    def metadata_updated(self, now: float) -> Failed:
        """Move the records whose topic's metadata is known into batches; the records that fail
        (a partition the topic lacks, a topic that does not exist, ``max.block.ms`` passed),
        each with its error, still reserved in the buffer. O(waiting records)."""
        failed: Failed = []
        with self.lock:
            for topic in list(self.waiting):
                meta = self._cluster.topics.get(topic)
                waiting = self.waiting[topic]
                if meta is not None and not meta.error and meta.partitions:
                    del self.waiting[topic]
                    state = TopicState(topic, len(meta.partitions), self._acc.partitioner)
                    for record in waiting:
                        if record.partition >= state.n:
                            failed.append(
                                (topic, record, unknown_partition(topic, record.partition, state.n))
                            )
                            continue
                        chosen = record.partition < 0
                        p = self._choose(state, record.key) if chosen else record.partition
                        self._acc.append_reserved(state, p, record.item, record.size, record.callback,
                                                  record.key, chosen, record.created)  # fmt: skip
                    with self._acc.lock:
                        known = self._acc.topics.get(topic)
                        if known is None:
                            self._acc.topics[topic] = state
                    continue
                if meta is not None and meta.error == KafkaError.UNKNOWN_TOPIC_OR_PART:  # type: ignore[attr-defined]
                    error = KafkaError(
                        meta.error,
                        f"topic {topic!r} does not exist (and the broker does not create it: "
                        "auto.create.topics.enable=false)",
                    )
                    self._missing[topic] = (now, error)
                    del self.waiting[topic]
                    failed.extend((topic, record, error) for record in waiting)
                    continue
                failed.extend(self._late(topic, now))
        return failed

    def expire(self, now: float) -> Failed:
        """The records that waited too long for metadata, removed (any thread: the producer's
        ``poll`` calls this, so that a sender held by a broker that does not answer cannot hold
        them past their timeout), each with ``_MSG_TIMED_OUT``, still reserved in the buffer."""
        failed: Failed = []
        with self.lock:
            for topic in list(self.waiting):
                failed.extend(self._late(topic, now))
        return failed

    def _late(self, topic: str, now: float) -> Failed:
        """Remove and return ``topic``'s records past their wait. Holds the lock."""
        waiting = self.waiting[topic]
        late = [r for r in waiting if now - r.created >= self._max_block]
        if not late:
            return []
        meta = self._cluster.topics.get(topic)
        error = local(
            "_MSG_TIMED_OUT",
            f"no metadata for topic {topic!r} within {self._bound}={self._max_block * 1000:.0f}"
            + (f" (topic error {KafkaError(meta.error).name()})" if meta is not None else " (no broker answered)"),
        )
        self.waiting[topic] = [r for r in waiting if now - r.created < self._max_block]
        if not self.waiting[topic]:
            del self.waiting[topic]
        return [(topic, record, error) for record in late]
