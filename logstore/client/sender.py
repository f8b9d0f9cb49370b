"""The producer's I/O thread: Kafka's ``Sender``, and the idempotence state it keeps.

:class:`Sender` is one daemon thread per producer. Each turn of its loop it

1. settles the Produce requests that were answered (or failed) since the last
   turn: acknowledged batches are reported, failed ones retried or failed;
2. obtains a producer id (InitProducerId) before the first Produce when
   idempotence is on, and again after a sequence reset (below);
3. refreshes metadata when a topic has no metadata yet, a leader is unknown, an
   answer said NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION /
   LEADER_NOT_AVAILABLE (or another retriable error), a connection failed, or
   the cache is older than ``metadata.max.age.ms``;
4. fails batches queued longer than ``delivery.timeout.ms`` with ``_MSG_TIMED_OUT``;
5. drains ready batches grouped by leader, one Produce request per leader with
   at most one batch per partition, while that connection has fewer than
   ``max.in.flight.requests.per.connection`` requests in flight;
6. sleeps until the next batch is due (``linger.ms``, a retry backoff), or
   until woken by the accumulator or an answer.

Every state change of batches in flight happens on this thread; answers are
handed over by the connections' threads through a queue.

Retries: a batch that fails with a retriable error (or a transport error or
timeout) is retried after ``retry.backoff.ms`` (doubling to
``retry.backoff.max.ms``) while it has attempts left (``retries``) and time left
(``delivery.timeout.ms``). Order per partition is kept across retries: while a
partition has a batch waiting to be retried it is *muted* (no newer batch of it
is sent); when its last batch in flight settles, the batches to retry go back
to the head of its deque, oldest first. A batch keeps its encoded bytes, so a
retry carries the same producer id, epoch and sequence.

Idempotence (:class:`~logstore.client.idempotence.IdempotenceState`, Kafka's
``TransactionManager`` for a non-transactional producer): each batch gets the
producer id and epoch and its partition's next sequence when first drained
(sequences count records and wrap at 2**31). DUPLICATE_SEQUENCE_NUMBER is a
success (offset unknown: -1). OUT_OF_ORDER_SEQUENCE_NUMBER for a batch that is
not the partition's oldest unacknowledged one means an older batch failed too:
it is retried in order.
This producer handles the unrecoverable cases as Kafka 2.5+'s idempotent
producer does (KIP-360), by a *sequence reset* rather than a fatal error:
OUT_OF_ORDER_SEQUENCE_NUMBER for the oldest batch, UNKNOWN_PRODUCER_ID, or a
batch that may have reached a broker and then expired or failed for good,
fail that batch, stop sending, wait for every request in flight to settle,
take a new producer id (InitProducerId), and start every partition's
sequences again at 0, re-encoding the batches still queued. (A queued batch
whose earlier attempt's outcome is unknown - its connection broke - may then be
appended twice, as in Kafka.) INVALID_PRODUCER_EPOCH, PRODUCER_FENCED and
authorization errors are *fatal*: every queued record fails, and every later
``produce()`` raises a KafkaException whose error is ``fatal()`` and says to
create a new producer.

acks=0: requests expect no answer; a batch is reported delivered (offset -1)
once written to the socket.

Transactions (``transactional.id``): a
:class:`~logstore.client.transactions.TransactionManager` owns the producer id
(InitProducerId goes to the transaction coordinator, from
``init_transactions()``), and each turn it runs before the batches are drained
(:meth:`~logstore.client.transactions.TransactionManager.run`): its requests go
one at a time, and a partition's batches wait until the partition is in the
transaction (``hold``). Batches are encoded transactional and Produce carries
the transactional id. A batch that fails makes the transaction abortable; a
sequence problem (the resets above) is not repaired here but by the abort,
which takes a new epoch. Fatal errors keep their code (PRODUCER_FENCED, ...)
rather than ``_FATAL``. See :mod:`logstore.client.transactions`.
"""

from __future__ import annotations

import collections
import datetime
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol

from logstore.client.accumulator import ProducerBatch, RecordAccumulator
from logstore.client.cluster import Cluster
from logstore.client.config import ClientConfig
from logstore.client.errors import KafkaError, KafkaException, local
from logstore.client.idempotence import IdempotenceState
from logstore.client.transactions import TransactionManager
from logstore.records import build_batch

