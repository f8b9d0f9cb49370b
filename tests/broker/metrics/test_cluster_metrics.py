"""Cluster metrics: a follower that stops fetching shows on its leader's ``/metrics`` as an ISR
shrink and an under-replicated partition, its return as an ISR expansion; the bytes the
followers fetch count as replication bytes out, not as consumer bytes out."""

from __future__ import annotations

import signal
import urllib.request
from collections.abc import Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.kit.brokerkit import free_port
from tests.kit.clusterkit import (
    BrokerProcess,
    create_topic,
    isrs,
    leaders,
    metadata,
    produce_acked,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


def samples(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def one(port: int, name: str, **labels: str) -> float:
    return samples(port).get((name, frozenset(labels.items())), -1.0)


def test_isr_changes_and_replication_on_the_leaders_metrics(cluster: Callable[..., BrokerProcess]) -> None:
    ports = {i: free_port() for i in (1, 2, 3)}
    brokers = {
        i: cluster(i, **{"replica.lag.time.max.ms": "1500", "metrics.listener": f"http://127.0.0.1:{ports[i]}"})
        for i in (1, 2, 3)
    }
    wait_until(lambda: all(len(metadata(b.bootstrap).brokers) == 3 for b in brokers.values()), "three brokers")
    create_topic(brokers[1].bootstrap, "watched", 1, 3, **{"min.insync.replicas": "2"})
    wait_until(lambda: len(isrs(brokers[1].bootstrap, "watched")[0]) == 3, "ISR of three")
    leader = leaders(brokers[1].bootstrap, "watched")[0]
    acked, errors = produce_acked(brokers[leader].bootstrap, "watched", [b"v%04d" % i for i in range(300)])
    assert errors == [] and len(acked) == 300
    port = ports[leader]
    assert one(port, "logstore_topic_records_in_total", topic="watched") == 300
    assert one(port, "logstore_topic_replication_bytes_out_total", topic="watched") > 0
    assert one(port, "logstore_topic_bytes_out_total", topic="watched") == 0  # no consumer yet
    assert one(port, "logstore_under_replicated_partitions") == 0
    assert one(port, "logstore_isr_shrinks_total") == 0
    # Every replica's log reaches the leader's end; the followers count no appends of their own.
    for i, broker_port in ports.items():
        wait_until(
            lambda broker_port=broker_port: one(broker_port, "logstore_log_end_offset", topic="watched", partition="0")
            == 300,
            f"broker {i}'s replica at 300",
        )
        if i != leader:
            assert one(broker_port, "logstore_topic_records_in_total", topic="watched") in (-1.0, 0.0)

    controller = metadata(brokers[1].bootstrap).controller_id  # (AlterPartition goes to it: keep it awake)
    follower = next(i for i in brokers if i not in (leader, controller))
    other = next(i for i in brokers if i not in (leader, follower))
    assert brokers[follower].proc is not None
    brokers[follower].proc.send_signal(signal.SIGSTOP)  # below the 6 s session: still registered
    try:
        wait_until(lambda: isrs(brokers[other].bootstrap, "watched")[0] == sorted([leader, other]), "ISR shrunk",
                   timeout=10)  # fmt: skip
        # (__consumer_offsets partitions the leader leads with the same replicas may shrink too.)
        wait_until(lambda: one(port, "logstore_under_replicated_partitions") >= 1, "under-replicated on the leader")
        assert one(port, "logstore_isr_shrinks_total") >= 1
    finally:
        brokers[follower].proc.send_signal(signal.SIGCONT)
    wait_until(lambda: len(isrs(brokers[other].bootstrap, "watched")[0]) == 3, "ISR back to three", timeout=20)
    wait_until(lambda: one(port, "logstore_under_replicated_partitions") == 0, "fully replicated on the leader")
    assert one(port, "logstore_isr_expands_total") >= 1
