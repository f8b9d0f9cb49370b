"""Fetching records for the consumer: Kafka's ``Fetcher`` (and the ListOffsets half of its ``OffsetFetcher``).

:class:`Fetcher` keeps at most one Fetch request in flight per broker, for
the partitions that broker leads which are assigned, not paused, have a known
position, and hold no unread response. Each partition is double-buffered: the
messages the application is reading, and the next response, requested as soon
as the current one is decoded (so it arrives while the application works
through the current one). A response is stored raw by the connection's
thread, which then sends the next request for any partition of that broker
that became eligible; the application's thread decodes it when it has read
the previous one, with :func:`logstore.records.fetch.decode_fetch`: batch
structure and CRC-32C checked in C, always (whatever ``check.crcs`` says), and
the :class:`~logstore.client.types.Message` objects built in C, so there is no
per-record Python at all. ``collect`` hands out slices of those lists.
(read_committed responses that list aborted transactions take a Python path
that leaves the aborted batches out.)

Per partition, the buffered records cover ``[position, fetched_to)``; a seek
or reset drops them and bumps the partition's epoch, so that a response to a
request sent before it is ignored when it arrives.

Errors of a partition are handled where Kafka's consumer handles them:
OFFSET_OUT_OF_RANGE resets the position by ``auto.offset.reset`` (``none``:
an error message, and the partition waits for a seek); NOT_LEADER /
UNKNOWN_TOPIC and their kin ask for a metadata refresh; a corrupt batch is an
error message, and the partition waits for a seek. Reaching the high
watermark gives one ``_PARTITION_EOF`` message when ``enable.partition.eof``.

Threads: the application's thread calls everything but ``_on_fetch``, which
runs on a connection's thread; both take ``SubscriptionState.lock`` around
the buffers' shared fields (``inflight``, ``completed``, ``fetched_to``) and
never hold it while decoding or sending.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any

from logstore.client.cluster import Cluster
from logstore.client.config import ClientConfig
from logstore.client.errors import KafkaError, KafkaException, local
from logstore.client.subscription import OffsetReset, SubscriptionState, TopicPartitionKey
from logstore.client.types import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Message
from logstore.errors import LogstoreError
from logstore.records import parse_batches
from logstore.records.fetch import CorruptFetchError, decode_fetch

FETCH = 1
LIST_OFFSETS = 2
_LOG_APPEND_TIME = 0x08
_TRANSACTIONAL = 0x10
_CONTROL = 0x20

# Partition errors after which the leader must be looked up again (Kafka's Fetcher does the same).
_REFRESH_ERRORS = frozenset(
    {
        KafkaError.NOT_LEADER_OR_FOLLOWER,  # type: ignore[attr-defined]
        KafkaError.UNKNOWN_TOPIC_OR_PARTITION,  # type: ignore[attr-defined]
        KafkaError.LEADER_NOT_AVAILABLE,  # type: ignore[attr-defined]
        KafkaError.REPLICA_NOT_AVAILABLE,  # type: ignore[attr-defined]
        KafkaError.KAFKA_STORAGE_ERROR,  # type: ignore[attr-defined]
        KafkaError.FENCED_LEADER_EPOCH,  # type: ignore[attr-defined]
        KafkaError.UNKNOWN_LEADER_EPOCH,  # type: ignore[attr-defined]
        KafkaError.UNKNOWN_TOPIC_ID,  # type: ignore[attr-defined]
        KafkaError.OFFSET_NOT_AVAILABLE,  # type: ignore[attr-defined]
        KafkaError.NOT_COORDINATOR,  # type: ignore[attr-defined]
    }
)
_OUT_OF_RANGE = KafkaError.OFFSET_OUT_OF_RANGE  # type: ignore[attr-defined]
_EOF = KafkaError._PARTITION_EOF  # type: ignore[attr-defined]


def error_message(topic: str | None, partition: int, offset: int, error: KafkaError) -> Message:
    """An event for the application: a Message whose ``error()`` is set, as confluent-kafka delivers them."""
    return Message(topic, partition, offset, None, None, error=error)


class _Buffer:
    """The fetch side of one partition: what is in flight, what arrived, what the application reads."""

    __slots__ = (
        "at",
        "completed",
        "epoch",
        "fails",
        "fetched_to",
        "inflight",
        "ready",
        "ready_end",
        "trailer",
    )

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.fetched_to: int | None = None  # the next fetch offset (None: not known yet)
        self.inflight = False
        self.completed: tuple[int, Any] | None = None  # (fetch offset, the response's partition data)
        self.ready: list[Message] = []
        self.at = 0
        self.ready_end = 0  # the offset after the last batch ``ready`` came from
        self.trailer: Message | None = (
            None  # an event once ``ready`` is read: _PARTITION_EOF, a corrupt batch
        )
        self.fails = False  # the trailer stops the partition (until a seek)


class Fetcher:
    """Fetch requests, their responses, and the records ready for the application (see the module)."""

    def __init__(
        self,
        cluster: Cluster,
        subscriptions: SubscriptionState,
        config: ClientConfig,
        wake: Callable[[], None],
    ) -> None:
        self.cluster = cluster
        self.subscriptions = subscriptions
        self.lock = subscriptions.lock
        self.wake = wake
        self.max_wait_ms = int(config["fetch.max.wait.ms"])
        self.min_bytes = int(config["fetch.min.bytes"])
        self.max_bytes = int(config["fetch.max.bytes"])
        self.partition_max_bytes = int(config["max.partition.fetch.bytes"])
        self.read_committed = config["isolation.level"] == "read_committed"
        self.partition_eof = bool(config["enable.partition.eof"])
        self.rack = config["client.rack"] or ""
        self.backoff_s = config.seconds("retry.backoff.ms")
        self.request_timeout_s = config.seconds("request.timeout.ms")
        self._buffers: dict[TopicPartitionKey, _Buffer] = {}
        self._epochs = 0
        self._has_data: dict[
            TopicPartitionKey, None
        ] = {}  # ordered set: partitions with records or a response
        self._inflight_nodes: set[int] = set()
        self._node_backoff: dict[int, float] = {}
        self.errors: collections.deque[Message] = collections.deque()
        self.need_metadata = False
        self.transport_errors: collections.deque[KafkaError] = collections.deque()
        self._resets: list[tuple[Future[Any], dict[TopicPartitionKey, OffsetReset]]] = []
        self._resetting: set[TopicPartitionKey] = set()
        self._reset_retry_at = 0.0

    # -- positions -----------------------------------------------------------

    def _new_buffer(self, key: TopicPartitionKey) -> _Buffer:
        self._epochs += 1
        buffer = self._buffers[key] = _Buffer(self._epochs)
        self._has_data.pop(key, None)
        return buffer

    def seek(self, key: TopicPartitionKey, offset: int) -> None:
        """Read ``key`` from ``offset`` next: buffered records and any response in flight are dropped."""
        with self.lock:
            state = self.subscriptions.state(key)
            assert state is not None, key
            state.seek(offset)
            self._new_buffer(key).fetched_to = offset

    def reset(self, key: TopicPartitionKey, reset: OffsetReset) -> None:
        """Look the position of ``key`` up (ListOffsets) before fetching it again."""
        with self.lock:
            state = self.subscriptions.state(key)
            assert state is not None, key
            state.reset_to(reset)
            self._new_buffer(key)

    def invalidate(self, key: TopicPartitionKey) -> None:
        """Drop what is buffered for ``key`` (its position is about to be looked up or has failed)."""
        with self.lock:
            self._new_buffer(key)

    def forget(self, keys: Iterable[TopicPartitionKey]) -> None:
        """The partitions are no longer assigned: drop their buffers (a response in flight is ignored)."""
        with self.lock:
            for key in keys:
                self._buffers.pop(key, None)
                self._has_data.pop(key, None)
                self._resetting.discard(key)

    def buffered(self, key: TopicPartitionKey) -> int:
        """Records decoded and not yet handed out for ``key``."""
        buffer = self._buffers.get(key)
        return 0 if buffer is None else len(buffer.ready) - buffer.at

    # -- sending -------------------------------------------------------------

    def send_fetches(self) -> int:
        """Send a Fetch to each broker with none in flight that leads an eligible partition; returns how many."""
        now = time.monotonic()
        requests: dict[int, list[tuple[TopicPartitionKey, int, int]]] = {}
        assignment = self.subscriptions.assignment
        cluster = self.cluster
        with self.lock:
            for key, buffer in self._buffers.items():
                if buffer.inflight or buffer.completed is not None or buffer.fetched_to is None:
                    continue
                state = assignment.get(key)
                if state is None or not state.fetchable:
                    continue
                node = cluster.leader(key[0], key[1])
                if node < 0:
                    self.need_metadata = True
                    continue
                if node in self._inflight_nodes or self._node_backoff.get(node, 0.0) > now:
                    continue
                requests.setdefault(node, []).append((key, buffer.fetched_to, buffer.epoch))
            for node, parts in requests.items():
                self._inflight_nodes.add(node)
                for key, _, _ in parts:
                    self._buffers[key].inflight = True
        for node, parts in requests.items():
            future = cluster.send(node, FETCH, self._request(parts))
            future.add_done_callback(lambda f, node=node, parts=parts: self._on_fetch(node, parts, f))  # type: ignore[misc]
        return len(requests)

    def _request(self, parts: list[tuple[TopicPartitionKey, int, int]]) -> dict[str, Any]:
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), offset, _ in parts:
            topics.setdefault(topic, []).append(
                {
                    "partition": partition,
                    "current_leader_epoch": -1,
                    "fetch_offset": offset,
                    "last_fetched_epoch": -1,
                    "log_start_offset": -1,
                    "partition_max_bytes": self.partition_max_bytes,
                }
            )
        return {
            "cluster_id": None,
            "replica_id": -1,
            "max_wait": self.max_wait_ms,
            "min_bytes": self.min_bytes,
            "max_bytes": self.max_bytes,
            "isolation_level": 1 if self.read_committed else 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [],
            "rack_id": self.rack,
        }

    def _on_fetch(
        self, node: int, parts: list[tuple[TopicPartitionKey, int, int]], future: Future[Any]
    ) -> None:
        """A connection's thread: store each partition's answer; send on for what became eligible."""
        failure: KafkaError | None = None
        response: Any = None
        try:
            response = future.result()
        except KafkaException as e:
            failure = e.error
        except Exception as e:  # a future cancelled or failed in an unexpected way
            failure = local("_FAIL", f"fetch from broker {node}: {e}")
        if failure is None and response.error_code:
            failure = KafkaError(int(response.error_code), f"fetch from broker {node}")
        answers: dict[TopicPartitionKey, Any] = {}
        if failure is None:
            for topic in response.responses:
                for p in topic.partitions:
                    answers[(topic.topic, int(p.partition_index))] = p
        with self.lock:
            self._inflight_nodes.discard(node)
            for key, offset, epoch in parts:
                buffer = self._buffers.get(key)
                if buffer is None or buffer.epoch != epoch:
                    continue  # sought, reset or revoked since the request left
                buffer.inflight = False
                answer = answers.get(key)
                if answer is not None:
                    buffer.completed = (offset, answer)
                    self._has_data[key] = None
            if failure is not None:
                self._node_backoff[node] = time.monotonic() + self.backoff_s
                self.need_metadata = True
                self.transport_errors.append(failure)
        self.wake()
        if failure is None:
            self.send_fetches()

    # -- reading -------------------------------------------------------------

    def collect(self, wanted: int, out: list[Message], auto_store: bool) -> None:
        """Move up to ``wanted`` messages (errors first) into ``out``, advancing positions.

        Partitions are served in turn (the one served last goes to the back), a slice of a decoded
        response at a time: O(partitions with data + messages moved / slice).
        """
        errors = self.errors
        while errors and wanted > 0:
            out.append(errors.popleft())
            wanted -= 1
        if wanted <= 0 or not self._has_data:
            return
        assignment = self.subscriptions.assignment
        sent_more = False
        for key in list(self._has_data):
            if wanted <= 0:
                break
            state = assignment.get(key)
            buffer = self._buffers.get(key)
            if state is None or buffer is None:
                self._has_data.pop(key, None)
                continue
            if state.paused or state.position is None:
                continue
            while wanted > 0:
                ready = buffer.ready
                if buffer.at >= len(ready):
                    trailer = buffer.trailer
                    if trailer is not None:
                        out.append(trailer)
                        wanted -= 1
                        buffer.trailer = None
                        if buffer.fails:
                            state.fail(trailer.error() or local("_BAD_MSG"))
                            break
                        continue
                    with self.lock:
                        completed = buffer.completed
                        buffer.completed = None
                    if completed is None:
                        with self.lock:
                            if buffer.completed is None:
                                self._has_data.pop(key, None)
                        break
                    self._decode(key, buffer, completed)
                    sent_more = True
                    if state.position is None:  # an error reset or failed the partition
                        break
                    continue
                at = buffer.at
                taken = ready[at : at + wanted]
                out += taken
                wanted -= len(taken)
                buffer.at = at = at + len(taken)
                if at >= len(ready):
                    buffer.ready = []
                    buffer.at = 0
                    state.position = buffer.ready_end
                else:
                    state.position = taken[-1].offset() + 1
                if auto_store:
                    state.stored = state.position
                    state.stored_metadata = None
            else:
                # served: to the back of the line, so the next call starts with another partition
                if key in self._has_data:
                    del self._has_data[key]
                    self._has_data[key] = None
        if sent_more:
            self.send_fetches()

    def _decode(self, key: TopicPartitionKey, buffer: _Buffer, completed: tuple[int, Any]) -> None:
        """Turn one response into ``buffer.ready`` (application thread); ``buffer`` was fully read."""
        offset, answer = completed
        state = self.subscriptions.state(key)
        if state is None or state.position != offset:
            buffer.fetched_to = None if state is None else state.position
            return
        code = int(answer.error_code)
        if code:
            self._partition_error(key, buffer, offset, code)
            return
        state.high_watermark = int(answer.high_watermark)
        state.log_start_offset = int(answer.log_start_offset)
        state.last_stable_offset = int(answer.last_stable_offset)
        records = answer.records
        messages: list[Message] = []
        end = offset
        if records:
            try:
                aborted = self._aborted(answer) if self.read_committed else None
                if aborted is None:
                    messages, end = decode_fetch(records, key[0], key[1], offset)
                else:
                    end = self._committed_messages(records, key, offset, aborted, messages)
            except CorruptFetchError as e:
                self._corrupt(key, buffer, e.messages, e.next_offset, str(e))
                return
            except LogstoreError as e:
                self._corrupt(
                    key, buffer, messages, messages[-1].offset() + 1 if messages else offset, str(e)
                )
                return
            if end == offset and len(records) >= self.partition_max_bytes:
                error = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE,  # type: ignore[attr-defined]
                                   f"{key[0]} [{key[1]}]: the batch at offset {offset} is larger than "
                                   f"max.partition.fetch.bytes={self.partition_max_bytes}")  # fmt: skip
                self._corrupt(key, buffer, [], offset, "", error)
                return
        if messages:
            buffer.ready = messages
            buffer.at = 0
            state.eof_sent = False
            if self.partition_eof and end >= state.high_watermark:
                state.eof_sent = (
                    True  # at the end already: say so right after the last message, as librdkafka
                )
                buffer.trailer, buffer.fails = self._eof(key, end), False
        elif end > offset:
            state.position = end  # only control or aborted records: step over them
        elif self.partition_eof and not state.eof_sent and offset >= state.high_watermark:
            state.eof_sent = True
            self.errors.append(self._eof(key, offset))
        buffer.ready_end = end
        with self.lock:
            buffer.fetched_to = end

    def _corrupt(
        self, key: TopicPartitionKey, buffer: _Buffer, messages: list[Message], next_offset: int, why: str,
        error: KafkaError | None = None,
    ) -> None:  # fmt: skip
        """A bad batch: the messages before it go out, then the error; the partition waits for a seek."""
        if error is None:
            error = local("_BAD_MSG", f"{key[0]} [{key[1]}] at offset {next_offset}: {why}")
        buffer.ready, buffer.at, buffer.ready_end = messages, 0, next_offset
        buffer.trailer, buffer.fails = error_message(key[0], key[1], next_offset, error), True
        with self.lock:
            buffer.fetched_to = None

    @staticmethod
    def _eof(key: TopicPartitionKey, offset: int) -> Message:
        reason = f"{key[0]} [{key[1]}] reached end of partition at offset {offset}"
        return error_message(key[0], key[1], offset, local("_PARTITION_EOF", reason))

    @staticmethod
    def _committed_messages(
        records: Any, key: TopicPartitionKey, offset: int, aborted: _AbortedTransactions, out: list[Message]
    ) -> int:
        """read_committed with aborted transactions listed: the batches one by one, aborted ones left out.

        O(records) in Python (one Message per record); responses without aborted transactions take
        ``decode_fetch``, in C.
        """
        end = offset
        topic, partition = key
        for batch in parse_batches(records, allow_partial=True):
            after = batch.last_offset + 1
            if after <= offset:
                continue
            end = after
            attributes = batch.attributes
            if attributes & _CONTROL:
                aborted.control(batch)
                continue
            if attributes & _TRANSACTIONAL and aborted.skips(batch):
                continue
            kind = TIMESTAMP_LOG_APPEND_TIME if attributes & _LOG_APPEND_TIME else TIMESTAMP_CREATE_TIME
            out += [
                Message(
                    topic,
                    partition,
                    r.offset,
                    r.key,
                    r.value,
                    (kind, r.timestamp if r.timestamp is not None else -1),
                    list(r.headers) or None,
                )
                for r in batch.records
                if r.offset >= offset
            ]
        return end

    @staticmethod
    def _aborted(answer: Any) -> _AbortedTransactions | None:
        listed = getattr(answer, "aborted_transactions", None)
        return _AbortedTransactions(listed) if listed else None

    def _partition_error(self, key: TopicPartitionKey, buffer: _Buffer, offset: int, code: int) -> None:
        state = self.subscriptions.state(key)
        assert state is not None
        if code == _OUT_OF_RANGE:
            error = self.subscriptions.out_of_range(key, state, offset)
            with self.lock:
                self._new_buffer(key)
            if error is not None:
                self.errors.append(error_message(key[0], key[1], offset, error))
            return
        if code in _REFRESH_ERRORS:
            self.need_metadata = True
        else:
            self.errors.append(error_message(key[0], key[1], offset,
                                             KafkaError(code, f"fetch {key[0]} [{key[1]}] at offset {offset}")))  # fmt: skip
        with self.lock:
            buffer.fetched_to = offset
            node = self.cluster.leader(key[0], key[1])
            self._node_backoff[node] = time.monotonic() + self.backoff_s

    # -- ListOffsets -----------------------------------------------------------

    def list_offsets_async(
        self, timestamps: dict[TopicPartitionKey, int]
    ) -> list[tuple[Future[Any], list[TopicPartitionKey]]]:
        """ListOffsets for each partition's timestamp (-2 earliest, -1 latest), one request per leader."""
        by_node: dict[int, dict[TopicPartitionKey, int]] = {}
        unknown = [k for k in timestamps if self.cluster.leader(*k) < 0]
        if unknown:
            self.cluster.refresh({t for t, _ in unknown}, auto_create=False)
        out = []
        for key, ts in timestamps.items():
            node = self.cluster.leader(*key)
            if node < 0:
                failed: Future[Any] = Future()
                failed.set_exception(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PARTITION,  # type: ignore[attr-defined]
                                                               f"{key[0]} [{key[1]}]: no leader known")))  # fmt: skip
                out.append((failed, [key]))
                continue
            by_node.setdefault(node, {})[key] = ts
        for node, wanted in by_node.items():
            topics: dict[str, list[dict[str, Any]]] = {}
            for (topic, partition), ts in wanted.items():
                topics.setdefault(topic, []).append(
                    {"partition_index": partition, "current_leader_epoch": -1, "timestamp": ts}
                )
            fields = {
                "replica_id": -1,
                "isolation_level": 1 if self.read_committed else 0,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            }
            future = self.cluster.send(node, LIST_OFFSETS, fields)
            future.add_done_callback(lambda _f: self.wake())
            out.append((future, list(wanted)))
        return out

    @staticmethod
    def list_offsets_result(
        future: Future[Any], keys: list[TopicPartitionKey]
    ) -> dict[TopicPartitionKey, tuple[int, int, int]]:
        """Each partition's (error code, offset, timestamp) from a settled ListOffsets future."""
        try:
            response = future.result(0)
        except KafkaException as e:
            return {k: (e.error.code(), -1, -1) for k in keys}
        got = {
            (t.name, int(p.partition_index)): (int(p.error_code), int(p.offset), int(p.timestamp))
            for t in response.topics
            for p in t.partitions
        }
        unknown = (KafkaError.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)  # type: ignore[attr-defined]
        return {k: got.get(k, unknown) for k in keys}

    def list_offsets(
        self, timestamps: dict[TopicPartitionKey, int], timeout: float
    ) -> dict[TopicPartitionKey, tuple[int, int, int]]:
        """ListOffsets and wait (at most ``timeout`` seconds; KafkaException ``_TIMED_OUT`` past it)."""
        return self.await_offsets(
            self.list_offsets_async(timestamps), time.monotonic() + timeout, "ListOffsets"
        )

    def await_offsets(
        self, sent: list[tuple[Future[Any], list[TopicPartitionKey]]], deadline: float, what: str
    ) -> dict[TopicPartitionKey, tuple[int, int, int]]:
        """The answers to requests of :meth:`list_offsets_async`, waited for until ``deadline``
        (monotonic seconds; KafkaException ``_TIMED_OUT`` past it). O(partitions)."""
        results: dict[TopicPartitionKey, tuple[int, int, int]] = {}
        for future, keys in sent:
            try:
                future.result(max(deadline - time.monotonic(), 0.0))
            except TimeoutError:
                raise KafkaException(local("_TIMED_OUT", f"{what}: no answer in time")) from None
            except KafkaException:
                pass  # settled with an error: list_offsets_result reports it per partition
            results.update(self.list_offsets_result(future, keys))
        return results

    def reset_positions(self) -> None:
        """Send ListOffsets for partitions awaiting a reset; apply the answers that have arrived."""
        if self._resets:
            pending = []
            for future, wanted in self._resets:
                if not future.done():
                    pending.append((future, wanted))
                    continue
                self._apply_resets(self.list_offsets_result(future, list(wanted)), wanted)
            self._resets = pending
        wanted_now = {
            k: r for k, r in self.subscriptions.awaiting_reset().items() if k not in self._resetting
        }
        if not wanted_now or time.monotonic() < self._reset_retry_at:
            return
        try:
            sent = self.list_offsets_async({k: r.timestamp for k, r in wanted_now.items()})
        except KafkaException as e:
            self.transport_errors.append(e.error)
            self._reset_retry_at = time.monotonic() + self.backoff_s
            return
        for future, keys in sent:
            self._resets.append((future, {k: wanted_now[k] for k in keys}))
            self._resetting.update(keys)

    def _apply_resets(self, results: dict[TopicPartitionKey, tuple[int, int, int]],
                      wanted: dict[TopicPartitionKey, OffsetReset]) -> None:  # fmt: skip
        for key, (code, offset, _) in results.items():
            self._resetting.discard(key)
            state = self.subscriptions.state(key)
            if state is None or state.reset != wanted[key]:
                continue  # revoked, or sought meanwhile
            if code == 0 and offset >= 0:
                self.seek(key, offset)
            elif code == 0 or code in _REFRESH_ERRORS or KafkaError(code).retriable():
                self.need_metadata = self.need_metadata or code != 0
                self._reset_retry_at = time.monotonic() + self.backoff_s
            else:
                error = KafkaError(code, f"{key[0]} [{key[1]}]: cannot reset the offset")
                state.fail(error)
                self.errors.append(error_message(key[0], key[1], -1, error))


class _AbortedTransactions:
    """read_committed: the aborted transactions of a fetch response, consumed in offset order (Kafka's)."""

    def __init__(self, listed: Any) -> None:
        self.pending = sorted(((int(a.first_offset), int(a.producer_id)) for a in listed), reverse=True)
        self.open: set[int] = set()

    def _up_to(self, offset: int) -> None:
        """Open the aborted transactions that start at or before ``offset`` (Kafka's
        ``consumeAbortedTransactionsUpTo``): for every batch, markers included."""
        while self.pending and self.pending[-1][0] <= offset:
            self.open.add(self.pending.pop()[1])

    def skips(self, batch: Any) -> bool:
        self._up_to(batch.last_offset)
        return bool(batch.producer_id in self.open)

    def control(self, batch: Any) -> None:
        # First open what starts before the marker: a response may begin after an aborted
        # transaction's records and before its marker, which must then close it, or the entry
        # would stay pending and hide the producer's next (committed) transaction.
        self._up_to(batch.last_offset)
        records = batch.records
        key = records[0].key if records else None
        if key is not None and len(key) >= 4 and key[2:4] == b"\x00\x00":  # an ABORT marker
            self.open.discard(batch.producer_id)


__all__ = ["Fetcher", "error_message"]
