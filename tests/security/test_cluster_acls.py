"""ACLs in a two-broker cluster (a real ZooKeeper): Kafka's znodes ``/kafka-acl/<Type>/<name>``,
``/kafka-acl-extended/prefixed/<Type>/<name>`` and the change notifications; an ACL created
through one broker is enforced and described by the other, and deleted through the other.

Brokers reach each other as ``User:ANONYMOUS`` (no inter-broker authentication yet), so the
cluster runs with ``super.users=User:ANONYMOUS;User:admin``: the ACLs here are about User:alice,
and their effect is read through DescribeAcls and the ZooKeeper state."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kazoo.client import KazooClient

from tests.kit.brokerkit import wait_until
from tests.kit.clusterkit import BrokerProcess, metadata

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.cluster]

SETTINGS = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS;User:admin",
}
ANY = AclBindingFilter(
    ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
)


def znodes(zk_connect: str) -> dict[str, Any]:
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=10)
    try:
        found: dict[str, Any] = {}
        for root in ("/kafka-acl", "/kafka-acl-extended/prefixed"):
            for rtype in client.get_children(root):
                for name in client.get_children(f"{root}/{rtype}"):
                    found[f"{root}/{rtype}/{name}"] = json.loads(client.get(f"{root}/{rtype}/{name}")[0])
        found["changes"] = sorted(client.get_children("/kafka-acl-changes"))
        found["extended-changes"] = [
            client.get(f"/kafka-acl-extended-changes/{c}")[0].decode()
            for c in sorted(client.get_children("/kafka-acl-extended-changes"))
        ]
        return found
    finally:
        client.stop()
        client.close()


def described(bootstrap: str) -> set[tuple[Any, ...]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return {
        (b.restype, b.name, b.resource_pattern_type, b.principal, b.operation, b.permission_type)
        for b in admin.describe_acls(ANY).result(10)
    }


def test_acls_live_in_zookeeper_and_reach_every_broker(
    cluster: Callable[..., BrokerProcess], zk_connect: str
) -> None:
    one, two = cluster(1, **SETTINGS), cluster(2, **SETTINGS)
    wait_until(lambda: len(metadata(one.bootstrap).brokers) == 2, "two brokers")
    admin = AdminClient({"bootstrap.servers": one.bootstrap})
    bindings = [
        AclBinding(
            ResourceType.TOPIC,
            "orders",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        ),
        AclBinding(
            ResourceType.GROUP,
            "app-",
            ResourcePatternType.PREFIXED,
            "User:alice",
            "*",
            AclOperation.ALL,
            AclPermissionType.DENY,
        ),
    ]
    futures = admin.create_acls(bindings)
    for b in bindings:
        futures[b].result(10)
    state = znodes(zk_connect)
    assert state["/kafka-acl/Topic/orders"] == {
        "version": 1,
        "acls": [{"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}],
    }
    assert state["/kafka-acl-extended/prefixed/Group/app-"]["acls"][0]["permissionType"] == "Deny"
    assert len(state["changes"]) >= 1
    assert json.loads(state["extended-changes"][-1]) == {
        "version": 1, "resourceType": "Group", "name": "app-", "patternType": "PREFIXED"
    }  # fmt: skip
    expected = {
        (
            ResourceType.TOPIC,
            "orders",
            ResourcePatternType.LITERAL,
            "User:alice",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        ),
        (
            ResourceType.GROUP,
            "app-",
            ResourcePatternType.PREFIXED,
            "User:alice",
            AclOperation.ALL,
            AclPermissionType.DENY,
        ),
    }
    wait_until(lambda: described(two.bootstrap) == expected, "broker 2 sees the ACLs", timeout=15)
    # Deleted through broker 2: gone from ZooKeeper and from broker 1.
    admin2 = AdminClient({"bootstrap.servers": two.bootstrap})
    f = AclBindingFilter(
        ResourceType.TOPIC,
        "orders",
        ResourcePatternType.LITERAL,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    removed = admin2.delete_acls([f])
    assert len(removed[f].result(10)) == 1
    wait_until(lambda: "/kafka-acl/Topic/orders" not in znodes(zk_connect), "the znode goes")
    wait_until(lambda: len(described(one.bootstrap)) == 1, "broker 1 forgets the ACL", timeout=15)
    # A broker (re)starting reads the ACLs from ZooKeeper.
    assert two.stop() == 0
    two.start()
    assert len(described(two.bootstrap)) == 1