PRODUCE = 0
INIT_PRODUCER_ID = 22

_log = logging.getLogger("logstore.client.producer")

# Answers that mean the metadata (leaders, topics) is out of date.
METADATA_ERRORS = frozenset({3, 5, 6, 13, 56, 74, 75})  # UNKNOWN_TOPIC_OR_PART, LEADER_NOT_AVAILABLE,
# NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH, KAFKA_STORAGE_ERROR, NETWORK_EXCEPTION, ...
DUPLICATE_SEQUENCE_NUMBER = 46
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
UNKNOWN_PRODUCER_ID = 59
FATAL_ERRORS = frozenset({47, 90, 31, 53, 29})  # INVALID_PRODUCER_EPOCH, PRODUCER_FENCED,
# CLUSTER/TRANSACTIONAL_ID/TOPIC_AUTHORIZATION_FAILED


class Reporter(Protocol):
    """What the sender tells the producer."""

    def delivered(
        self, batch: ProducerBatch, error: KafkaError | None, base_offset: int, append_time: int
    ) -> None:
        """A batch left for good: acknowledged (error None) or failed."""

    def client_error(self, error: KafkaError) -> None:
        """An error of the client as a whole (confluent's ``error_cb``)."""

    def metadata_updated(self) -> None:
        """Metadata was refreshed: records waiting for their topic's metadata may move on."""

    def pending_topics(self) -> set[str]:
        """Topics with records waiting for their first metadata."""

    def pending_expiry(self) -> float | None:
        """When the oldest record waiting for metadata times out (``time.monotonic()``), or None."""

    def fail_pending(self, error: KafkaError) -> None:
        """Fail every record waiting for its topic's metadata (a transaction is aborted)."""


