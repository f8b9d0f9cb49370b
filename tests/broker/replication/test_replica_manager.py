"""Partition and ReplicaManager (broker/replication/) over a real Store: appends and reads through partitions,
acks=all against min.insync.replicas, recreated topics, fetches woken by appends, the verification guard."""

from __future__ import annotations

import asyncio
import pathlib

import pytest
from kio.schema.errors import ErrorCode

from logstore.broker.metadata_cache import (
    MetadataCache,
)
from logstore.broker.replication.partition import Partition
from logstore.broker.replication.replica_manager import ReplicaManager
from logstore.errors import UnknownTopicError
from logstore.records import build_batch
from logstore.storage.store import Store

pytestmark = pytest.mark.unit

NODE = 7


@pytest.fixture
def store(tmp_path: pathlib.Path) -> Store:
    with Store(str(tmp_path / "data"), scheduler=False) as opened:
        yield opened


def replicas_for(store: Store) -> tuple[MetadataCache, ReplicaManager]:
    cache = MetadataCache("cluster")
    cache.track_store(store, NODE)
    return cache, ReplicaManager(store.log_manager, cache, NODE, 60_000)


def test_appends_and_reads_go_through_partitions(store: Store) -> None:
    store.create_topic("t", 2)
    _, replicas = replicas_for(store)

    async def main() -> None:
        result = await replicas.append("t", 1, build_batch([b"a", b"b"]), acks=1)
        assert (result.error, result.base_offset) == (ErrorCode.none, 0)
        assert (await replicas.append("t", 1, build_batch([b"c"]), acks=-1)).base_offset == 2
        assert (await replicas.append("t", 2, build_batch([b"x"]), acks=1)).error == (
            ErrorCode.unknown_topic_or_partition
        )
        assert (await replicas.append("nope", 0, build_batch([b"x"]), acks=1)).error == (
            ErrorCode.unknown_topic_or_partition
        )
        read = replicas.read("t", 1, 0, 1 << 20, True, "high_watermark")
        assert read.error == ErrorCode.none and read.high_watermark == 3 and read.read is not None
        assert [r.value for b in read.read.batches for r in b.records] == [b"a", b"b", b"c"]
        assert replicas.read("t", 0, 0, 1 << 20, True, "high_watermark").read is None  # empty

    asyncio.run(main())
    partition = replicas.partition("t", 1)
    assert isinstance(partition, Partition) and partition.log is store.log("t", 1)
    assert partition.log_start_offset <= partition.high_watermark <= partition.log_end_offset == 3
    partition.check_offsets()


def test_acks_all_needs_min_insync_replicas_in_the_isr(store: Store) -> None:
    store.create_topic("t", 1, {"min.insync.replicas": 2})
    _, replicas = replicas_for(store)

    async def main() -> None:
        refused = await replicas.append("t", 0, build_batch([b"a"]), acks=-1)
        assert refused.error == ErrorCode.not_enough_replicas and "min.insync.replicas=2" in (
            refused.message or ""
        )
        assert (await replicas.append("t", 0, build_batch([b"a"]), acks=1)).error == ErrorCode.none

    asyncio.run(main())


def test_a_recreated_topic_gets_a_new_partition_and_fresh_producer_state(store: Store) -> None:
    store.create_topic("t", 1)
    _, replicas = replicas_for(store)
    idempotent = build_batch([b"a"], producer_id=5, producer_epoch=0, base_sequence=0)

    async def main() -> None:
        assert (await replicas.append("t", 0, idempotent, acks=-1)).base_offset == 0
        duplicate = await replicas.append("t", 0, idempotent, acks=-1)
        assert (duplicate.error, duplicate.base_offset) == (ErrorCode.none, 0)  # the first append's offset
        old = replicas.partition("t", 0)
        store.delete_topic("t")
        assert replicas.partition("t", 0) is None
        store.create_topic("t", 1)
        assert replicas.partition("t", 0) is not old
        again = await replicas.append("t", 0, idempotent, acks=-1)
        assert (again.error, again.base_offset) == (ErrorCode.none, 0)  # a new log: not a duplicate
        assert replicas.log("t", 0).log_end_offset == 1
        with pytest.raises(UnknownTopicError):
            replicas.log("t", 1)

    asyncio.run(main())


def test_an_append_wakes_a_waiting_fetch(store: Store) -> None:
    store.create_topic("t", 1)
    _, replicas = replicas_for(store)

    async def main() -> bool:
        waiter = asyncio.create_task(replicas.wait_for_data([("t", 0)], timeout=10))
        await asyncio.sleep(0)
        await replicas.append("t", 0, build_batch([b"a"]), acks=1)
        return await asyncio.wait_for(waiter, 5)

    assert asyncio.run(main()) is True


def test_transaction_verification_guard(store: Store) -> None:
    """KIP-890 part 1 at the partition: which batches need their coordinator's word, and a
    marker written while it was being asked voids the answer (INVALID_TXN_STATE)."""
    store.create_topic("t", 1)
    _, replicas = replicas_for(store)

    def txn_batch(sequence: int, epoch: int = 0) -> bytes:
        return build_batch([b"v"], producer_id=5, producer_epoch=epoch, base_sequence=sequence, transactional=True)

    async def main() -> None:
        assert replicas.needs_verification("t", 0, build_batch([b"plain"])) is None
        assert replicas.needs_verification("t", 0, build_batch([b"i"], producer_id=5, producer_epoch=0, base_sequence=0)) is None
        assert replicas.needs_verification("nope", 0, txn_batch(0)) is None  # the append says why
        partition = replicas.partition("t", 0)
        assert isinstance(partition, Partition)
        assert replicas.needs_verification("t", 0, txn_batch(0)) == (5, 0, partition)
        guard = partition.producers.guards[5] = object()
        assert (await replicas.append("t", 0, txn_batch(0), acks=-1, guard=guard)).error == ErrorCode.none
        assert 5 not in partition.producers.guards  # spent: the transaction is open here now
        assert replicas.needs_verification("t", 0, txn_batch(1)) is None  # open: no question
        assert replicas.needs_verification("t", 0, txn_batch(0, epoch=1)) == (5, 1, partition)  # open at epoch 0 only
        assert (await replicas.append_marker("t", 0, 5, 0, 0, commit=False)).error == ErrorCode.none
        # Asked, then the marker came before the append: the answer is void.
        guard = partition.producers.guards[5] = object()
        assert (await replicas.append_marker("t", 0, 5, 0, 0, commit=False)).error == ErrorCode.none
        late = await replicas.append("t", 0, txn_batch(1), acks=-1, guard=guard)
        assert late.error == ErrorCode.invalid_txn_state and late.message == "Partition was not added to the transaction"
        # Asked, and nothing came in between: appended.
        guard = partition.producers.guards[5] = object()
        assert (await replicas.append("t", 0, txn_batch(1), acks=-1, guard=guard)).error == ErrorCode.none

    asyncio.run(main())
