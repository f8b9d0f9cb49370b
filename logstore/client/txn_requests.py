"""The requests of a transactional producer (KIP-98) and how each answer moves its manager.

One class per request the :class:`~logstore.client.transactions.TransactionManager`
queues, in Kafka's order (:attr:`TxnRequest.priority`): FindCoordinator (the transaction
coordinator, key_type 1, or a group's, key_type 0), InitProducerId, AddPartitionsToTxn
(v3 and below: one transactional id), AddOffsetsToTxn and TxnOffsetCommit, then EndTxn.
Each builds its fields (``fields``) and acts on its answer (``handle``) through the
:class:`Manager` interface, on the sender thread with the manager's lock held:

- NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE: the coordinator is looked up again and the
  request retried at once; COORDINATOR_LOAD_IN_PROGRESS and CONCURRENT_TRANSACTIONS: retried
  after ``retry.backoff.ms`` (20 ms at most for AddPartitionsToTxn);
- UNKNOWN_PRODUCER_ID / INVALID_PRODUCER_ID_MAPPING: abortable, and the abort takes a new
  epoch (KIP-360); GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED and a stale group
  generation or member (TxnOffsetCommit): abortable;
- PRODUCER_FENCED / INVALID_PRODUCER_EPOCH, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
  CLUSTER_AUTHORIZATION_FAILED, INVALID_TXN_STATE and unexpected codes: fatal.

Each answer is O(its partitions).
"""

from __future__ import annotations

import itertools
from concurrent.futures import Future
from typing import Any, ClassVar, Protocol

from logstore.client.cluster import FIND_COORDINATOR, Cluster, find_coordinator_fields
from logstore.client.errors import KafkaError, KafkaException
from logstore.client.idempotence import IdempotenceState
from logstore.client.types import ConsumerGroupMetadata

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
NOT_COORDINATOR = frozenset({E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE})  # type: ignore[attr-defined]
RETRY = frozenset({E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS})  # type: ignore[attr-defined]
FENCED = frozenset({E.INVALID_PRODUCER_EPOCH, E.PRODUCER_FENCED})  # type: ignore[attr-defined]
_PRODUCER_ID_LOST = frozenset({E.UNKNOWN_PRODUCER_ID, E.INVALID_PRODUCER_ID_MAPPING})  # type: ignore[attr-defined]
_UNAUTHORIZED = frozenset({E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED})  # type: ignore[attr-defined]
TRANSPORT = frozenset({E._TRANSPORT, E._TIMED_OUT, E._ALL_BROKERS_DOWN})  # type: ignore[attr-defined]


# -- the requests ---------------------------------------------------------------------------------


class Manager(Protocol):
    """What a request reads of its transaction manager, and what it may do to it (on the
    sender thread, the manager's lock held)."""

    transactional_id: str
    timeout_ms: int
    cluster: Cluster
    backoff: float
    idempotence: IdempotenceState
    partitions: set[TP]  # in the transaction
    pending_partitions: set[TP]  # in an AddPartitionsToTxn queued or in flight
    transaction_started: bool

    def wake(self) -> None:
        """Wake the sender."""

    def enqueue(self, request: TxnRequest) -> None:
        """Queue ``request`` (in priority order)."""

    def retry_later(self, request: TxnRequest, delay: float) -> None:
        """Queue ``request`` again, to be sent after ``delay`` seconds."""

    def retried(self, request: TxnRequest, code: int) -> bool:
        """Retry ``request`` if ``code`` is one every coordinator request retries; whether it was."""

    def coordinator_found(self, key_type: int, key: str, node: int) -> None:
        """``node`` is the coordinator of ``key``."""

    def coordinator_lost(self, request: TxnRequest) -> None:
        """Forget the coordinator ``request`` goes to (it is looked up again)."""

    def initialized(self, request: TxnRequest, producer_id: int, epoch: int) -> None:
        """InitProducerId answered: the producer's id and epoch (READY)."""

    def completed(self, request: EndTxn, *, reinit: bool = False, keep_id: bool = True) -> None:
        """The transaction ended: READY, or a new epoch first."""

    def abortable(self, error: KafkaError, request: TxnRequest | None, *, bump: bool = False) -> None:
        """The transaction must be aborted (ABORTABLE_ERROR); ``request`` fails."""

    def fatal(self, error: KafkaError, request: TxnRequest | None = None) -> None:
        """The producer can do nothing more (FATAL_ERROR); ``request`` fails."""


def settle(result: Future[None], error: KafkaError | None) -> None:
    """Settle ``result`` (unless it is): None, or KafkaException(``error``)."""
    if result.done():
        return
    if error is None:
        result.set_result(None)
    else:
        result.set_exception(KafkaException(error))


_ORDER = itertools.count()


