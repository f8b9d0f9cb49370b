"""Dynamic broker configs in a two-broker cluster (a real ZooKeeper): Kafka's znodes
``/config/brokers/<default>`` and ``/config/brokers/<id>``, a change made through one broker
applied by every broker it concerns, and kept across a restart."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kazoo.client import KazooClient
from kio.index import load_payload_module
from kio.static.constants import EntityType

from tests.kit.brokerkit import wait_until
from tests.kit.clusterkit import BrokerProcess, create_topic
from tests.kit.wire import WireClient, request_class

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.cluster]

TIMEOUT = 15
DYNAMIC_BROKER, DYNAMIC_DEFAULT = 2, 3


def znode(zk_connect: str, path: str) -> Any:
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=10)
    try:
        data, _ = client.get(path)
        return json.loads(data)
    finally:
        client.stop()
        client.close()


def set_cluster_default(broker: BrokerProcess, name: str, value: str) -> Any:
    module = load_payload_module(44, 1, EntityType.request)
    change = module.AlterableConfig(name=name, config_operation=0, value=value)
    resource = module.AlterConfigsResource(resource_type=4, resource_name="", configs=(change,))
    with WireClient(broker.bootstrap, timeout=TIMEOUT) as client:
        (result,) = client.call(request_class(44, 1)(resources=(resource,), validate_only=False)).responses
    return result


def topic_entry(broker: BrokerProcess, topic: str, name: str) -> tuple[str, int]:
    """(value, source) of a topic key as ``broker`` itself describes it (librdkafka would send a
    topic's DescribeConfigs to any broker)."""
    module = load_payload_module(32, 1, EntityType.request)
    resource = module.DescribeConfigsResource(
        resource_type=2, resource_name=topic, configuration_keys=(name,)
    )
    with WireClient(broker.bootstrap, timeout=TIMEOUT) as client:
        (result,) = client.call(request_class(32, 1)(resources=(resource,), include_synonyms=False)).results
    (entry,) = result.configs
    return entry.value, entry.config_source


def test_dynamic_configs_live_in_zookeeper_and_reach_every_broker(
    cluster: Callable[..., BrokerProcess], zk_connect: str
) -> None:
    first, second = cluster(1), cluster(2)
    create_topic(first.bootstrap, "dyn", 2, 2)
    wait_until(lambda: topic_entry(second, "dyn", "retention.ms")[0] == "604800000", "the topic on broker 2")

    # The cluster-wide default, sent to broker 1, in Kafka's znode, applied by broker 2 too.
    result = set_cluster_default(first, "log.retention.ms", "60000")
    assert result.error_code.value == 0, result.error_message
    assert znode(zk_connect, "/config/brokers/<default>") == {
        "version": 1,
        "config": {"log.retention.ms": "60000"},
    }
    for broker in (first, second):
        wait_until(
            lambda b=broker: topic_entry(b, "dyn", "retention.ms") == ("60000", DYNAMIC_DEFAULT),
            f"the new default on {broker.bootstrap}",
        )

    # Broker 2's own set: librdkafka sends it to broker 2; broker 1 is not concerned.
    client = AdminClient({"bootstrap.servers": second.bootstrap})
    change = ConfigResource(
        ResourceType.BROKER,
        "2",
        incremental_configs=[
            ConfigEntry("log.retention.ms", "30000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("num.io.threads", "12", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    (future,) = client.incremental_alter_configs([change]).values()
    future.result(TIMEOUT)
    assert znode(zk_connect, "/config/brokers/2")["config"] == {
        "log.retention.ms": "30000",
        "num.io.threads": "12",
    }
    wait_until(
        lambda: topic_entry(second, "dyn", "retention.ms") == ("30000", DYNAMIC_BROKER), "broker 2's own set"
    )
    assert topic_entry(first, "dyn", "retention.ms") == ("60000", DYNAMIC_DEFAULT)

    # Kept across a restart (read from ZooKeeper at the join).
    second.stop()
    second.restart()
    wait_until(
        lambda: topic_entry(second, "dyn", "retention.ms") == ("30000", DYNAMIC_BROKER), "after a restart"
    )
    client = AdminClient({"bootstrap.servers": second.bootstrap})
    (future,) = client.describe_configs([ConfigResource(ResourceType.BROKER, "2")]).values()
    threads = future.result(TIMEOUT)["num.io.threads"]
    assert (threads.value, threads.source) == ("12", DYNAMIC_BROKER)
