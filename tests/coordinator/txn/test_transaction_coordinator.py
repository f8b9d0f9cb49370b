"""The transaction coordinator's state machine against an in-process fake of the broker
(records kept in lists, markers recorded): Kafka's TransactionCoordinator behaviour."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
from kio.schema.errors import ErrorCode

from logstore.coordinator.record_codec import Record
from logstore.coordinator.txn.transaction_coordinator import (
    EPOCH_MAX,
    TransactionCoordinator,
    TransactionsConfig,
)
from logstore.coordinator.txn.transaction_log import (
    TopicPartition,
    TransactionMetadata,
    TxnState,
    decode_transaction_key,
    decode_transaction_value,
    transaction_key,
    transaction_value,
)

pytestmark = pytest.mark.unit

T = TypeVar("T")


class FakeIO:
    """The broker side: ids counted up, records appended to lists, markers recorded."""

    def __init__(self) -> None:
        self.next_id = 1000
        self.records: dict[int, list[Record]] = {}
        self.markers: list[tuple[int, int, bool, set[TopicPartition]]] = []
        self.fail_writes: ErrorCode | None = None
        self.gate: asyncio.Event | None = None  # set: writes wait for it

    def allocate_producer_id(self) -> int:
        self.next_id += 1
        return self.next_id

    async def write(self, partition: int, record: Record) -> ErrorCode:
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_writes is not None:
            return self.fail_writes
        self.records.setdefault(partition, []).append(record)
        return ErrorCode.none

    async def write_markers(
        self, producer_id: int, epoch: int, coordinator_epoch: int, commit: bool, partitions: set[TopicPartition]
    ) -> None:
        self.markers.append((producer_id, epoch, commit, set(partitions)))

    def coordinator_epoch(self, partition: int) -> int:
        return 0


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def run(make: Callable[[TransactionCoordinator, FakeIO, Clock], Awaitable[T]], config: TransactionsConfig | None = None) -> T:
    async def main() -> T:
        io, clock = FakeIO(), Clock()
        coordinator = TransactionCoordinator(config or TransactionsConfig(), io, clock)
        try:
            return await make(coordinator, io, clock)
        finally:
            await coordinator.close()

    return asyncio.run(main())


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def test_init_bumps_the_epoch_each_time() -> None:
    async def body(c: TransactionCoordinator, io: FakeIO, clock: Clock) -> None:
        first = await c.init_producer_id("t", 60_000)
        assert first == (ErrorCode.none, 1001, 0)
        assert await c.init_producer_id("t", 60_000) == (ErrorCode.none, 1001, 1)
        assert c.txns["t"].state == TxnState.EMPTY
        assert len(io.records[c.partition_of("t")]) == 2

    run(body)


def test_timeouts_and_ids_are_checked() -> None:
    async def body(c: TransactionCoordinator, io: FakeIO, clock: Clock) -> None:
        assert (await c.init_producer_id("t", 0))[0] == ErrorCode.invalid_transaction_timeout
        assert (await c.init_producer_id("t", 900_001))[0] == ErrorCode.invalid_transaction_timeout
        assert (await c.init_producer_id("", 1000))[0] == ErrorCode.invalid_request
        assert io.records == {}

    run(body)


def test_commit_writes_prepare_markers_then_complete() -> None:
    async def body(c: TransactionCoordinator, io: FakeIO, clock: Clock) -> None:
        _, pid, epoch = await c.init_producer_id("t", 60_000)
        assert await c.add_partitions("t", pid, epoch, [("a", 0), ("b", 1)]) == ErrorCode.none
        assert c.txns["t"].state == TxnState.ONGOING
        assert c.txns["t"].start_ms == clock.now
        assert await c.add_partitions("t", pid, epoch, [("a", 0)]) == ErrorCode.none  # no new write
        writes = len(io.records[c.partition_of("t")])
        assert writes == 2
        assert await c.end_transaction("t", pid, epoch, commit=True) == ErrorCode.none
        await settle()
        assert io.markers == [(pid, epoch, True, {("a", 0), ("b", 1)})]
        assert c.txns["t"].state == TxnState.COMPLETE_COMMIT
        assert c.txns["t"].partitions == set()
        states = [decode_transaction_value("t", v).state for _, v in io.records[c.partition_of("t")] if v]
        assert states == [TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT]
        # A retried EndTxn(commit) succeeds; abort after a commit is an invalid transition.
        assert await c.end_transaction("t", pid, epoch, commit=True) == ErrorCode.none
        assert await c.end_transaction("t", pid, epoch, commit=False) == ErrorCode.invalid_txn_state

    run(body)


def test_end_without_a_transaction_and_wrong_producers() -> None:
    async def body(c: TransactionCoordinator, io: FakeIO, clock: Clock) -> None:
        _, pid, epoch = await c.init_producer_id("t", 60_000)
        assert await c.end_transaction("t", pid, epoch, commit=True) == ErrorCode.invalid_txn_state
        assert await c.add_partitions("t", pid + 1, epoch, [("a", 0)]) == ErrorCode.invalid_producer_id_mapping
        assert await c.add_partitions("t", pid, epoch + 1, [("a", 0)]) == ErrorCode.producer_fenced
        assert await c.add_partitions("nobody", pid, epoch, [("a", 0)]) == ErrorCode.invalid_producer_id_mapping

    run(body)


def test_a_new_producer_aborts_and_fences_the_open_transaction() -> None:
    async def body(c: TransactionCoordinator, io: FakeIO, clock: Clock) -> None:
        _, pid, epoch = await c.init_producer_id("t", 60_000)
        await c.add_partitions("t", pid, epoch, [("a", 0)])
        assert (await c.init_producer_id("t", 60_000))[0] == ErrorCode.concurrent_transactions
        await settle()
        assert io.markers == [(pid, epoch + 1, False, {("a", 0)})]  # aborted with the bumped epoch
        assert c.txns["t"].state == TxnState.COMPLETE_ABORT
        assert await c.init_producer_id("t", 60_000) == (ErrorCode.none, pid, epoch + 2)
        # The zombie's epoch is stale everywhere now.
        assert await c.add_partitions("t", pid, epoch, [("a", 0)]) == ErrorCode.producer_fenced
        assert await c.end_transaction("t", pid, epoch, commit=True) == ErrorCode.producer_fenced

    run(body)


def test_timed_out_transactions_are_aborted_with_the_epoch_bumped() -> None:
    async def body(c: TransactionCoordinator, io: FakeIO, clock: Clock) -> None:
        _, pid, epoch = await c.init_producer_id("t", 1_000)
        await c.add_partitions("t", pid, epoch, [("a", 0)])
        clock.now += 999
        assert await c.abort_timed_out() == 0
        clock.now += 2
        assert await c.abort_timed_out() == 1
        await settle()
        assert io.markers == [(pid, epoch + 1, False, {("a", 0)})]
        assert c.txns["t"].state == TxnState.COMPLETE_ABORT
        assert await c.end_transaction("t", pid, epoch, commit=True) == ErrorCode.producer_fenced

    run(body)


def test_concurrent_request_during_a_write() -> None:
    async def body(c: TransactionCoordinator, io: FakeIO, clock: Clock) -> None:
        _, pid, epoch = await c.init_producer_id("t", 60_000)
        io.gate = asyncio.Event()
        adding = asyncio.ensure_future(c.add_partitions("t", pid, epoch, [("a", 0)]))
        await settle()
        assert await c.end_transaction("t", pid, epoch, commit=True) == ErrorCode.concurrent_transactions
        io.gate.set()
        assert await adding == ErrorCode.none

    run(body)


def test_a_failed_write_changes_nothing() -> None:
    async def body(c: TransactionCoordinator, io: FakeIO, clock: Clock) -> None:
        _, pid, epoch = await c.init_producer_id("t", 60_000)
        io.fail_writes = ErrorCode.not_coordinator
        assert await c.add_partitions("t", pid, epoch, [("a", 0)]) == ErrorCode.not_coordinator
        assert c.txns["t"].state == TxnState.EMPTY and c.txns["t"].partitions == set()
        assert not c.txns["t"].pending

    run(body)


def test_an_exhausted_epoch_takes_a_new_producer_id() -> None:
    async def body(c: TransactionCoordinator, io: FakeIO, clock: Clock) -> None:
        _, pid, _ = await c.init_producer_id("t", 60_000)
        c.txns["t"].producer_epoch = EPOCH_MAX - 1
        error, new_pid, epoch = await c.init_producer_id("t", 60_000)
        assert (error, epoch) == (ErrorCode.none, 0) and new_pid != pid

    run(body)


def test_a_new_coordinator_loads_the_state_and_finishes_prepared_transactions() -> None:
    async def body(c: TransactionCoordinator, io: FakeIO, clock: Clock) -> None:
        _, pid, epoch = await c.init_producer_id("t", 60_000)
        await c.add_partitions("t", pid, epoch, [("a", 0)])
        partition = c.partition_of("t")
        written = list(io.records[partition])
        # The old coordinator died right after writing PrepareCommit: replay up to it.
        prepared = c.txns["t"].copy()
        prepared.state = TxnState.PREPARE_COMMIT
        written.append((transaction_key("t"), transaction_value(prepared)))
        io2 = FakeIO()
        successor = TransactionCoordinator(TransactionsConfig(), io2, clock)
        successor.serve_partitions_taken_only()
        assert successor.owner_error("t") == ErrorCode.not_coordinator
        successor.load(partition, written)
        await settle()
        assert io2.markers == [(pid, epoch, True, {("a", 0)})]
        assert successor.txns["t"].state == TxnState.COMPLETE_COMMIT
        successor.unload(partition)
        assert successor.owner_error("t") == ErrorCode.not_coordinator and "t" not in successor.txns
        await successor.close()

    run(body)


def test_list_and_describe() -> None:
    async def body(c: TransactionCoordinator, io: FakeIO, clock: Clock) -> None:
        _, pid, epoch = await c.init_producer_id("open", 60_000)
        await c.add_partitions("open", pid, epoch, [("a", 0)])
        await c.init_producer_id("idle", 60_000)
        assert sorted(m.transactional_id for m in c.list()) == ["idle", "open"]
        assert [m.transactional_id for m in c.list(states=["Ongoing"])] == ["open"]
        assert [m.transactional_id for m in c.list(producer_ids=[pid])] == ["open"]
        clock.now += 5_000
        assert [m.transactional_id for m in c.list(min_duration_ms=4_000)] == ["open"]
        assert list(c.list(min_duration_ms=6_000)) == []
        assert c.describe("nobody") == (ErrorCode.transactional_id_not_found, None)

    run(body)


def test_ids_expire_with_a_tombstone() -> None:
    async def body(c: TransactionCoordinator, io: FakeIO, clock: Clock) -> None:
        await c.init_producer_id("t", 60_000)
        clock.now += 1_001
        assert await c.expire_ids() == 1
        assert "t" not in c.txns
        assert io.records[c.partition_of("t")][-1] == (transaction_key("t"), None)

    run(body, TransactionsConfig(id_expiration_ms=1_000))


def test_records_round_trip_in_kafkas_layout() -> None:
    metadata = TransactionMetadata("tx", 42, 3, 60_000, TxnState.ONGOING, {("b", 1), ("a", 0), ("a", 2)}, 10, 20)
    key, value = transaction_key("tx"), transaction_value(metadata)
    assert key == b"\x00\x00\x00\x02tx"
    assert value[:2] == b"\x00\x00"  # version 0
    assert decode_transaction_key(key) == "tx"
    back = decode_transaction_value("tx", value)
    assert (back.producer_id, back.producer_epoch, back.timeout_ms, back.state) == (42, 3, 60_000, TxnState.ONGOING)
    assert back.partitions == {("b", 1), ("a", 0), ("a", 2)} and (back.start_ms, back.last_update_ms) == (10, 20)


def test_flexible_v1_value_is_read() -> None:
    # version 1: compact array/strings and tagged fields (a tag 2: ClientTransactionVersion=2)
    body = bytearray(b"\x00\x01")
    body += (7).to_bytes(8, "big") + (1).to_bytes(2, "big") + (5000).to_bytes(4, "big") + bytes([4])
    body += bytes([2]) + bytes([2]) + b"t" + bytes([2]) + (3).to_bytes(4, "big") + b"\x00"  # one topic, one partition
    body += (30).to_bytes(8, "big") + (-1).to_bytes(8, "big", signed=True)
    body += bytes([1, 2, 2]) + (2).to_bytes(2, "big")  # one tagged field: tag 2, 2 bytes
    metadata = decode_transaction_value("x", bytes(body))
    assert (metadata.producer_id, metadata.state, metadata.partitions) == (7, TxnState.COMPLETE_COMMIT, {("t", 3)})


def test_wire_names() -> None:
    names: dict[Any, str] = {state: state.wire_name for state in TxnState}
    assert names[TxnState.PREPARE_EPOCH_FENCE] == "PrepareEpochFence"
    assert names[TxnState.COMPLETE_ABORT] == "CompleteAbort"
    with pytest.raises(ValueError):
        TxnState(9)


def test_verify_partitions() -> None:
    """KIP-890 part 1: Kafka's handleVerifyPartitionsInTransaction, answer by answer."""

    async def body(c: TransactionCoordinator, io: FakeIO, clock: Clock) -> None:
        _, pid, epoch = await c.init_producer_id("t", 60_000)
        none, abortable = ErrorCode.none, ErrorCode.transaction_abortable
        assert c.verify_partitions("t", pid, epoch, [("a", 0)]) == {("a", 0): abortable}  # no transaction yet
        assert await c.add_partitions("t", pid, epoch, [("a", 0)]) == none
        assert c.verify_partitions("t", pid, epoch, [("a", 0), ("a", 1)]) == {("a", 0): none, ("a", 1): abortable}
        assert c.verify_partitions("t", pid + 1, epoch, [("a", 0)]) == {("a", 0): ErrorCode.invalid_producer_id_mapping}
        assert c.verify_partitions("t", pid, epoch + 1, [("a", 0)]) == {("a", 0): ErrorCode.producer_fenced}
        assert c.verify_partitions("other", pid, epoch, [("a", 0)]) == {("a", 0): ErrorCode.invalid_producer_id_mapping}
        assert c.verify_partitions("", pid, epoch, [("a", 0)]) == {("a", 0): ErrorCode.invalid_request}
        assert await c.end_transaction("t", pid, epoch, commit=False) == none
        io.gate = asyncio.Event()  # hold the Complete* write (its task runs next): PrepareAbort stays
        await settle()
        assert c.txns["t"].state == TxnState.PREPARE_ABORT
        assert c.verify_partitions("t", pid, epoch, [("a", 0)]) == {("a", 0): ErrorCode.concurrent_transactions}
        io.gate.set()
        await settle()
        assert c.txns["t"].state == TxnState.COMPLETE_ABORT
        assert c.verify_partitions("t", pid, epoch, [("a", 0)]) == {("a", 0): abortable}  # ended: a late batch

    run(body)
