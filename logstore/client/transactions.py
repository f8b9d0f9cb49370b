"""Transactions (KIP-98) for the producer: the transactional side of Kafka's ``TransactionManager``.

A producer with a ``transactional.id`` has one :class:`TransactionManager`.
The application moves it with confluent-kafka's calls
(``Producer.init_transactions``, ``begin_transaction``,
``send_offsets_to_transaction``, ``commit_transaction``,
``abort_transaction``); the producer's :class:`~logstore.client.sender.Sender`
thread sends its requests, one at a time, from a queue ordered as Kafka's:
FindCoordinator, then InitProducerId, then AddPartitionsToTxn /
AddOffsetsToTxn / TxnOffsetCommit, then EndTxn (first come, first served
within a kind). A request that waits for a backoff holds up the ones after it.

States (Kafka's ``TransactionManager.State``) and the moves this client makes::

    UNINITIALIZED --init_transactions--> INITIALIZING --InitProducerId--> READY
    READY --begin_transaction--> IN_TRANSACTION
    IN_TRANSACTION --commit_transaction--> COMMITTING_TRANSACTION --EndTxn(commit)--> READY
    IN_TRANSACTION, ABORTABLE_ERROR --abort_transaction--> ABORTING_TRANSACTION --EndTxn(abort)--> READY
    ABORTING_TRANSACTION --EndTxn(abort), the epoch must be bumped--> INITIALIZING
        (InitProducerId with the current id and epoch, KIP-360; its answer: READY)
    IN_TRANSACTION, COMMITTING_TRANSACTION, INITIALIZING --a failed batch or request--> ABORTABLE_ERROR
    any --fenced, unauthorized, an unexpected answer--> FATAL_ERROR (never left)

:data:`VALID_TRANSITIONS` is that table; :meth:`TransactionManager._transition`
refuses anything else. ``begin_transaction`` is local; the others return a
:class:`~concurrent.futures.Future` the producer waits on. A wait that times out
raises a retriable ``_TIMED_OUT`` and the operation goes on: calling the same
method again resumes the wait (calling another raises ``_CONFLICT``), as
librdkafka and the Java client do.

What the sender does for a transaction:

- the transaction coordinator is found with FindCoordinator (key_type 1), the
  group coordinator of ``send_offsets_to_transaction`` with key_type 0;
  NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / a broken connection forget it
  and look it up again; COORDINATOR_LOAD_IN_PROGRESS and
  CONCURRENT_TRANSACTIONS are retried after ``retry.backoff.ms`` (20 ms for
  AddPartitionsToTxn, whose CONCURRENT_TRANSACTIONS right after a commit
  lasts until the markers are written);
- a partition's batches are held (:meth:`TransactionManager.hold`) until the
  partition is in the transaction: the partitions with queued batches that are
  not are added with one AddPartitionsToTxn per turn of the sender;
- batches are encoded transactional (attribute 0x10) and Produce carries the
  transactional id;
- commit: every batch is sent at once (``linger.ms`` ignored); EndTxn(commit)
  goes when none is queued or in flight; a transaction that added nothing
  completes without EndTxn (Kafka's ``transactionStarted``);
- abort: queued batches never sent fail with ``_PURGE_QUEUE`` (so do records
  still waiting for metadata); batches that already have a sequence are
  retried to the end (a gap would break the partition's sequence), unless the
  epoch must be bumped, when they fail too; then EndTxn(abort), after the
  batches in flight are answered;
- a failed batch makes the transaction abortable (ABORTABLE_ERROR), as does a
  group coordinator refusing the offsets (stale generation, ...): the failing
  call, and then ``produce``, ``send_offsets_to_transaction`` and
  ``commit_transaction``, raise a KafkaError whose ``txn_requires_abort()`` is
  True; PRODUCER_FENCED / INVALID_PRODUCER_EPOCH (reported as PRODUCER_FENCED),
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED,
  INVALID_TXN_STATE, INVALID_TRANSACTION_TIMEOUT and unexpected answers are
  fatal (``fatal()`` True): every queued record fails and every later call
  raises it. UNKNOWN_PRODUCER_ID / INVALID_PRODUCER_ID_MAPPING are abortable,
  and the abort takes a new epoch (KIP-360) or, for the latter, a new id.

The requests, and what each answer does, are :mod:`logstore.client.txn_requests`.

Threads: the application's calls and the sender's turns share one lock; the
sender alone sends, reads answers and settles results (a result's callbacks
run on the sender thread). Complexity: each call is O(1) plus its partitions;
:meth:`TransactionManager.hold` is O(partitions with queued batches) per turn
of the sender; each answer is O(its partitions).
"""

