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

Threads: the application's calls and the sender's turns share one lock; the
sender alone sends, reads answers and settles results (a result's callbacks
run on the sender thread). Complexity: each call is O(1) plus its partitions;
:meth:`TransactionManager.hold` is O(partitions with queued batches) per turn
of the sender; each answer is O(its partitions).
"""

from __future__ import annotations

import bisect
import enum
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from typing import Any, ClassVar, Protocol

from logstore.client.cluster import FIND_COORDINATOR, Cluster, find_coordinator_fields
from logstore.client.errors import KafkaError, KafkaException, local
from logstore.client.sender import IdempotenceState
from logstore.client.types import ConsumerGroupMetadata

_log = logging.getLogger("logstore.client.producer")

INIT_PRODUCER_ID = 22
ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
TXN_OFFSET_COMMIT = 28
KEY_GROUP = 0
KEY_TRANSACTION = 1
CONCURRENT_BACKOFF_S = 0.02  # Kafka's retry of AddPartitionsToTxn answered CONCURRENT_TRANSACTIONS

TP = tuple[str, int]
Offsets = dict[TP, tuple[int, str | None, int | None]]  # (offset, metadata, leader epoch)

E = KafkaError
NONE = 0
_NOT_COORDINATOR = frozenset({E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE})  # type: ignore[attr-defined]
_RETRY = frozenset({E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS})  # type: ignore[attr-defined]
_FENCED = frozenset({E.INVALID_PRODUCER_EPOCH, E.PRODUCER_FENCED})  # type: ignore[attr-defined]
_PRODUCER_ID_LOST = frozenset({E.UNKNOWN_PRODUCER_ID, E.INVALID_PRODUCER_ID_MAPPING})  # type: ignore[attr-defined]
_UNAUTHORIZED = frozenset({E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED})  # type: ignore[attr-defined]
_TRANSPORT = frozenset({E._TRANSPORT, E._TIMED_OUT, E._ALL_BROKERS_DOWN})  # type: ignore[attr-defined]
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


# -- the requests ---------------------------------------------------------------------------------

_ORDER = itertools.count()


class _Request:
    """One transactional request: queued, in flight, or waiting to be retried.

    ``result`` settles when the request (and the ones it leads to) succeeds or fails;
    ``key_type`` names the coordinator it goes to (None: any broker).
    """

    priority: ClassVar[int] = 2
    api_key: ClassVar[int] = -1
    name: ClassVar[str] = "?"
    key_type: ClassVar[int | None] = KEY_TRANSACTION

    def __init__(self, result: Future[None] | None = None) -> None:
        self.result: Future[None] = result if result is not None else Future()
        self.retry_at = 0.0
        self.order = (self.priority, next(_ORDER))

    def coordinator_key(self, manager: TransactionManager) -> str:
        return manager.transactional_id

    def fields(self, manager: TransactionManager) -> dict[str, Any]:
        raise NotImplementedError

    def handle(self, manager: TransactionManager, response: Any) -> None:
        """Act on the answer (the manager's lock held, on the sender thread)."""
        raise NotImplementedError

    def dropped(self, manager: TransactionManager) -> None:
        """The request is failed without being sent (or answered): undo what it reserved."""


class _FindCoordinator(_Request):
    priority = 0
    api_key = FIND_COORDINATOR
    name = "FindCoordinator"
    key_type = None

    def __init__(self, coordinator_type: int, key: str) -> None:
        super().__init__()
        self.coordinator_type = coordinator_type
        self.key = key

    def fields(self, manager: TransactionManager) -> dict[str, Any]:
        return find_coordinator_fields(self.key, self.coordinator_type)

    def handle(self, manager: TransactionManager, response: Any) -> None:
        try:
            node = manager.cluster.coordinator_answer(self.key, self.coordinator_type, response)
        except KafkaException as e:
            code = e.error.code()
            if code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:  # type: ignore[attr-defined]
                manager._fatal(e.error, self)
            elif code == E.GROUP_AUTHORIZATION_FAILED:  # type: ignore[attr-defined]
                manager._abortable(e.error, self)
            elif e.error.retriable():
                manager._reenqueue(self, manager.backoff)
            else:
                manager._fatal(e.error, self)
            return
        if self.coordinator_type == KEY_TRANSACTION:
            manager._txn_node = node
        else:
            manager._group_nodes[self.key] = node
        manager._settle(self.result, None)


class _InitProducerId(_Request):
    priority = 1
    api_key = INIT_PRODUCER_ID
    name = "InitProducerId"

    def __init__(self, result: Future[None] | None, keep_id: bool) -> None:
        super().__init__(result)
        self.keep_id = keep_id  # KIP-360: the current id and epoch, for the epoch to be bumped

    def fields(self, manager: TransactionManager) -> dict[str, Any]:
        idem = manager.idempotence
        keep = self.keep_id and idem.producer_id >= 0
        return {
            "transactional_id": manager.transactional_id,
            "transaction_timeout": manager.timeout_ms,
            "producer_id": idem.producer_id if keep else -1,
            "producer_epoch": idem.epoch if keep else -1,
        }

    def handle(self, manager: TransactionManager, response: Any) -> None:
        code = int(response.error_code)
        if code == NONE:
            manager._initialized(self, int(response.producer_id), int(response.producer_epoch))
        elif manager._retried(self, code):
            pass
        else:
            manager._fatal(_error(code, self.name), self)


class _AddPartitions(_Request):
    priority = 2
    api_key = ADD_PARTITIONS_TO_TXN
    name = "AddPartitionsToTxn"

    def __init__(self, partitions: set[TP]) -> None:
        super().__init__()
        self.partitions = partitions

    def fields(self, manager: TransactionManager) -> dict[str, Any]:
        topics: dict[str, list[int]] = {}
        for topic, partition in sorted(self.partitions):
            topics.setdefault(topic, []).append(partition)
        idem = manager.idempotence
        return {
            "v3_and_below_transactional_id": manager.transactional_id,
            "v3_and_below_producer_id": idem.producer_id,
            "v3_and_below_producer_epoch": idem.epoch,
            "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }

    def handle(self, manager: TransactionManager, response: Any) -> None:
        errors = {
            (t.name, int(p.partition_index)): int(p.partition_error_code)
            for t in response.results_by_topic_v3_and_below
            for p in t.results_by_partition
        }
        unauthorized: set[str] = set()
        failed: dict[TP, int] = {}
        for tp, code in sorted(errors.items()):
            if code == NONE or code == E.OPERATION_NOT_ATTEMPTED:  # type: ignore[attr-defined]
                continue
            if code == E.CONCURRENT_TRANSACTIONS:  # type: ignore[attr-defined]
                manager._reenqueue(self, min(manager.backoff, CONCURRENT_BACKOFF_S))
                return
            if code == E.UNKNOWN_TOPIC_OR_PART:  # type: ignore[attr-defined]
                manager._reenqueue(self, manager.backoff)
                return
            if manager._retried(self, code):
                return
            if code in _PRODUCER_ID_LOST:
                self.dropped(manager)
                manager._abortable(_error(code, self.name), self, bump=True)
                return
            if code == E.TOPIC_AUTHORIZATION_FAILED:  # type: ignore[attr-defined]
                unauthorized.add(tp[0])
            elif code in _FENCED or code in _UNAUTHORIZED or code == E.INVALID_TXN_STATE:  # type: ignore[attr-defined]
                manager._fatal(_error(code, self.name), self)
                return
            else:
                failed[tp] = code
        self.dropped(manager)
        missing = self.partitions - errors.keys()
        if unauthorized:
            manager._abortable(
                KafkaError(E.TOPIC_AUTHORIZATION_FAILED,  # type: ignore[attr-defined]
                           f"{self.name}: not authorized to write to {', '.join(sorted(unauthorized))}"),
                self,
            )  # fmt: skip
        elif failed or missing:
            code = next(iter(failed.values())) if failed else E._BAD_MSG  # type: ignore[attr-defined]
            what = ", ".join(f"{t}-{p}: {KafkaError(c).name()}" for (t, p), c in sorted(failed.items()))
            if missing:
                what += (
                    (", " if what else "")
                    + "unanswered: "
                    + ", ".join(f"{t}-{p}" for t, p in sorted(missing))
                )
            manager._abortable(KafkaError(code, f"{self.name}: could not add partitions ({what})"), self)
        else:
            manager.partitions |= self.partitions
            manager.transaction_started = True
            manager._settle(self.result, None)
            manager._wake()  # their batches may go

    def dropped(self, manager: TransactionManager) -> None:
        manager._pending_partitions -= self.partitions


class _AddOffsets(_Request):
    priority = 2
    api_key = ADD_OFFSETS_TO_TXN
    name = "AddOffsetsToTxn"

    def __init__(self, result: Future[None], offsets: Offsets, group: ConsumerGroupMetadata) -> None:
        super().__init__(result)
        self.offsets = offsets
        self.group = group

    def fields(self, manager: TransactionManager) -> dict[str, Any]:
        idem = manager.idempotence
        return {
            "transactional_id": manager.transactional_id,
            "producer_id": idem.producer_id,
            "producer_epoch": idem.epoch,
            "group_id": self.group.group_id,
        }

    def handle(self, manager: TransactionManager, response: Any) -> None:
        code = int(response.error_code)
        if code == NONE:
            manager.transaction_started = True
            manager._enqueue(_TxnOffsetCommit(self.result, self.offsets, self.group))
        elif manager._retried(self, code):
            pass
        elif code in _PRODUCER_ID_LOST:
            manager._abortable(_error(code, self.name), self, bump=True)
        elif code == E.GROUP_AUTHORIZATION_FAILED:  # type: ignore[attr-defined]
            manager._abortable(_error(code, f"{self.name} (group {self.group.group_id!r})"), self)
        else:
            manager._fatal(_error(code, self.name), self)


class _TxnOffsetCommit(_Request):
    priority = 2
    api_key = TXN_OFFSET_COMMIT
    name = "TxnOffsetCommit"
    key_type = KEY_GROUP

    def __init__(self, result: Future[None], offsets: Offsets, group: ConsumerGroupMetadata) -> None:
        super().__init__(result)
        self.offsets = dict(offsets)  # those not yet committed
        self.group = group

    def coordinator_key(self, manager: TransactionManager) -> str:
        return self.group.group_id

    def fields(self, manager: TransactionManager) -> dict[str, Any]:
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), (offset, metadata, epoch) in sorted(self.offsets.items()):
            topics.setdefault(topic, []).append({
                "partition_index": partition,
                "committed_offset": offset,
                "committed_leader_epoch": -1 if epoch is None else epoch,
                "committed_metadata": metadata,
            })  # fmt: skip
        idem = manager.idempotence
        group = self.group
        return {
            "transactional_id": manager.transactional_id,
            "group_id": group.group_id,
            "producer_id": idem.producer_id,
            "producer_epoch": idem.epoch,
            "generation_id": group.generation_id,
            "member_id": group.member_id,
            "group_instance_id": group.group_instance_id,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }

    def handle(self, manager: TransactionManager, response: Any) -> None:
        retry = lost = False
        where = f"{self.name} (group {self.group.group_id!r})"
        for topic in response.topics:
            for p in topic.partitions:
                code = int(p.error_code)
                if code == NONE:
                    self.offsets.pop((topic.name, int(p.partition_index)), None)
                elif code in _NOT_COORDINATOR or code == E.REQUEST_TIMED_OUT:  # type: ignore[attr-defined]
                    retry = lost = True
                elif code in (E.UNKNOWN_TOPIC_OR_PART, E.COORDINATOR_LOAD_IN_PROGRESS):  # type: ignore[attr-defined]
                    retry = True
                elif code in (E.GROUP_AUTHORIZATION_FAILED, E.FENCED_INSTANCE_ID):  # type: ignore[attr-defined]
                    manager._abortable(_error(code, where), self)
                    return
                elif code in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION):  # type: ignore[attr-defined]
                    reason = (f"{where}: {KafkaError(code).name()}: the consumer's group generation or member "
                              "is stale (the group rebalanced): the offsets cannot be committed")  # fmt: skip
                    manager._abortable(KafkaError(code, reason), self)
                    return
                elif code in _PRODUCER_ID_LOST:
                    manager._abortable(_error(code, where), self, bump=True)
                    return
                else:  # fenced, unauthorized, unexpected
                    manager._fatal(_error(code, where), self)
                    return
        if lost:
            manager._coordinator_lost(self)
        if retry or self.offsets:
            manager._reenqueue(self, manager.backoff)
        else:
            manager._settle(self.result, None)


