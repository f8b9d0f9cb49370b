"""The broker's partition layer: MetadataCache, Partition and ReplicaManager over a real Store."""

from __future__ import annotations

import asyncio
import pathlib
import uuid

import pytest
from kio.schema.errors import ErrorCode

from logstore.broker.controller import LocalController
from logstore.broker.metadata_cache import (
    NO_LEADER,
    BrokerEndpoint,
    MetadataCache,
    PartitionState,
    TopicMetadata,
)
from logstore.broker.partition import Partition
from logstore.broker.replica_manager import ReplicaManager
from logstore.errors import UnknownTopicError
from logstore.records import build_batch
from logstore.storage.config import LogConfig
from logstore.storage.manager import Store

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


# -- MetadataCache ------------------------------------------------------------------------------


def test_partition_state_invariants_are_asserted() -> None:
    PartitionState(1, 0, (1, 2, 3), (1, 2))
    PartitionState(NO_LEADER, 3, (1, 2), (), offline=(1, 2))
    with pytest.raises(AssertionError):
        PartitionState(3, 0, (1, 2, 3), (1, 2))  # the leader outside the ISR
    with pytest.raises(AssertionError):
        PartitionState(1, 0, (1, 2), (1, 4))  # an ISR member that is no replica
    with pytest.raises(AssertionError):
        PartitionState(1, 0, (1, 2), (1,), offline=(5,))  # an offline replica that is no replica


def test_topics_by_name_and_id() -> None:
    cache = MetadataCache("c")
    config = LogConfig.from_dict({})
    first, second = uuid.uuid4(), uuid.uuid4()
    state = PartitionState(1, 0, (1,), (1,))
    cache.put_topic(TopicMetadata("t", first, config, (state, state)))
    assert cache.partition_count("t") == 2 and cache.partitions("t") == 2
    assert cache.topic_id("t") == first and cache.topic_by_id(first) == "t"
    assert cache.partition_state("t", 1) == state
    assert cache.partition_state("t", 2) is None and cache.partition_state("t", -1) is None
    cache.put_topic(TopicMetadata("t", second, config, (state,)))  # re-created: a new ID
    assert cache.topic_by_id(first) is None and cache.topic_by_id(second) == "t"
    cache.remove_topic("t")
    cache.remove_topic("t")  # twice: ignored
    assert not cache.has_topic("t") and cache.partition_count("t") is None
    for lookup in (cache.partitions, cache.topic_id, cache.topic_config):
        with pytest.raises(UnknownTopicError):
            lookup("t")


def test_brokers_are_replaced_whole_and_sorted() -> None:
    cache = MetadataCache("c")
    cache.set_brokers([BrokerEndpoint(3, "127.0.0.3", 9092), BrokerEndpoint(1, "127.0.0.1", 9092, "r1")])
    assert [b.node_id for b in cache.brokers()] == [1, 3]
    assert cache.broker(1) == BrokerEndpoint(1, "127.0.0.1", 9092, "r1")
    cache.set_brokers([BrokerEndpoint(2, "127.0.0.2", 9092)])
    assert [b.node_id for b in cache.brokers()] == [2] and cache.broker(1) is None


def test_the_cache_follows_every_change_to_the_store(store: Store) -> None:
    store.create_topic("before", 2)
    cache = MetadataCache("c")
    cache.track_store(store, NODE)
    assert cache.topic_names() == ["before"] and cache.controller_id == NODE
    assert cache.partition_state("before", 1) == PartitionState(NODE, -1, (NODE,), (NODE,))
    controller = LocalController(store)
    controller.create_topic("after", 1, {"retention.ms": 1000})
    assert cache.partitions("after") == 1 and cache.topic_id("after") == store.topic_id("after")
    assert cache.topic_config("after").retention_ms == 1000
    controller.add_partitions("after", 3)
    assert cache.partitions("after") == 3
    controller.set_topic_overrides("after", {"retention.ms": 2000})
    assert cache.topic_config("after").retention_ms == 2000
    store.create_topic("direct", 1)  # made on the Store itself (an embedded broker's owner)
    assert cache.has_topic("direct")
    controller.delete_topic("before")
    assert cache.topic_names() == ["after", "direct"]


# -- Partition and ReplicaManager ---------------------------------------------------------------


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