from __future__ import annotations

import bisect
import enum
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from typing import Any, Protocol

from logstore.client.cluster import Cluster
from logstore.client.errors import KafkaError, KafkaException, local
from logstore.client.idempotence import IdempotenceState
from logstore.client.txn_requests import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    END_TXN,
    FENCED,
    INIT_PRODUCER_ID,
    KEY_TRANSACTION,
    NOT_COORDINATOR,
    RETRY,
    TP,
    TRANSPORT,
    TXN_OFFSET_COMMIT,
    AddOffsets,
    AddPartitions,
    EndTxn,
    FindCoordinator,
    InitProducerId,
    Offsets,
    TxnRequest,
    settle,
)
from logstore.client.types import ConsumerGroupMetadata

_log = logging.getLogger("logstore.client.producer")

E = KafkaError
# What makes a producer fatal when a batch fails with it (the sender's FATAL_ERRORS, plus these).
FATAL_CODES = frozenset({E.INVALID_PRODUCER_EPOCH, E.PRODUCER_FENCED, E.CLUSTER_AUTHORIZATION_FAILED,  # type: ignore[attr-defined]
                         E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, E.TOPIC_AUTHORIZATION_FAILED,  # type: ignore[attr-defined]
                         E._FATAL})  # type: ignore[attr-defined]  # fmt: skip


class TxnState(enum.Enum):
    """The states of a transactional producer (Kafka's ``TransactionManager.State``)."""

    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


S = TxnState
VALID_TRANSITIONS: Mapping[TxnState, frozenset[TxnState]] = {
    # target: the states it may be entered from (Kafka's isTransitionValid, less the moves to
    # UNINITIALIZED that only its non-transactional idempotent producer makes).
    S.UNINITIALIZED: frozenset(),
    S.INITIALIZING: frozenset({S.UNINITIALIZED, S.ABORTING_TRANSACTION}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    S.COMMITTING_TRANSACTION: frozenset({S.IN_TRANSACTION}),
    S.ABORTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR}),
    S.ABORTABLE_ERROR: frozenset(
        {S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR, S.INITIALIZING}
    ),
    S.FATAL_ERROR: frozenset(TxnState) - {S.FATAL_ERROR},
}


def is_transition_valid(source: TxnState, target: TxnState) -> bool:
    """Whether a transactional producer may move from ``source`` to ``target``.

    >>> is_transition_valid(TxnState.READY, TxnState.IN_TRANSACTION)
    True
    >>> is_transition_valid(TxnState.UNINITIALIZED, TxnState.IN_TRANSACTION)
    False
    """
    return source in VALID_TRANSITIONS[target]


_HINTS = {
    S.UNINITIALIZED: "call init_transactions() first",
    S.INITIALIZING: "init_transactions() has not completed: call it again to wait for it",
    S.READY: "no transaction is open: call begin_transaction() first",
    S.IN_TRANSACTION: "a transaction is open: commit or abort it first",
    S.COMMITTING_TRANSACTION: "the transaction is being committed: call commit_transaction() again to wait",
    S.ABORTING_TRANSACTION: "the transaction is being aborted: call abort_transaction() again to wait",
    S.ABORTABLE_ERROR: "the transaction failed: call abort_transaction()",
    S.FATAL_ERROR: "the producer failed fatally: close it",
}


class SenderOps(Protocol):
    """What the manager asks of the sender (on the sender's thread)."""

    def incomplete(self) -> bool:
        """Whether any record is queued, waiting for metadata, or in flight."""

    def abort_undrained(self, error: KafkaError, everything: bool) -> None:
        """Fail, with ``error``, the queued batches never sent (``everything``: every batch not in
        flight) and the records waiting for metadata."""

    def set_fatal(self, error: KafkaError) -> None:
        """The producer can do nothing more: fail every record and refuse every call."""

    def queued(self) -> list[Any]:
        """The queued batches (re-sequenced when the producer id or epoch changes)."""