class _EndTxn(_Request):
    priority = 3
    api_key = END_TXN
    name = "EndTxn"

    def __init__(self, result: Future[None], commit: bool) -> None:
        super().__init__(result)
        self.commit = commit

    def fields(self, manager: TransactionManager) -> dict[str, Any]:
        idem = manager.idempotence
        return {
            "transactional_id": manager.transactional_id,
            "producer_id": idem.producer_id,
            "producer_epoch": idem.epoch,
            "committed": self.commit,
        }

    def handle(self, manager: TransactionManager, response: Any) -> None:
        code = int(response.error_code)
        if code == NONE:
            manager._completed(self)
        elif manager._retried(self, code):
            pass
        elif code in _PRODUCER_ID_LOST:
            if self.commit:
                manager._abortable(_error(code, self.name), self, bump=True)
            else:  # the coordinator has no transaction of ours to abort: take a new epoch, or id
                manager._completed(self, reinit=True, keep_id=code == E.UNKNOWN_PRODUCER_ID)  # type: ignore[attr-defined]
        else:
            manager._fatal(_error(code, self.name), self)


def _error(code: int, where: str) -> KafkaError:
    return KafkaError(code, f"{where}: {KafkaError(code).name()}: {KafkaError(code).str()}")


# -- the manager ------------------------------------------------------------------------------------


