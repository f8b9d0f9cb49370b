"""DeleteTopics in a cluster: every broker stops following the deleted partitions, the one that
served the request included (its own ``forget_topic`` once left their fetches running, warning
"the leader answers unknown_topic_or_partition" about once a second per partition, forever)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import pytest
from confluent_kafka.admin import AdminClient

from tests.kit.brokerkit import wait_until
from tests.kit.clusterkit import BrokerProcess, create_topic, isrs, produce_acked, three_brokers

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.cluster]


def test_no_broker_keeps_fetching_a_deleted_topic(cluster: Callable[..., BrokerProcess]) -> None:
    brokers = three_brokers(cluster, **{"replica.fetch.backoff.ms": "200"})
    create_topic(brokers[1].bootstrap, "doomed", 6, 3)
    wait_until(lambda: all(len(v) == 3 for v in isrs(brokers[1].bootstrap, "doomed").values()), "ISR of three")
    acked, errors = produce_acked(brokers[1].bootstrap, "doomed", [b"v%03d" % i for i in range(60)])
    assert errors == [] and len(acked) == 60
    marks = {node: len(broker.log_text()) for node, broker in brokers.items()}

    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    admin.delete_topics(["doomed"], operation_timeout=30)["doomed"].result(30)
    wait_until(
        lambda: not any(
            name.startswith("doomed-") for b in brokers.values() for name in os.listdir(b.data_dir)
        ),
        "the deleted topic's logs gone from every broker",
    )
    time.sleep(2.0)  # ten fetch backoffs: a fetcher still running would have warned by now

    for node, broker in brokers.items():
        since = broker.log_text()[marks[node] :]
        stale = [line for line in since.splitlines() if "doomed-" in line and "the leader answers" in line]
        assert stale == [], f"broker {node} still fetches the deleted partitions: {stale[:3]}"
