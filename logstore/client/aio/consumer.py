"""``AIOConsumer``: the consumer for asyncio, shaped like ``confluent_kafka.aio.AIOConsumer``
with aiokafka's ``async for`` and ``getmany``.

>>> async def main() -> None:                                                    # doctest: +SKIP
...     async with AIOConsumer({"bootstrap.servers": "127.0.0.1:9092", "group.id": "g"}) as c:
...         await c.subscribe(["events"])
...         async for msg in c:                        # one by one
...             handle(msg)
...         batches = await c.getmany(timeout_ms=1000, max_records=10_000)   # {TopicPartition: [Message]}
...         await c.commit()

Over the synchronous :class:`~logstore.client.consumer.Consumer`, on the loop's thread, with
no thread of its own and none per call: each step is ``Consumer.consume(n, timeout=0)`` (one
turn of the coordinator, fetcher and timers, then the records already decoded; it never
waits), and between steps the coroutine awaits a future that the client's threads resolve
when there is something to do: a Fetch response decoded, a JoinGroup / SyncGroup / OffsetFetch
answered (``Consumer.on_wake`` -> :class:`~logstore.client.aio.bridge.Waker`), or the next
timer at most 0.2 s later (auto-commit, backoffs). Commits and committed-offset lookups are the
client's request futures, bridged.

Cancellation: records leave the client only inside a synchronous stretch that ends in a
``return`` (no ``await`` between taking them and handing them out), so a cancelled
``getmany`` / ``consume`` / ``__anext__`` has taken none: the next call returns them. A
cancelled ``commit`` leaves its OffsetCommit request to complete: the group's offsets are then
all those of the request or, if it failed, none of them (one request, one answer), and the
consumer records the outcome as if the call had waited; no further attempt is made.

``enable.auto.offset.store`` (default true) stores a record's offset when it is handed to the
application (``getmany`` / ``consume`` returning, ``__anext__`` yielding it), not when it is
buffered, so that auto-commit and ``commit()`` never pass a record the application has not seen.

What still runs on the loop's thread and may block it briefly: the rare synchronous round trips
of the consumer's step (FindCoordinator, a metadata refresh; each cut at about 0.2 s when no
broker answers), the commit of a rebalance (eager revocation with auto-commit: one OffsetCommit
round trip) and ``close()`` (LeaveGroup, cut at 1 s). Rebalance callbacks are plain functions,
called on the loop's thread.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any, Self

from logstore.client.aio.bridge import Waker, bridge
from logstore.client.config import ClientConfig
from logstore.client.consumer import _CLIENT_ERRORS, Consumer
from logstore.client.coordinator import _NOT_COORDINATOR, _RETRY, ConsumerCoordinator
from logstore.client.errors import KafkaError, KafkaException, local
from logstore.client.types import OFFSET_INVALID, ConsumerGroupMetadata, Message, TopicPartition

_log = logging.getLogger("logstore.client.aio.consumer")

_ERROR, _TOPIC, _PARTITION = Message.error, Message.topic, Message.partition
_STEP_S = 0.2
"""The longest the loop waits between two steps of the consumer (its timers)."""
_ITER_BATCH = 500
"""How many records ``async for`` takes from the client at a time."""
_CLOSE_S = 1.0
"""How long ``close()`` lets the LeaveGroup round trip hold the loop."""

Offsets = dict[tuple[str, int], tuple[int, str | None]]


def _passing(message: Message) -> bool:
    """An error event of the client's connections (a broker down, as aiokafka retries them
    quietly): logged, not raised by ``getmany`` / ``async for`` (``error_cb`` hears them when set;
    ``consume`` / ``poll`` return them, as confluent-kafka's)."""
    error = message.error()
    if error is None or message.topic() is not None or error.code() not in _CLIENT_ERRORS:
        return False
    _log.warning("consumer: %s", error)
    return True


class AIOConsumer:
    """The consumer for asyncio (see the module docstring). Make it inside a running loop; use it
    from that loop only (one coroutine consuming at a time)."""

    def __init__(self, config: dict[str, Any] | None = None, /, **kwargs: Any) -> None:
        given = dict(config or {})
        given.update(kwargs)
        self._auto_store = bool(ClientConfig.parse(given, "consumer")["enable.auto.offset.store"])
        given["enable.auto.offset.store"] = False  # offsets are stored as records are handed out
        self._loop = asyncio.get_running_loop()
        self._consumer = Consumer(given)
        self._request_timeout_s = self._consumer.config.seconds("request.timeout.ms")
        self._backoff_s = self._consumer.config.seconds("retry.backoff.ms")
        self._waker = Waker(self._loop, self._woken)
        self._consumer.on_wake = self._waker.wake
        self._woke: asyncio.Future[None] | None = None
        self._buffer: collections.deque[Message] = collections.deque()  # async for's, taken
        self._closed = False

    @property
    def consumer(self) -> Consumer:
        """The synchronous consumer underneath."""
        return self._consumer

    # -- waking -------------------------------------------------------------------------

    def _woken(self) -> None:
        woke, self._woke = self._woke, None
        if woke is not None and not woke.done():
            woke.set_result(None)

    async def _wait(self, limit: float) -> None:
        """Wait until the client's threads wake the loop, or ``limit`` seconds."""
        if limit <= 0:
            return
        woke = self._woke
        if woke is None or woke.done():
            woke = self._woke = self._loop.create_future()
        handle = self._loop.call_later(limit, self._woken)
        try:
            await woke
        finally:
            handle.cancel()

    # -- records ----------------------------------------------------------------------------

    def _take(self, wanted: int) -> list[Message]:
        """Up to ``wanted`` records, buffered ones first; one step of the client. Never waits."""
        self._check_open()
        out: list[Message] = []
        buffer = self._buffer
        while buffer and len(out) < wanted:
            out.append(buffer.popleft())
        if len(out) < wanted:
            out.extend(self._consumer.consume(min(wanted - len(out), 1_000_000), 0))
        return out

    def _store(self, messages: Iterable[Message]) -> None:
        """Store the offsets of the records handed out (``enable.auto.offset.store``)."""
        if not self._auto_store:
            return
        last: dict[tuple[str, int], int] = {}
        for m in messages:
            if m.error() is None:
                last[(m.topic(), m.partition())] = m.offset()  # type: ignore[index]
        subscriptions = self._consumer._subscriptions
        for key, offset in last.items():
            state = subscriptions.state(key)
            if state is not None:
                state.stored = offset + 1
                state.stored_metadata = None

    async def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        """Up to ``num_messages`` records (and error events, as confluent-kafka's), as soon as at
        least one is there, or none after ``timeout`` seconds (negative or None: no limit)."""
        if not isinstance(num_messages, int) or not 0 < num_messages <= 1_000_000:
            raise ValueError(f"num_messages must be between 1 and 1000000, not {num_messages!r}")
        deadline = None if timeout is None or timeout < 0 else self._loop.time() + timeout
        while True:
            self._woke = None
            out = self._take(num_messages)
            if out:
                self._store(out)
                return out
            left = _STEP_S if deadline is None else min(deadline - self._loop.time(), _STEP_S)
            if left <= 0:
                return out
            await self._wait(left)

    async def poll(self, timeout: float = -1) -> Message | None:
        """One record (or error event), or None after ``timeout`` seconds."""
        out = await self.consume(1, timeout)
        return out[0] if out else None

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[Message]]:
        """aiokafka's ``getmany``: the records there are within ``timeout_ms`` (up to
        ``max_records``, default 10,000), by partition. An error event (e.g. OFFSET_OUT_OF_RANGE
        with ``auto.offset.reset=none``) is raised as KafkaException, after the records taken
        with it were returned (by the next call); the client's connection errors are not raised
        (logged, and given to ``error_cb``), as aiokafka retries them. ``partitions``: only these (the others'
        records stay buffered)."""
        wanted = 10_000 if max_records is None else max_records
        if partitions:
            return await self._getmany_of(partitions, timeout_ms, wanted)
        deadline = self._loop.time() + timeout_ms / 1000
        while True:
            result = self._by_partition(await self.consume(wanted, max(deadline - self._loop.time(), 0.0)))
            if result or self._loop.time() >= deadline:
                return result

    def _by_partition(self, out: list[Message]) -> dict[TopicPartition, list[Message]]:
        if not out:
            return {}
        # The common case in C-level passes: no error event, one partition (the fetcher hands
        # out a partition's records in runs).
        if list(map(_ERROR, out)).count(None) == len(out):
            topics = set(map(_TOPIC, out))
            partitions = set(map(_PARTITION, out))
            if len(topics) == 1 and len(partitions) == 1:
                return {TopicPartition(str(topics.pop()), partitions.pop()): out}
        result: dict[TopicPartition, list[Message]] = {}
        lists: dict[tuple[str, int], list[Message]] = {}
        errors = []
        for m in out:
            if m.error() is not None:
                if not _passing(m):
                    errors.append(m)
                continue
            key = (str(m.topic()), m.partition())
            bucket = lists.get(key)
            if bucket is None:
                bucket = lists[key] = []
                result[TopicPartition(key[0], key[1])] = bucket
            bucket.append(m)
        if errors:
            if not result:
                error = errors[0].error()
                self._buffer.extendleft(reversed(errors[1:]))
                assert error is not None
                raise KafkaException(error)
            self._buffer.extendleft(reversed(errors))  # raised by the next call
        return result

    async def _getmany_of(
        self, partitions: tuple[TopicPartition, ...], timeout_ms: int, wanted: int
    ) -> dict[TopicPartition, list[Message]]:
        keys = {(tp.topic, tp.partition) for tp in partitions}
        others = [tp for tp in self._consumer.assignment() if (tp.topic, tp.partition) not in keys]
        self._consumer.pause(others)
        try:
            kept = [m for m in self._buffer if (m.topic(), m.partition()) not in keys]
            mine = [m for m in self._buffer if (m.topic(), m.partition()) in keys]
            self._buffer = collections.deque(mine)
            try:
                deadline = self._loop.time() + timeout_ms / 1000
                while True:
                    out = self._by_partition(await self.consume(wanted, max(deadline - self._loop.time(), 0.0)))
                    if out or self._loop.time() >= deadline:
                        return out
            finally:
                self._buffer.extend(kept)
        finally:
            self._consumer.resume(others)

    async def getone(self) -> Message:
        """The next record (aiokafka's ``getone``); error events raise KafkaException."""
        return await self.__anext__()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Message:
        while True:
            if self._closed:
                raise StopAsyncIteration
            buffer = self._buffer
            if not buffer:
                self._woke = None
                taken = self._consumer.consume(_ITER_BATCH, 0)
                if not taken:
                    await self._wait(_STEP_S)
                    continue
                buffer.extend(taken)
            message = buffer.popleft()
            error = message.error()
            if error is not None:
                if _passing(message):
                    continue
                raise KafkaException(error)
            state = self._consumer._subscriptions.assignment.get((message.topic(), message.partition()))  # type: ignore[arg-type]
            if state is None:
                continue  # revoked since it was taken
            if self._auto_store:
                state.stored = message.offset() + 1
                state.stored_metadata = None
            return message

    # -- subscription and positions (local: the loop's thread) --------------------------------

    async def subscribe(
        self,
        topics: list[str],
        on_assign: Callable[..., Any] | None = None,
        on_revoke: Callable[..., Any] | None = None,
        on_lost: Callable[..., Any] | None = None,
    ) -> None:
        """Join the group for ``topics``; the assignment comes while consuming. The callbacks are
        called with (this AIOConsumer, partitions) on the loop's thread."""
        self._check_open()
        self._consumer.subscribe(topics, on_assign=self._callback(on_assign),
                                 on_revoke=self._callback(on_revoke), on_lost=self._callback(on_lost))  # fmt: skip

    def _callback(self, callback: Callable[..., Any] | None) -> Callable[..., Any] | None:
        if callback is None:
            return None
        return lambda _consumer, partitions: callback(self, partitions)

    async def unsubscribe(self) -> None:
        self._check_open()
        self._buffer.clear()
        with self._consumer._cluster.deadline(time.monotonic() + _CLOSE_S):
            self._consumer.unsubscribe()

    async def assign(self, partitions: list[TopicPartition]) -> None:
        self._check_open()
        self._consumer.assign(partitions)

    async def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        self._check_open()
        self._consumer.incremental_assign(partitions)

    async def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        self._check_open()
        self._consumer.incremental_unassign(partitions)

    async def unassign(self) -> None:
        self._check_open()
        self._buffer.clear()
        self._consumer.unassign()

    async def assignment(self) -> list[TopicPartition]:
        return self._consumer.assignment()

    async def seek(self, partition: TopicPartition) -> None:
        self._check_open()
        key = (partition.topic, partition.partition)
        self._buffer = collections.deque(m for m in self._buffer if (m.topic(), m.partition()) != key)
        self._consumer.seek(partition)

    async def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """Each partition's next offset to hand out (records buffered by ``async for`` count as
        not handed out yet)."""
        out = self._consumer.position(partitions)
        first: dict[tuple[str, int], int] = {}
        for m in self._buffer:
            if m.error() is None:
                first.setdefault((m.topic(), m.partition()), m.offset())  # type: ignore[arg-type]
        for tp in out:
            offset = first.get((tp.topic, tp.partition))
            if offset is not None:
                tp.offset = offset
        return out

    async def pause(self, partitions: list[TopicPartition]) -> None:
        self._consumer.pause(partitions)

    async def resume(self, partitions: list[TopicPartition]) -> None:
        self._consumer.resume(partitions)

    async def store_offsets(
        self, message: Message | None = None, offsets: list[TopicPartition] | None = None
    ) -> None:
        if self._auto_store:
            raise KafkaException(local("_INVALID_ARG", "store_offsets() needs enable.auto.offset.store=false"))
        self._consumer.store_offsets(message, offsets)

    async def consumer_group_metadata(self) -> ConsumerGroupMetadata:
        return self._consumer.consumer_group_metadata()

    def memberid(self) -> str | None:
        return self._consumer.memberid()

    # -- commits -----------------------------------------------------------------------------

    def _coordinator(self) -> ConsumerCoordinator:
        self._check_open()
        coordinator = self._consumer._coordinator
        if coordinator is None:
            raise KafkaException(local("_INVALID_ARG", "commit() needs group.id in the config"))
        return coordinator

    async def commit(
        self, message: Message | None = None, offsets: list[TopicPartition] | None = None,
        asynchronous: bool = False,
    ) -> list[TopicPartition] | None:  # fmt: skip
        """Commit ``message.offset() + 1``, or ``offsets``, or every partition's stored offset,
        and wait for the answer: the partitions (each with ``.error``), KafkaException if any
        failed. Retriable errors (the coordinator moving or loading) are retried up to
        ``request.timeout.ms``. ``asynchronous=True``: send it and return None (``on_commit``
        reports). Cancelled, the request in flight completes (see the module docstring)."""
        coordinator = self._coordinator()
        if message is not None and offsets is not None:
            raise KafkaException(local("_INVALID_ARG", "commit() takes a message or offsets, not both"))
        wanted: Offsets
        if message is not None:
            if message.error() is not None or message.topic() is None:
                raise KafkaException(local("_INVALID_ARG", "commit(message): the message is an error event"))
            wanted = {(str(message.topic()), message.partition()): (message.offset() + 1, None)}
        elif offsets is not None:
            wanted = {(tp.topic, tp.partition): (tp.offset, tp.metadata) for tp in offsets}
        else:
            wanted = self._consumer._subscriptions.stored_offsets()
            if not wanted:
                if asynchronous:
                    return None
                raise KafkaException(local("_NO_OFFSET", "commit(): no offset stored for any partition"))
        if asynchronous:
            with self._consumer._cluster.deadline(time.monotonic()):  # FindCoordinator: cut short
                self._consumer.commit(offsets=[TopicPartition(t, p, o, m) for (t, p), (o, m) in wanted.items()],
                                      asynchronous=True)  # fmt: skip
            self._waker.wake()
            return None
        deadline = time.monotonic() + self._request_timeout_s
        while True:
            with self._consumer._cluster.deadline(time.monotonic()):  # FindCoordinator: cut short
                sent = coordinator.commit_async(wanted)
            answer = bridge(sent, self._loop)
            answer.add_done_callback(lambda done: self._commit_answered(wanted, done))
            left = deadline - time.monotonic()
            try:
                async with asyncio.timeout(max(left, 0.001)):
                    result = await asyncio.shield(answer)
            except TimeoutError:
                raise KafkaException(
                    local("_TIMED_OUT", f"OffsetCommit: no answer within {self._request_timeout_s:.1f} s")
                ) from None
            retry = [tp for tp in result
                     if tp.error is not None and (tp.error.code() in _RETRY or tp.error.code() in _NOT_COORDINATOR)]  # fmt: skip
            if not retry or time.monotonic() + self._backoff_s >= deadline:
                break
            await asyncio.sleep(self._backoff_s)
        failed = [tp.error for tp in result if tp.error is not None]
        if failed:
            raise KafkaException(failed[0])
        return result

    def _commit_answered(self, wanted: Offsets, done: asyncio.Future[list[TopicPartition]]) -> None:
        """Record a commit's outcome in the consumer (on the loop, whether or not anyone waits)."""
        if done.cancelled() or done.exception() is not None:
            return
        result = done.result()
        self._consumer._committed(wanted, result)
        on_commit = self._consumer._on_commit
        if on_commit is not None:
            errors = [tp.error for tp in result if tp.error is not None]
            on_commit(errors[0] if errors else None, result)

    async def committed(self, partitions: list[TopicPartition], timeout: float | None = None) -> list[TopicPartition]:
        """The group's committed offsets of ``partitions`` (OFFSET_INVALID where none), within
        ``timeout`` seconds (default ``request.timeout.ms``); retried while the coordinator moves."""
        coordinator = self._coordinator()
        keys = [(tp.topic, tp.partition) for tp in partitions]
        limit = self._request_timeout_s if timeout is None or timeout < 0 else timeout
        deadline = time.monotonic() + limit
        while True:
            try:
                with self._consumer._cluster.deadline(time.monotonic()):
                    sent = coordinator.offset_fetch_async(keys)
                async with asyncio.timeout(max(deadline - time.monotonic(), 0.001)):
                    await bridge(sent, self._loop)
                results = coordinator.offset_fetch_result(sent)
                break
            except TimeoutError:
                raise KafkaException(local("_TIMED_OUT", f"OffsetFetch: no answer within {limit:.1f} s")) from None
            except KafkaException as e:
                code = e.error.code()
                if code in _NOT_COORDINATOR or e.error.retriable():
                    coordinator.coordinator_dead(f"OffsetFetch: {e.error.str()}")
                if not (code in _RETRY or code in _NOT_COORDINATOR or e.error.retriable()) or \
                        time.monotonic() + self._backoff_s >= deadline:  # fmt: skip
                    raise
                await asyncio.sleep(self._backoff_s)
        out = []
        for key in keys:
            offset, metadata, code = results.get(key, (-1, None, 0))
            tp = TopicPartition(key[0], key[1], offset if offset >= 0 else OFFSET_INVALID, metadata or None)
            if code:
                tp.error = KafkaError(code, f"committed({key[0]} [{key[1]}])")
            out.append(tp)
        return out

    # -- the rest -------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("Consumer closed")

    async def close(self) -> None:
        """Stop: a final commit of the offsets handed out (``enable.auto.commit``), awaited;
        on_revoke; LeaveGroup (holding the loop at most about 1 s). Records taken and not
        handed out are dropped (they were never stored: the group reads them again)."""
        if self._closed:
            return
        consumer = self._consumer
        self._buffer.clear()
        if consumer._auto_commit and consumer._coordinator is not None:
            wanted = {
                key: (state.stored, state.stored_metadata)
                for key, state in consumer._subscriptions.assignment.items()
                if state.stored is not None and state.stored >= 0 and state.stored != state.committed
            }
            if wanted:
                with contextlib.suppress(KafkaException):  # as the sync close: best effort
                    await self.commit(offsets=[TopicPartition(t, p, o, m) for (t, p), (o, m) in wanted.items()])
        self._closed = True
        self._waker.close()
        with consumer._cluster.deadline(time.monotonic() + _CLOSE_S):
            consumer.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<AIOConsumer {self._consumer.config['client.id']}>"
