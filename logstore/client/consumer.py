"""The consumer, shaped like ``confluent_kafka.Consumer``: Kafka's ``KafkaConsumer`` over this client's core.

>>> consumer = Consumer({"bootstrap.servers": "127.0.0.1:9092", "group.id": "g"})  # doctest: +SKIP
>>> consumer.subscribe(["orders"])                                                 # doctest: +SKIP
>>> for message in consumer.consume(10_000, timeout=1.0):                           # doctest: +SKIP
...     handle(message.value())

A consumer reads partitions it is *assigned* (``assign()``: no group) or that
its group gives it (``subscribe()``: the classic group protocol through
:class:`~logstore.client.coordinator.ConsumerCoordinator`). Everything the
application sees happens on its own thread inside ``poll()`` / ``consume()``,
as in confluent-kafka: the rebalance callbacks ``on_assign`` / ``on_revoke``
/ ``on_lost``, ``on_commit``, ``error_cb``, and errors delivered as messages
whose ``error()`` is set (``_PARTITION_EOF``, ``_NO_OFFSET``,
OFFSET_OUT_OF_RANGE with ``auto.offset.reset=none``, ``_MAX_POLL_EXCEEDED``,
a group's fatal error).

Each ``poll``/``consume`` runs one step of every component before it waits:
the coordinator (join, sync, rebalance callbacks), auto-commit every
``auto.commit.interval.ms`` of the positions of messages already handed out,
position lookups (OffsetFetch of committed offsets, then ListOffsets by
``auto.offset.reset``), metadata upkeep, and the :class:`Fetcher`'s requests;
then it hands out messages the fetcher has decoded, waiting (on an event the
network threads set) until ``num_messages`` are there or the timeout passes,
as librdkafka's ``consume`` does.

Threads: the application's; one reader per broker connection (settling
responses, sending the next Fetch); the heartbeat thread. Callbacks of the
application never run on the last two.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any

from logstore.client.admin.metadata import ClusterMetadata, cluster_metadata
from logstore.client.cluster import Cluster
from logstore.client.config import ClientConfig
from logstore.client.coordinator import ConsumerCoordinator, MemberState
from logstore.client.errors import KafkaError, KafkaException, local
from logstore.client.fetcher import Fetcher, error_message
from logstore.client.subscription import OffsetReset, SubscriptionState, TopicPartitionKey
from logstore.client.types import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    OFFSET_STORED,
    ConsumerGroupMetadata,
    Message,
    TopicPartition,
)

_log = logging.getLogger("logstore.client.consumer")

RebalanceCallback = Callable[[Any, list[TopicPartition]], None]
_WAIT_STEP_S = 0.2  # the longest a consume() sleeps between steps (timers: backoffs, auto-commit)
_REPORT_EVERY_S = 1.0  # the most often one kind of connection error reaches error_cb / poll
_FAST_METADATA_S = 1.0  # how soon to look again for a subscribed topic that does not exist yet
# Errors of the client's connections rather than of a partition or the group: error_cb's.
_CLIENT_ERRORS = frozenset(
    getattr(KafkaError, name)
    for name in ("_TRANSPORT", "_ALL_BROKERS_DOWN", "_TIMED_OUT", "_DESTROY", "_BAD_MSG")
)


class SerializationContext:
    """What a ``key.deserializer`` / ``value.deserializer`` is called with, as confluent-kafka's."""

    __slots__ = ("field", "headers", "topic")

    def __init__(self, topic: str | None, field: str, headers: Any = None) -> None:
        self.topic = topic
        self.field = field
        self.headers = headers


def _key(tp: TopicPartition) -> TopicPartitionKey:
    if not isinstance(tp, TopicPartition):
        raise TypeError(f"expected a TopicPartition, not {type(tp).__name__}")
    if tp.partition < 0:
        raise KafkaException(local("_INVALID_ARG", f"{tp.topic}: a partition number is required"))
    return (tp.topic, tp.partition)