class TransactionManager:
    """The transactional state of one producer, and its requests (see the module docstring).

    Invariants: ``partitions`` (in the open transaction), ``_pending_partitions`` (in an
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
        self._wake: Callable[[], None] = lambda: None
        self._lock = threading.RLock()
        self.state = TxnState.UNINITIALIZED
        self.last_error: KafkaError | None = None
        self.partitions: set[TP] = set()
        self._pending_partitions: set[TP] = set()
        self._new_partitions: set[TP] = set()
        self.transaction_started = False  # a partition or offsets were added (else no EndTxn)
        self.bump_required = False  # the abort must end with InitProducerId (KIP-360)
        self._queue: list[_Request] = []  # sorted by order
        self._in_flight: tuple[_Request, Future[Any]] | None = None
        self._txn_node: int | None = None
        self._group_nodes: dict[str, int] = {}
        self._operation: tuple[str, Future[None]] | None = None  # init/commit/abort under way

    def bind(self, ops: SenderOps, wake: Callable[[], None]) -> None:
        """Attach the sender: its operations on batches, and its wake-up (an event's ``set``)."""
        self._ops = ops
        self._wake = wake

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
            self._enqueue(_InitProducerId(result, keep_id=False))
            self._operation = ("init_transactions", result)
        self._wake()
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
            self._enqueue(_EndTxn(result, commit=True))
            self._operation = ("commit_transaction", result)
        self._wake()
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
            for request in [r for r in self._queue if not isinstance(r, _FindCoordinator)]:
                self._queue.remove(request)
                request.dropped(self)
                self._settle(request.result, cause)
            self._new_partitions.clear()
            result: Future[None] = Future()
            self._enqueue(_EndTxn(result, commit=False))
            self._operation = ("abort_transaction", result)
        self._wake()
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
            self._enqueue(_AddOffsets(result, dict(offsets), group))
        self._wake()
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
                    pending = self._pending_partitions
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
                self._abortable(error, None)

    def fatal(self, error: KafkaError) -> None:
        """The producer failed fatally (the sender's report): FATAL_ERROR, every request failed."""
        with self._lock:
            if self.state is not S.FATAL_ERROR:
                self._fatal(error, None)

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
                    self._pending_partitions |= new
                    self._enqueue(_AddPartitions(new))
                if not self._queue:
                    return float("inf")
                request = self._queue[0]
                if request.retry_at > now:
                    return request.retry_at - now
                if isinstance(request, _EndTxn) and ops.incomplete():
                    return self.backoff  # every batch first (an answer wakes the sender sooner)
                self._queue.pop(0)
                if isinstance(request, _EndTxn) and not self.transaction_started:
                    self._completed(request)  # nothing reached the coordinator: no EndTxn
                    continue
                node: int | None = None
                if request.key_type is not None:
                    node = self._coordinator_node(request)
                    if node is None:  # a FindCoordinator now heads the queue
                        self._enqueue(request)
                        continue
                fields = request.fields(self)
            future = self.cluster.send(node, request.api_key, fields)
            self._in_flight = (request, future)
            future.add_done_callback(lambda _: self._wake())
            return float("inf")

    def _answered(self, request: _Request, future: Future[Any]) -> None:
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
                    self._fatal(local("_BAD_MSG", f"{request.name}: cannot read the answer: {e!r}"), request)
            return
        with self._lock:
            code = error.code()
            if code == E._DESTROY:  # type: ignore[attr-defined]
                request.dropped(self)
                self._settle(request.result, error)
            elif code in _TRANSPORT or error.retriable():
                _log.info("transactional id %r: %s failed (%s); retrying", self.transactional_id, request.name,
                          error.str())  # fmt: skip
                if request.key_type is not None:
                    self._coordinator_lost(request)
                self._reenqueue(request, self.backoff)
            else:
                self._fatal(KafkaError(code, f"{request.name}: {error.str()}"), request)

    def _retried(self, request: _Request, code: int) -> bool:
        """The answers every coordinator request retries: coordinator moved (looked up again),
        loading, or busy with another request of the id. True if ``code`` was one."""
        if code in _NOT_COORDINATOR:
            self._coordinator_lost(request)
            self._reenqueue(request, 0.0)
            return True
        if code in _RETRY:
            self._reenqueue(request, self.backoff)
            return True
        return False

    def _coordinator_node(self, request: _Request) -> int | None:
        key = request.coordinator_key(self)
        node = self._txn_node if request.key_type == KEY_TRANSACTION else self._group_nodes.get(key)
        if node is None:
            assert request.key_type is not None
            self._lookup(request.key_type, key)
        return node

    def _lookup(self, key_type: int, key: str) -> None:
        for queued in self._queue:
            if isinstance(queued, _FindCoordinator) and (queued.coordinator_type, queued.key) == (
                key_type,
                key,
            ):
                return
        self._enqueue(_FindCoordinator(key_type, key))

    def _coordinator_lost(self, request: _Request) -> None:
        key = request.coordinator_key(self)
        if request.key_type == KEY_TRANSACTION:
            self._txn_node = None
        else:
            self._group_nodes.pop(key, None)
        assert request.key_type is not None
        self.cluster.forget_coordinator(key, request.key_type)

    def _enqueue(self, request: _Request) -> None:
        bisect.insort(self._queue, request, key=lambda r: r.order)

    def _reenqueue(self, request: _Request, delay: float) -> None:
        request.retry_at = time.monotonic() + delay if delay > 0 else 0.0
        self._enqueue(request)

    def _terminate_queued(self) -> None:
        """In an error state only FindCoordinator goes on; every other request fails with it."""
        error = self._last()
        for request in [r for r in self._queue if not isinstance(r, _FindCoordinator)]:
            self._queue.remove(request)
            request.dropped(self)
            self._settle(request.result, error)

    # -- outcomes ---------------------------------------------------------------------------------

    def _initialized(self, request: _Request, producer_id: int, epoch: int) -> None:
        assert self._ops is not None
        self.idempotence.restart(producer_id, epoch, self._ops.queued())
        self.bump_required = False
        self._transition(S.READY)
        _log.info("transactional id %r: producer id %d, epoch %d", self.transactional_id, producer_id, epoch)
        self._settle(request.result, None)

    def _completed(self, request: _EndTxn, *, reinit: bool = False, keep_id: bool = True) -> None:
        """The transaction ended (EndTxn answered, or nothing to end): READY, or INITIALIZING for
        a new epoch (``reinit``, or a bump the abort needs) with the same result."""
        self.partitions.clear()
        self._pending_partitions.clear()
        self._new_partitions.clear()
        self.transaction_started = False
        bump = not request.commit and (self.bump_required or self.idempotence.reset_needed)
        if reinit or bump:
            self._transition(S.INITIALIZING)
            self._enqueue(_InitProducerId(request.result, keep_id=keep_id))
            return
        self._transition(S.READY)
        self._settle(request.result, None)

    def _abortable(self, error: KafkaError, request: _Request | None, *, bump: bool = False) -> None:
        """The transaction cannot commit: ABORTABLE_ERROR (the first error is kept); ``request``'s
        result fails. While aborting, only the result fails."""
        if self.state is S.FATAL_ERROR:
            if request is not None:
                self._settle(request.result, self._last())
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
            self._settle(request.result, failure)

    def _fatal(self, error: KafkaError, request: _Request | None) -> None:
        """FATAL_ERROR: ``request``, every queued request and the call under way fail with the
        error (``fatal()`` True); the sender fails every record."""
        if self.state is S.FATAL_ERROR:
            if request is not None:
                self._settle(request.result, self._last())
            return
        code = error.code()
        if code in _FENCED:
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
            self._settle(request.result, fatal)
        for queued in self._queue:
            queued.dropped(self)
            self._settle(queued.result, fatal)
        self._queue.clear()
        self._new_partitions.clear()
        if self._operation is not None:
            self._settle(self._operation[1], fatal)
        if self._ops is not None:
            self._ops.set_fatal(fatal)

    @staticmethod
    def _settle(result: Future[None], error: KafkaError | None) -> None:
        if result.done():
            return
        if error is None:
            result.set_result(None)
        else:
            result.set_exception(KafkaException(error))

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