class Sender(threading.Thread):
    """The producer's I/O thread (see the module docstring)."""

    def __init__(
        self, config: ClientConfig, cluster: Cluster, accumulator: RecordAccumulator, reporter: Reporter,
        idempotent: bool, acks: int, transactions: TransactionManager | None = None,
    ) -> None:  # fmt: skip
        super().__init__(name=f"logstore-producer-sender-{config['client.id']}", daemon=True)
        self.config = config
        self.cluster = cluster
        self.accumulator = accumulator
        self.reporter = reporter
        self.acks = acks
        self.transactions = transactions
        self.transactional_id = None if transactions is None else transactions.transactional_id
        if transactions is not None:
            self.idempotence: IdempotenceState | None = transactions.idempotence
        else:
            self.idempotence = IdempotenceState() if idempotent else None
        self.max_in_flight = int(config["max.in.flight.requests.per.connection"])
        self.retries = int(config["retries"])
        self.backoff = config.seconds("retry.backoff.ms")
        self.backoff_max = max(config.seconds("retry.backoff.max.ms"), self.backoff)
        self.delivery_timeout = config.seconds("delivery.timeout.ms") or float("inf")
        self.request_timeout_ms = int(config["request.timeout.ms"])
        self.compression = str(config["compression.type"])
        self.max_age = config.seconds("metadata.max.age.ms")
        self.wake = threading.Event()
        self._answers: collections.deque[tuple[int, list[ProducerBatch], Future[Any]]] = collections.deque()
        self._in_flight: dict[int, int] = collections.defaultdict(int)  # node -> requests in flight
        self._tp_in_flight: dict[tuple[str, int], int] = collections.defaultdict(int)
        self._retry: dict[tuple[str, int], list[ProducerBatch]] = {}  # muted partitions' batches to retry
        self._metadata_needed = True
        self._metadata_next = 0.0  # monotonic time before which no refresh is tried
        self._metadata_failures = 0
        self._pid_next = 0.0
        self._stopping = False
        self._force = False
        self.fatal: KafkaError | None = None
        self.retried = 0  # batch attempts that failed and were retried (a statistic)
        self.resets = 0  # sequence resets (KIP-360) so far
        self.on_fatal: Callable[[KafkaError], None] = lambda error: None
        if transactions is not None:
            transactions.bind(self, self.wake.set)

    # -- control -------------------------------------------------------------

    def request_metadata(self) -> None:
        self._metadata_needed = True
        self.wake.set()

    def stop(self, force: bool) -> None:
        """End the loop: when nothing is queued or in flight, or at once (``force``)."""
        self._stopping = True
        self._force = force
        self.wake.set()

    @property
    def in_flight(self) -> int:
        return sum(self._in_flight.values())

    # -- the loop ------------------------------------------------------------

    def run(self) -> None:
        while True:
            self.wake.clear()
            try:
                # Connecting to a broker that does not answer cannot hold a record past its
                # delivery timeout: every wait of this turn ends at the next record's.
                expiry = self._next_expiry()
                with self.cluster.deadline(expiry):
                    wait = self._run_once(expiry)
            except Exception:  # a bug must not kill the thread silently and hang flush()
                _log.exception("producer sender loop failed; continuing")
                wait = self.backoff
            if self._stopping and (
                self._force or (not self.accumulator.has_queued() and not self.in_flight and not self._retry)
            ):
                break
            if wait > 0:
                self.wake.wait(min(wait, 1.0))
        self._settle_answers()
        if self._force:
            error = local("_DESTROY", "the producer was closed before this record was delivered")
            for batch in self.accumulator.take_all():
                self._fail(batch, error, terminal=False)
            for batches in self._retry.values():
                for batch in batches:
                    self._fail(batch, error, terminal=False)
            self._retry.clear()

    def _run_once(self, expiry: float | None) -> float:
        """One turn; ``expiry``: when the next record times out (``_next_expiry()``)."""
        now = time.monotonic()
        self._settle_answers()
        if self.fatal is not None:
            self._fail_all(self.fatal)
            return 1.0
        wait = float("inf")
        if self._metadata_needed or (self.cluster.updated and now - self.cluster.updated > self.max_age):
            wait = min(wait, self._refresh(now, expiry))
        self._expire(now)
        idem = self.idempotence
        muted = [tp for tp, batches in self._retry.items() if batches]
        txn = self.transactions
        if txn is not None:
            muted += txn.hold(self.accumulator.partitions())
            wait = min(wait, txn.run(now))
            if self.fatal is not None or (idem is not None and not idem.ready):
                return wait  # the manager obtains the producer id (and a new epoch after an abort)
        elif idem is not None and not idem.ready:
            if idem.reset_needed and self.in_flight:
                return 0.05  # answers still to come; they wake us
            return min(wait, self._init_producer_id(now))
        everything = txn is not None and txn.completing
        ready, due, unknown = self.accumulator.ready(now, self.cluster.leader, muted, everything)
        wait = min(wait, due)
        if unknown:
            self.request_metadata()
            wait = min(wait, max(self._metadata_next - now, 0.01))
        for node, partitions in ready.items():
            if self._in_flight[node] >= self.max_in_flight:
                continue  # an answer from node wakes us
            self._send(node, partitions)
        return wait

    # -- metadata --------------------------------------------------------------

    def _next_expiry(self) -> float | None:
        """When the next queued or waiting record times out (``time.monotonic()``), or None."""
        found = []
        pending = self.reporter.pending_expiry()
        if pending is not None:
            found.append(pending)
        oldest = self.accumulator.oldest_created()
        if oldest is not None and self.delivery_timeout != float("inf"):
            found.append(oldest + self.delivery_timeout)
        return min(found, default=None)

    def _refresh(self, now: float, expiry: float | None) -> float:
        if now < self._metadata_next:
            if expiry is not None and expiry <= now:
                self.reporter.metadata_updated()  # records waiting on metadata time out now
            wait = self._metadata_next - now
            return wait if expiry is None or expiry <= now else min(wait, expiry - now)
        topics = set(self.accumulator.topics) | self.reporter.pending_topics()
        if not topics and self.cluster.updated:
            self._metadata_needed = False
            return float("inf")
        self._metadata_next = now + self.backoff
        try:
            self.cluster.refresh(sorted(topics), auto_create=self.auto_create())
        except KafkaException as e:
            self._metadata_failures += 1
            delay = min(self.backoff * 2**self._metadata_failures, self.backoff_max)
            self._metadata_next = time.monotonic() + delay
            error = e.error
            if error.code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN):  # type: ignore[attr-defined]
                error = local("_ALL_BROKERS_DOWN", f"no broker answered a metadata request: {error.str()}")
            self.reporter.client_error(error)
            self.reporter.metadata_updated()  # records waiting on metadata may time out
            return delay
        self._metadata_failures = 0
        self._metadata_needed = False
        for name, state in list(self.accumulator.topics.items()):
            meta = self.cluster.topics.get(name)
            if meta is not None and not meta.error and meta.partitions:
                if len(meta.partitions) > state.n:
                    self.accumulator.topic_state(name, len(meta.partitions))
                if any(p.leader < 0 for p in meta.partitions.values()):
                    self._metadata_needed = True
        self.reporter.metadata_updated()
        if self.reporter.pending_topics():
            self._metadata_needed = True
        return self.backoff if self._metadata_needed else float("inf")

    def auto_create(self) -> bool:
        given = self.config.given
        return bool(self.config["allow.auto.create.topics"]) if "allow.auto.create.topics" in given else True

    # -- idempotence -------------------------------------------------------------

    def _init_producer_id(self, now: float) -> float:
        idem = self.idempotence
        assert idem is not None
        if now < self._pid_next:
            return self._pid_next - now
        fields = {
            "transactional_id": None,
            "transaction_timeout": 60_000,
            "producer_id": -1,
            "producer_epoch": -1,
        }
        try:
            response = self.cluster.request(None, INIT_PRODUCER_ID, fields)
        except KafkaException as e:
            self._pid_next = time.monotonic() + self.backoff_max
            self.reporter.client_error(e.error)
            return self.backoff_max
        code = int(response.error_code)
        if code:
            error = KafkaError(code, f"InitProducerId failed: {KafkaError(code).name()}")
            if error.retriable():
                self._pid_next = time.monotonic() + self.backoff
                return self.backoff
            self._set_fatal(error)
            return 0.0
        queued = self.accumulator.queued()
        if idem.producer_id >= 0:
            self.resets += 1
        idem.restart(int(response.producer_id), int(response.producer_epoch), queued)
        _log.debug("producer id %d epoch %d", idem.producer_id, idem.epoch)
        return 0.0

    def _set_fatal(self, error: KafkaError) -> None:
        if self.fatal is not None:
            return
        if self.transactions is not None and not error.fatal():
            self.transactions.fatal(error)  # its error (fenced: PRODUCER_FENCED) comes back through set_fatal
            if self.fatal is not None:
                return
        if self.transactions is not None:
            self.fatal = error if error.fatal() else KafkaError(
                error.code(),
                f"fatal transactional producer error {error.name()}: {error.str()}; this producer can send "
                "no more records: create a new producer",
                fatal=True,
            )  # fmt: skip
        else:
            self.fatal = KafkaError(
                KafkaError._FATAL,  # type: ignore[attr-defined]
                f"fatal idempotent producer error {error.name()}: {error.str()}; this producer can send no "
                "more records: create a new producer",
                fatal=True,
            )
        _log.error("%s", self.fatal.str())
        self.on_fatal(self.fatal)
        self.reporter.client_error(self.fatal)
        if self.transactions is not None:
            self.transactions.fatal(self.fatal)
        self._fail_all(self.fatal)

    # -- what the transaction manager asks (SenderOps; this thread) ---------------------

    def set_fatal(self, error: KafkaError) -> None:
        self._set_fatal(error)

    def incomplete(self) -> bool:
        """Records queued, in flight, waiting to be retried or waiting for metadata."""
        return self.accumulator.records > 0 or bool(self.in_flight)

    def queued(self) -> list[ProducerBatch]:
        return self.accumulator.queued()

    def abort_undrained(self, error: KafkaError, everything: bool) -> None:
        """Fail the queued batches never sent (``everything``: every batch not in flight, those
        waiting for a retry too) and the records waiting for metadata. O(queued batches)."""
        if self.accumulator.has_queued():
            keep = []
            for batch in self.accumulator.take_all():
                if batch.base_sequence >= 0 and not everything:
                    keep.append(batch)  # sequenced: it goes (a gap would break the sequence)
                else:
                    self._fail(batch, error, terminal=False)
            if keep:
                self.accumulator.reenqueue(keep)
        if everything:
            for tp in [tp for tp, batches in self._retry.items() if batches and not self._tp_in_flight[tp]]:
                for batch in self._retry.pop(tp):
                    self._fail(batch, error, terminal=False)
        if self.reporter.pending_topics():
            self.reporter.fail_pending(error)

    def _fail_all(self, error: KafkaError) -> None:
        for batch in self.accumulator.take_all():
            self._fail(batch, error, terminal=False)
        for tp in [tp for tp, batches in self._retry.items() if batches and not self._tp_in_flight[tp]]:
            for batch in self._retry.pop(tp):
                self._fail(batch, error, terminal=False)

    # -- sending -----------------------------------------------------------------

    def _send(self, node: int, partitions: list[tuple[str, int]]) -> None:
        batches = self.accumulator.drain(partitions)
        sendable: list[ProducerBatch] = []
        topic_data: dict[str, list[dict[str, Any]]] = {}
        idem = self.idempotence
        transactional = self.transactions is not None
        for batch in batches:
            if batch.encoded is None:
                if idem is not None and batch.base_sequence < 0:
                    idem.assign(batch)
                try:
                    batch.encoded = build_batch(
                        batch.records,
                        compression=self.compression,
                        timestamp=batch.timestamp,
                        producer_id=batch.producer_id,
                        producer_epoch=batch.producer_epoch,
                        base_sequence=batch.base_sequence,
                        transactional=transactional,
                    )
                except Exception as e:
                    self._fail(batch, local("_INVALID_ARG", f"cannot encode the batch: {e}"), terminal=True)
                    continue
            batch.sent = True
            batch.attempts += 1
            sendable.append(batch)
            topic_data.setdefault(batch.topic, []).append(
                {"index": batch.partition, "records": batch.encoded}
            )
        if not sendable:
            return
        fields = {
            "transactional_id": self.transactional_id,
            "acks": self.acks,
            "timeout": self.request_timeout_ms,
            "topic_data": [{"name": t, "partition_data": parts} for t, parts in topic_data.items()],
        }
        for batch in sendable:
            self._tp_in_flight[(batch.topic, batch.partition)] += 1
        self._in_flight[node] += 1
        try:
            future = self.cluster.send(node, PRODUCE, fields, expect_response=self.acks != 0)
        except Exception as e:  # encoding or version negotiation: the batches must still settle
            future = Future()
            future.set_exception(
                e if isinstance(e, KafkaException) else KafkaException(local("_FAIL", repr(e)))
            )

        def answered(done: Future[Any]) -> None:
            self._answers.append((node, sendable, done))
            self.wake.set()

        future.add_done_callback(answered)

    # -- answers -------------------------------------------------------------------

    def _settle_answers(self) -> None:
        while self._answers:
            node, batches, future = self._answers.popleft()
            self._in_flight[node] -= 1
            try:
                response = future.result()
            except KafkaException as e:
                self._metadata_needed = True
                for batch in batches:
                    self._attempt_failed(batch, e.error)
                continue
            except Exception as e:  # a future can carry anything: fail the batches, don't die
                for batch in batches:
                    self._attempt_failed(batch, local("_FAIL", f"Produce failed: {e!r}"))
                continue
            if response is None:  # acks=0
                for batch in batches:
                    self._succeeded(batch, -1, -1)
                continue
            answers = {(t.name, int(p.index)): p for t in response.responses for p in t.partition_responses}
            for batch in batches:
                part = answers.get((batch.topic, batch.partition))
                if part is None:
                    self._attempt_failed(
                        batch, local("_BAD_MSG", f"the Produce answer lacks {batch.topic}-{batch.partition}")
                    )
                    continue
                code = int(part.error_code)
                if code == 0:
                    self._succeeded(batch, int(part.base_offset), _millis(part.log_append_time))
                elif code == DUPLICATE_SEQUENCE_NUMBER:
                    self._succeeded(batch, -1, -1)
                else:
                    message = getattr(part, "error_message", None)
                    reason = f"{batch.topic}-{batch.partition}: {KafkaError(code).name()}" + (
                        f": {message}" if message else f": {KafkaError(code).str()}"
                    )
                    self._attempt_failed(batch, KafkaError(code, reason))

    def _succeeded(self, batch: ProducerBatch, base_offset: int, append_time: int) -> None:
        tp = (batch.topic, batch.partition)
        self._tp_in_flight[tp] -= 1
        if self.idempotence is not None:
            self.idempotence.acknowledged(batch)
        self._done(batch, None, base_offset, append_time)
        self._release_retries(tp)

    def _attempt_failed(self, batch: ProducerBatch, error: KafkaError) -> None:
        tp = (batch.topic, batch.partition)
        self._tp_in_flight[tp] -= 1
        code = error.code()
        idem = self.idempotence
        now = time.monotonic()
        if code in FATAL_ERRORS:
            self._set_fatal(error)  # first: a produce() after this batch's report must see it
            self._fail(batch, error, terminal=False)
        elif idem is not None and code == OUT_OF_ORDER_SEQUENCE_NUMBER and not idem.is_oldest(batch):
            self._retry_later(batch, now)  # an older batch of the partition failed: it goes first
        elif idem is not None and code in (OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID):
            self._fail(batch, error, terminal=True)
        elif (
            error.retriable()
            and batch.attempts <= self.retries
            and now - batch.created < self.delivery_timeout
            and not self._force
        ):
            if code in METADATA_ERRORS or code < 0:
                self._metadata_needed = True
            self._retry_later(batch, now)
        elif error.retriable() and now - batch.created >= self.delivery_timeout:
            self._fail(batch, _timed_out(self.delivery_timeout, error), terminal=True)
        else:
            self._fail(batch, error, terminal=True)
        self._release_retries(tp)

    def _retry_later(self, batch: ProducerBatch, now: float) -> None:
        self.retried += 1
        delay = min(self.backoff * 2 ** max(batch.attempts - 1, 0), self.backoff_max)
        batch.retry_at = now + delay
        self._retry.setdefault((batch.topic, batch.partition), []).append(batch)

    def _release_retries(self, tp: tuple[str, int]) -> None:
        """When ``tp`` has nothing in flight, its batches to retry go back to its head, oldest first."""
        if self._tp_in_flight[tp] or tp not in self._retry:
            return
        batches = self._retry.pop(tp)
        batches.sort(key=lambda b: b.created)
        self.accumulator.reenqueue(batches)
        self.wake.set()

    def _expire(self, now: float) -> None:
        if self.delivery_timeout == float("inf"):
            return
        for batch in self.accumulator.expired(now, self.delivery_timeout):
            self._fail(batch, _timed_out(self.delivery_timeout, None), terminal=True)

    def _fail(self, batch: ProducerBatch, error: KafkaError, *, terminal: bool) -> None:
        """Report ``batch`` failed. ``terminal``: a batch that may have reached a broker ends
        here, so an idempotent producer must reset its sequences (see the module docstring)."""
        idem = self.idempotence
        if terminal and idem is not None and batch.sent and batch.producer_id == idem.producer_id:
            if not idem.reset_needed:
                _log.warning(
                    "batch of %s-%d failed for good (%s): resetting the producer id and sequences",
                    batch.topic, batch.partition, error.name(),
                )  # fmt: skip
            idem.reset_needed = True
        self._done(batch, error, -1, -1)

    def _done(
        self, batch: ProducerBatch, error: KafkaError | None, base_offset: int, append_time: int
    ) -> None:
        if error is not None and self.transactions is not None:
            self.transactions.batch_failed(error)  # before the report: the application sees both at once
        try:
            self.reporter.delivered(batch, error, base_offset, append_time)
        finally:
            self.accumulator.complete(batch)


def _millis(value: Any) -> int:
    """A kio timestamp (an aware datetime, or None for -1) as ms since the epoch."""
    if value is None:
        return -1
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    return int(value)


def _timed_out(timeout: float, last: KafkaError | None) -> KafkaError:
    reason = f"not delivered within delivery.timeout.ms={timeout * 1000:.0f}"
    if last is not None:
        reason += f" (last error: {last.name()}: {last.str()})"
    return local("_MSG_TIMED_OUT", reason)