# -- the manager ------------------------------------------------------------------------------------


class TransactionManager:
    """The transactional state of one producer, and its requests (see the module docstring).

    Invariants: ``partitions`` (in the open transaction), ``pending_partitions`` (in an
    AddPartitionsToTxn queued or in flight) and ``_new_partitions`` (to be asked for) are
    disjoint, and all empty outside IN_TRANSACTION / COMMITTING_TRANSACTION /
    ABORTING_TRANSACTION / ABORTABLE_ERROR; at most one request is in flight;
    ``last_error`` is set exactly in ABORTABLE_ERROR and FATAL_ERROR (and kept while the
    failed transaction is aborted).
    """

    def __init__(
        self,
        transactional_id: str,
        timeout_ms: int,
        cluster: Cluster,
        *,
        backoff: float = 0.1,
        on_state: Callable[[TxnState], None] | None = None,
    ) -> None:
        self.transactional_id = transactional_id
        self.timeout_ms = int(timeout_ms)
        self.cluster = cluster
        self.backoff = backoff
        self.on_state: Callable[[TxnState], None] = on_state or (lambda state: None)
        self.idempotence = IdempotenceState()  # the producer id, epoch and sequences (the sender's too)
        self._ops: SenderOps | None = None
        self._wake_sender: Callable[[], None] = lambda: None
        self._lock = threading.RLock()
        self.state = TxnState.UNINITIALIZED
        self.last_error: KafkaError | None = None
        self.partitions: set[TP] = set()
        self.pending_partitions: set[TP] = set()
        self._new_partitions: set[TP] = set()
        self.transaction_started = False  # a partition or offsets were added (else no EndTxn)
        self.bump_required = False  # the abort must end with InitProducerId (KIP-360)
        self._queue: list[TxnRequest] = []  # sorted by order
        self._in_flight: tuple[TxnRequest, Future[Any]] | None = None
        self._txn_node: int | None = None
        self._group_nodes: dict[str, int] = {}
        self._operation: tuple[str, Future[None]] | None = None  # init/commit/abort under way

    def bind(self, ops: SenderOps, wake: Callable[[], None]) -> None:
        """Attach the sender: its operations on batches, and its wake-up (an event's ``set``)."""
        self._ops = ops
        self._wake_sender = wake

    def wake(self) -> None:
        """Wake the sender: its next turn sends what is due."""
        self._wake_sender()

    # -- the application's calls ----------------------------------------------------------------

    def initialize(self) -> Future[None]:
        """``init_transactions``: UNINITIALIZED -> INITIALIZING, and InitProducerId (after
        FindCoordinator) queued; the result settles when the id and epoch are known (READY).

        Raises KafkaException: ``_STATE`` when already initialized; ``_CONFLICT`` while
        another call is under way; the fatal error after one. O(1).
        """
        with self._lock:
            resumed = self._resume("init_transactions")
            if resumed is not None:
                return resumed
            if self.state is S.FATAL_ERROR:
                raise KafkaException(self._last())
            if self.state is not S.UNINITIALIZED:
                raise KafkaException(
                    local("_STATE", f"init_transactions() was already called (state {self.state.name})")
                )
            self._transition(S.INITIALIZING)
            result: Future[None] = Future()
            self.enqueue(InitProducerId(result, keep_id=False))
            self._operation = ("init_transactions", result)
        self.wake()
        return result

    def begin(self) -> None:
        """``begin_transaction``: READY -> IN_TRANSACTION (local: the coordinator hears of the
        transaction with its first partition or offsets).

        Raises KafkaException: ``_STATE`` outside READY (before init_transactions, with a
        transaction open or completing); the abortable error (``txn_requires_abort()``) or the
        fatal one after a failure; ``_CONFLICT`` while init/commit/abort is under way. O(1).
        """
        with self._lock:
            self._check_free("begin_transaction")
            self._raise_if_failed()
            if self.state is not S.READY:
                raise self._state_error("begin_transaction")
            self._transition(S.IN_TRANSACTION)

    def begin_commit(self) -> Future[None]:
        """``commit_transaction``: IN_TRANSACTION -> COMMITTING_TRANSACTION and EndTxn(commit)
        queued (sent once every record is delivered); the result settles when the coordinator
        has committed (READY), or fails with the transaction's error (abortable: abort then).

        Raises KafkaException: as :meth:`begin` (``_STATE`` without a transaction). O(1).
        """
        with self._lock:
            resumed = self._resume("commit_transaction")
            if resumed is not None:
                return resumed
            self._raise_if_failed()
            if self.state is not S.IN_TRANSACTION:
                raise self._state_error("commit_transaction")
            self._transition(S.COMMITTING_TRANSACTION)
            result: Future[None] = Future()
            self.enqueue(EndTxn(result, commit=True))
            self._operation = ("commit_transaction", result)
        self.wake()
        return result

    def begin_abort(self) -> Future[None]:
        """``abort_transaction``: IN_TRANSACTION / ABORTABLE_ERROR -> ABORTING_TRANSACTION;
        requests not yet sent for the transaction are dropped, and EndTxn(abort) queued (sent
        once the batches in flight are answered; the sender fails the unsent ones). The result
        settles when the coordinator has aborted (READY).

        Raises KafkaException: ``_STATE`` without a transaction; the fatal error after one;
        ``_CONFLICT`` while init/commit is under way. O(queued requests).
        """
        with self._lock:
            resumed = self._resume("abort_transaction")
            if resumed is not None:
                return resumed
            if self.state is S.FATAL_ERROR:
                raise KafkaException(self._last())
            if self.state not in (S.IN_TRANSACTION, S.ABORTABLE_ERROR):
                raise self._state_error("abort_transaction")
            self._transition(S.ABORTING_TRANSACTION)
            cause = local("_PURGE_QUEUE", "the transaction was aborted before this request was sent")
            for request in [r for r in self._queue if not isinstance(r, FindCoordinator)]:
                self._queue.remove(request)
                request.dropped(self)
                settle(request.result, cause)
            self._new_partitions.clear()
            result: Future[None] = Future()
            self.enqueue(EndTxn(result, commit=False))
            self._operation = ("abort_transaction", result)
        self.wake()
        return result

    def send_offsets(self, offsets: Offsets, group: ConsumerGroupMetadata) -> Future[None]:
        """``send_offsets_to_transaction``: AddOffsetsToTxn(group) to the transaction
        coordinator, then TxnOffsetCommit of ``offsets`` to the group's coordinator; the result
        settles when every offset is written (committed with the transaction). No offsets: a
        settled result (after the state checks).

        Raises KafkaException: as :meth:`begin_commit`. O(len(offsets)).
        """
        with self._lock:
            self._check_free("send_offsets_to_transaction")
            self._raise_if_failed()
            if self.state is not S.IN_TRANSACTION:
                raise self._state_error("send_offsets_to_transaction")
            result: Future[None] = Future()
            if not offsets:
                result.set_result(None)
                return result
            self.enqueue(AddOffsets(result, dict(offsets), group))
        self.wake()
        return result

    def check_produce(self) -> None:
        """Raise unless records may be produced now (IN_TRANSACTION): ``_STATE`` outside a
        transaction, the abortable or fatal error after a failure. O(1), no lock."""
        state = self.state
        if state is S.IN_TRANSACTION:
            return
        if state in (S.ABORTABLE_ERROR, S.FATAL_ERROR):
            raise KafkaException(self._last())
        raise self._state_error("produce")

    def finished(self, result: Future[None]) -> None:
        """The application has seen ``result`` settle: the call it belongs to is over."""
        with self._lock:
            if self._operation is not None and self._operation[1] is result:
                self._operation = None

    @property
    def completing(self) -> bool:
        """Committing or aborting: every queued batch is ready at once."""
        return self.state in (S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION)

    # -- the sender's side ------------------------------------------------------------------------

    def hold(self, partitions: Iterable[TP]) -> list[TP]:
        """Of ``partitions`` (those with queued batches), the ones not yet in the transaction,
        whose batches must wait; those not yet asked for join the next AddPartitionsToTxn
        (in IN_TRANSACTION or COMMITTING_TRANSACTION). O(len(partitions))."""
        added = self.partitions
        held = [tp for tp in partitions if tp not in added]
        if held:
            with self._lock:
                if self.state in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION):
                    pending = self.pending_partitions
                    self._new_partitions.update(tp for tp in held if tp not in pending)
        return held

    def run(self, now: float) -> float:
        """One turn of the sender: fail what an abort drops, take in the answer to the request in
        flight, send the next request if its time has come. Returns the seconds until a retry
        is due (inf: nothing to do until an answer or a call wakes the sender)."""
        ops = self._ops
        assert ops is not None, "bind() first"
        if self.state in (S.ABORTING_TRANSACTION, S.ABORTABLE_ERROR):
            ops.abort_undrained(self._abort_cause(), self.bump_required or self.idempotence.reset_needed)
        if self._in_flight is not None:
            request, future = self._in_flight
            if not future.done():
                return float("inf")
            self._in_flight = None
            self._answered(request, future)
        return self._send_next(now)

    def batch_failed(self, error: KafkaError) -> None:
        """A batch of the transaction failed for good: the transaction must be aborted (fatal
        codes are the sender's to report, through :meth:`fatal`)."""
        if error.code() in FATAL_CODES or error.fatal():
            return
        with self._lock:
            if self.state in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR):
                self.abortable(error, None)

    def idle(self) -> bool:
        """Nothing queued or in flight (for tests)."""
        with self._lock:
            return not self._queue and self._in_flight is None

    # -- sending and answers ------------------------------------------------------------------------

    def _send_next(self, now: float) -> float:
        ops = self._ops
        assert ops is not None
        while True:
            with self._lock:
                if self.state in (S.ABORTABLE_ERROR, S.FATAL_ERROR):
                    self._terminate_queued()
                if self._new_partitions and self.state in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION):
                    new, self._new_partitions = self._new_partitions, set()
                    self.pending_partitions |= new
                    self.enqueue(AddPartitions(new))
                if not self._queue:
                    return float("inf")
                request = self._queue[0]
                if request.retry_at > now:
                    return request.retry_at - now
                if isinstance(request, EndTxn) and ops.incomplete():
                    return self.backoff  # every batch first (an answer wakes the sender sooner)
                self._queue.pop(0)
                if isinstance(request, EndTxn) and not self.transaction_started:
                    self.completed(request)  # nothing reached the coordinator: no EndTxn
                    continue
                node: int | None = None
                if request.key_type is not None:
                    node = self._coordinator_node(request)
                    if node is None:  # a FindCoordinator now heads the queue
                        self.enqueue(request)
                        continue
                fields = request.fields(self)
            future = self.cluster.send(node, request.api_key, fields)
            self._in_flight = (request, future)
            future.add_done_callback(lambda _: self.wake())
            return float("inf")

    def _answered(self, request: TxnRequest, future: Future[Any]) -> None:
        try:
            response = future.result()
        except KafkaException as e:
            error = e.error
        except Exception as e:  # a future can carry anything: a failed attempt, not a dead thread
            error = local("_FAIL", f"{request.name}: {e!r}")
        else:
            with self._lock:
                try:
                    request.handle(self, response)
                except Exception as e:  # an answer we cannot read
                    _log.exception(
                        "transactional id %r: %s answer not understood", self.transactional_id, request.name
                    )
                    self.fatal(local("_BAD_MSG", f"{request.name}: cannot read the answer: {e!r}"), request)
            return
        with self._lock:
            code = error.code()
            if code == E._DESTROY:  # type: ignore[attr-defined]
                request.dropped(self)
                settle(request.result, error)
            elif code in TRANSPORT or error.retriable():
                _log.info("transactional id %r: %s failed (%s); retrying", self.transactional_id, request.name,
                          error.str())  # fmt: skip
                if request.key_type is not None:
                    self.coordinator_lost(request)
                self.retry_later(request, self.backoff)
            else:
                self.fatal(KafkaError(code, f"{request.name}: {error.str()}"), request)

    def retried(self, request: TxnRequest, code: int) -> bool:
        """The answers every coordinator request retries: coordinator moved (looked up again),
        loading, or busy with another request of the id. True if ``code`` was one."""
        if code in NOT_COORDINATOR:
            self.coordinator_lost(request)
            self.retry_later(request, 0.0)
            return True
        if code in RETRY:
            self.retry_later(request, self.backoff)
            return True
        return False

    def _coordinator_node(self, request: TxnRequest) -> int | None:
        key = request.coordinator_key(self)
        node = self._txn_node if request.key_type == KEY_TRANSACTION else self._group_nodes.get(key)
        if node is None:
            assert request.key_type is not None
            self._lookup(request.key_type, key)
        return node

    def _lookup(self, key_type: int, key: str) -> None:
        for queued in self._queue:
            if isinstance(queued, FindCoordinator) and (queued.coordinator_type, queued.key) == (
                key_type,
                key,
            ):
                return
        self.enqueue(FindCoordinator(key_type, key))

    def coordinator_found(self, key_type: int, key: str, node: int) -> None:
        """FindCoordinator answered: ``node`` is the coordinator of ``key``."""
        if key_type == KEY_TRANSACTION:
            self._txn_node = node
        else:
            self._group_nodes[key] = node

    def coordinator_lost(self, request: TxnRequest) -> None:
        key = request.coordinator_key(self)
        if request.key_type == KEY_TRANSACTION:
            self._txn_node = None
        else:
            self._group_nodes.pop(key, None)
        assert request.key_type is not None
        self.cluster.forget_coordinator(key, request.key_type)

    def enqueue(self, request: TxnRequest) -> None:
        bisect.insort(self._queue, request, key=lambda r: r.order)

    def retry_later(self, request: TxnRequest, delay: float) -> None:
        request.retry_at = time.monotonic() + delay if delay > 0 else 0.0
        self.enqueue(request)

    def _terminate_queued(self) -> None:
        """In an error state only FindCoordinator goes on; every other request fails with it."""
        error = self._last()
        for request in [r for r in self._queue if not isinstance(r, FindCoordinator)]:
            self._queue.remove(request)
            request.dropped(self)
            settle(request.result, error)

    # -- outcomes ---------------------------------------------------------------------------------

    def initialized(self, request: TxnRequest, producer_id: int, epoch: int) -> None:
        assert self._ops is not None
        self.idempotence.restart(producer_id, epoch, self._ops.queued())
        self.bump_required = False
        self._transition(S.READY)
        _log.info("transactional id %r: producer id %d, epoch %d", self.transactional_id, producer_id, epoch)
        settle(request.result, None)

    def completed(self, request: EndTxn, *, reinit: bool = False, keep_id: bool = True) -> None:
        """The transaction ended (EndTxn answered, or nothing to end): READY, or INITIALIZING for
        a new epoch (``reinit``, or a bump the abort needs) with the same result."""
        self.partitions.clear()
        self.pending_partitions.clear()
        self._new_partitions.clear()
        self.transaction_started = False
        bump = not request.commit and (self.bump_required or self.idempotence.reset_needed)
        if reinit or bump:
            self._transition(S.INITIALIZING)
            self.enqueue(InitProducerId(request.result, keep_id=keep_id))
            return
        self._transition(S.READY)
        settle(request.result, None)

    def abortable(self, error: KafkaError, request: TxnRequest | None, *, bump: bool = False) -> None:
        """The transaction cannot commit: ABORTABLE_ERROR (the first error is kept); ``request``'s
        result fails. While aborting, only the result fails."""
        if self.state is S.FATAL_ERROR:
            if request is not None:
                settle(request.result, self._last())
            return
        if bump:
            self.bump_required = True
        failure = error if error.txn_requires_abort() else KafkaError(
            error.code(), f"{error.str()} (the transaction must be aborted: call abort_transaction())",
            retriable=False, txn_requires_abort=True,
        )  # fmt: skip
        if self.state is not S.ABORTING_TRANSACTION:
            if is_transition_valid(self.state, S.ABORTABLE_ERROR):
                if self.state is not S.ABORTABLE_ERROR:
                    _log.info(
                        "transactional id %r: transaction failed: %s", self.transactional_id, failure.str()
                    )
                self._transition(S.ABORTABLE_ERROR, failure)
            else:
                _log.warning("transactional id %r: %s in state %s", self.transactional_id, failure.str(),
                             self.state.name)  # fmt: skip
        if request is not None:
            settle(request.result, failure)

    def fatal(self, error: KafkaError, request: TxnRequest | None = None) -> None:
        """FATAL_ERROR: ``request``, every queued request and the call under way fail with the
        error (``fatal()`` True); the sender fails every record. The sender reports a fatal
        error of the producer here too (no request). Takes the lock."""
        with self._lock:
            if self.state is S.FATAL_ERROR:
                if request is not None:
                    settle(request.result, self._last())
                return
            code = error.code()
            if code in FENCED:
                code = E.PRODUCER_FENCED  # type: ignore[attr-defined]
                reason = (f"{error.str()}: producer fenced: another producer with transactional.id "
                          f"{self.transactional_id!r} started (or the transaction timed out)")  # fmt: skip
            else:
                reason = error.str()
            fatal = error if error.fatal() and code == error.code() else KafkaError(
                code, f"{reason}; this producer can do nothing more: close it and create a new one", fatal=True
            )  # fmt: skip
            _log.error("transactional id %r: fatal error: %s", self.transactional_id, fatal.str())
            self._transition(S.FATAL_ERROR, fatal)
            if request is not None:
                request.dropped(self)
                settle(request.result, fatal)
            for queued in self._queue:
                queued.dropped(self)
                settle(queued.result, fatal)
            self._queue.clear()
            self._new_partitions.clear()
            if self._operation is not None:
                settle(self._operation[1], fatal)
            if self._ops is not None:
                self._ops.set_fatal(fatal)

    # -- states -------------------------------------------------------------------------------------

    def _transition(self, target: TxnState, error: KafkaError | None = None) -> None:
        """Move to ``target`` (the lock held); KafkaException ``_STATE`` when the table forbids it.
        O(1)."""
        source = self.state
        if not is_transition_valid(source, target):
            raise KafkaException(
                local("_STATE", f"transactional id {self.transactional_id!r}: invalid transition from "
                                f"{source.name} to {target.name}")
            )  # fmt: skip
        if target in (S.ABORTABLE_ERROR, S.FATAL_ERROR):
            assert error is not None, target
            if not (target is S.ABORTABLE_ERROR and source is S.ABORTABLE_ERROR):
                self.last_error = error  # the first failure of a transaction is the one to tell
        elif target is S.READY:
            self.last_error = None
        self.state = target
        if source is not target:
            self.on_state(target)

    def _last(self) -> KafkaError:
        return self.last_error or local("_STATE", f"state {self.state.name}")

    def _raise_if_failed(self) -> None:
        if self.state in (S.ABORTABLE_ERROR, S.FATAL_ERROR):
            raise KafkaException(self._last())

    def _state_error(self, call: str) -> KafkaException:
        return KafkaException(
            local("_STATE", f"{call}() is not valid in state {self.state.name}: {_HINTS[self.state]}")
        )

    def _resume(self, call: str) -> Future[None] | None:
        """The result of ``call`` when an earlier ``call`` timed out (to wait on again); raises
        ``_CONFLICT`` if another call is still under way."""
        if self._operation is None:
            return None
        name, result = self._operation
        if name == call:
            return result
        if not result.done():
            raise KafkaException(
                KafkaError(E._CONFLICT,  # type: ignore[attr-defined]
                           f"{call}(): {name}() timed out and is still under way: call {name}() again to "
                           "wait for it", retriable=True)
            )  # fmt: skip
        self._operation = None
        return None

    def _check_free(self, call: str) -> None:
        if self._operation is not None:
            self._resume(call)  # raises while it is under way

    def _abort_cause(self) -> KafkaError:
        last = self.last_error
        reason = "not sent: the transaction is being aborted"
        if last is not None:
            reason += f" ({last.name()}: {last.str()})"
        return local("_PURGE_QUEUE", reason)

    def __repr__(self) -> str:
        return f"<TransactionManager {self.transactional_id!r} {self.state.name}>"


__all__ = [
    "ADD_OFFSETS_TO_TXN",
    "ADD_PARTITIONS_TO_TXN",
    "END_TXN",
    "FATAL_CODES",
    "INIT_PRODUCER_ID",
    "TXN_OFFSET_COMMIT",
    "VALID_TRANSITIONS",
    "SenderOps",
    "TransactionManager",
    "TxnState",
    "is_transition_valid",
]
