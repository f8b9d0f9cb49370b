"""The producer's TransactionManager without a broker: the state table, the calls' checks, and
the requests it sends and retries (a fake cluster answers them). The broker-backed flows are in
tests/client/test_transactions.py."""

from __future__ import annotations

import time
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest

from logstore.client.errors import KafkaError, KafkaException
from logstore.client.fetcher import _AbortedTransactions
from logstore.client.transactions import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    END_TXN,
    INIT_PRODUCER_ID,
    TXN_OFFSET_COMMIT,
    VALID_TRANSITIONS,
    TransactionManager,
    TxnState,
    is_transition_valid,
)
from logstore.client.types import ConsumerGroupMetadata

pytestmark = pytest.mark.unit

S = TxnState
E = KafkaError
FIND_COORDINATOR = 10


class FakeCluster:
    """Records what is sent; the test answers each request's future."""

    def __init__(self) -> None:
        self.sent: list[tuple[int | None, int, dict[str, Any], Future[Any]]] = []
        self.forgotten: list[tuple[str, int]] = []

    def send(self, node: int | None, api_key: int, fields: dict[str, Any], **_: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self.sent.append((node, api_key, fields, future))
        return future

    def coordinator_answer(self, key: str, key_type: int, response: Any) -> int:
        if response.error_code:
            raise KafkaException(KafkaError(response.error_code))
        return int(response.node_id)

    def forget_coordinator(self, key: str, key_type: int) -> None:
        self.forgotten.append((key, key_type))


class FakeOps:
    def __init__(self) -> None:
        self.busy = False
        self.aborts: list[tuple[KafkaError, bool]] = []
        self.fatal: KafkaError | None = None

    def incomplete(self) -> bool:
        return self.busy

    def abort_undrained(self, error: KafkaError, everything: bool) -> None:
        self.aborts.append((error, everything))

    def set_fatal(self, error: KafkaError) -> None:
        self.fatal = error

    def queued(self) -> list[Any]:
        return []


class Rig:
    def __init__(self) -> None:
        self.cluster = FakeCluster()
        self.ops = FakeOps()
        self.states: list[TxnState] = []
        self.m = TransactionManager("tx", 60_000, self.cluster, backoff=0.01, on_state=self.states.append)  # type: ignore[arg-type]
        self.m.bind(self.ops, lambda: None)

    def turn(self) -> float:
        return self.m.run(time.monotonic())

    def last(self) -> tuple[int | None, int, dict[str, Any], Future[Any]]:
        return self.cluster.sent[-1]

    def answer(self, api_key: int, **response: Any) -> dict[str, Any]:
        """Answer the request in flight (which must be ``api_key``); returns its fields."""
        _node, key, fields, future = self.last()
        assert key == api_key, (key, api_key)
        assert not future.done()
        future.set_result(SimpleNamespace(**response))
        self.turn()
        return fields

    def settle_retries(self) -> None:
        """Let a backoff pass and take a turn."""
        time.sleep(0.02)
        self.turn()

    def init(self, producer_id: int = 7, epoch: int = 0) -> Future[None]:
        result = self.m.initialize()
        self.turn()
        self.answer(FIND_COORDINATOR, error_code=0, node_id=3)
        fields = self.answer(INIT_PRODUCER_ID, error_code=0, producer_id=producer_id, producer_epoch=epoch)
        assert fields["transactional_id"] == "tx" and fields["transaction_timeout"] == 60_000
        assert result.done() and result.exception() is None
        assert self.m.state is S.READY
        self.m.finished(result)  # as Producer.init_transactions does once it has seen the result
        return result

    def add(self, *partitions: tuple[str, int]) -> None:
        """Hold and add ``partitions`` to the open transaction."""
        assert self.m.hold(partitions) == list(partitions)
        self.turn()
        fields = self.answer(ADD_PARTITIONS_TO_TXN, results_by_topic_v3_and_below=_added(partitions, 0))
        assert {(t["name"], p) for t in fields["v3_and_below_topics"] for p in t["partitions"]} == set(
            partitions
        )
        assert self.m.hold(partitions) == []


def _added(partitions: Any, code: int) -> list[Any]:
    by_topic: dict[str, list[Any]] = {}
    for topic, p in partitions:
        by_topic.setdefault(topic, []).append(SimpleNamespace(partition_index=p, partition_error_code=code))
    return [SimpleNamespace(name=t, results_by_partition=ps) for t, ps in by_topic.items()]


def _code(result: Future[None]) -> KafkaError:
    error = result.exception()
    assert isinstance(error, KafkaException), error
    return error.error


def _raises(call: Any) -> KafkaError:
    with pytest.raises(KafkaException) as raised:
        call()
    return raised.value.error


# -- the state table ---------------------------------------------------------------------------------

# Kafka's TransactionManager.State.isTransitionValid, as (target: sources), less the moves to
# UNINITIALIZED its non-transactional idempotent producer makes.
KAFKA = {
    S.INITIALIZING: {S.UNINITIALIZED, S.ABORTING_TRANSACTION},
    S.READY: {S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION},
    S.IN_TRANSACTION: {S.READY},
    S.COMMITTING_TRANSACTION: {S.IN_TRANSACTION},
    S.ABORTING_TRANSACTION: {S.IN_TRANSACTION, S.ABORTABLE_ERROR},
    S.ABORTABLE_ERROR: {S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR, S.INITIALIZING},
}


@pytest.mark.parametrize("source", list(TxnState))
@pytest.mark.parametrize("target", list(TxnState))
def test_transition_table(source: TxnState, target: TxnState) -> None:
    if target is S.FATAL_ERROR:
        expected = source is not S.FATAL_ERROR  # from anywhere, and never left
    elif target is S.UNINITIALIZED:
        expected = False  # never re-entered
    else:
        expected = source in KAFKA[target]
    assert is_transition_valid(source, target) is expected
    assert set(VALID_TRANSITIONS) == set(TxnState)


def test_an_illegal_transition_is_refused() -> None:
    rig = Rig()
    error = _raises(lambda: rig.m._transition(S.IN_TRANSACTION))
    assert error.code() == E._STATE and "UNINITIALIZED to IN_TRANSACTION" in error.str()  # type: ignore[attr-defined]
    assert rig.m.state is S.UNINITIALIZED and rig.states == []


# -- the application's calls ------------------------------------------------------------------------


def test_calls_before_init_transactions_raise_state_errors() -> None:
    rig = Rig()
    calls = {"begin_transaction": rig.m.begin, "commit_transaction": rig.m.begin_commit,
             "abort_transaction": rig.m.begin_abort, "produce": rig.m.check_produce,
             "send_offsets_to_transaction": lambda: rig.m.send_offsets({("t", 0): (1, None, None)},
                                                                        ConsumerGroupMetadata("g"))}  # fmt: skip
    for name, call in calls.items():
        error = _raises(call)
        assert error.code() == E._STATE and not error.fatal() and not error.txn_requires_abort()  # type: ignore[attr-defined]
        assert error.str().startswith(
            f"{name}() is not valid in state UNINITIALIZED: call init_transactions()"
        )
    assert rig.cluster.sent == [] and rig.m.state is S.UNINITIALIZED


def test_init_then_a_transaction_commits() -> None:
    rig = Rig()
    rig.init(producer_id=7, epoch=2)
    assert (rig.m.idempotence.producer_id, rig.m.idempotence.epoch) == (7, 2)
    assert _raises(rig.m.initialize).code() == E._STATE  # type: ignore[attr-defined]
    rig.m.begin()
    rig.m.check_produce()
    assert _raises(rig.m.begin).code() == E._STATE  # type: ignore[attr-defined]
    rig.add(("t", 0), ("t", 1))
    assert rig.m.transaction_started
    rig.ops.busy = True  # records still to deliver: no EndTxn yet
    result = rig.m.begin_commit()
    assert rig.m.completing and _raises(rig.m.check_produce).code() == E._STATE  # type: ignore[attr-defined]
    sent = len(rig.cluster.sent)
    rig.turn()
    assert len(rig.cluster.sent) == sent
    rig.ops.busy = False
    rig.turn()
    rig.answer(END_TXN, error_code=E.CONCURRENT_TRANSACTIONS)  # type: ignore[attr-defined]
    assert not result.done()
    rig.settle_retries()
    fields = rig.answer(END_TXN, error_code=0)
    assert fields == {"transactional_id": "tx", "producer_id": 7, "producer_epoch": 2, "committed": True}
    assert result.done() and result.exception() is None
    assert rig.m.state is S.READY and rig.m.partitions == set() and not rig.m.transaction_started
    assert rig.states == [S.INITIALIZING, S.READY, S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.READY]


def test_init_retries_and_looks_the_coordinator_up_again() -> None:
    rig = Rig()
    result = rig.m.initialize()
    rig.turn()
    rig.answer(FIND_COORDINATOR, error_code=E.COORDINATOR_NOT_AVAILABLE, node_id=-1)  # type: ignore[attr-defined]
    rig.settle_retries()
    rig.answer(FIND_COORDINATOR, error_code=0, node_id=3)
    assert rig.last()[0] == 3
    rig.answer(INIT_PRODUCER_ID, error_code=E.CONCURRENT_TRANSACTIONS, producer_id=-1, producer_epoch=-1)  # type: ignore[attr-defined]
    rig.settle_retries()
    rig.answer(INIT_PRODUCER_ID, error_code=E.NOT_COORDINATOR, producer_id=-1, producer_epoch=-1)  # type: ignore[attr-defined]
    assert rig.cluster.forgotten == [("tx", 1)]
    assert rig.last()[1] == FIND_COORDINATOR and rig.last()[2]["key_type"] == 1  # looked up again
    rig.answer(FIND_COORDINATOR, error_code=0, node_id=4)
    assert rig.last()[0] == 4
    rig.last()[3].set_exception(KafkaException(KafkaError(E._TRANSPORT)))  # type: ignore[attr-defined]
    rig.turn()
    rig.settle_retries()  # a broken connection: the coordinator is looked up once more
    rig.answer(FIND_COORDINATOR, error_code=0, node_id=4)
    rig.answer(INIT_PRODUCER_ID, error_code=0, producer_id=1, producer_epoch=0)
    assert result.done() and result.exception() is None and rig.m.state is S.READY


def test_invalid_transaction_timeout_is_fatal() -> None:
    rig = Rig()
    result = rig.m.initialize()
    rig.turn()
    rig.answer(FIND_COORDINATOR, error_code=0, node_id=3)
    rig.answer(INIT_PRODUCER_ID, error_code=E.INVALID_TRANSACTION_TIMEOUT, producer_id=-1, producer_epoch=-1)  # type: ignore[attr-defined]
    error = _code(result)
    assert error.code() == E.INVALID_TRANSACTION_TIMEOUT and error.fatal()  # type: ignore[attr-defined]
    assert rig.m.state is S.FATAL_ERROR and rig.ops.fatal is not None and rig.ops.fatal.fatal()
    assert _raises(rig.m.begin) is rig.m.last_error
    assert _raises(rig.m.initialize).fatal()


def test_a_timed_out_call_is_resumed_and_others_conflict() -> None:
    rig = Rig()
    first = rig.m.initialize()
    assert rig.m.initialize() is first  # called again after a timeout: the same operation
    conflict = _raises(rig.m.begin)
    assert conflict.code() == E._CONFLICT and conflict.retriable()  # type: ignore[attr-defined]
    rig.turn()
    rig.answer(FIND_COORDINATOR, error_code=0, node_id=3)
    rig.answer(INIT_PRODUCER_ID, error_code=0, producer_id=1, producer_epoch=0)
    rig.m.finished(first)
    rig.m.begin()
    rig.add(("t", 0))
    commit = rig.m.begin_commit()
    assert rig.m.begin_commit() is commit
    assert _raises(rig.m.begin_abort).code() == E._CONFLICT  # type: ignore[attr-defined]


def test_a_transaction_that_added_nothing_ends_without_end_txn() -> None:
    rig = Rig()
    rig.init()
    for begin_end in (rig.m.begin_commit, rig.m.begin_abort):
        rig.m.begin()
        sent = len(rig.cluster.sent)
        result = begin_end()
        rig.turn()
        assert result.done() and result.exception() is None and rig.m.state is S.READY
        assert len(rig.cluster.sent) == sent


def test_a_failed_batch_makes_the_transaction_abortable() -> None:
    rig = Rig()
    rig.init()
    rig.m.begin()
    rig.add(("t", 0))
    rig.m.batch_failed(KafkaError(E.MSG_SIZE_TOO_LARGE, "too big"))  # type: ignore[attr-defined]
    assert rig.m.state is S.ABORTABLE_ERROR
    for call in (rig.m.check_produce, rig.m.begin_commit, rig.m.begin,
                 lambda: rig.m.send_offsets({("t", 0): (1, None, None)}, ConsumerGroupMetadata("g"))):  # fmt: skip
        error = _raises(call)
        assert error.txn_requires_abort() and not error.fatal() and not error.retriable()
        assert error.code() == E.MSG_SIZE_TOO_LARGE  # type: ignore[attr-defined]
    rig.m.batch_failed(KafkaError(E.REQUEST_TIMED_OUT))  # type: ignore[attr-defined]
    assert rig.m.last_error is not None and rig.m.last_error.code() == E.MSG_SIZE_TOO_LARGE  # type: ignore[attr-defined]  # the first is kept
    assert rig.m.hold([("t", 1)]) == [("t", 1)]
    rig.turn()  # no AddPartitionsToTxn for a failed transaction; its unsent batches fail
    assert rig.last()[1] == ADD_PARTITIONS_TO_TXN and rig.last()[3].done()
    assert rig.ops.aborts and rig.ops.aborts[-1][0].code() == E._PURGE_QUEUE  # type: ignore[attr-defined]
    result = rig.m.begin_abort()
    rig.turn()
    fields = rig.answer(END_TXN, error_code=0)
    assert fields["committed"] is False
    assert result.done() and result.exception() is None
    assert rig.m.state is S.READY and rig.m.last_error is None
    rig.m.begin()  # a new transaction
    rig.m.check_produce()


def test_fenced_is_fatal_and_final() -> None:
    rig = Rig()
    rig.init()
    rig.m.begin()
    rig.add(("t", 0))
    result = rig.m.begin_commit()
    rig.turn()
    rig.answer(END_TXN, error_code=E.INVALID_PRODUCER_EPOCH)  # type: ignore[attr-defined]
    error = _code(result)
    assert error.code() == E.PRODUCER_FENCED and error.fatal() and not error.txn_requires_abort()  # type: ignore[attr-defined]
    assert "fenced" in error.str()
    assert rig.m.state is S.FATAL_ERROR and rig.ops.fatal is error
    for call in (rig.m.begin, rig.m.begin_abort, rig.m.check_produce, rig.m.initialize):
        assert _raises(call) is error
    rig.m.batch_failed(KafkaError(3))
    assert rig.m.state is S.FATAL_ERROR


def test_add_partitions_fenced_fails_the_waiting_commit() -> None:
    rig = Rig()
    rig.init()
    rig.m.begin()
    rig.m.hold([("t", 0)])
    rig.ops.busy = True  # its batch waits for the partition
    commit = rig.m.begin_commit()
    rig.turn()
    rig.answer(ADD_PARTITIONS_TO_TXN, results_by_topic_v3_and_below=_added([("t", 0)], E.PRODUCER_FENCED))  # type: ignore[attr-defined]
    assert _code(commit).fatal() and rig.m.state is S.FATAL_ERROR


def test_add_partitions_concurrent_transactions_is_retried() -> None:
    rig = Rig()
    rig.init()
    rig.m.begin()
    rig.m.hold([("t", 0)])
    rig.turn()
    busy = _added([("t", 0)], E.CONCURRENT_TRANSACTIONS)  # type: ignore[attr-defined]
    rig.answer(ADD_PARTITIONS_TO_TXN, results_by_topic_v3_and_below=busy)
    assert rig.m.hold([("t", 0)]) == [("t", 0)]  # still held, and not asked for twice
    rig.settle_retries()
    rig.answer(ADD_PARTITIONS_TO_TXN, results_by_topic_v3_and_below=_added([("t", 0)], 0))
    assert rig.m.hold([("t", 0)]) == [] and rig.m.state is S.IN_TRANSACTION


def test_send_offsets_commits_through_the_group_coordinator() -> None:
    rig = Rig()
    rig.init(producer_id=7, epoch=1)
    rig.m.begin()
    group = ConsumerGroupMetadata("g", 5, "member-1", "static-1")
    result = rig.m.send_offsets({("in", 0): (10, None, None), ("in", 1): (20, "m", 3)}, group)
    rig.turn()
    fields = rig.answer(ADD_OFFSETS_TO_TXN, error_code=0)
    assert fields == {"transactional_id": "tx", "producer_id": 7, "producer_epoch": 1, "group_id": "g"}
    assert (
        rig.last()[1] == FIND_COORDINATOR and rig.last()[2]["key_type"] == 0 and rig.last()[2]["key"] == "g"
    )
    rig.answer(FIND_COORDINATOR, error_code=0, node_id=5)
    node, api_key, fields, _future = rig.last()
    assert (node, api_key) == (5, TXN_OFFSET_COMMIT)
    assert (fields["generation_id"], fields["member_id"], fields["group_instance_id"]) == (
        5,
        "member-1",
        "static-1",
    )
    assert fields["topics"] == [{"name": "in", "partitions": [
        {"partition_index": 0, "committed_offset": 10, "committed_leader_epoch": -1, "committed_metadata": None},
        {"partition_index": 1, "committed_offset": 20, "committed_leader_epoch": 3, "committed_metadata": "m"},
    ]}]  # fmt: skip
    answer = [SimpleNamespace(name="in", partitions=[SimpleNamespace(partition_index=0, error_code=0),
                                                     SimpleNamespace(partition_index=1, error_code=E.COORDINATOR_LOAD_IN_PROGRESS)])]  # type: ignore[attr-defined]  # fmt: skip
    rig.answer(TXN_OFFSET_COMMIT, topics=answer)
    assert not result.done()
    rig.settle_retries()
    fields = rig.answer(TXN_OFFSET_COMMIT, topics=[SimpleNamespace(name="in", partitions=[
        SimpleNamespace(partition_index=1, error_code=0)])])  # fmt: skip
    assert [p["partition_index"] for t in fields["topics"] for p in t["partitions"]] == [
        1
    ]  # only what failed
    assert result.done() and result.exception() is None and rig.m.transaction_started


def test_stale_generation_makes_the_offsets_abortable() -> None:
    rig = Rig()
    rig.init()
    rig.m.begin()
    result = rig.m.send_offsets({("in", 0): (10, None, None)}, ConsumerGroupMetadata("g", 1, "m"))
    rig.turn()
    rig.answer(ADD_OFFSETS_TO_TXN, error_code=0)
    rig.answer(FIND_COORDINATOR, error_code=0, node_id=5)
    rig.answer(TXN_OFFSET_COMMIT, topics=[SimpleNamespace(name="in", partitions=[
        SimpleNamespace(partition_index=0, error_code=E.ILLEGAL_GENERATION)])])  # type: ignore[attr-defined]  # fmt: skip
    error = _code(result)
    assert error.code() == E.ILLEGAL_GENERATION and error.txn_requires_abort() and "rebalanced" in error.str()  # type: ignore[attr-defined]
    assert rig.m.state is S.ABORTABLE_ERROR


def test_an_abort_after_a_sequence_error_takes_a_new_epoch() -> None:
    rig = Rig()
    rig.init(producer_id=7, epoch=0)
    rig.m.begin()
    rig.add(("t", 0))
    rig.m.idempotence.reset_needed = True  # the sender lost a batch's sequence
    rig.m.batch_failed(KafkaError(E.OUT_OF_ORDER_SEQUENCE_NUMBER))  # type: ignore[attr-defined]
    result = rig.m.begin_abort()
    rig.turn()
    assert rig.ops.aborts[-1][1] is True  # every unsent batch fails, sequenced or not
    rig.answer(END_TXN, error_code=0)
    assert rig.m.state is S.INITIALIZING and not result.done()
    fields = rig.answer(INIT_PRODUCER_ID, error_code=0, producer_id=7, producer_epoch=1)
    assert (fields["producer_id"], fields["producer_epoch"]) == (7, 0)  # KIP-360: the current ones
    assert result.done() and result.exception() is None and rig.m.state is S.READY
    assert (rig.m.idempotence.epoch, rig.m.idempotence.reset_needed) == (1, False)


# -- read_committed (the consumer's side of aborted transactions) -----------------------------------


def _batch(offset: int, producer_id: int, *, marker: bytes | None = None) -> Any:
    record = SimpleNamespace(key=None if marker is None else b"\x00\x00" + marker)
    return SimpleNamespace(last_offset=offset, producer_id=producer_id, records=[record])


def test_a_response_starting_between_an_aborted_transaction_and_its_marker() -> None:
    """The aborted transaction began before the fetch offset; its ABORT marker is the response's
    first batch: the producer's next (committed) transaction must not be hidden."""
    aborted = _AbortedTransactions([SimpleNamespace(first_offset=3, producer_id=1)])
    aborted.control(_batch(10, 1, marker=b"\x00\x00"))  # ABORT
    assert not aborted.skips(_batch(11, 1))
    aborted = _AbortedTransactions([SimpleNamespace(first_offset=12, producer_id=1)])
    assert not aborted.skips(_batch(11, 1))
    assert aborted.skips(_batch(12, 1))
    aborted.control(_batch(13, 1, marker=b"\x00\x00"))
    assert not aborted.skips(_batch(14, 1))
    aborted.control(_batch(15, 1, marker=b"\x00\x01"))  # a COMMIT marker changes nothing
