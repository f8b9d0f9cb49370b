"""Broker processes joined through a real ZooKeeper: one cluster, as Kafka clients see it.

These topics have one replica per partition, spread over the brokers (what
is tested is membership, the controller, metadata, routing and what a
broker's death does to leadership); tests/broker/replication/test_replication.py replicates.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from tests.kit.brokerkit import wait_until
from tests.kit.clusterkit import BrokerProcess, broker_id, leaders, metadata

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.cluster]


def test_three_brokers_form_one_cluster(cluster: Callable[..., BrokerProcess]) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    brokers = [cluster(i, rack=f"r{i}") for i in (1, 2, 3)]
    for broker in brokers:  # every broker sees the three, and the same controller
        wait_until(lambda b=broker: len(metadata(b.bootstrap).brokers) == 3, "three brokers in metadata")
    seen = [metadata(b.bootstrap) for b in brokers]
    assert len({m.controller_id for m in seen}) == 1 and seen[0].controller_id in (1, 2, 3)
    assert len({m.cluster_id for m in seen}) == 1
    # A topic made through one broker: its partitions' leaders spread over all three.
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    admin.create_topics([NewTopic("spread", num_partitions=6, replication_factor=1)])["spread"].result(30)
    wait_until(lambda: set(leaders(brokers[2].bootstrap, "spread").values()) == {1, 2, 3}, "leaders spread")
    # Produce through the cluster (the client routes to each leader), read back per partition.
    producer = Producer({"bootstrap.servers": brokers[0].bootstrap, "acks": "all"})
    for i in range(600):
        producer.produce("spread", value=b"v%d" % i, key=b"k%d" % i)
    assert producer.flush(30) == 0
    import logstore.arrow

    table = logstore.arrow.read_table({"bootstrap.servers": brokers[2].bootstrap}, "spread")
    assert sorted(table.column("value").to_pylist()) == sorted(b"v%d" % i for i in range(600))
    assert len(set(table.column("partition").to_pylist())) == 6
    # Each partition's log is on its leader only.
    for broker in brokers:
        held = {name for name in os.listdir(broker.data_dir) if name.startswith("spread-")}
        mine = {
            f"spread-{p}"
            for p, leader in leaders(brokers[0].bootstrap, "spread").items()
            if leader == broker_id(broker)
        }
        assert held == mine


def test_a_dead_broker_leaves_the_metadata_and_its_partitions_come_back_with_it(
    cluster: Callable[..., BrokerProcess],
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    brokers = {i: cluster(i) for i in (1, 2, 3)}
    wait_until(lambda: len(metadata(brokers[1].bootstrap).brokers) == 3, "three brokers")
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    admin.create_topics([NewTopic("t", num_partitions=3, replication_factor=1)])["t"].result(30)
    wait_until(lambda: set(leaders(brokers[1].bootstrap, "t").values()) == {1, 2, 3}, "leaders spread")
    on_three = [p for p, leader in leaders(brokers[1].bootstrap, "t").items() if leader == 3]
    brokers[3].kill()  # kill -9: its session expires after zookeeper.session.timeout.ms
    wait_until(lambda: len(metadata(brokers[1].bootstrap).brokers) == 2, "broker 3 gone", timeout=30)
    wait_until(
        lambda: all(leaders(brokers[1].bootstrap, "t")[p] == -1 for p in on_three), "offline", timeout=30
    )
    brokers[3].restart()  # the same id and data directory
    wait_until(lambda: all(leaders(brokers[2].bootstrap, "t")[p] == 3 for p in on_three), "back", timeout=30)


def test_a_duplicate_broker_id_exits_with_a_clear_error(cluster: Callable[..., BrokerProcess]) -> None:
    first = cluster(1)
    with pytest.raises(RuntimeError, match="did not start"):
        cluster(1)
    assert metadata(first.bootstrap).brokers.keys() == {1}
