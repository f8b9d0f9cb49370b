"""MetadataCache (broker/metadata_cache.py): partition state invariants, topics by name and id, brokers,
and the cache following every change to the Store."""

from __future__ import annotations

import pathlib
import uuid

import pytest

from logstore.broker.cluster_member import LocalController
from logstore.broker.metadata_cache import (
    NO_LEADER,
    BrokerEndpoint,
    MetadataCache,
    PartitionState,
    TopicMetadata,
)
from logstore.errors import UnknownTopicError
from logstore.storage.config import LogConfig
from logstore.storage.store import Store

pytestmark = pytest.mark.unit

NODE = 7


@pytest.fixture
def store(tmp_path: pathlib.Path) -> Store:
    with Store(str(tmp_path / "data"), scheduler=False) as opened:
        yield opened


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
