"""The producer's record buffer: Kafka's ``RecordAccumulator`` and ``ProducerBatch``.

``produce()`` appends records here on the application's thread; the
:class:`~logstore.client.sender.Sender` thread takes whole batches out.
Each partition has a deque of :class:`ProducerBatch`; records go to the
*open* batch at its tail, the sender drains from its head. A batch is

- **full** when one more record could push its encoded size past
  ``min(batch.size, message.max.bytes)`` (an upper-bound estimate of the v2
  encoding, so a sealed batch never exceeds the broker's limit) or it holds
  ``batch.num.messages`` records; a full batch is closed at once;
- **ready** (may be sent) when it is closed, or not the only batch of its
  partition, or ``linger.ms`` has passed since its first record, or a flush
  or close is under way; and its retry backoff has passed.

Records are kept as the C encoder's fast items: a ``bytes`` value (no key),
a ``(key, value)`` tuple, or a :class:`logstore.records.Record` when the
record carries headers or its own timestamp. A batch is encoded once, in one
C call, when the sender first drains it (``compression.type`` is applied
then), and keeps its bytes for retries, so a retried batch carries the same
producer id, epoch and sequence.

Memory: ``buffer.memory`` bytes (the same estimate) and
``queue.buffering.max.messages`` records are the most that may be queued or
in flight; ``append`` waits up to ``max.block.ms`` for room and then raises
``BufferError``, as confluent-kafka's producer does when its queue is full.
A record counts until its batch is acknowledged or failed.

Thread-safety: one lock (``lock``) guards every deque, open batch and
counter; ``append`` takes it once per record. Sealed batches (closed,
drained) are only touched by the sender thread. ``Producer.produce`` is
:class:`logstore._speedups.FastProduce`, which appends a plain record to an
open batch with room in C: the fields it touches live in the C base classes
(``AccumulatorCore``, ``TopicStateCore``, ``ProducerBatchCore``), and it takes
``lock`` only by a non-blocking try (held: the call takes the general path,
which waits), running no Python code while it holds it. Python code may lose
the GIL between bytecodes while holding ``lock``, so everything below holds
it for every change of the guarded state, never just the GIL.

Invariants (``check_invariants`` asserts them; the tests call it):

- ``records`` / ``bytes`` are the count / estimated size of the records in
  the batches queued or in flight, plus those reserved for records waiting
  for metadata; ``0 <= records <= max_records``, ``0 <= bytes <=
  buffer_memory``;
- a batch's ``size`` is ``BATCH_HEADER`` plus its records' estimates, at most
  ``batch_size``, and it holds at most ``batch_records`` records (a batch of
  one record may exceed ``batch_size``: a record is never refused for it);
- ``open[p]`` is None or the last batch of ``queues[p]``, and not closed; every
  other queued batch is closed; ``nonempty`` holds exactly the partitions
  with a queued batch;
- KIP-480: only ``_place`` starts a batch, and for a record whose partition
  the partitioner chose it first tells the partitioner (``on_new_batch``).
  The C path never starts (or closes) a batch.
"""

from __future__ import annotations

import collections
import struct
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from logstore import _speedups
from logstore._speedups import AccumulatorCore, ProducerBatchCore, TopicStateCore, partition_for_key
from logstore.client.partitioner import Murmur2Partitioner, Murmur2RandomPartitioner, Partitioner

BATCH_HEADER = 61
RECORD_OVERHEAD: int = _speedups.RECORD_OVERHEAD  # 21, shared with the C path
"""An upper bound of a plain record's framing: length (5), attributes (1),
timestamp delta (1), offset delta (3), key and value lengths (5 + 5), header
count (1)."""
TIMESTAMP_OVERHEAD = 9
"""Extra framing of a record with its own timestamp (a varint delta up to 10 bytes)."""
HEADER_OVERHEAD = 10
"""Framing of one header: its key and value lengths."""

Item = Any  # bytes | None | tuple[bytes | None, bytes | None] | logstore.records.Record
DeliveryCallback = Callable[[Any, Any], Any]


ENQUEUE_TIME = struct.Struct("=d")
"""A record's enqueue time in :attr:`ProducerBatch.times`: a native double of ``time.monotonic()``."""

