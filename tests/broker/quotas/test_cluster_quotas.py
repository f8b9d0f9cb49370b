"""Client quotas in a two-broker cluster (a real ZooKeeper): Kafka's znodes under /config, a
change made through one broker seen by the other (/config/changes), other keys of a shared
``/config/users/<user>`` znode (SCRAM credentials) kept, and quotas kept across a restart."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from types import SimpleNamespace

import pytest
from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode

from logstore.cluster.zk_quotas import ZkQuotaStore
from tests.kit.brokerkit import wait_until
from tests.kit.clusterkit import BrokerProcess
from tests.kit.quotakit import alter, describe, described, entity, op

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.cluster]


def zk(zk_connect: str) -> KazooClient:
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=10)
    return client


def test_quotas_live_in_kafkas_znodes_and_reach_every_broker(
    cluster: Callable[..., BrokerProcess], zk_connect: str
) -> None:
    one, two = cluster(1), cluster(2)
    client = zk(zk_connect)
    try:
        # SCRAM credentials already in alice's znode (another writer): they must survive
        scram = "salt=c2FsdA==,stored_key=a2V5,server_key=a2V5,iterations=4096"
        client.create(
            "/config/users/alice",
            json.dumps({"version": 1, "config": {"SCRAM-SHA-256": scram}}).encode(),
            makepath=True,
        )
        response = alter(
            one.bootstrap,
            [
                {"entity": entity(user="alice"), "ops": [op("producer_byte_rate", 1024)]},
                {"entity": entity(user="alice", client_id="app"), "ops": [op("request_percentage", 25.5)]},
                {"entity": entity(client_id=None), "ops": [op("consumer_byte_rate", 2048)]},
            ],
        )
        assert [e.error_code for e in response.entries] == [ErrorCode.none] * 3
        data, _ = client.get("/config/users/alice")
        assert json.loads(data) == {
            "version": 1,
            "config": {"SCRAM-SHA-256": scram, "producer_byte_rate": "1024"},
        }
        data, _ = client.get("/config/users/alice/clients/app")
        assert json.loads(data)["config"] == {"request_percentage": "25.5"}
        data, _ = client.get("/config/clients/<default>")
        assert json.loads(data)["config"] == {"consumer_byte_rate": "2048"}
        changes = [
            json.loads(client.get(f"/config/changes/{c}")[0]) for c in client.get_children("/config/changes")
        ]
        assert {"version": 2, "entity_path": "users/alice"} in changes
        expected = {
            (("user", "alice"),): {"producer_byte_rate": 1024.0},
            (("client-id", "app"), ("user", "alice")): {"request_percentage": 25.5},
            (("client-id", None),): {"consumer_byte_rate": 2048.0},
        }
        wait_until(
            lambda: described(describe(two.bootstrap, [])) == expected,
            "broker 2 to see the quotas",
            timeout=15,
        )
        # removing the quota keeps the credentials
        alter(
            two.bootstrap, [{"entity": entity(user="alice"), "ops": [op("producer_byte_rate", remove=True)]}]
        )
        data, _ = client.get("/config/users/alice")
        assert json.loads(data)["config"] == {"SCRAM-SHA-256": scram}
        wait_until(
            lambda: (("user", "alice"),) not in described(describe(one.bootstrap, [])),
            "broker 1 to see it",
            timeout=15,
        )
        # notifications older than 15 minutes go (checked by pretending the clock moved on)
        store = ZkQuotaStore(SimpleNamespace(zk=client))  # type: ignore[arg-type]
        assert store.purge_changes(time.time() * 1000) == 0
        assert store.purge_changes(time.time() * 1000 + 16 * 60 * 1000) == len(changes) + 1
        assert client.get_children("/config/changes") == []
    finally:
        client.stop()
        client.close()
    assert one.stop() == 0
    one.restart()
    assert (("client-id", None),) in described(describe(one.bootstrap, []))
