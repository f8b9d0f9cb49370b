"""Listeners and SCRAM credentials in a ZooKeeper cluster: registrations list every listener,
Metadata answers per listener, and a credential altered through one broker works on the others."""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any

import pytest
from kazoo.client import KazooClient

from tests.kit.brokerkit import BrokerProcess, free_port, wait_until
from tests.kit.saslkit import SaslWire, metadata_request

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.cluster]


def scram_ok(at: str, user: str, password: str) -> bool:
    try:
        with SaslWire(at) as client:
            return bool(client.scram("SCRAM-SHA-512", user, password).error_code.value == 0)
    except (ConnectionError, OSError):
        return False


def test_scram_credentials_and_listeners_across_brokers(zk_connect: str, tmp_path: pathlib.Path) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    brokers: dict[int, BrokerProcess] = {}
    ports: dict[int, dict[str, int]] = {}
    zk = KazooClient(hosts=zk_connect)
    zk.start(timeout=10)
    try:
        # A user quota already in the user's znode (the quota layer's key) must survive.
        zk.create("/config/users/zed", b'{"version":1,"config":{"producer_byte_rate":"1024"}}', makepath=True)
        for broker_id in (1, 2):
            ports[broker_id] = {"PLAINTEXT": free_port(), "SASL_PLAINTEXT": free_port()}
            listeners = ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports[broker_id].items())
            settings = {"zookeeper.connect": zk_connect, "broker.id": str(broker_id),
                        "zookeeper.session.timeout.ms": "6000", "sasl.enabled.mechanisms": "SCRAM-SHA-512"}  # fmt: skip
            data_dir = str(tmp_path / f"broker-{broker_id}" / "data")
            os.makedirs(os.path.dirname(data_dir), exist_ok=True)
            brokers[broker_id] = BrokerProcess(
                data_dir, settings, ports[broker_id]["PLAINTEXT"], listeners
            ).start()

        def plaintext(i: int) -> str:
            return f"127.0.0.1:{ports[i]['PLAINTEXT']}"

        def sasl(i: int) -> str:
            return f"127.0.0.1:{ports[i]['SASL_PLAINTEXT']}"

        wait_until(lambda: len(AdminClient({"bootstrap.servers": plaintext(1)}).list_topics(timeout=10).brokers) == 2,
                   "two brokers")  # fmt: skip
        registered = json.loads(zk.get("/brokers/ids/2")[0])
        assert registered["endpoints"] == [f"PLAINTEXT://{plaintext(2)}", f"SASL_PLAINTEXT://{sasl(2)}"]
        assert registered["listener_security_protocol_map"] == {
            "PLAINTEXT": "PLAINTEXT", "SASL_PLAINTEXT": "SASL_PLAINTEXT"}  # fmt: skip

        admin = AdminClient({"bootstrap.servers": plaintext(1)})
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
        for future in admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("zed", info, b"zed-pw")]
        ).values():
            future.result(15)
        stored = json.loads(zk.get("/config/users/zed")[0])["config"]
        assert stored["producer_byte_rate"] == "1024" and stored["SCRAM-SHA-512"].startswith("salt=")
        wait_until(
            lambda: scram_ok(sasl(2), "zed", "zed-pw"), "the credential on the other broker", timeout=15
        )
        assert not scram_ok(sasl(2), "zed", "wrong")

        # Metadata on a SASL listener names every broker's SASL endpoint.
        with SaslWire(sasl(1)) as client:
            assert client.scram("SCRAM-SHA-512", "zed", "zed-pw").error_code.value == 0
            response: Any = client.call(metadata_request())
            assert sorted((b.node_id, b.port) for b in response.brokers) == [
                (1, ports[1]["SASL_PLAINTEXT"]), (2, ports[2]["SASL_PLAINTEXT"])]  # fmt: skip

        deletion = UserScramCredentialDeletion("zed", ScramMechanism.SCRAM_SHA_512)
        other = AdminClient({"bootstrap.servers": plaintext(2)})
        for future in other.alter_user_scram_credentials([deletion]).values():
            future.result(15)
        wait_until(
            lambda: not scram_ok(sasl(1), "zed", "zed-pw"), "the deletion on the other broker", timeout=15
        )
        assert json.loads(zk.get("/config/users/zed")[0])["config"] == {"producer_byte_rate": "1024"}
    finally:
        zk.stop()
        zk.close()
        for broker in brokers.values():
            if broker.alive:
                assert broker.stop() == 0, broker.log_text()[-3000:]