class ProducerBatch(ProducerBatchCore):
    """Records for one partition, sent (and retried) as one v2 record batch.

    Invariants: ``records`` is appended to only while ``closed`` is False, under
    the accumulator's lock; once closed, ``records`` never changes. ``encoded``
    is None until the first drain, then the batch's bytes (with ``producer_id``,
    ``producer_epoch`` and ``base_sequence`` set). ``size`` is the estimate
    ``BATCH_HEADER + sum(record estimates)``, an upper bound of the encoding
    without compression. ``times`` (when the accumulator keeps them) holds each
    record's enqueue time as native doubles of ``time.monotonic()``, one per
    record (a delivery report's ``latency()``). ``records``, ``callbacks``,
    ``times``, ``size`` and ``closed`` are fields of the C base class (the fast
    path appends through them).
    """

    __slots__ = ("attempts", "base_sequence", "callback", "created", "done_at", "encoded", "partition",
                 "producer_epoch", "producer_id", "retry_at", "sent", "timestamp", "topic")  # fmt: skip

    def __init__(
        self, topic: str, partition: int, created: float, timestamp: int, times: bool | bytes = False
    ) -> None:
        """``times``: keep each record's enqueue time (see the class doc); bytes: the times so far."""
        self.topic = topic
        self.partition = partition
        self.records: list[Item] = []
        self.size = BATCH_HEADER
        self.callbacks: list[tuple[int, DeliveryCallback]] | None = None  # (record index, on_delivery)
        self.callback: DeliveryCallback | None = None  # on_delivery of every record (produce_batch)
        self.times = bytearray(times) if isinstance(times, bytes) else bytearray() if times else None
        self.created = created  # time.monotonic() of its first record
        self.done_at = 0.0  # time.monotonic() when it was acknowledged or failed (the sender sets it)
        self.timestamp = timestamp  # ms since the epoch: the CreateTime of its plain records
        self.closed = False
        self.attempts = 0
        self.retry_at = 0.0
        self.sent = False  # drained at least once: a broker may have appended it
        self.encoded: bytes | None = None
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1

    def __len__(self) -> int:
        return len(self.records)

    def __repr__(self) -> str:
        return (
            f"<ProducerBatch {self.topic}-{self.partition} records={len(self.records)} size~{self.size} "
            f"seq={self.base_sequence} attempts={self.attempts}>"
        )


class TopicState(TopicStateCore):
    """The accumulator's view of one topic: its partition count and per-partition deques.

    ``open[p]`` is the batch of partition ``p`` records are appended to (also the
    last of ``queues[p]``), or None. ``keyless`` caches the partition the
    partitioner gives a record with no key, for the built-in partitioners, whose
    answer for ``key=None`` changes only in ``on_new_batch`` (-1: ask each time).
    ``hashed`` is True when keyed records go to ``murmur2(key) % n`` (computed in
    C right here rather than through the partitioner). ``n``, ``open``,
    ``keyless`` and ``hashed`` are fields of the C base class.
    """

    __slots__ = ("name", "queues")

    def __init__(self, name: str, n: int, partitioner: Partitioner) -> None:
        assert n > 0, n
        self.name = name
        self.n = n
        self.open: list[ProducerBatch | None] = [None] * n
        self.queues: list[collections.deque[ProducerBatch]] = [collections.deque() for _ in range(n)]
        builtin = type(partitioner).__module__ == "logstore.client.partitioner" and hasattr(
            partitioner, "sticky"
        )
        self.keyless = partitioner.partition(name, None, n) if builtin else -1
        self.hashed = type(partitioner) in (Murmur2RandomPartitioner, Murmur2Partitioner)

    def grow(self, n: int, partitioner: Partitioner) -> None:
        """More partitions (CreatePartitions); a topic's partition count never shrinks."""
        if n <= self.n:
            return
        self.open.extend([None] * (n - self.n))
        self.queues.extend(collections.deque() for _ in range(n - self.n))
        self.n = n
        if self.keyless >= 0:
            self.keyless = partitioner.partition(self.name, None, n)


