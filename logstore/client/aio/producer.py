"""``AIOProducer``: the producer for asyncio, shaped like ``confluent_kafka.aio.AIOProducer``.

>>> async def main() -> None:                                          # doctest: +SKIP
...     async with AIOProducer({"bootstrap.servers": "127.0.0.1:9092"}) as p:
...         msg = await p.produce("events", b"v", key=b"k")             # the delivered Message
...         fut = await p.send("events", b"w")                          # enqueued; fut: its delivery
...         await fut

Over the synchronous :class:`~logstore.client.producer.Producer` (its accumulator, Sender
thread and C fast path), with no thread of its own and none per call:

- ``produce`` / ``send`` append the record on the loop's thread (the C fast path: no
  network, never blocking: the producer is told never to wait for room) with a delivery
  callback that settles the record's asyncio future;
- the Sender thread queues delivery reports and wakes the loop (``Producer.on_report`` ->
  :class:`~logstore.client.aio.bridge.Waker`: one ``call_soon_threadsafe`` per turn of the
  loop, however many batches completed); the loop then serves the reports (``poll(0)``),
  settling the futures on its own thread;
- a record that does not fit the buffer (``buffer.memory``, ``queue.buffering.max.messages``)
  waits in this object's overflow queue, in order, and moves into the buffer as reports free
  room; ``send`` awaits until the overflow is empty again (back-pressure, rather than
  ``BufferError`` or a blocked loop).

Cancellation: a record is the producer's from the moment ``produce`` / ``send`` is called
(it is appended, or queued in the overflow, before the first suspension point). Cancelling
the task that awaits it (``produce``'s delivery, ``send``'s room) does not withdraw it: it
is delivered once, as if the task had not been cancelled, and its outcome is dropped. Only
``purge()`` / an aborted transaction / ``close()`` fail records not yet sent.

Differences from confluent-kafka's AIOProducer: ``await produce(...)`` resolves to the
delivered :class:`~logstore.client.types.Message` (confluent's returns a future to await a
second time: that is :meth:`AIOProducer.send` here, as aiokafka's ``send``), headers are
taken, and no thread pool is used.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import Any, Self

from logstore.client import producer as sync_producer
from logstore.client.aio.bridge import Waker, bridge
from logstore.client.config import ConfigError
from logstore.client.errors import KafkaError, KafkaException, local
from logstore.client.producer import Producer
from logstore.client.producer_records import Headers
from logstore.client.transactions import TransactionManager
from logstore.client.types import Message, TopicPartition

_log = logging.getLogger("logstore.client.aio.producer")

_TICK_S = 0.2
"""While records are outstanding the loop serves reports at least this often: records waiting
for metadata time out in ``poll()`` (a Sender held by a broker that never answers)."""

_SETTLE_S = 0.002
"""How soon a wait looks again once every report is served but records still count (see _until)."""

Args = tuple[str, Any, Any, int, Any, Headers]
_BATCH = object()
"""In an overflow item's timestamp place: the item is a whole ``produce_batch`` (values, keys)."""


class _Delivery(asyncio.Future):
    """A record's delivery future, which is also its delivery callback (one object per record:
    the report settles it on the loop's thread, reports being served there). A future already
    done (cancelled) is left as it is."""

    __slots__ = ()

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if self.done():
            return
        if error is None:
            self.set_result(message)
        else:
            self.set_exception(KafkaException(error))


class _BatchDelivery:
    """The delivery callback of a whole ``produce_batch``: counts reports, keeps the first error."""

    __slots__ = ("count", "error", "future", "left")

    def __init__(self, future: asyncio.Future[int], count: int) -> None:
        self.future = future
        self.count = count
        self.left = count
        self.error: KafkaError | None = None

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        self.batch_delivered(error, 1)

    def batch_delivered(self, error: KafkaError | None, count: int) -> None:
        """``count`` records reported at once (``Producer._report`` calls this for a whole batch)."""
        if error is not None and self.error is None:
            self.error = error
        self.left -= count
        if self.left <= 0 and not self.future.done():
            if self.error is None:
                self.future.set_result(self.count)
            else:
                self.future.set_exception(KafkaException(self.error))