class TxnRequest:
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

    def coordinator_key(self, manager: Manager) -> str:
        return manager.transactional_id

    def fields(self, manager: Manager) -> dict[str, Any]:
        raise NotImplementedError

    def handle(self, manager: Manager, response: Any) -> None:
        """Act on the answer (the manager's lock held, on the sender thread)."""
        raise NotImplementedError

    def dropped(self, manager: Manager) -> None:
        """The request is failed without being sent (or answered): undo what it reserved."""

    @staticmethod
    def producer_fields(manager: Manager) -> dict[str, Any]:
        """The transactional id, producer id and epoch that AddOffsetsToTxn, TxnOffsetCommit and
        EndTxn carry."""
        idem = manager.idempotence
        return {
            "transactional_id": manager.transactional_id,
            "producer_id": idem.producer_id,
            "producer_epoch": idem.epoch,
        }


class FindCoordinator(TxnRequest):
    priority = 0
    api_key = FIND_COORDINATOR
    name = "FindCoordinator"
    key_type = None

    def __init__(self, coordinator_type: int, key: str) -> None:
        super().__init__()
        self.coordinator_type = coordinator_type
        self.key = key

    def fields(self, manager: Manager) -> dict[str, Any]:
        return find_coordinator_fields(self.key, self.coordinator_type)

    def handle(self, manager: Manager, response: Any) -> None:
        try:
            node = manager.cluster.coordinator_answer(self.key, self.coordinator_type, response)
        except KafkaException as e:
            code = e.error.code()
            if code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:  # type: ignore[attr-defined]
                manager.fatal(e.error, self)
            elif code == E.GROUP_AUTHORIZATION_FAILED:  # type: ignore[attr-defined]
                manager.abortable(e.error, self)
            elif e.error.retriable():
                manager.retry_later(self, manager.backoff)
            else:
                manager.fatal(e.error, self)
            return
        manager.coordinator_found(self.coordinator_type, self.key, node)
        settle(self.result, None)


class InitProducerId(TxnRequest):
    priority = 1
    api_key = INIT_PRODUCER_ID
    name = "InitProducerId"

    def __init__(self, result: Future[None] | None, keep_id: bool) -> None:
        super().__init__(result)
        self.keep_id = keep_id  # KIP-360: the current id and epoch, for the epoch to be bumped

    def fields(self, manager: Manager) -> dict[str, Any]:
        idem = manager.idempotence
        keep = self.keep_id and idem.producer_id >= 0
        return {
            "transactional_id": manager.transactional_id,
            "transaction_timeout": manager.timeout_ms,
            "producer_id": idem.producer_id if keep else -1,
            "producer_epoch": idem.epoch if keep else -1,
        }

    def handle(self, manager: Manager, response: Any) -> None:
        code = int(response.error_code)
        if code == NONE:
            manager.initialized(self, int(response.producer_id), int(response.producer_epoch))
        elif manager.retried(self, code):
            pass
        else:
            manager.fatal(_error(code, self.name), self)