class RecordAccumulator(AccumulatorCore):
    """Per-partition deques of batches, with the memory bound (see the module docstring).

    ``wakeup`` is called, with the lock held (so it must only set an event),
    when a batch is created or closed, so the sender recomputes when the next
    batch becomes ready. A batch that fills without being closed (the fast path
    of ``Producer.produce`` does not check) is found full by ``ready``.
    ``lock``, ``topics``, the counters ``records`` and ``bytes`` and the limits
    are fields of the C base class (``lock`` and ``topics`` made by it).
    """

    def __init__(
        self,
        *,
        batch_size: int,
        batch_records: int,
        linger: float,
        buffer_memory: int,
        max_records: int,
        max_block: float,
        partitioner: Partitioner,
        wakeup: Callable[[], Any] = lambda: None,
        times: bool = False,
        times_on_callback: bool = False,
    ) -> None:
        """``times``: batches keep each record's enqueue time (delivery reports' ``latency()``);
        ``times_on_callback``: ``times`` turns on at the first record with a delivery callback
        (a producer with no callback pays nothing for them)."""
        assert batch_size > BATCH_HEADER, batch_size
        self.times = times
        self.times_on_callback = times_on_callback
        self.batch_size = batch_size  # the estimate's bound, header included
        self.batch_records = batch_records
        self.linger = linger
        self.buffer_memory = buffer_memory
        self.max_records = max_records if max_records > 0 else 2**62
        self.max_block = max_block
        self.partitioner = partitioner
        self.wakeup = wakeup
        # Notified when records leave. Condition takes any lock with acquire/release (typeshed: threading's).
        self.room = threading.Condition(self.lock)  # type: ignore[arg-type]
        self.nonempty: dict[tuple[str, int], TopicState] = {}  # partitions with a batch queued
        self.records = 0  # records appended and not yet completed (queued or in flight)
        self.bytes = 0  # their estimated size
        self.flushing = 0  # flush() calls under way: every batch is ready
        self.closing = False

    # -- the application's side ----------------------------------------------

    def topic_state(self, topic: str, n: int) -> TopicState:
        """The state of ``topic`` with ``n`` partitions (created, or grown). O(n)."""
        with self.lock:
            state = self.topics.get(topic)
            if state is None:
                state = self.topics[topic] = TopicState(topic, n, self.partitioner)
            else:
                state.grow(n, self.partitioner)
            return state

    def append(
        self,
        state: TopicState,
        partition: int,
        item: Item,
        size: int,
        callback: DeliveryCallback | None,
        key: bytes | None,
        chosen: bool,
    ) -> int:
        """Append one record to ``partition``'s open batch; returns the partition used.

        ``chosen``: the partitioner picked ``partition`` (not the application), so if
        the record would start a new batch, ``on_new_batch`` is called and the
        partitioner asked again (KIP-480, as Kafka's ``KafkaProducer.doSend``).
        Waits up to ``max.block.ms`` for room, then raises BufferError. O(1).
        """
        with self.lock:
            if self.records >= self.max_records or self.bytes + size > self.buffer_memory:
                self._wait_for_room(size)
            self.records += 1
            self.bytes += size
            return self._place(state, partition, item, size, callback, key, chosen)

    def append_reserved(
        self, state: TopicState, partition: int, item: Item, size: int, callback: DeliveryCallback | None,
        key: bytes | None, chosen: bool, enqueued: float,
    ) -> int:  # fmt: skip
        """``append`` for a record whose room was taken by ``reserve`` (never blocks);
        ``enqueued``: when it was produced (``time.monotonic()``)."""
        with self.lock:
            return self._place(state, partition, item, size, callback, key, chosen, enqueued)

    def _place(
        self, state: TopicState, partition: int, item: Item, size: int, callback: DeliveryCallback | None,
        key: bytes | None, chosen: bool, enqueued: float | None = None,
    ) -> int:  # fmt: skip
        if callback is not None and self.times_on_callback:
            self.times = True  # batches from the next on
        """Append to ``partition``'s open batch, or a new one (repartitioning a chosen partition
        first, KIP-480); close the batch once full. Holds ``self.lock``. Returns the partition."""
        batch = state.open[partition]
        if not self._fits(batch, size):
            if chosen:
                partition = self._repartition(state, partition, key)
                batch = state.open[partition]
            if not self._fits(batch, size):
                batch = self._new_batch(state, partition)
        assert batch is not None
        if batch.times is None and self.times:  # turned on just now: the records before need none
            batch.times = bytearray(ENQUEUE_TIME.size * len(batch.records))
        if batch.times is not None:
            batch.times += ENQUEUE_TIME.pack(time.monotonic() if enqueued is None else enqueued)
        batch.records.append(item)
        batch.size += size
        if callback is not None:
            if batch.callbacks is None:
                batch.callbacks = []
            batch.callbacks.append((len(batch.records) - 1, callback))
        if batch.size + RECORD_OVERHEAD > self.batch_size or len(batch.records) >= self.batch_records:
            self._close(state, batch)
        return partition

    def _fits(self, batch: ProducerBatch | None, size: int) -> bool:
        return (
            batch is not None
            and batch.size + size <= self.batch_size
            and len(batch.records) < self.batch_records
        )

    def reserve(self, count: int, size: int) -> None:
        """Count records not yet placed in a batch (waiting for their topic's metadata);
        waits for room like ``append``."""
        with self.lock:
            if self.records + count > self.max_records or self.bytes + size > self.buffer_memory:
                self._wait_for_room(size, count)
            self.records += count
            self.bytes += size

    def append_many(
        self,
        state: TopicState,
        partition: int | None,
        items: list[Item],
        cumulative: npt.NDArray[np.int64],
        callback: DeliveryCallback | None,
        timestamp: int,
    ) -> list[ProducerBatch]:
        """Append ``items`` as whole new batches, closed at once: ``produce_batch``.

        ``cumulative[i]`` is the estimated size of ``items[:i]`` (length
        ``len(items) + 1``). The items are cut into as few batches as fit
        ``batch.size`` / ``batch.num.messages`` with a binary search per batch
        and a list slice each: no per-record Python work. ``partition`` None:
        the sticky partition, moved on (``on_new_batch``) after each batch, as
        one ``produce()`` per record would. Waits for room for all of them
        first (BufferError after ``max.block.ms``). O(len(items)) in C, plus
        O(batches x log(len(items))).
        """
        count = len(items)
        total = int(cumulative[-1])
        out: list[ProducerBatch] = []
        now = time.monotonic()
        with self.lock:
            if self.records + count > self.max_records or self.bytes + total > self.buffer_memory:
                self._wait_for_room(total, count)
            start = 0
            room = self.batch_size - BATCH_HEADER
            while start < count:
                end = int(np.searchsorted(cumulative, cumulative[start] + room, side="right")) - 1
                end = max(min(end, start + self.batch_records, count), start + 1)
                p = partition
                if p is None:
                    p = (
                        state.keyless
                        if state.keyless >= 0
                        else int(self.partitioner.partition(state.name, None, state.n))
                    )
                batch = self._new_batch(state, p)
                batch.created = now
                batch.records = items if (start == 0 and end == count) else items[start:end]
                if batch.times is not None:
                    batch.times = bytearray(ENQUEUE_TIME.pack(now) * (end - start))
                batch.size = BATCH_HEADER + int(cumulative[end] - cumulative[start])
                batch.callback = callback
                if timestamp:
                    batch.timestamp = timestamp
                self._close(state, batch)
                out.append(batch)
                if partition is None:
                    self.partitioner.on_new_batch(state.name, state.n, p)
                    if state.keyless >= 0:
                        state.keyless = self.partitioner.partition(state.name, None, state.n)
                start = end
            self.records += count
            self.bytes += total
        return out

    def _repartition(self, state: TopicState, partition: int, key: bytes | None) -> int:
        partitioner = self.partitioner
        partitioner.on_new_batch(state.name, state.n, partition)
        if state.keyless >= 0:
            state.keyless = partitioner.partition(state.name, None, state.n)
        if key is None and state.keyless >= 0:
            return state.keyless
        if key is not None and state.hashed:
            return int(partition_for_key(key, state.n))
        return int(partitioner.partition(state.name, key, state.n))

    def _new_batch(self, state: TopicState, partition: int) -> ProducerBatch:
        old = state.open[partition]
        if old is not None:
            self._close(state, old)
        batch = ProducerBatch(state.name, partition, time.monotonic(), int(time.time() * 1000), self.times)
        queue = state.queues[partition]
        queue.append(batch)
        state.open[partition] = batch
        if len(queue) == 1:
            self.nonempty[(state.name, partition)] = state
        self.wakeup()
        return batch

    def _close(self, state: TopicState, batch: ProducerBatch) -> None:
        batch.closed = True
        if state.open[batch.partition] is batch:
            state.open[batch.partition] = None
            self.wakeup()

    def _wait_for_room(self, size: int, count: int = 1) -> None:
        """Wait (the lock held by the caller, released while waiting) for room; BufferError after max.block.ms."""
        if count > self.max_records or size > self.buffer_memory:
            raise BufferError(
                f"{count} record(s) of ~{size} bytes can never fit: queue.buffering.max.messages="
                f"{self.max_records}, buffer.memory={self.buffer_memory}"
            )
        deadline = time.monotonic() + self.max_block
        while self.records + count > self.max_records or self.bytes + size > self.buffer_memory:
            left = deadline - time.monotonic()
            if left <= 0 or self.closing:
                raise BufferError(
                    f"Local: Queue full: {self.records} records (~{self.bytes} bytes) are queued "
                    f"(queue.buffering.max.messages={self.max_records}, buffer.memory={self.buffer_memory}) "
                    f"and no room was made within max.block.ms={self.max_block * 1000:.0f}; "
                    "call poll()/flush() or raise the limits"
                )
            self.wakeup()
            self.room.wait(left)

    # -- the sender's side -----------------------------------------------------

    def ready(
        self, now: float, leader: Callable[[str, int], int], muted: Iterable[tuple[str, int]] = (),
        everything: bool = False,
    ) -> tuple[dict[int, list[tuple[str, int]]], float, set[str]]:  # fmt: skip
        """Partitions whose head batch may be sent now, by leader node.

        Returns ``(ready by node, seconds until the next batch may become ready
        (inf: none), topics with a partition whose leader is unknown)``.
        ``muted`` partitions (a retry of theirs is pending, or not yet added to the
        producer's transaction) are skipped. ``everything``: every batch is ready, as
        during a flush (a transaction being committed or aborted).
        O(partitions with queued batches).
        """
        by_node: dict[int, list[tuple[str, int]]] = {}
        unknown: set[str] = set()
        wait = float("inf")
        blocked = set(muted)
        with self.lock:
            everything = everything or self.flushing > 0 or self.closing
            for tp, state in self.nonempty.items():
                if tp in blocked:
                    continue
                queue = state.queues[tp[1]]
                head = queue[0]
                if head.retry_at > now:
                    wait = min(wait, head.retry_at - now)
                    continue
                full = (
                    head.size + RECORD_OVERHEAD > self.batch_size or len(head.records) >= self.batch_records
                )
                if not (everything or full or head.closed or len(queue) > 1):
                    due = head.created + self.linger - now
                    if due > 0:
                        wait = min(wait, due)
                        continue
                node = leader(tp[0], tp[1])
                if node < 0:
                    unknown.add(tp[0])
                    continue
                by_node.setdefault(node, []).append(tp)
        return by_node, wait, unknown

    def drain(self, partitions: Iterable[tuple[str, int]]) -> list[ProducerBatch]:
        """Take the head batch of each of ``partitions`` (closing it). O(len(partitions))."""
        out = []
        with self.lock:
            for tp in partitions:
                state = self.nonempty.get(tp)
                if state is None:
                    continue
                queue = state.queues[tp[1]]
                batch = queue.popleft()
                if not queue:
                    del self.nonempty[tp]
                if not batch.closed:
                    self._close(state, batch)
                out.append(batch)
        return out

    def reenqueue(self, batches: list[ProducerBatch]) -> None:
        """Put batches to retry back at the head of their partitions, in the given order."""
        with self.lock:
            for batch in reversed(batches):
                state = self.topics[batch.topic]
                queue = state.queues[batch.partition]
                queue.appendleft(batch)
                self.nonempty[(batch.topic, batch.partition)] = state

    def oldest_created(self) -> float | None:
        """When the oldest queued batch got its first record (``time.monotonic()``), or None.
        O(partitions with batches queued)."""
        with self.lock:
            return min(
                (state.queues[tp[1]][0].created for tp, state in self.nonempty.items() if state.queues[tp[1]]),
                default=None,
            )

    def expired(self, now: float, timeout: float) -> list[ProducerBatch]:
        """Remove and return queued batches older than ``timeout`` seconds (delivery.timeout.ms)."""
        out: list[ProducerBatch] = []
        with self.lock:
            for tp, state in list(self.nonempty.items()):
                queue = state.queues[tp[1]]
                while queue and now - queue[0].created >= timeout:
                    batch = queue.popleft()
                    if not batch.closed:
                        self._close(state, batch)
                    out.append(batch)
                if not queue:
                    del self.nonempty[tp]
        return out

    def take_all(self) -> list[ProducerBatch]:
        """Remove and return every queued batch (to fail them: fatal error, purge, close)."""
        out: list[ProducerBatch] = []
        with self.lock:
            for tp, state in self.nonempty.items():
                queue = state.queues[tp[1]]
                for batch in queue:
                    if not batch.closed:
                        self._close(state, batch)
                    out.append(batch)
                queue.clear()
            self.nonempty.clear()
        return out

    def queued(self) -> list[ProducerBatch]:
        """Every queued batch, head first per partition (a copy; for resequencing)."""
        with self.lock:
            return [batch for tp, state in self.nonempty.items() for batch in state.queues[tp[1]]]

    def complete(self, batch: ProducerBatch) -> None:
        """A batch left for good (acknowledged or failed): its records free their room."""
        with self.lock:
            self.records -= len(batch.records)
            self.bytes -= batch.size - BATCH_HEADER
            assert self.records >= 0, self.records
            self.room.notify_all()

    def release(self, count: int, size: int) -> None:
        """Records that were counted but never reached a batch (failed before it)."""
        with self.lock:
            self.records -= count
            self.bytes -= size
            self.room.notify_all()

    def has_queued(self) -> bool:
        return bool(self.nonempty)

    def partitions(self) -> list[tuple[str, int]]:
        """The partitions with a queued batch (a copy). O(such partitions)."""
        with self.lock:
            return list(self.nonempty)

    # -- the debug check ---------------------------------------------------------

    def check_invariants(
        self, in_flight: Iterable[ProducerBatch] = (), reserved: tuple[int, int] = (0, 0)
    ) -> None:
        """Assert the module docstring's invariants (for tests; O(records)).

        ``in_flight``: the batches out of the deques and not yet completed (the
        sender's); ``reserved``: the (records, bytes) of ``reserve`` not yet placed.
        """
        with self.lock:
            queued = [b for state in self.topics.values() for queue in state.queues for b in queue]
            batches = queued + list(in_flight)
            count = sum(len(b.records) for b in batches) + reserved[0]
            size = sum(b.size - BATCH_HEADER for b in batches) + reserved[1]
            assert (self.records, self.bytes) == (count, size), ((self.records, self.bytes), (count, size))
            assert 0 <= self.records <= self.max_records, (self.records, self.max_records)
            assert 0 <= self.bytes <= self.buffer_memory, (self.bytes, self.buffer_memory)
            for batch in batches:
                _check_batch(batch, self.batch_size, self.batch_records)
            for name, state in self.topics.items():
                _check_state(name, state, self.nonempty)