class Consumer:
    """A Kafka consumer with confluent-kafka's methods (see the module's docstring).

    Invariants: subscribe and assign are exclusive (``_STATE`` otherwise); the callbacks run only
    on the thread calling poll/consume/close; a committed offset is the next offset to read.
    """

    def __init__(self, config: dict[str, Any] | None = None, /, **kwargs: Any) -> None:
        given = dict(config or {})
        given.update(kwargs)
        self.config = ClientConfig.parse(given, "consumer")
        config_ = self.config
        self._group_id: str | None = config_["group.id"] or None
        self._auto_commit = bool(config_["enable.auto.commit"]) and self._group_id is not None
        self._auto_store = bool(config_["enable.auto.offset.store"])
        self._commit_interval_s = config_.seconds("auto.commit.interval.ms")
        self._request_timeout_s = config_.seconds("request.timeout.ms")
        self._backoff_s = config_.seconds("retry.backoff.ms")
        self._auto_create = (
            bool(config_["allow.auto.create.topics"]) and "allow.auto.create.topics" in config_.given
        )
        self._refresh_s = config_.seconds("topic.metadata.refresh.interval.ms")
        self._on_commit: Callable[..., Any] | None = config_["on_commit"]
        self._error_cb: Callable[..., Any] | None = config_["error_cb"]
        self._key_deserializer: Callable[..., Any] | None = config_["key.deserializer"]
        self._value_deserializer: Callable[..., Any] | None = config_["value.deserializer"]
        self._wake = threading.Event()
        # Called (any thread) whenever the consumer's wait should end: records landed, a
        # response came, a rebalance moved on. logstore.client.aio wakes its event loop with it.
        self.on_wake: Callable[[], Any] | None = None
        self._cluster = Cluster(config_)
        self._subscriptions = SubscriptionState(config_["auto.offset.reset"])
        self._fetcher = Fetcher(self._cluster, self._subscriptions, config_, self._wake_up)
        self._coordinator: ConsumerCoordinator | None = None
        if self._group_id is not None:
            self._coordinator = ConsumerCoordinator(
                self._cluster, config_, self._subscriptions, self, self._wake_up
            )
        self._on_assign: RebalanceCallback | None = None
        self._on_revoke: RebalanceCallback | None = None
        self._on_lost: RebalanceCallback | None = None
        self._in_rebalance: str | None = None  # "assign" / "revoke" while a rebalance callback runs
        self._commit_results: collections.deque[tuple[dict[TopicPartitionKey, tuple[int, str | None]], Future[list[TopicPartition]]]] = collections.deque()  # fmt: skip
        self._next_auto_commit = time.monotonic() + self._commit_interval_s
        self._offset_fetch: tuple[Future[Any], list[TopicPartitionKey]] | None = None
        self._offset_fetch_retry_at = 0.0
        self._metadata_retry_at = 0.0
        self._subscription_refresh_at = 0.0
        self._reported: dict[int, float] = {}  # error code -> when last reported
        self._closed = False

    def _wake_up(self) -> None:
        """End the wait of ``consume()`` (the network and heartbeat threads call it)."""
        self._wake.set()
        hook = self.on_wake
        if hook is not None:
            hook()

    # -- confluent-kafka's API: subscription -------------------------------------

    def subscribe(
        self,
        topics: list[str],
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
        on_lost: RebalanceCallback | None = None,
    ) -> None:
        """Join the group for ``topics`` (``^`` starts a regex); the assignment comes in poll()."""
        self._check_open()
        if isinstance(topics, str):
            raise TypeError("subscribe() takes a list of topics, not a string")
        if self._coordinator is None:
            raise KafkaException(local("_INVALID_ARG", "subscribe() needs group.id in the config"))
        if self._subscriptions.user_assigned:
            raise KafkaException(local("_STATE", "subscribe() after assign(): call unassign() first"))
        names = list(topics)
        if not names or any(not isinstance(t, str) or not t for t in names):
            raise KafkaException(local("_INVALID_ARG", f"subscribe() needs topic names, not {topics!r}"))
        for callback in (on_assign, on_revoke, on_lost):
            if callback is not None and not callable(callback):
                raise TypeError(f"a rebalance callback must be callable, not {type(callback).__name__}")
        self._on_assign, self._on_revoke, self._on_lost = on_assign, on_revoke, on_lost
        try:
            changed = self._subscriptions.subscribe(names)
        except Exception as e:  # re.error: a bad pattern
            raise KafkaException(local("_INVALID_ARG", f"subscribe({names!r}): {e}")) from None
        if changed:
            self._subscription_refresh_at = 0.0
            self._coordinator.request_rejoin("the subscription changed")

    def unsubscribe(self) -> None:
        """Leave the group: on_revoke for what was owned (auto-commit first), then LeaveGroup."""
        self._check_open()
        if self._subscriptions.subscribed:
            owned = self._subscriptions.owned()
            if owned:
                self.partitions_revoked(owned)
            if self._coordinator is not None:
                self._coordinator.leave("the consumer unsubscribed", self._request_timeout_s)
        self._fetcher.forget(self._subscriptions.unsubscribe())

    def assign(self, partitions: list[TopicPartition]) -> None:
        """Read exactly ``partitions`` (no group membership), from their offsets.

        An offset >= 0 is where to start; OFFSET_BEGINNING / OFFSET_END the log's ends; OFFSET_STORED
        or OFFSET_INVALID the group's committed offset (``auto.offset.reset`` when there is none).
        Inside ``on_assign`` this sets where the group's partitions start, as in confluent-kafka.
        """
        self._check_open()
        given = [(_key(tp), tp.offset) for tp in partitions]
        if self._in_rebalance is not None or self._subscriptions.subscribed:
            if self._in_rebalance != "assign":
                raise KafkaException(local("_STATE", "assign() while subscribed: call unsubscribe() first"))
            added = set(self._subscriptions.add(k for k, _ in given))
            for key, offset in given:
                self._start_at(key, offset, explicit_only=key not in added)
            return
        old = set(self._subscriptions.owned())
        self._subscriptions.assign_from_user(given)
        self._fetcher.forget(old - {k for k, _ in given})
        for key, offset in given:
            self._start_at(key, offset)

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        """Add ``partitions`` to the assignment (confluent-kafka's cooperative call)."""
        self._check_open()
        given = [(_key(tp), tp.offset) for tp in partitions]
        if self._in_rebalance is None and self._subscriptions.mode == SubscriptionState.NONE:
            self._subscriptions.assign_from_user([])
        added = set(self._subscriptions.add(k for k, _ in given))
        for key, offset in given:
            self._start_at(key, offset, explicit_only=key not in added)

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        self._check_open()
        keys = [_key(tp) for tp in partitions]
        if self._in_rebalance is not None:
            return  # the rebalance removes them when the callback returns
        self._fetcher.forget(self._subscriptions.remove(keys))

    def unassign(self) -> None:
        """Drop the manual assignment (inside on_revoke: accepted, the rebalance does it)."""
        self._check_open()
        if self._in_rebalance is not None:
            return
        if self._subscriptions.subscribed:
            raise KafkaException(local("_STATE", "unassign() while subscribed: call unsubscribe()"))
        if self._auto_commit:
            self._commit_changed(self._subscriptions.owned(), quiet=True)
        self._fetcher.forget(self._subscriptions.unsubscribe())

    def assignment(self) -> list[TopicPartition]:
        self._check_open()
        return [TopicPartition(t, p) for t, p in self._subscriptions.owned()]

    def memberid(self) -> str | None:
        self._check_open()
        if self._coordinator is None or not self._coordinator.member_id:
            return None
        return self._coordinator.member_id

    def consumer_group_metadata(self) -> ConsumerGroupMetadata:
        """The group membership a transactional producer's ``send_offsets_to_transaction`` needs:
        group id, generation, member id, group instance id (confluent-kafka's method; Kafka's
        ``groupMetadata()``). Outside a generation (assigned, not subscribed; not joined yet)
        the generation is -1 and the member id "", so the coordinator checks nothing. O(1).

        Raises KafkaException ``_INVALID_ARG`` without ``group.id``.
        """
        self._check_open()
        coordinator = self._require_group("consumer_group_metadata()")
        generation, member_id = coordinator.generation_and_member()
        if not self._subscriptions.subscribed:
            generation, member_id = -1, ""
        return ConsumerGroupMetadata(coordinator.group_id, generation, member_id, coordinator.instance_id)

    # -- positions -----------------------------------------------------------------

    def _start_at(self, key: TopicPartitionKey, offset: int, explicit_only: bool = False) -> None:
        """Set where ``key`` is read from: an offset, a log end, or (unless ``explicit_only``) the committed one."""
        fetcher = self._fetcher
        if offset >= 0:
            fetcher.seek(key, offset)
        elif offset == OFFSET_BEGINNING:
            fetcher.reset(key, OffsetReset(-2))
        elif offset == OFFSET_END:
            fetcher.reset(key, OffsetReset(-1))
        elif offset in (OFFSET_STORED, OFFSET_INVALID):
            if explicit_only:
                return
            self._from_committed(key)
        else:
            raise KafkaException(local("_INVALID_ARG", f"{key[0]} [{key[1]}]: offset {offset} is not valid"))

    def _from_committed(self, key: TopicPartitionKey) -> None:
        state = self._subscriptions.state(key)
        assert state is not None
        self._fetcher.invalidate(key)
        if self._coordinator is not None:
            state.await_committed()
        else:
            self._no_offset(key)

    def _no_offset(self, key: TopicPartitionKey) -> None:
        state = self._subscriptions.state(key)
        assert state is not None
        self._subscriptions.no_committed_offset(key, state)
        if state.error is not None:
            self._fetcher.errors.append(error_message(key[0], key[1], OFFSET_INVALID, state.error))

    def seek(self, partition: TopicPartition) -> None:
        """Read ``partition`` from its offset next (an offset, OFFSET_BEGINNING or OFFSET_END)."""
        self._check_open()
        key = _key(partition)
        if self._subscriptions.state(key) is None:
            raise KafkaException(local("_STATE", f"seek: {key[0]} [{key[1]}] is not assigned"))
        if partition.offset == OFFSET_INVALID:
            raise KafkaException(local("_INVALID_ARG", f"seek: {key[0]} [{key[1]}] has no offset"))
        self._start_at(key, partition.offset)

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """Each partition's next offset to read (OFFSET_INVALID when not known yet)."""
        self._check_open()
        out = []
        for tp in partitions:
            state = self._subscriptions.state(_key(tp))
            position = state.position if state is not None and state.position is not None else OFFSET_INVALID
            out.append(TopicPartition(tp.topic, tp.partition, position))
        return out

    def pause(self, partitions: list[TopicPartition]) -> None:
        """Stop fetching and handing out ``partitions`` (records already buffered wait for resume)."""
        self._check_open()
        for tp in partitions:
            state = self._subscriptions.state(_key(tp))
            if state is not None:
                state.paused = True

    def resume(self, partitions: list[TopicPartition]) -> None:
        self._check_open()
        for tp in partitions:
            state = self._subscriptions.state(_key(tp))
            if state is not None:
                state.paused = False
        self._wake.set()

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float | None = None, cached: bool = False
    ) -> tuple[int, int]:
        """(low, high) watermarks: asked with ListOffsets, or (``cached``) as the last fetch saw them."""
        self._check_open()
        key = _key(partition)
        if cached:
            state = self._subscriptions.state(key)
            if state is None or state.high_watermark < 0:
                return OFFSET_INVALID, OFFSET_INVALID
            return state.log_start_offset, state.high_watermark
        deadline = time.monotonic() + self._timeout(timeout)
        low_sent = self._fetcher.list_offsets_async({key: -2})  # both in flight at once
        high_sent = self._fetcher.list_offsets_async({key: -1})
        values = []
        for sent in (low_sent, high_sent):
            code, offset, _ = self._fetcher.await_offsets(sent, deadline, "get_watermark_offsets")[key]
            if code:
                raise KafkaException(KafkaError(code, f"get_watermark_offsets({key[0]} [{key[1]}])"))
            values.append(offset)
        return values[0], values[1]

    def offsets_for_times(
        self, partitions: list[TopicPartition], timeout: float | None = None
    ) -> list[TopicPartition]:
        """The earliest offset whose timestamp is at least each partition's ``offset`` (a time in ms); -1: none."""
        self._check_open()
        wanted = {_key(tp): tp.offset for tp in partitions}
        results = self._fetcher.list_offsets(wanted, self._timeout(timeout))
        out = []
        for tp in partitions:
            key = _key(tp)
            code, offset, _ = results[key]
            result = TopicPartition(tp.topic, tp.partition, offset)
            if code:
                result.error = KafkaError(code, f"offsets_for_times({key[0]} [{key[1]}])")
            out.append(result)
        return out

    def committed(
        self, partitions: list[TopicPartition], timeout: float | None = None
    ) -> list[TopicPartition]:
        """The group's committed offsets of ``partitions`` (OFFSET_INVALID where none)."""
        self._check_open()
        coordinator = self._require_group("committed()")
        keys = [_key(tp) for tp in partitions]
        results = coordinator.fetch_committed(keys, self._timeout(timeout))
        out = []
        for key in keys:
            offset, metadata, code = results.get(key, (-1, None, 0))
            tp = TopicPartition(key[0], key[1], offset if offset >= 0 else OFFSET_INVALID, metadata or None)
            if code:
                tp.error = KafkaError(code, f"committed({key[0]} [{key[1]}])")
            out.append(tp)
        return out

    # -- commits -------------------------------------------------------------------

    def commit(
        self,
        message: Message | None = None,
        offsets: list[TopicPartition] | None = None,
        asynchronous: bool = True,
    ) -> list[TopicPartition] | None:
        """Commit ``message.offset() + 1``, or ``offsets`` as given, or every owned partition's stored offset.

        Asynchronous: returns None, ``on_commit`` reports the result in a later poll. Synchronous:
        returns the partitions (each with ``.error``), raising KafkaException if any failed.
        """
        self._check_open()
        coordinator = self._require_group("commit()")
        if message is not None and offsets is not None:
            raise KafkaException(local("_INVALID_ARG", "commit() takes a message or offsets, not both"))
        wanted: dict[TopicPartitionKey, tuple[int, str | None]]
        if message is not None:
            if message.error() is not None or message.topic() is None:
                raise KafkaException(local("_INVALID_ARG", "commit(message): the message is an error event"))
            wanted = {(str(message.topic()), message.partition()): (message.offset() + 1, None)}
        elif offsets is not None:
            wanted = {_key(tp): (tp.offset, tp.metadata) for tp in offsets}
        else:
            wanted = self._subscriptions.stored_offsets()
            if not wanted:
                if asynchronous:
                    return None
                raise KafkaException(local("_NO_OFFSET", "commit(): no offset stored for any partition"))
        if asynchronous:
            self._commit_results.append((wanted, coordinator.commit_async(wanted)))
            return None
        result = coordinator.commit_sync(wanted, self._request_timeout_s)
        self._committed(wanted, result)
        if self._on_commit is not None:
            self._commit_results.append((wanted, _settled(result)))
        failed = [tp.error for tp in result if tp.error is not None]
        if failed:
            raise KafkaException(failed[0])
        return result

    def store_offsets(
        self, message: Message | None = None, offsets: list[TopicPartition] | None = None
    ) -> None:
        """Store the offset the next commit sends (``enable.auto.offset.store=false``)."""
        self._check_open()
        if self._auto_store:
            raise KafkaException(
                local("_INVALID_ARG", "store_offsets() needs enable.auto.offset.store=false")
            )
        entries: list[tuple[TopicPartitionKey, int, str | None]]
        if message is not None:
            entries = [((str(message.topic()), message.partition()), message.offset() + 1, None)]
        elif offsets is not None:
            entries = [(_key(tp), tp.offset, tp.metadata) for tp in offsets]
        else:
            raise KafkaException(local("_INVALID_ARG", "store_offsets() takes a message or offsets"))
        for key, offset, metadata in entries:
            state = self._subscriptions.state(key)
            if state is None:
                raise KafkaException(local("_STATE", f"store_offsets: {key[0]} [{key[1]}] is not assigned"))
            state.stored = offset
            state.stored_metadata = metadata

    def _committed(
        self, wanted: dict[TopicPartitionKey, tuple[int, str | None]], result: list[TopicPartition]
    ) -> None:
        for tp in result:
            if tp.error is None:
                state = self._subscriptions.state((tp.topic, tp.partition))
                if state is not None:
                    state.committed = wanted.get((tp.topic, tp.partition), (tp.offset, None))[0]

    def _commit_changed(self, keys: Iterable[TopicPartitionKey], quiet: bool) -> None:
        """Commit (synchronously) the stored offsets of ``keys`` that moved since their last commit."""
        coordinator = self._coordinator
        if coordinator is None:
            return
        wanted = {}
        for key in keys:
            state = self._subscriptions.state(key)
            if (
                state is not None
                and state.stored is not None
                and state.stored >= 0
                and state.stored != state.committed
            ):
                wanted[key] = (state.stored, state.stored_metadata)
        if not wanted:
            return
        try:
            result = coordinator.commit_sync(wanted, self._request_timeout_s)
        except KafkaException as e:
            if not quiet:
                raise
            _log.info("commit before a rebalance failed: %s", e)
            return
        self._committed(wanted, result)
        if self._on_commit is not None:
            self._commit_results.append((wanted, _settled(result)))

    # -- the rebalance listener (called by the coordinator, on this thread) -------

    def commit_before_rebalance(self) -> None:
        if self._auto_commit:
            self._commit_changed(self._subscriptions.owned(), quiet=True)

    def partitions_revoked(self, keys: list[TopicPartitionKey]) -> None:
        """on_revoke (the partitions still readable inside it), auto-commit, then they are gone."""
        try:
            self._run_callback(self._on_revoke, keys, "revoke")
        finally:
            if self._auto_commit:
                self._commit_changed(keys, quiet=True)
            self._fetcher.forget(self._subscriptions.remove(keys))

    def partitions_lost(self, keys: list[TopicPartitionKey]) -> None:
        """on_lost (on_revoke when there is none): another member may own them already; nothing is committed."""
        try:
            self._run_callback(self._on_lost or self._on_revoke, keys, "revoke")
        finally:
            self._fetcher.forget(self._subscriptions.remove(keys))

    def partitions_assigned(self, keys: list[TopicPartitionKey]) -> None:
        """They start at the committed offsets, unless on_assign calls assign() with offsets."""
        for key in self._subscriptions.add(keys):
            self._from_committed(key)
        try:
            self._run_callback(self._on_assign, keys, "assign")
        finally:
            assert self._subscriptions.check()

    def _run_callback(
        self, callback: RebalanceCallback | None, keys: list[TopicPartitionKey], kind: str
    ) -> None:
        if callback is None:
            return
        self._in_rebalance = kind
        try:
            callback(self, [TopicPartition(t, p) for t, p in keys])
        finally:
            self._in_rebalance = None

    # -- poll / consume --------------------------------------------------------------

    def poll(self, timeout: float | None = None) -> Message | None:
        """One message (or error event), or None when none came within ``timeout`` seconds (None: forever)."""
        messages = self.consume(1, -1 if timeout is None else timeout)
        return messages[0] if messages else None

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        """Up to ``num_messages`` messages: returns once that many are ready or ``timeout`` seconds passed."""
        self._check_open()
        if not isinstance(num_messages, int) or not 0 <= num_messages <= 1_000_000:
            raise ValueError(f"num_messages must be between 0 and 1000000, not {num_messages!r}")
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        out: list[Message] = []
        wake = self._wake
        fetcher = self._fetcher
        with self._cluster.deadline(deadline):  # a broker that does not answer cannot hold the call
            while True:
                wake.clear()
                self._step()
                fetcher.collect(num_messages - len(out), out, self._auto_store)
                if len(out) >= num_messages:
                    break
                if deadline is None:
                    wait = _WAIT_STEP_S
                else:
                    wait = deadline - time.monotonic()
                    if wait <= 0:
                        break
                    wait = min(wait, _WAIT_STEP_S)
                wake.wait(wait)
        if self._key_deserializer is not None or self._value_deserializer is not None:
            self._deserialize(out)
        return out

    def _deserialize(self, messages: list[Message]) -> None:
        kd, vd = self._key_deserializer, self._value_deserializer
        for m in messages:
            if m.error() is not None:
                continue
            if kd is not None:
                m.set_key(kd(m.key(), SerializationContext(m.topic(), "key", m.headers())))
            if vd is not None:
                m.set_value(vd(m.value(), SerializationContext(m.topic(), "value", m.headers())))

    def _step(self) -> None:
        """One turn of every component (see the module's docstring)."""
        self._serve_callbacks()
        self._maintain_metadata()
        coordinator = self._coordinator
        if coordinator is not None:
            coordinator.poll()
            if coordinator.errors:
                errors, coordinator.errors = coordinator.errors, []  # the heartbeat thread may append
                for error in errors:
                    if error.code() in _CLIENT_ERRORS:
                        self._fetcher.transport_errors.append(error)
                    else:
                        self._fetcher.errors.append(error_message(None, -1, OFFSET_INVALID, error))
            self._maybe_auto_commit()
            self._update_committed_positions()
        self._fetcher.reset_positions()
        self._fetcher.send_fetches()

    def _serve_callbacks(self) -> None:
        results = self._commit_results
        while results and results[0][1].done():
            wanted, future = results.popleft()
            partitions = future.result()
            self._committed(wanted, partitions)
            if self._on_commit is not None:
                errors = [tp.error for tp in partitions if tp.error is not None]
                self._on_commit(errors[0] if errors else None, partitions)
        transport = self._fetcher.transport_errors
        if transport:
            now = time.monotonic()
            while transport:
                error = transport.popleft()
                if now - self._reported.get(error.code(), -1e9) < _REPORT_EVERY_S:
                    continue  # a broker down fails every fetch: say so once a second, not each time
                self._reported[error.code()] = now
                if self._error_cb is not None:
                    self._error_cb(error)
                else:  # as librdkafka does without an error_cb: an error event from poll
                    _log.warning("consumer: %s", error)
                    self._fetcher.errors.append(error_message(None, -1, OFFSET_INVALID, error))

    def _maybe_auto_commit(self) -> None:
        if not self._auto_commit:
            return
        now = time.monotonic()
        if now < self._next_auto_commit:
            return
        self._next_auto_commit = now + self._commit_interval_s
        coordinator = self._coordinator
        assert coordinator is not None
        if self._subscriptions.subscribed and coordinator.state != MemberState.STABLE:
            return  # mid-rebalance: the commit before the revoke covers it
        wanted = {
            key: (state.stored, state.stored_metadata)
            for key, state in self._subscriptions.assignment.items()
            if state.stored is not None and state.stored >= 0 and state.stored != state.committed
        }
        if wanted:
            self._commit_results.append((wanted, coordinator.commit_async(wanted)))

    def _update_committed_positions(self) -> None:
        """OffsetFetch for partitions waiting for their committed offset; apply an answer that came."""
        coordinator = self._coordinator
        assert coordinator is not None
        if self._offset_fetch is not None:
            future, keys = self._offset_fetch
            if not future.done():
                return
            self._offset_fetch = None
            try:
                results = coordinator.offset_fetch_result(future)
            except KafkaException as e:
                self._offset_fetch_retry_at = time.monotonic() + self._backoff_s
                if not e.error.retriable() and e.error.code() not in (KafkaError.NOT_COORDINATOR,  # type: ignore[attr-defined]
                                                                     KafkaError.COORDINATOR_NOT_AVAILABLE):  # type: ignore[attr-defined]  # fmt: skip
                    self._fetcher.errors.append(error_message(None, -1, OFFSET_INVALID, e.error))
                return
            for key in keys:
                state = self._subscriptions.state(key)
                if state is None or not state.awaiting_committed:
                    continue
                offset, _, code = results.get(key, (-1, None, 0))
                if code:
                    error = KafkaError(code, f"committed offset of {key[0]} [{key[1]}]")
                    if error.retriable():
                        self._offset_fetch_retry_at = time.monotonic() + self._backoff_s
                        continue
                    state.fail(error)
                    self._fetcher.errors.append(error_message(key[0], key[1], OFFSET_INVALID, error))
                elif offset >= 0:
                    self._fetcher.seek(key, offset)
                    state.committed = offset
                    state.stored = offset if self._auto_store else state.stored
                else:
                    self._no_offset(key)
        if time.monotonic() < self._offset_fetch_retry_at:
            return
        waiting = self._subscriptions.awaiting_committed()
        if not waiting:
            return
        try:
            future = coordinator.offset_fetch_async(waiting)
        except KafkaException as e:
            self._offset_fetch_retry_at = time.monotonic() + self._backoff_s
            self._fetcher.transport_errors.append(e.error)
            return
        future.add_done_callback(lambda _f: self._wake_up())
        self._offset_fetch = (future, waiting)

    def _maintain_metadata(self) -> None:
        """Leaders after NOT_LEADER-like errors; the subscription's topics (patterns, new topics, partitions)."""
        now = time.monotonic()
        fetcher = self._fetcher
        if fetcher.need_metadata and now >= self._metadata_retry_at:
            fetcher.need_metadata = False
            self._metadata_retry_at = now + self._backoff_s
            topics = {t for t, _ in self._subscriptions.owned()}
            if topics:
                try:
                    self._cluster.refresh(topics, auto_create=False)
                except KafkaException as e:
                    fetcher.need_metadata = True
                    fetcher.transport_errors.append(e.error)
        subscriptions = self._subscriptions
        coordinator = self._coordinator
        if not subscriptions.subscribed or coordinator is None or now < self._subscription_refresh_at:
            return
        self._subscription_refresh_at = now + (self._refresh_s if self._refresh_s > 0 else 3600.0)
        leading = coordinator.state == MemberState.STABLE and coordinator.leader_id == coordinator.member_id
        watched = set(subscriptions.topics) | (
            set(coordinator.leader_topics_subscribed) if leading else set()
        )
        try:
            if subscriptions.patterns:
                self._cluster.refresh(None, auto_create=False)
            elif watched:
                self._cluster.refresh(watched, auto_create=self._auto_create)
        except KafkaException as e:
            fetcher.transport_errors.append(e.error)
            self._subscription_refresh_at = now + _FAST_METADATA_S
            return
        known = self._cluster.topics
        if subscriptions.patterns and subscriptions.match(
            n for n, m in known.items() if not m.internal and not m.error
        ):
            coordinator.request_rejoin("the topics matching the subscription changed")
        if any(t not in known or known[t].error for t in watched):
            self._subscription_refresh_at = min(self._subscription_refresh_at, now + _FAST_METADATA_S)
        if leading:
            counts = {t: len(known[t].partitions) for t in coordinator.leader_topics_subscribed
                      if t in known and not known[t].error and known[t].partitions}  # fmt: skip
            if counts != coordinator.leader_topics:
                coordinator.request_rejoin("the subscribed topics' partitions changed")

    # -- the rest -------------------------------------------------------------------

    def _timeout(self, timeout: float | None) -> float:
        if timeout is None or timeout < 0:
            return self._request_timeout_s
        return float(timeout)

    def _require_group(self, what: str) -> ConsumerCoordinator:
        if self._coordinator is None:
            raise KafkaException(local("_INVALID_ARG", f"{what} needs group.id in the config"))
        return self._coordinator

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("Consumer closed")

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        """The cluster's brokers and topics (all, or ``topic``) as confluent's ``ClusterMetadata``;
        bounded by ``timeout`` seconds (default ``request.timeout.ms``). Never creates a topic."""
        limit = None if timeout is None or timeout < 0 else float(timeout)
        response = self._cluster.refresh(None if topic is None else [topic], auto_create=False, timeout=limit)
        return cluster_metadata(response)

    def close(self) -> None:
        """Stop: on_revoke and a final commit (``enable.auto.commit``), LeaveGroup (not for static members)."""
        if self._closed:
            return
        coordinator = self._coordinator
        try:
            if coordinator is not None:
                owned = self._subscriptions.owned()
                if self._subscriptions.subscribed and owned:
                    self.partitions_revoked(owned)
                elif self._auto_commit and owned:
                    self._commit_changed(owned, quiet=True)
        finally:
            self._closed = True
            try:
                if coordinator is not None:
                    coordinator.close(self._request_timeout_s)
                    self._serve_callbacks()
            finally:
                self._cluster.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _settled(result: list[TopicPartition]) -> Future[list[TopicPartition]]:
    future: Future[list[TopicPartition]] = Future()
    future.set_result(result)
    return future


__all__ = ["Consumer", "SerializationContext"]
