"""The producer, shaped like ``confluent_kafka.Producer``.

>>> import tempfile
>>> from logstore.client.producer import Producer
>>> with tempfile.TemporaryDirectory() as d:
...     with Producer({"bootstrap.servers": f"embedded://{d}"}) as p:
...         seen = []
...         p.produce("doc", b"hello", key=b"k", on_delivery=lambda err, msg: seen.append((err, msg.offset())))
...         p.flush(10)
...     seen
0
[(None, 0)]

How a record travels (Kafka's ``KafkaProducer``): ``produce()`` runs the
interceptors' ``on_send``, the serializers, and the partitioner, and appends
the record to the :class:`~logstore.client.accumulator.RecordAccumulator`; it
returns at once (blocking only while the buffer is full, up to
``max.block.ms``, then ``BufferError``). The
:class:`~logstore.client.sender.Sender` thread sends batches to the partition
leaders and settles the answers; delivery reports are queued and run by
``poll()`` / ``flush()`` on the application's thread, as confluent-kafka does.

A record whose topic has no metadata yet waits (counted in ``len()``) until
the sender has it (:mod:`logstore.client.pending`): the first record to a new
topic is never blocked on the network. If the metadata says the topic does not
exist (after a refresh, ``auto.create.topics.enable=false`` on the broker),
those records fail with UNKNOWN_TOPIC_OR_PART in their delivery reports, and
``produce()`` to that topic raises KafkaException(UNKNOWN_TOPIC_OR_PART) for the next
``retry.backoff.max.ms`` (then the topic is looked up again). Records that get
no metadata within ``max.block.ms`` (no broker reachable) fail with
``_MSG_TIMED_OUT``; ``error_cb`` hears ``_ALL_BROKERS_DOWN`` as soon as a
metadata request finds no broker.

Keys, values and headers become bytes as :mod:`logstore.client.producer_records`
says. Records with neither headers nor their own ``timestamp`` take the CreateTime
of their batch (the wall clock when the batch was opened, at most ``linger.ms``
before the record when batches drain on time): they are encoded by the C fast
path with no per-record timestamp.

Idempotence is on by default (Kafka 3.x's defaults): acks=all, at most 5
requests in flight, retries until ``delivery.timeout.ms``. As in Kafka, setting
``acks`` to 0/1, ``retries`` to 0, or more than 5 in flight without setting
``enable.idempotence`` turns idempotence off; setting ``enable.idempotence=true``
with any of those is a ConfigError. See :mod:`logstore.client.sender` for how
sequence errors are handled (KIP-360's reset; fatal errors).

Transactions (KIP-98), with confluent-kafka's calls: set ``transactional.id``
(which implies ``enable.idempotence``: setting it false, or acks/retries/in
flight that conflict with it, is a ConfigError, as in Kafka) and
``transaction.timeout.ms`` (default 60000; the broker refuses more than its
``transaction.max.timeout.ms``), then::

    p.init_transactions()            # once: fences older producers of the id
    p.begin_transaction()
    p.produce(...)                   # only inside a transaction
    p.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                  consumer.consumer_group_metadata())
    p.commit_transaction()           # or p.abort_transaction()

Errors are KafkaException(KafkaError) as in confluent-kafka: ``retriable()``
(a timed-out call: call it again to resume), ``txn_requires_abort()`` (the
transaction failed: ``abort_transaction()``, then begin a new one), ``fatal()``
(fenced by a newer producer of the id, unauthorized: close the producer);
anything else (``_STATE``: a call out of order) is the application's mistake.
How it works: :mod:`logstore.client.transactions`.
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
import time
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from logstore._speedups import FastProduce, partition_for_key, partition_for_keys
from logstore.client.accumulator import (
    BATCH_HEADER,
    HEADER_OVERHEAD,
    RECORD_OVERHEAD,
    TIMESTAMP_OVERHEAD,
    DeliveryCallback,
    ProducerBatch,
    RecordAccumulator,
    TopicState,
)
from logstore.client.admin.metadata import ClusterMetadata, cluster_metadata
from logstore.client.cluster import Cluster
from logstore.client.config import ClientConfig, ConfigError
from logstore.client.errors import KafkaError, KafkaException, local
from logstore.client.partitioner import get_partitioner
from logstore.client.pending import PendingRecord, PendingRecords, unknown_partition
from logstore.client.producer_records import (
    Headers,
    byte_lengths,
    delivery_message,
    header_pairs,
    serialized,
    to_bytes,
)
from logstore.client.sender import Sender
from logstore.client.transactions import TransactionManager, TxnState
from logstore.client.types import (
    TIMESTAMP_CREATE_TIME,
    ConsumerGroupMetadata,
    Message,
    TopicPartition,
)
from logstore.records import Record

_log = logging.getLogger("logstore.client.producer")

MAX_IDEMPOTENT_IN_FLIGHT = 5


class Producer:
    """An asynchronous producer with confluent-kafka's methods (see the module docstring).

    Thread-safe: ``produce`` may be called from several threads; ``poll`` and
    ``flush`` run callbacks on the calling thread.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        cfg = ClientConfig.parse(config, "producer", **kwargs)
        self.config = cfg
        acks, idempotent = _idempotence(cfg)
        try:
            self._partitioner = get_partitioner(cfg["partitioner"])
        except (ValueError, TypeError) as e:
            raise ConfigError(f"partitioner: {e}") from None
        self._interceptors = tuple(cfg["interceptors"])
        for interceptor in self._interceptors:
            if not (hasattr(interceptor, "on_send") or hasattr(interceptor, "on_acknowledgement")):
                raise ConfigError(
                    f"interceptors: {interceptor!r} has neither on_send(msg) nor on_acknowledgement(msg, err)"
                )
        self._key_serializer = cfg["key.serializer"]
        self._value_serializer = cfg["value.serializer"]
        self._default_callback: DeliveryCallback | None = cfg["on_delivery"]
        self._only_errors = bool(cfg["delivery.report.only.error"])
        self._error_cb: Callable[[KafkaError], Any] | None = cfg["error_cb"]
        message_max = int(cfg["message.max.bytes"])
        self._max_record = message_max - BATCH_HEADER
        self._max_block = cfg.seconds("max.block.ms")

        self._events = threading.Condition()  # guards the report queue; notified on every completion
        self._reports: collections.deque[tuple[ProducerBatch, KafkaError | None, int, int]] = (
            collections.deque()
        )
        self._report_records = 0
        self._errors: collections.deque[KafkaError] = collections.deque()
        self._closed = False
        self._fatal: KafkaError | None = None
        # Called (on the sender's thread, no lock held) whenever a delivery report or an error
        # is queued for poll(): logstore.client.aio wakes its event loop with it.
        self.on_report: Callable[[], Any] | None = None

        self._cluster = Cluster(cfg)
        self._txn: TransactionManager | None = None
        self._txn_timeout = cfg.seconds("transaction.timeout.ms")
        if cfg["transactional.id"] is not None:
            self._txn = TransactionManager(
                cfg["transactional.id"], int(cfg["transaction.timeout.ms"]), self._cluster,
                backoff=cfg.seconds("retry.backoff.ms"), on_state=self._txn_state_changed,
            )  # fmt: skip
        self._acc = RecordAccumulator(
            batch_size=min(int(cfg["batch.size"]), message_max),
            batch_records=int(cfg["batch.num.messages"]),
            linger=cfg.seconds("linger.ms"),
            buffer_memory=int(cfg["buffer.memory"]),
            max_records=int(cfg["queue.buffering.max.messages"]),
            max_block=self._max_block,
            partitioner=self._partitioner,
            # Each record's enqueue time, for delivery reports' latency(): kept once a report is wanted.
            times=not self._only_errors and (self._default_callback is not None or bool(self._interceptors)),
            times_on_callback=not self._only_errors,
        )
        self._states = self._acc.topics  # read without a lock by produce(): a dict lookup is atomic
        self._pending = PendingRecords(
            self._acc, self._cluster, self._choose, max_block=self._max_block,
            delivery_timeout=cfg.seconds("delivery.timeout.ms") or float("inf"),
            missing_for=cfg.seconds("retry.backoff.max.ms"),
        )  # fmt: skip
        self._sender = Sender(cfg, self._cluster, self._acc, self, idempotent, acks, self._txn)
        self._sender.on_fatal = self._set_fatal
        self._acc.wakeup = self._sender.wake.set
        # produce()'s fast path needs no interceptor, serializer, fatal error or close.
        self._plain = not (self._interceptors or self._key_serializer or self._value_serializer)
        self._fast = _fast_produce(self)
        if self._txn is not None:
            self._fast.plain = False  # the C path only inside a transaction (_txn_state_changed)
        self.produce = self._fast  # type: ignore[method-assign]
        self._sender.start()

    # -- producing -------------------------------------------------------------

    def produce(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int = -1,
        on_delivery: DeliveryCallback | None = None,
        timestamp: int = 0,
        headers: Headers = None,
        callback: DeliveryCallback | None = None,
    ) -> None:
        """Queue one record; returns at once. ``callback`` is an alias of ``on_delivery``.

        ``value``/``key``: bytes or str (utf-8), or anything the configured
        serializers take. ``headers``: a list of (str, bytes|str|None) or a dict.
        ``timestamp``: ms since the epoch (0: now). Raises BufferError when the
        queue stays full for ``max.block.ms``; KafkaException for a record over
        ``message.max.bytes`` (MSG_SIZE_TOO_LARGE), a partition the topic lacks
        (``_UNKNOWN_PARTITION``), a topic known not to exist
        (UNKNOWN_TOPIC_OR_PART), or after a fatal error / close. O(1) plus the
        record's bytes; one lock taken.
        """
        # Each instance's ``produce`` is the C fast path of _fast_produce(); this class-level
        # method is its general path (same behaviour), which it calls for anything not plain.
        return self._produce(topic, value, key, partition, on_delivery or callback, timestamp, headers)

    def _produce(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int,
        callback: DeliveryCallback | None,
        timestamp: int,
        headers: Headers,
    ) -> None:
        """The general path: interceptors, serializers, headers, timestamps, new topics."""
        self._check_usable()
        if not isinstance(topic, str) or not topic:
            raise TypeError(f"topic must be a non-empty str, not {topic!r}")
        if not isinstance(partition, int):
            raise TypeError(f"partition must be an int, not {type(partition).__name__}")
        header_list = header_pairs(headers)
        message: Message | None = None
        if self._interceptors:
            message = Message(
                topic, partition, -1, key, value, (TIMESTAMP_CREATE_TIME, timestamp), header_list
            )
            message = self._on_send(message)
            topic, partition = message.topic() or topic, message.partition()
            key, value, header_list = message.key(), message.value(), message.headers()
            header_list = header_pairs(header_list)
        try:
            if self._key_serializer is not None and key is not None:
                key = serialized(self._key_serializer, key, "key")
            if self._value_serializer is not None and value is not None:
                value = serialized(self._value_serializer, value, "value")
            if value is not None and value.__class__ is not bytes:
                value = to_bytes(value, "value")
            if key is not None and key.__class__ is not bytes:
                key = to_bytes(key, "key")
            size = (
                RECORD_OVERHEAD
                + (len(key) if key is not None else 0)
                + (len(value) if value is not None else 0)
            )
            if timestamp or header_list:
                size += TIMESTAMP_OVERHEAD if timestamp else 0
                for name, data in header_list or ():
                    size += HEADER_OVERHEAD + len(name.encode()) + (len(data) if data is not None else 0)
                item: Any = Record(key, value, tuple(header_list or ()), timestamp or None)
            else:
                item = value if key is None else (key, value)
            if size > self._max_record:
                raise KafkaException(self._too_large(size))
            state = self._states.get(topic)
            if state is None:
                state = self._pending.state_or_wait(topic, partition, item, size, callback, key)
                if state is None:
                    self._sender.request_metadata()
                    return  # waiting for metadata
            if partition >= state.n:
                raise KafkaException(unknown_partition(topic, partition, state.n))
            chosen = partition < 0
            if chosen:
                partition = self._choose(state, key)
            self._acc.append(state, partition, item, size, callback, key, chosen)
        except KafkaException as e:
            if message is not None:
                self._acknowledge_one(message, e.error)
            raise
        except BufferError as e:
            if message is not None:
                self._acknowledge_one(message, local("_QUEUE_FULL", str(e)))
            raise

    def _choose(self, state: TopicState, key: bytes | None) -> int:
        if key is None and state.keyless >= 0:
            return state.keyless
        if key is not None and state.hashed:
            return int(partition_for_key(key, state.n))
        return int(self._partitioner.partition(state.name, key, state.n))

    def produce_batch(
        self,
        topic: str,
        values: Sequence[Any],
        keys: Sequence[Any] | None = None,
        partition: int = -1,
        on_delivery: DeliveryCallback | None = None,
        timestamp: int = 0,
        headers: Headers = None,
        callback: DeliveryCallback | None = None,
    ) -> int:
        """Queue many records at once; returns how many were queued (all of them, or it raises).

        The records are cut into whole batches in one pass (no per-record
        Python for bytes values with bytes or no keys): keyed records are
        partitioned in C (``murmur2`` partitioners), keyless ones go to the
        sticky partition, moving on after each batch. ``on_delivery`` is called
        for each record. Interceptors and serializers, when configured, run per
        record. Raises as ``produce`` does. O(len(values)).
        """
        callback = on_delivery or callback
        values = list(values)
        count = len(values)
        if keys is not None:
            keys = list(keys)
            if len(keys) != count:
                raise ValueError(f"produce_batch: {len(keys)} keys for {count} values")
        if not count:
            return 0
        if self._plain and headers is None and topic not in self._states:
            self._topic_now(topic)
        if not self._plain or headers is not None or topic not in self._states:
            for i in range(count):
                self._produce(topic, values[i], None if keys is None else keys[i], partition, callback,
                              timestamp, headers)  # fmt: skip
            return count
        self._check_usable()
        state = self._states[topic]
        lengths = byte_lengths(values, "value")
        if keys is not None:
            lengths += byte_lengths(keys, "key")
        lengths += RECORD_OVERHEAD
        largest = int(lengths.max())
        if largest > self._max_record:
            raise KafkaException(self._too_large(largest))
        if partition >= state.n:
            raise KafkaException(unknown_partition(topic, partition, state.n))
        items: list[Any] = values if keys is None else list(zip(keys, values, strict=True))
        if partition >= 0 or keys is None:
            self._append_group(
                state, None if partition < 0 else partition, items, lengths, callback, timestamp
            )
            return count
        if state.hashed:
            parts = np.asarray(partition_for_keys(keys, state.n), dtype=np.int64)
        else:
            parts = np.asarray(
                [-1 if k is None else self._partitioner.partition(topic, k, state.n) for k in keys],
                dtype=np.int64,
            )
        order = np.argsort(parts, kind="stable")
        sorted_parts = parts[order]
        cuts = np.flatnonzero(np.diff(sorted_parts)) + 1
        starts = np.concatenate(([0], cuts))
        ends = np.concatenate((cuts, [count]))
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            index = order[start:end]
            group = list(map(items.__getitem__, index.tolist()))
            p = int(sorted_parts[start])
            self._append_group(state, None if p < 0 else p, group, lengths[index], callback, timestamp)
        return count

    def _topic_now(self, topic: str) -> None:
        """Look ``topic`` up now (produce_batch), unless records already wait for it."""
        self._check_usable()
        self._pending.look_up(topic, self._sender.auto_create())

    def _append_group(self, state: TopicState, partition: int | None, items: list[Any],
                      lengths: np.ndarray[Any, Any], callback: DeliveryCallback | None, timestamp: int) -> None:  # fmt: skip
        cumulative = np.zeros(len(items) + 1, dtype=np.int64)
        np.cumsum(lengths, out=cumulative[1:])
        self._acc.append_many(state, partition, items, cumulative, callback, timestamp)

    # -- delivery reports --------------------------------------------------------

    def poll(self, timeout: float | None = None) -> int:
        """Run the delivery callbacks (and ``error_cb``) queued so far, waiting up to
        ``timeout`` seconds (None or negative: until one arrives) for the first.
        Returns how many callbacks ran."""
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        with self._events:
            while not self._reports and not self._errors:
                now = time.monotonic()
                # Records waiting for metadata time out here too: the sender may be held by a
                # broker that accepts and never answers (a transaction's are the sender's to fail).
                expiry = self._pending.next_expiry() if self._pending and self._txn is None else None
                if expiry is not None and expiry <= now:
                    for topic, record, error in self._pending.expire(now):
                        self._fail_record(topic, record, error, now)
                    continue
                left = None if deadline is None else deadline - now
                if left is not None and left <= 0:
                    return 0
                if expiry is not None:
                    left = expiry - now if left is None else min(left, expiry - now)
                self._events.wait(left)
            reports = self._reports
            self._reports = collections.deque()
            errors = list(self._errors)
            self._errors.clear()
        return self._serve(reports, errors)

    def _serve(self, reports: Iterable[tuple[ProducerBatch, KafkaError | None, int, int]],
               errors: list[KafkaError]) -> int:  # fmt: skip
        served = 0
        first: BaseException | None = None
        for client_error in errors:
            if self._error_cb is not None:
                try:
                    self._error_cb(client_error)
                    served += 1
                except Exception as e:
                    first = first or e
        for batch, error, base_offset, append_time in reports:
            try:
                served += self._report(batch, error, base_offset, append_time)
            except Exception as e:
                first = first or e
            finally:
                with self._events:
                    self._report_records -= len(batch.records)
                    self._events.notify_all()
        if first is not None:
            raise first
        return served

    def _report(
        self, batch: ProducerBatch, error: KafkaError | None, base_offset: int, append_time: int
    ) -> int:
        if error is None and self._only_errors:
            return 0
        default = batch.callback or self._default_callback
        records = batch.records
        whole = getattr(batch.callback, "batch_delivered", None)
        if whole is not None and batch.callbacks is None:
            # produce_batch's callback that takes a batch at once (logstore.client.aio): no Message per record
            whole(error, len(records))
            return 1
        if batch.callbacks is None:
            if default is None:
                return 0
            pairs: Iterable[tuple[int, DeliveryCallback]] = zip(
                range(len(records)), itertools.repeat(default)
            )
        elif default is None:
            pairs = batch.callbacks
        else:
            own = dict(batch.callbacks)
            pairs = ((i, own.get(i, default)) for i in range(len(records)))
        first: BaseException | None = None
        served = 0
        for i, cb in pairs:
            message = delivery_message(batch, i, error, base_offset, append_time)
            try:
                cb(error, message)
            except Exception as e:
                first = first or e
            served += 1
        if first is not None:
            raise first
        return served

    def flush(self, timeout: float | None = None) -> int:
        """Send every queued record now (``linger.ms`` ignored) and wait for their delivery
        reports, running callbacks; returns how many records are still queued (0: all done).
        ``timeout`` seconds (None or negative: no limit)."""
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        self._flushing(1)
        try:
            while True:
                self.poll(0)
                if len(self) == 0:
                    return 0
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return len(self)
                with self._events:
                    if not self._reports and not self._errors and len(self):
                        self._events.wait(0.1 if left is None else min(left, 0.1))
        finally:
            self._flushing(-1)

    def _flushing(self, change: int) -> None:
        """A flush starts (+1: every queued batch is ready now, the sender woken) or ends (-1)."""
        with self._acc.lock:
            self._acc.flushing += change
        if change > 0:
            self._sender.wake.set()

    def _never_block(self) -> None:
        """From now on ``produce()`` raises BufferError at once when the buffer is full, rather
        than waiting up to ``max.block.ms`` (logstore.client.aio: an event loop must not block;
        it keeps such records itself until there is room)."""
        self._acc.max_block = 0.0

    def __len__(self) -> int:
        """Records queued or in flight, plus delivery reports not yet served by poll()."""
        return self._acc.records + self._report_records

    def __bool__(self) -> bool:
        return True

    # -- the sender's reports (its thread) ------------------------------------------

    def delivered(
        self, batch: ProducerBatch, error: KafkaError | None, base_offset: int, append_time: int
    ) -> None:
        if not batch.done_at:  # a record failed before it was sent has its time already
            batch.done_at = time.monotonic()
        if self._interceptors:
            for i in range(len(batch.records)):
                self._acknowledge_one(delivery_message(batch, i, error, base_offset, append_time), error)
        wanted = (
            batch.callback is not None or batch.callbacks is not None or self._default_callback is not None
        )
        with self._events:
            if wanted and not (error is None and self._only_errors):
                self._reports.append((batch, error, base_offset, append_time))
                self._report_records += len(batch.records)
            self._events.notify_all()
        hook = self.on_report
        if hook is not None:
            hook()

    def client_error(self, error: KafkaError) -> None:
        _log.debug("producer error: %s", error)
        if self._error_cb is None:
            return
        with self._events:
            self._errors.append(error)
            self._events.notify_all()
        hook = self.on_report
        if hook is not None:
            hook()

    def pending_topics(self) -> set[str]:
        return self._pending.topics()

    def pending_expiry(self) -> float | None:
        return self._pending.next_expiry()

    def fail_pending(self, error: KafkaError) -> None:
        """Fail every record waiting for its topic's metadata with ``error`` (the sender's thread,
        when a transaction is aborted). O(such records)."""
        now = time.monotonic()
        for topic, records in self._pending.take_all().items():
            for record in records:
                self._fail_record(topic, record, error, now)

    def _fail_record(self, topic: str, record: PendingRecord, error: KafkaError, now: float) -> None:
        try:
            self.delivered(record.as_batch(topic, now), error, -1, -1)
        finally:
            self._acc.release(1, record.size)

    def metadata_updated(self) -> None:
        """Move records waiting for metadata into batches, or fail them (the sender's thread)."""
        if not self._pending:
            return
        now = time.monotonic()
        for topic, record, error in self._pending.metadata_updated(now):
            if self._txn is not None:
                self._txn.batch_failed(error)
            self._fail_record(topic, record, error, now)

    # -- errors ----------------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._fatal is not None:
            raise KafkaException(self._fatal)
        if self._closed:
            raise KafkaException(local("_DESTROY", "the producer is closed"))
        if self._txn is not None:
            self._txn.check_produce()

    def _set_fatal(self, error: KafkaError) -> None:
        self._fatal = error
        self._general_only()

    def _general_only(self) -> None:
        """Every produce() from now on takes the general path (which raises after a fatal
        error or close)."""
        self._plain = False
        self._fast.plain = False

    def _too_large(self, size: int) -> KafkaError:
        return KafkaError(
            KafkaError.MSG_SIZE_TOO_LARGE,  # type: ignore[attr-defined]
            f"a record of ~{size + BATCH_HEADER} bytes (with its batch header) is larger than "
            f"message.max.bytes={self._max_record + BATCH_HEADER}",
        )

    # -- interceptors ------------------------------------------------------------------

    def _on_send(self, message: Message) -> Message:
        for interceptor in self._interceptors:
            on_send = getattr(interceptor, "on_send", None)
            if on_send is None:
                continue
            try:
                changed = on_send(message)
            except Exception:
                _log.exception("interceptor %r on_send failed; the record goes on unchanged", interceptor)
                continue
            if isinstance(changed, Message):
                message = changed
        return message

    def _acknowledge_one(self, message: Message, error: KafkaError | None) -> None:
        for interceptor in self._interceptors:
            on_ack = getattr(interceptor, "on_acknowledgement", None)
            if on_ack is None:
                continue
            try:
                on_ack(message, error)
            except Exception:
                _log.exception("interceptor %r on_acknowledgement failed", interceptor)

    # -- transactions (KIP-98; see logstore.client.transactions) ---------------------------

    def init_transactions(self, timeout: float | None = None) -> None:
        """Register ``transactional.id`` with its transaction coordinator (FindCoordinator, then
        InitProducerId): the producer gets the id's producer id and a new epoch, which fences
        every older producer of the id (the coordinator aborts its open transaction first).
        Call it once, before the first ``begin_transaction()``.

        Waits up to ``timeout`` seconds (None or negative: 2 x ``transaction.timeout.ms``, as
        librdkafka). Raises KafkaException: ``_NOT_CONFIGURED`` without ``transactional.id``;
        ``_TIMED_OUT`` (retriable: call again to resume); fatal errors, among them
        INVALID_TRANSACTION_TIMEOUT (``transaction.timeout.ms`` above the broker's
        ``transaction.max.timeout.ms``), TRANSACTIONAL_ID_AUTHORIZATION_FAILED and
        PRODUCER_FENCED; ``_STATE`` when already initialized.
        """
        txn = self._transactional()
        limit = _limit(timeout, 2 * self._txn_timeout)
        result = txn.initialize()
        self._await(txn, result, limit, "init_transactions", serve=False)

    def begin_transaction(self) -> None:
        """Open a transaction: the records produced until ``commit_transaction()`` /
        ``abort_transaction()`` are committed or aborted together. Local (the coordinator
        hears of the transaction with its first partition). O(1).

        Raises KafkaException: ``_NOT_CONFIGURED``; ``_STATE`` before ``init_transactions()``
        has succeeded, or with a transaction already open; an error whose
        ``txn_requires_abort()`` is True while a failed transaction awaits its abort; the
        fatal error after one.
        """
        self._transactional().begin()

    def send_offsets_to_transaction(
        self, positions: Sequence[TopicPartition], group_metadata: Any, timeout: float | None = None
    ) -> None:
        """Commit a consumer group's offsets as part of the open transaction (exactly-once
        consume-transform-produce): AddOffsetsToTxn to the transaction coordinator, then
        TxnOffsetCommit to the group's coordinator. The offsets are visible to the group
        (``Consumer.committed()``) only once the transaction commits.

        ``positions``: TopicPartitions whose ``offset`` is the next to consume (the last
        processed offset + 1: ``consumer.position(consumer.assignment())``); logical and
        invalid offsets (< 0) are ignored, and with none left nothing is sent.
        ``group_metadata``: ``consumer.consumer_group_metadata()`` (a group id str is taken
        too, without the generation check). Waits up to ``timeout`` seconds (None or
        negative: ``transaction.timeout.ms``). O(len(positions)).

        Raises KafkaException: ``_NOT_CONFIGURED``; ``_STATE`` outside a transaction;
        ``_TIMED_OUT`` (retriable: call again); abortable errors (``txn_requires_abort()``:
        ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID when the consumer's
        group rebalanced meanwhile, GROUP_AUTHORIZATION_FAILED); fatal ones (fenced).
        TypeError for arguments of the wrong type.
        """
        txn = self._transactional()
        group = _group_metadata(group_metadata)
        offsets: dict[tuple[str, int], tuple[int, str | None, int | None]] = {}
        for tp in positions:
            if not isinstance(tp, TopicPartition):
                raise TypeError(f"positions must be TopicPartitions, not {type(tp).__name__}")
            if tp.offset >= 0:
                offsets[(tp.topic, tp.partition)] = (tp.offset, tp.metadata, tp.leader_epoch)
        limit = _limit(timeout, self._txn_timeout)
        result = txn.send_offsets(offsets, group)
        self._await(txn, result, limit, "send_offsets_to_transaction", serve=False)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Commit the open transaction: flush every record (serving delivery reports, as
        ``flush()``), add the partitions not yet in the transaction, then EndTxn(commit). On
        return the records (and offsets sent) are committed; read_committed consumers see
        them once the coordinator's markers are written (at once, in practice).

        Waits up to ``timeout`` seconds (None or negative: ``transaction.timeout.ms``).
        Raises KafkaException: ``_NOT_CONFIGURED``; ``_STATE`` without an open transaction;
        ``_TIMED_OUT`` (retriable: call again to resume); an error whose
        ``txn_requires_abort()`` is True when a record or request of the transaction failed
        (call ``abort_transaction()``); fatal errors (PRODUCER_FENCED, ...).
        """
        txn = self._transactional()
        limit = _limit(timeout, self._txn_timeout)
        deadline = time.monotonic() + limit
        result = txn.begin_commit()
        self._sender.wake.set()
        if not result.done():
            left = self.flush(max(deadline - time.monotonic(), 0.0))
            if left and not result.done():
                raise KafkaException(
                    _timed_out("commit_transaction", limit, f"{left} record(s) not delivered yet")
                )
        self._await(txn, result, max(deadline - time.monotonic(), 0.0), "commit_transaction", serve=True)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the open (or failed) transaction: records not yet sent fail with
        ``_PURGE_QUEUE`` in their delivery reports (served by this call, as ``flush()`` would),
        the requests in flight are answered, then EndTxn(abort); read_committed consumers never
        see the transaction's records. After a sequence error the producer takes a new epoch
        (InitProducerId) before it returns.

        Waits up to ``timeout`` seconds (None or negative: ``transaction.timeout.ms``).
        Raises KafkaException: ``_NOT_CONFIGURED``; ``_STATE`` without a transaction;
        ``_TIMED_OUT`` (retriable: call again to resume); fatal errors.
        """
        txn = self._transactional()
        limit = _limit(timeout, self._txn_timeout)
        result = txn.begin_abort()
        self._sender.wake.set()
        self._await(txn, result, limit, "abort_transaction", serve=True)

    def _transactional(self) -> TransactionManager:
        if self._txn is None:
            raise KafkaException(
                local("_NOT_CONFIGURED", "The Transactional API requires transactional.id to be configured")
            )
        if self._closed:
            raise KafkaException(local("_DESTROY", "the producer is closed"))
        return self._txn

    def _await(self, txn: TransactionManager, result: Future[None], timeout: float, call: str, *,
               serve: bool) -> None:  # fmt: skip
        """Wait up to ``timeout`` seconds for ``result`` (serving delivery reports if ``serve``);
        raise its error, or a retriable ``_TIMED_OUT`` (the call goes on in the background)."""
        deadline = time.monotonic() + timeout

        def settled(_: Future[None]) -> None:
            with self._events:
                self._events.notify_all()

        result.add_done_callback(settled)
        while not result.done():
            if serve:
                self.poll(0)
            left = deadline - time.monotonic()
            if left <= 0:
                raise KafkaException(_timed_out(call, timeout, "the operation goes on"))
            with self._events:
                if result.done() or (serve and (self._reports or self._errors)):
                    continue
                self._events.wait(min(left, 1.0))
        if serve:
            self.poll(0)
        txn.finished(result)
        error = result.exception()
        if error is not None:
            raise KafkaException(error.error) if isinstance(error, KafkaException) else error

    def _txn_state_changed(self, state: TxnState) -> None:
        """The C fast path of produce() runs only inside a transaction (any thread; no lock)."""
        fast = getattr(self, "_fast", None)
        if fast is not None:
            fast.plain = self._plain and state is TxnState.IN_TRANSACTION

    # -- the rest of confluent's surface ---------------------------------------------

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        """The cluster's brokers and topics (all, or ``topic``) as confluent's ``ClusterMetadata``
        (``logstore.client.admin``'s); a named topic is created if the broker allows it, as
        librdkafka's producer does. Refreshes this producer's metadata too; bounded by
        ``request.timeout.ms`` (``timeout`` seconds, when shorter)."""
        limit = None if timeout is None or timeout < 0 else float(timeout)
        # As librdkafka's producer: naming a topic may create it (allow.auto.create.topics, on for producers).
        create = topic is not None and self._sender.auto_create()
        response = self._cluster.refresh(
            None if topic is None else [topic], auto_create=create, timeout=limit
        )
        return cluster_metadata(response)

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Fail every record still queued (not yet sent) with ``_PURGE_QUEUE``; records in flight
        complete as they will. Their reports are served by the next poll()."""
        if not in_queue:
            return
        error = KafkaError(-152, "Local: Purged in queue")
        for batch in self._acc.take_all():
            if batch.sent:
                self._acc.reenqueue([batch])  # in the hands of the sender: keep it
                continue
            try:
                self.delivered(batch, error, -1, -1)
            finally:
                self._acc.complete(batch)

    def close(self, timeout: float | None = None) -> int:
        """Flush (up to ``timeout`` seconds), then stop: records still queued fail with
        ``_DESTROY``. Returns how many records were not delivered in time."""
        if self._closed:
            return 0
        txn = self._txn
        if (
            txn is not None
            and self._fatal is None
            and txn.state in (TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR)
        ):
            try:  # as Kafka's producer: an open transaction is aborted, not left to time out
                self.abort_transaction(timeout if timeout is not None and timeout >= 0 else None)
            except KafkaException as e:
                _log.warning("closing: aborting the open transaction failed: %s", e)
        left = self.flush(timeout) if self._fatal is None else len(self)
        self._closed = True
        self._general_only()
        self._sender.stop(force=True)
        self._sender.join(30)
        self._acc.closing = True
        self._pending.release_all()
        self._cluster.close()
        self.poll(0)
        return left

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Producer {self.config['client.id']} queued={len(self)}>"


# -- helpers ---------------------------------------------------------------------------


def _fast_produce(producer: Producer) -> FastProduce:
    """``producer.produce``: :class:`logstore._speedups.FastProduce`, which appends a record
    that needs no interceptor, serializer, header or timestamp, whose topic's metadata is
    known and whose partition's open batch has room, in one C call (~0.1 us); every other
    call goes, arguments unchanged, to ``Producer.produce``'s general path (a new batch,
    KIP-480's repartitioning, waiting for room, every error). See the accumulator's
    docstring for how it shares the accumulator's lock. O(1) plus the record's bytes."""
    general = types.MethodType(Producer.produce, producer)
    return FastProduce(producer._acc, general, producer._max_record, producer._plain)


def _idempotence(cfg: ClientConfig) -> tuple[int, bool]:
    """(acks, idempotent) per Kafka 3.x's rules (see the module docstring); ``transactional.id``
    requires idempotence (ConfigError when it is turned off or conflicts)."""
    acks = int(cfg["acks"])
    in_flight = int(cfg["max.in.flight.requests.per.connection"])
    retries = int(cfg["retries"])
    conflicts = []
    if acks != -1:
        conflicts.append(f"acks={acks} (idempotence needs acks=all)")
    if in_flight > MAX_IDEMPOTENT_IN_FLIGHT:
        conflicts.append(f"max.in.flight.requests.per.connection={in_flight} (at most 5)")
    if retries == 0:
        conflicts.append("retries=0 (idempotence retries)")
    transactional_id = cfg["transactional.id"]
    if transactional_id is not None:
        if not transactional_id:
            raise ConfigError("transactional.id must not be empty")
        if not cfg["enable.idempotence"]:
            raise ConfigError(
                "Cannot set a transactional.id without also enabling idempotence: enable.idempotence=false"
            )
        if conflicts:
            raise ConfigError(
                "transactional.id (which implies enable.idempotence=true) conflicts with "
                + "; ".join(conflicts)
            )
        return acks, True
    if not cfg["enable.idempotence"]:
        return acks, False
    if "enable.idempotence" in cfg.given:
        if conflicts:
            raise ConfigError("enable.idempotence=true conflicts with " + "; ".join(conflicts))
        return acks, True
    return acks, not conflicts


def _limit(timeout: float | None, default: float) -> float:
    """A call's wait in seconds: ``timeout``, or ``default`` when None or negative."""
    return default if timeout is None or timeout < 0 else float(timeout)


def _timed_out(call: str, timeout: float, detail: str) -> KafkaError:
    return KafkaError(
        KafkaError._TIMED_OUT,  # type: ignore[attr-defined]
        f"{call}() did not complete within {timeout:.1f} s ({detail}): call {call}() again to resume",
        retriable=True,
    )


def _group_metadata(value: Any) -> ConsumerGroupMetadata:
    """``send_offsets_to_transaction``'s group: a ConsumerGroupMetadata, or a group id."""
    if isinstance(value, ConsumerGroupMetadata):
        return value
    if isinstance(value, str) and value:
        return ConsumerGroupMetadata(value)
    raise TypeError(
        "group_metadata must be Consumer.consumer_group_metadata()'s value (or a group id), "
        f"not {type(value).__name__}"
    )
