"""ACLs on authenticated principals: SCRAM users on a SASL_PLAINTEXT listener, the broker's
authorizer deciding per user (the ACL matrix of test_acls.py runs as User:ANONYMOUS).

``dave`` may write and read topic ``paid`` (and its group); ``erin`` has no ACL: her produce is
TOPIC_AUTHORIZATION_FAILED, her Metadata does not list the topic, her group is
GROUP_AUTHORIZATION_FAILED. ``User:ANONYMOUS`` (the PLAINTEXT listener) is a super user and
manages the ACLs; an ACL for dave with a host that is not his is not his.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.kit.brokerkit import BrokerProcess, free_port
from tests.kit.saslkit import scram_acl_broker

pytestmark = pytest.mark.integration

PASSWORDS = {"dave": "dave-pw", "erin": "erin-pw"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    directory = str(tmp_path_factory.mktemp("acl-sasl"))
    sasl = free_port()
    overrides = {
        "super.users": "User:ANONYMOUS",
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "2",
    }
    process = scram_acl_broker(directory, PASSWORDS, overrides, sasl)
    process.start()
    admin = AdminClient({"bootstrap.servers": process.bootstrap})
    for future in admin.create_topics([NewTopic("paid", 1, 1)]).values():
        future.result(30)
    bindings = [
        AclBinding(ResourceType.TOPIC, "paid", ResourcePatternType.LITERAL, "User:dave", "*", op,
                   AclPermissionType.ALLOW)
        for op in (AclOperation.WRITE, AclOperation.READ)
    ] + [
        AclBinding(ResourceType.GROUP, "dave-", ResourcePatternType.PREFIXED, "User:dave", "*",
                   AclOperation.READ, AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, "paid", ResourcePatternType.LITERAL, "User:erin", "10.9.9.9",
                   AclOperation.ALL, AclPermissionType.ALLOW),  # another host: not erin's here
    ]  # fmt: skip
    for future in admin.create_acls(bindings).values():
        future.result(30)
    yield process, sasl
    assert process.stop() == 0, process.log_text()[-3000:]


def config(port: int, user: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": PASSWORDS[user], **extra,
    }  # fmt: skip


def produce_one(port: int, user: str, value: bytes) -> KafkaError | None:
    outcome: list[KafkaError | None] = []
    producer = Producer(config(port, user, **{"message.timeout.ms": 10_000}))
    producer.produce("paid", value, on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(20)
    assert outcome, f"no delivery report for {user}"
    return outcome[0]


def test_each_user_gets_what_the_acls_give(broker: tuple[BrokerProcess, int]) -> None:
    _, port = broker
    assert produce_one(port, "dave", b"from dave") is None
    error = produce_one(port, "erin", b"from erin")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    listed = {u: AdminClient(config(port, u)).list_topics(timeout=20).topics for u in PASSWORDS}
    assert "paid" in listed["dave"]
    assert "paid" not in listed["erin"]  # Metadata leaves out what erin may not describe

    consumer = Consumer(config(port, "dave", **{"group.id": "dave-readers", "auto.offset.reset": "earliest"}))
    try:
        consumer.subscribe(["paid"])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while not values and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        assert values == [b"from dave"]  # erin's record was never appended
    finally:
        consumer.close()

    erin = Consumer(config(port, "erin", **{"group.id": "dave-readers", "auto.offset.reset": "earliest"}))
    try:
        erin.subscribe(["paid"])
        codes: set[int] = set()
        deadline = time.monotonic() + 30
        while not codes and time.monotonic() < deadline:
            try:
                message = erin.poll(0.5)
            except KafkaException as e:
                codes.add(e.args[0].code())
                continue
            if message is not None and message.error() is not None:
                codes.add(message.error().code())
        assert codes & {KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED}, codes
    finally:
        erin.close()
