"""Transactions in a three-broker cluster (a real ZooKeeper): markers reach every partition's
leader (WriteTxnMarkers between brokers), ``__transaction_state`` is replicated, a new
coordinator takes over an open transaction after its coordinator is killed, and a partition
leader verifies a transaction's first batch with a coordinator on another broker (KIP-890)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kio.index import load_payload_module
from kio.static.constants import EntityType

from logstore.coordinator.internal_topics import TRANSACTION_STATE_TOPIC, partition_for
from tests.kit.brokerkit import read_values, wait_until
from tests.kit.clusterkit import BrokerProcess, create_topic, leaders, metadata, three_brokers

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.cluster]


def txn_producer(bootstrap: str, txn_id: str) -> Any:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 20000})
    producer.init_transactions(60)
    return producer


def test_markers_reach_every_leader(cluster: Callable[..., BrokerProcess]) -> None:
    brokers = three_brokers(cluster)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    create_topic(bootstrap, "tx", 3, 3, **{"min.insync.replicas": "2"})
    assert len(set(leaders(bootstrap, "tx").values())) == 3  # leaders spread: markers cross brokers
    producer = txn_producer(bootstrap, "cluster-txn")
    producer.begin_transaction()
    for i in range(300):
        producer.produce("tx", value=b"c%03d" % i, partition=i % 3)
    producer.commit_transaction(60)
    producer.begin_transaction()
    for i in range(150):
        producer.produce("tx", value=b"a%03d" % i, partition=i % 3)
    producer.flush(60)
    producer.abort_transaction(60)
    assert sorted(read_values(bootstrap, "tx", "read_committed", 300)) == sorted(b"c%03d" % i for i in range(300))


def test_coordinator_killed_with_a_transaction_open(cluster: Callable[..., BrokerProcess]) -> None:
    brokers = three_brokers(cluster, **{"transaction.state.log.replication.factor": "3"})
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    create_topic(bootstrap, "tk", 3, 3, **{"min.insync.replicas": "2"})
    zombie = txn_producer(bootstrap, "killed-coordinator")
    zombie.begin_transaction()
    for i in range(30):
        zombie.produce("tk", value=b"doomed-%d" % i, partition=i % 3)
    zombie.flush(60)
    index = partition_for("killed-coordinator", 50)
    coordinator = leaders(bootstrap, TRANSACTION_STATE_TOPIC)[index]
    brokers[coordinator].kill()
    rest = ",".join(b.bootstrap for i, b in brokers.items() if i != coordinator)
    wait_until(lambda: leaders(rest, TRANSACTION_STATE_TOPIC)[index] != coordinator, "a new coordinator", timeout=30)
    successor = txn_producer(rest, "killed-coordinator")  # the new coordinator aborts the open transaction
    successor.begin_transaction()
    for i in range(30):
        successor.produce("tk", value=b"kept-%d" % i, partition=i % 3)
    successor.commit_transaction(60)
    assert sorted(read_values(rest, "tk", "read_committed", 30)) == sorted(b"kept-%d" % i for i in range(30))


def test_late_batch_refused_by_a_leader_that_is_not_the_coordinator(cluster: Callable[..., BrokerProcess]) -> None:
    """KIP-890 part 1 across brokers: the partition's leader asks the coordinator on another
    broker (AddPartitionsToTxn v5, verify_only) before a transaction's first batch."""
    from tests.kit.txnkit import INVALID_TXN_STATE, NONE, Txn, offsets
    from tests.kit.wire import WireClient

    brokers = three_brokers(cluster)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    create_topic(bootstrap, "tv", 1, 3, **{"min.insync.replicas": "2"})
    leader = leaders(bootstrap, "tv")[0]
    with WireClient(brokers[leader].bootstrap) as on_leader:
        # FindCoordinator creates __transaction_state; then an id whose coordinator is elsewhere.
        fc = load_payload_module(10, 4, EntityType.request)
        on_leader.call(fc.FindCoordinatorRequest(key_type=1, coordinator_keys=("tv-probe",)))
        wait_until(lambda: TRANSACTION_STATE_TOPIC in metadata(bootstrap).topics, "__transaction_state")
        owners: dict[int, int] = {}

        def all_led() -> bool:  # in the view of whichever broker answers: each may lag the others
            owners.clear()
            owners.update(leaders(bootstrap, TRANSACTION_STATE_TOPIC))
            return len(owners) == 50 and all(v >= 0 for v in owners.values())

        wait_until(all_led, "a leader for each of its 50 partitions")
        txn_id = next(f"tv-{n}" for n in range(1000) if owners[partition_for(f"tv-{n}", 50)] != leader)
        coordinator = owners[partition_for(txn_id, 50)]
        with WireClient(brokers[coordinator].bootstrap) as on_coordinator:
            txn = Txn(on_coordinator, txn_id, "tv", leader=on_leader)
            assert txn.produce(b"not added").error_code == INVALID_TXN_STATE
            assert txn.add_partition() == NONE
            assert txn.produce(b"in").error_code == NONE
            txn.end(commit=False)
            assert txn.produce(b"late").error_code == INVALID_TXN_STATE
            wait_until(lambda: offsets(on_leader, "tv") == (2, 2), "the HW past the abort marker, LSO with it")
