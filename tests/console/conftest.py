"""Fixtures of the web console's tests: brokers (plaintext; SASL with ACLs) and consoles in front of them.

``plain_broker``: one broker for the module, groups fast. ``sasl_broker``: a
broker with a PLAINTEXT listener (User:ANONYMOUS, a super user, sets things up)
and a SASL_PLAINTEXT one with SCRAM users (its metrics and schema registry on more ports): ``admin`` (a super user) and
``dave``, who may read, write and describe topic ``paid`` and groups
``dave-*`` and nothing else. ``console_for(settings)`` serves a console in
front of either and stops it after the test.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from logstore.client.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from logstore.console import ConsoleSettings
from tests.kit.brokerkit import BrokerProcess, free_port
from tests.kit.consolekit import ConsoleServer
from tests.kit.saslkit import scram_acl_broker

PASSWORDS = {"admin": "admin-pw", "dave": "dave-pw"}
FAST = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000",
        "offsets.topic.num.partitions": "2"}  # fmt: skip


@dataclass
class SaslBroker:
    process: BrokerProcess
    sasl_port: int
    metrics_port: int
    registry_port: int

    @property
    def registry_url(self) -> str:
        return f"http://127.0.0.1:{self.registry_port}"

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    def settings(self, **kwargs: object) -> ConsoleSettings:
        config = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512"}
        urls = [f"http://127.0.0.1:{self.metrics_port}/metrics"]
        return ConsoleSettings(self.sasl_bootstrap, config, metrics_urls=urls, schema_registry_url=self.registry_url,
                               **kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def plain_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    directory = str(tmp_path_factory.mktemp("console-plain"))
    process = BrokerProcess(os.path.join(directory, "data"), FAST).start()
    yield process
    assert process.stop() == 0, process.log_text()[-3000:]


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    directory = str(tmp_path_factory.mktemp("console-sasl"))
    sasl, metrics, registry = free_port(), free_port(), free_port()
    overrides = {
        **FAST,
        "metrics.listener": f"http://127.0.0.1:{metrics}",
        "schema.registry.listeners": f"http://127.0.0.1:{registry}",
        "super.users": "User:ANONYMOUS;User:admin",
    }
    process = scram_acl_broker(directory, PASSWORDS, overrides, sasl)
    process.start()
    admin = AdminClient({"bootstrap.servers": process.bootstrap})
    try:
        for future in admin.create_topics([NewTopic("paid", 2, 1)]).values():
            future.result(30)
        bindings = [
            AclBinding(ResourceType.TOPIC, "paid", ResourcePatternType.LITERAL, "User:dave", "*", op,
                       AclPermissionType.ALLOW)
            for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS)
        ] + [
            AclBinding(ResourceType.GROUP, "dave-", ResourcePatternType.PREFIXED, "User:dave", "*",
                       AclOperation.ALL, AclPermissionType.ALLOW),
        ]  # fmt: skip
        for future in admin.create_acls(bindings).values():
            future.result(30)
    finally:
        admin.close()
    yield SaslBroker(process, sasl, metrics, registry)
    assert process.stop() == 0, process.log_text()[-3000:]


@pytest.fixture
def console_for() -> Iterator[Callable[[ConsoleSettings], ConsoleServer]]:
    started: list[ConsoleServer] = []

    def start(settings: ConsoleSettings) -> ConsoleServer:
        server = ConsoleServer(settings).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