class AIOProducer:
    """The producer for asyncio (see the module docstring). Make it inside a running loop; use
    it from that loop only."""

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        given = dict(config or {})
        given.update(kwargs)
        only_errors = given.get("delivery.report.only.error", False)
        if only_errors is True or str(only_errors).lower() in ("true", "1"):
            raise ConfigError("AIOProducer: delivery.report.only.error cannot be set (each record's future "
                              "settles with its report)")  # fmt: skip
        self._loop = asyncio.get_running_loop()
        self._producer = Producer(given)
        self._producer._never_block()
        self._waker = Waker(self._loop, self._serve)
        self._producer.on_report = self._waker.wake
        self._overflow: collections.deque[tuple[Args, Any]] = collections.deque()  # waiting for room, in order
        self._overflow_records = 0  # the records in it (a produce_batch item holds many)
        self._progress: asyncio.Future[None] | None = None  # settled at the next serve
        self._tick: asyncio.TimerHandle | None = None
        self._closed = False

    @property
    def producer(self) -> Producer:
        """The synchronous producer underneath (its config, ``len``, ``list_topics``)."""
        return self._producer

    # -- producing --------------------------------------------------------------------

    async def produce(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int = -1,
        timestamp: int = 0,
        headers: Headers = None,
    ) -> Message:
        """Produce one record and wait for its delivery: the delivered Message (its
        ``offset()``, ``partition()``, ``latency()``), or KafkaException with its error.

        Raises at once (before anything is queued) what ``Producer.produce`` raises for a bad
        record (TypeError, MSG_SIZE_TOO_LARGE, ``_UNKNOWN_PARTITION``, a topic known not to
        exist, a closed or failed producer). Cancelled while waiting, the record is still
        delivered (see the module docstring).
        """
        return await self._enqueue(topic, value, key, partition, timestamp, headers)

    async def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int = -1,
        timestamp: int = 0,
        headers: Headers = None,
    ) -> asyncio.Future[Message]:
        """Queue one record; returns its delivery future once the producer's buffer has room
        for what is queued (aiokafka's ``send``; confluent's AIOProducer ``produce``). Awaiting
        many such futures at once is the fast way to produce one by one."""
        future = self._enqueue(topic, value, key, partition, timestamp, headers)
        if self._overflow:
            await self._until(lambda: not self._overflow, None)
        return future

    def send_nowait(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int = -1,
        timestamp: int = 0,
        headers: Headers = None,
    ) -> asyncio.Future[Message]:
        """``send`` without waiting for room (the record waits in the overflow queue if need be)."""
        return self._enqueue(topic, value, key, partition, timestamp, headers)

    async def produce_batch(
        self, topic: str, values: Sequence[Any], keys: Sequence[Any] | None = None, partition: int = -1
    ) -> int:
        """Produce many records (cut into batches in C, as ``Producer.produce_batch``) and wait
        until every one is delivered: their count, or KafkaException with the first error
        (after all of them have their outcome). Cancelled while waiting, they are still
        delivered."""
        self._check_open()
        values = list(values)
        count = len(values)
        if not count:
            return 0
        future: asyncio.Future[int] = self._loop.create_future()
        delivery = _BatchDelivery(future, count)
        keys = None if keys is None else list(keys)
        if topic in self._producer._states:  # else produce_batch would look the topic up, blocking
            if self._closed:
                raise KafkaException(local("_DESTROY", "the producer is closed"))
            item = ((topic, values, keys, partition, _BATCH, None), delivery)
            if self._overflow or not self._put_batch(item):
                self._overflow.append(item)
                self._overflow_records += count
            self._arm()
            return await future
        for i in range(count):
            self._enqueue_with(topic, values[i], None if keys is None else keys[i], partition, 0, None, delivery)
        return await future

    def _put_batch(self, item: tuple[Args, Any]) -> bool:
        """Hand a whole produce_batch to the producer: whether there was room (for all of it, or,
        with nothing else queued, per record: a list larger than the buffer goes in piece by piece)."""
        (topic, values, keys, partition, _, _), delivery = item
        try:
            self._producer.produce_batch(topic, values, keys, partition, delivery)
            return True
        except BufferError:
            if len(self._producer):
                return False
        # Larger than the whole buffer: record by record, first in the overflow (the item was its head).
        self._overflow.extendleft(
            ((topic, values[i], None if keys is None else keys[i], partition, 0, None), delivery)
            for i in reversed(range(len(values)))
        )
        self._overflow_records += len(values)
        return True

    def _enqueue(
        self, topic: str, value: Any, key: Any, partition: int, timestamp: int, headers: Headers
    ) -> asyncio.Future[Message]:
        future = _Delivery(loop=self._loop)
        self._enqueue_with(topic, value, key, partition, timestamp, headers, future)
        return future

    def _enqueue_with(
        self, topic: str, value: Any, key: Any, partition: int, timestamp: int, headers: Headers, delivery: Any
    ) -> None:
        if self._closed:
            raise KafkaException(local("_DESTROY", "the producer is closed"))
        if self._overflow:
            self._overflow.append(((topic, value, key, partition, timestamp, headers), delivery))
            self._overflow_records += 1
        else:
            try:
                self._producer.produce(topic, value, key, partition, delivery, timestamp, headers)
            except BufferError:
                self._overflow.append(((topic, value, key, partition, timestamp, headers), delivery))
                self._overflow_records += 1
        if self._tick is None:
            self._arm()

    # -- the loop's side: reports, room, timers ---------------------------------------------

    def _serve(self) -> None:
        """On the loop: serve queued delivery reports (settling futures), move overflowed records
        into the buffer, wake the waiters."""
        try:
            self._producer.poll(0)
        except Exception:
            _log.exception("AIOProducer: a delivery callback or error_cb failed")
        overflow = self._overflow
        produce = self._producer.produce
        while overflow:
            item = overflow[0]
            (topic, value, key, partition, timestamp, headers), delivery = item
            if timestamp is _BATCH:
                overflow.popleft()
                if not self._put_batch(item):
                    overflow.appendleft(item)
                    break
                self._overflow_records -= len(value)
                continue
            try:
                produce(topic, value, key, partition, delivery, timestamp, headers)
            except BufferError:
                break
            except KafkaException as e:
                delivery(e.error, Message(topic, partition, -1, key, value, error=e.error))
            overflow.popleft()
            self._overflow_records -= 1
        progress, self._progress = self._progress, None
        if progress is not None and not progress.done():
            progress.set_result(None)

    def _arm(self) -> None:
        if self._tick is None and not self._closed:
            self._tick = self._loop.call_later(_TICK_S, self._on_tick)

    def _on_tick(self) -> None:
        self._tick = None
        self._serve()
        if len(self._producer) or self._overflow:
            self._arm()

    async def _until(self, done: Any, timeout: float | None) -> bool:
        """Wait (serving reports) until ``done()`` or ``timeout`` seconds; whether it is done."""
        deadline = None if timeout is None or timeout < 0 else self._loop.time() + timeout
        while not done():
            left = None if deadline is None else deadline - self._loop.time()
            if left is not None and left <= 0:
                return False
            if self._progress is None:
                self._progress = self._loop.create_future()
            self._arm()
            # The Sender releases a batch's room just after queuing its report: when the last
            # reports are served and records still count, look again shortly.
            settling = not self._producer._reports and self._overflow_records == 0
            step = _SETTLE_S if settling else left
            if step is not None and left is not None:
                step = min(step, left)
            try:
                async with asyncio.timeout(step):
                    await asyncio.shield(self._progress)
            except TimeoutError:
                self._serve()
        return True

    def _queued(self) -> int:
        return len(self._producer) + self._overflow_records

    def __len__(self) -> int:
        """Records queued, in flight, or waiting for room (and reports not yet served)."""
        return self._queued()

    async def poll(self, timeout: float = 0) -> int:
        """Serve delivery reports now (they are served as they come anyway); returns 0."""
        self._serve()
        if timeout and timeout > 0:
            await asyncio.sleep(0)
        return 0

    async def flush(self, timeout: float | None = None) -> int:
        """Send everything queued now (``linger.ms`` ignored) and wait until it is delivered, up
        to ``timeout`` seconds (None or negative: no limit): how many records are still queued
        (0: all delivered). Cancelled, the records go on as they would."""
        self._producer._flushing(1)
        try:
            await self._until(lambda: self._queued() == 0, timeout)
        finally:
            self._producer._flushing(-1)
        return self._queued()

    def purge(self) -> None:
        """Fail every record not yet sent (``_PURGE_QUEUE``), as ``Producer.purge``."""
        self._fail_overflow(local("_PURGE_QUEUE", "Local: Purged in queue"))
        self._producer.purge()
        self._serve()

    def _fail_overflow(self, error: KafkaError) -> None:
        while self._overflow:
            (topic, value, key, partition, timestamp, _), delivery = self._overflow.popleft()
            if timestamp is _BATCH:
                delivery.batch_delivered(error, len(value))
            else:
                delivery(error, Message(topic, partition, -1, key, value, error=error))
        self._overflow_records = 0

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaException(local("_DESTROY", "the producer is closed"))

    async def close(self, timeout: float | None = None) -> int:
        """Flush (up to ``timeout`` seconds), then stop; records still queued fail with
        ``_DESTROY``. Returns how many were not delivered in time."""
        if self._closed:
            return 0
        txn = self._producer._txn
        if txn is not None and txn.state.name in ("IN_TRANSACTION", "ABORTABLE_ERROR"):
            try:
                await self.abort_transaction(timeout)
            except KafkaException as e:
                _log.warning("closing: aborting the open transaction failed: %s", e)
        left = await self.flush(timeout)
        self._closed = True
        self._fail_overflow(local("_DESTROY", "the producer is closed"))
        self._producer.close(0)  # nothing left to flush: stops the Sender, serves the last reports
        self._waker.close()
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        self._serve()
        return left

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<AIOProducer {self._producer.config['client.id']} queued={len(self)}>"

    # -- transactions (as Producer's, awaited) -------------------------------------------------

    def _txn(self) -> TransactionManager:
        return self._producer._transactional()

    async def _txn_await(self, txn: TransactionManager, result: Future[None], timeout: float, call: str) -> None:
        """Wait up to ``timeout`` for ``result``; raise its error or a retriable ``_TIMED_OUT`` (the
        operation goes on: call again to resume). Cancelled, it goes on too."""
        try:
            async with asyncio.timeout(timeout):
                await bridge(result, self._loop)
        except TimeoutError:
            raise KafkaException(sync_producer._timed_out(call, timeout, "the operation goes on")) from None
        except KafkaException:
            pass
        self._serve()
        txn.finished(result)
        error = result.exception()
        if error is not None:
            raise KafkaException(error.error) if isinstance(error, KafkaException) else error

    async def init_transactions(self, timeout: float | None = None) -> None:
        """``Producer.init_transactions``, awaited."""
        txn = self._txn()
        limit = sync_producer._limit(timeout, 2 * self._producer._txn_timeout)
        await self._txn_await(txn, txn.initialize(), limit, "init_transactions")

    async def begin_transaction(self) -> None:
        """``Producer.begin_transaction`` (local)."""
        self._txn().begin()

    async def send_offsets_to_transaction(
        self, positions: Sequence[TopicPartition], group_metadata: Any, timeout: float | None = None
    ) -> None:
        """``Producer.send_offsets_to_transaction``, awaited."""
        txn = self._txn()
        group = sync_producer._group_metadata(group_metadata)
        offsets: dict[tuple[str, int], tuple[int, str | None, int | None]] = {}
        for tp in positions:
            if not isinstance(tp, TopicPartition):
                raise TypeError(f"positions must be TopicPartitions, not {type(tp).__name__}")
            if tp.offset >= 0:
                offsets[(tp.topic, tp.partition)] = (tp.offset, tp.metadata, tp.leader_epoch)
        limit = sync_producer._limit(timeout, self._producer._txn_timeout)
        await self._txn_await(txn, txn.send_offsets(offsets, group), limit, "send_offsets_to_transaction")

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """``Producer.commit_transaction``, awaited: the records waiting for room go into the
        buffer first, then everything is flushed and EndTxn(commit) sent."""
        txn = self._txn()
        limit = sync_producer._limit(timeout, self._producer._txn_timeout)
        deadline = time.monotonic() + limit
        if self._overflow and not await self._until(lambda: not self._overflow, limit):
            raise KafkaException(sync_producer._timed_out("commit_transaction", limit, "records wait for room"))
        result = txn.begin_commit()
        self._producer._sender.wake.set()
        if not result.done():
            left = await self.flush(max(deadline - time.monotonic(), 0.0))
            if left and not result.done():
                raise KafkaException(sync_producer._timed_out(
                    "commit_transaction", limit, f"{left} record(s) not delivered yet"))  # fmt: skip
        await self._txn_await(txn, result, max(deadline - time.monotonic(), 0.0), "commit_transaction")

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """``Producer.abort_transaction``, awaited: records not yet sent (waiting for room
        included) fail with ``_PURGE_QUEUE``."""
        txn = self._txn()
        limit = sync_producer._limit(timeout, self._producer._txn_timeout)
        self._fail_overflow(local("_PURGE_QUEUE", "Local: Purged in queue (transaction aborted)"))
        result = txn.begin_abort()
        self._producer._sender.wake.set()
        await self._txn_await(txn, result, limit, "abort_transaction")