def estimate(item: Item) -> int:
    """A record's share of a batch's ``size``: an upper bound of its v2 encoding (as
    ``Producer.produce`` computes it). O(1), O(headers) for a Record."""
    if item is None or item.__class__ is bytes:
        return RECORD_OVERHEAD + (0 if item is None else len(item))
    if item.__class__ is tuple:
        key, value = item
        return RECORD_OVERHEAD + (0 if key is None else len(key)) + (0 if value is None else len(value))
    size = RECORD_OVERHEAD + len(item.key or b"") + len(item.value or b"")
    size += TIMESTAMP_OVERHEAD if item.timestamp else 0
    for name, data in item.headers:
        size += HEADER_OVERHEAD + len(name.encode()) + (0 if data is None else len(data))
    return size


def _check_batch(batch: ProducerBatch, batch_size: int, batch_records: int) -> None:
    records = batch.records
    assert batch.size == BATCH_HEADER + sum(map(estimate, records)), (batch, batch.size)
    assert len(records) == 1 or (batch.size <= batch_size and len(records) <= batch_records), batch
    indexes = [i for i, _ in batch.callbacks or ()]
    assert indexes == sorted(set(indexes)) and all(0 <= i < len(records) for i in indexes), (batch, indexes)


def _check_state(name: str, state: TopicState, nonempty: dict[tuple[str, int], TopicState]) -> None:
    assert state.name == name and len(state.open) == len(state.queues) == state.n, (name, state.n)
    assert -1 <= state.keyless < state.n, (name, state.keyless)
    for p, queue in enumerate(state.queues):
        assert all(b.topic == name and b.partition == p for b in queue), (name, p)
        assert all(b.closed for b in list(queue)[:-1]), f"{name}-{p}: an open batch before the last"
        batch = state.open[p]
        assert batch is None or (queue[-1] is batch and not batch.closed), f"{name}-{p}: open {batch}"
        assert (nonempty.get((name, p)) is state) == bool(queue), f"{name}-{p}: nonempty"