class AddPartitions(TxnRequest):
    priority = 2
    api_key = ADD_PARTITIONS_TO_TXN
    name = "AddPartitionsToTxn"

    def __init__(self, partitions: set[TP]) -> None:
        super().__init__()
        self.partitions = partitions

    def fields(self, manager: Manager) -> dict[str, Any]:
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

    def handle(self, manager: Manager, response: Any) -> None:
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
                manager.retry_later(self, min(manager.backoff, CONCURRENT_BACKOFF_S))
                return
            if code == E.UNKNOWN_TOPIC_OR_PART:  # type: ignore[attr-defined]
                manager.retry_later(self, manager.backoff)
                return
            if manager.retried(self, code):
                return
            if code in _PRODUCER_ID_LOST:
                self.dropped(manager)
                manager.abortable(_error(code, self.name), self, bump=True)
                return
            if code == E.TOPIC_AUTHORIZATION_FAILED:  # type: ignore[attr-defined]
                unauthorized.add(tp[0])
            elif code in FENCED or code in _UNAUTHORIZED or code == E.INVALID_TXN_STATE:  # type: ignore[attr-defined]
                manager.fatal(_error(code, self.name), self)
                return
            else:
                failed[tp] = code
        self.dropped(manager)
        missing = self.partitions - errors.keys()
        if unauthorized:
            manager.abortable(
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
            manager.abortable(KafkaError(code, f"{self.name}: could not add partitions ({what})"), self)
        else:
            manager.partitions |= self.partitions
            manager.transaction_started = True
            settle(self.result, None)
            manager.wake()  # their batches may go

    def dropped(self, manager: Manager) -> None:
        manager.pending_partitions -= self.partitions


class AddOffsets(TxnRequest):
    priority = 2
    api_key = ADD_OFFSETS_TO_TXN
    name = "AddOffsetsToTxn"

    def __init__(self, result: Future[None], offsets: Offsets, group: ConsumerGroupMetadata) -> None:
        super().__init__(result)
        self.offsets = offsets
        self.group = group

    def fields(self, manager: Manager) -> dict[str, Any]:
        return {**self.producer_fields(manager), "group_id": self.group.group_id}

    def handle(self, manager: Manager, response: Any) -> None:
        code = int(response.error_code)
        if code == NONE:
            manager.transaction_started = True
            manager.enqueue(TxnOffsetCommit(self.result, self.offsets, self.group))
        elif manager.retried(self, code):
            pass
        elif code in _PRODUCER_ID_LOST:
            manager.abortable(_error(code, self.name), self, bump=True)
        elif code == E.GROUP_AUTHORIZATION_FAILED:  # type: ignore[attr-defined]
            manager.abortable(_error(code, f"{self.name} (group {self.group.group_id!r})"), self)
        else:
            manager.fatal(_error(code, self.name), self)


class TxnOffsetCommit(TxnRequest):
    priority = 2
    api_key = TXN_OFFSET_COMMIT
    name = "TxnOffsetCommit"
    key_type = KEY_GROUP

    def __init__(self, result: Future[None], offsets: Offsets, group: ConsumerGroupMetadata) -> None:
        super().__init__(result)
        self.offsets = dict(offsets)  # those not yet committed
        self.group = group

    def coordinator_key(self, manager: Manager) -> str:
        return self.group.group_id

    def fields(self, manager: Manager) -> dict[str, Any]:
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), (offset, metadata, epoch) in sorted(self.offsets.items()):
            topics.setdefault(topic, []).append({
                "partition_index": partition,
                "committed_offset": offset,
                "committed_leader_epoch": -1 if epoch is None else epoch,
                "committed_metadata": metadata,
            })  # fmt: skip
        group = self.group
        return {
            **self.producer_fields(manager),
            "group_id": group.group_id,
            "generation_id": group.generation_id,
            "member_id": group.member_id,
            "group_instance_id": group.group_instance_id,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }

    def handle(self, manager: Manager, response: Any) -> None:
        retry = lost = False
        where = f"{self.name} (group {self.group.group_id!r})"
        for topic in response.topics:
            for p in topic.partitions:
                code = int(p.error_code)
                if code == NONE:
                    self.offsets.pop((topic.name, int(p.partition_index)), None)
                elif code in NOT_COORDINATOR or code == E.REQUEST_TIMED_OUT:  # type: ignore[attr-defined]
                    retry = lost = True
                elif code in (E.UNKNOWN_TOPIC_OR_PART, E.COORDINATOR_LOAD_IN_PROGRESS):  # type: ignore[attr-defined]
                    retry = True
                elif code in (E.GROUP_AUTHORIZATION_FAILED, E.FENCED_INSTANCE_ID):  # type: ignore[attr-defined]
                    manager.abortable(_error(code, where), self)
                    return
                elif code in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION):  # type: ignore[attr-defined]
                    reason = (f"{where}: {KafkaError(code).name()}: the consumer's group generation or member "
                              "is stale (the group rebalanced): the offsets cannot be committed")  # fmt: skip
                    manager.abortable(KafkaError(code, reason), self)
                    return
                elif code in _PRODUCER_ID_LOST:
                    manager.abortable(_error(code, where), self, bump=True)
                    return
                else:  # fenced, unauthorized, unexpected
                    manager.fatal(_error(code, where), self)
                    return
        if lost:
            manager.coordinator_lost(self)
        if retry or self.offsets:
            manager.retry_later(self, manager.backoff)
        else:
            settle(self.result, None)


class EndTxn(TxnRequest):
    priority = 3
    api_key = END_TXN
    name = "EndTxn"

    def __init__(self, result: Future[None], commit: bool) -> None:
        super().__init__(result)
        self.commit = commit

    def fields(self, manager: Manager) -> dict[str, Any]:
        return {**self.producer_fields(manager), "committed": self.commit}

    def handle(self, manager: Manager, response: Any) -> None:
        code = int(response.error_code)
        if code == NONE:
            manager.completed(self)
        elif manager.retried(self, code):
            pass
        elif code in _PRODUCER_ID_LOST:
            if self.commit:
                manager.abortable(_error(code, self.name), self, bump=True)
            else:  # the coordinator has no transaction of ours to abort: take a new epoch, or id
                manager.completed(self, reinit=True, keep_id=code == E.UNKNOWN_PRODUCER_ID)  # type: ignore[attr-defined]
        else:
            manager.fatal(_error(code, self.name), self)


def _error(code: int, where: str) -> KafkaError:
    return KafkaError(code, f"{where}: {KafkaError(code).name()}: {KafkaError(code).str()}")
