"""``readStream`` / ``writeStream`` with format("logstore"): admission, AvailableNow, new partitions,
failOnDataLoss, and an exactly-once sink through a kill -9 of the driver."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from logstore.client import TopicPartition
from logstore.client.admin import AdminClient, NewPartitions
from tests.kit import KIT
from tests.kit.brokerkit import wait_until
from tests.kit.sparkkit import consume_all, create, produce

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.spark]


def stream(spark: Any, broker: Any, topic: str, **options: str) -> Any:
    r = (spark.readStream.format("logstore").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("subscribe", topic))  # fmt: skip
    for key, value in options.items():
        r = r.option(key, value)
    return r.load()


def to_topic(df: Any, broker: Any, topic: str, checkpoint: Path) -> Any:
    return (df.selectExpr("key", "value").writeStream.format("logstore")
            .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic)
            .option("checkpointLocation", str(checkpoint)))  # fmt: skip


def test_available_now_with_admission_control_then_resume(spark: Any, broker: Any, tmp_path: Path) -> None:
    create(broker.bootstrap, "in", 3)
    create(broker.bootstrap, "out", 2)
    first = produce(broker.bootstrap, "in", 3000, headers=False)
    source = stream(spark, broker, "in", startingOffsets="earliest", maxOffsetsPerTrigger="1000")
    query = to_topic(source, broker, "out", tmp_path / "cp").trigger(availableNow=True).start()
    query.awaitTermination(300)
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 3000
    assert len(sizes) >= 3 and max(sizes) <= 1000 + 3  # each partition's share rounds up by at most 1
    # Offsets in the progress are Kafka's JSON.
    assert json.loads(query.recentProgress[-1]["sources"][0]["endOffset"]) == {
        "in": {
            "0": sum(1 for r in first if r[3] == 0),
            "1": sum(1 for r in first if r[3] == 1),
            "2": sum(1 for r in first if r[3] == 2),
        }
    }
    more = produce(broker.bootstrap, "in", 500, start=3000, headers=False)
    query = to_topic(source, broker, "out", tmp_path / "cp").trigger(availableNow=True).start()
    query.awaitTermination(300)
    got = consume_all(broker.bootstrap, "out", 3500)
    assert collections.Counter((m.key(), m.value()) for m in got) == collections.Counter(
        (r[0], r[1]) for r in first + more
    )


def test_new_partitions_are_picked_up_mid_stream(spark: Any, broker: Any, tmp_path: Path) -> None:
    create(broker.bootstrap, "grow", 2)
    produce(broker.bootstrap, "grow", 100, headers=False)
    source = stream(spark, broker, "grow", startingOffsets="earliest")
    query = (source.selectExpr("partition", "offset").writeStream.format("memory").queryName("grown")
             .option("checkpointLocation", str(tmp_path / "cp")).trigger(processingTime="200 milliseconds")
             .start())  # fmt: skip
    try:
        wait_until(lambda: spark.sql("select count(*) c from grown").collect()[0].c == 100, "the first 100", timeout=120,
                   step=lambda: time.sleep(0.2))  # fmt: skip
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_partitions([NewPartitions("grow", 4)])["grow"].result(30)
        for p in (2, 3):
            produce(broker.bootstrap, "grow", 10, start=1000 + 10 * p, headers=False, partition=p)
        wait_until(lambda: spark.sql("select count(*) c from grown").collect()[0].c == 120, "the new partitions", timeout=120,
                   step=lambda: time.sleep(0.2))  # fmt: skip
        rows = spark.sql("select partition, offset from grown").collect()
        assert sorted((r.partition, r.offset) for r in rows if r.partition >= 2) == [
            (p, o) for p in (2, 3) for o in range(10)
        ]
    finally:
        query.stop()


@pytest.mark.parametrize("fail", [True, False])
def test_fail_on_data_loss_both_ways(spark: Any, broker: Any, tmp_path: Path, fail: bool) -> None:
    create(broker.bootstrap, "lossy", 1)
    create(broker.bootstrap, "seen", 1)
    produce(broker.bootstrap, "lossy", 100, headers=False)
    options = {"startingOffsets": "earliest", "failOnDataLoss": str(fail).lower()}

    def run() -> Any:
        offsets = stream(spark, broker, "lossy", **options).selectExpr("cast(offset as string) as value")
        return (
            to_topic(offsets.selectExpr("null as key", "value"), broker, "seen", tmp_path / "cp")
            .trigger(availableNow=True)
            .start()
        )

    run().awaitTermination(120)
    produce(broker.bootstrap, "lossy", 100, start=100, headers=False)
    # Retention (here DeleteRecords) removes offsets 100..149 before the query reads them.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.delete_records([TopicPartition("lossy", 0, 150)]).values():
        assert future.result(30).low_watermark == 150
    query = run()
    if fail:
        with pytest.raises(Exception, match=r"lossy\[0\]: offsets 100 to 149 are gone.*failOnDataLoss"):
            query.awaitTermination(120)
        expected = list(range(100))
    else:
        query.awaitTermination(120)
        expected = list(range(100)) + list(range(150, 200))
    seen = sorted(int(m.value()) for m in consume_all(broker.bootstrap, "seen", len(expected)))
    assert seen == expected


def test_exactly_once_through_kill_minus_9_of_the_driver(broker: Any, tmp_path: Path) -> None:
    create(broker.bootstrap, "in", 2)
    create(broker.bootstrap, "out", 3)
    inputs = produce(broker.bootstrap, "in", 6000, headers=False)
    child = [
        sys.executable,
        str(KIT / "stream_child.py"),
        broker.bootstrap,
        str(tmp_path / "cp"),
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    log = open(tmp_path / "child.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [*child, "run"], stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    try:
        wait_until(lambda: len(consume_all(broker.bootstrap, "out", 1500, timeout=2)) >= 1500 or proc.poll() is not None,
                   "the pipeline's first 1500 records", timeout=240, step=lambda: time.sleep(0.2))  # fmt: skip
        assert proc.poll() is None, (tmp_path / "child.log").read_text()[-3000:]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM, mid-stream
        proc.wait()
    seen = len(consume_all(broker.bootstrap, "out", 0, timeout=5))
    assert seen < 6000, "killed too late: the test proves nothing"
    drain = subprocess.run([*child, "drain"], stdout=log, stderr=subprocess.STDOUT, env=env, timeout=600)
    assert drain.returncode == 0, (tmp_path / "child.log").read_text()[-3000:]
    got = consume_all(broker.bootstrap, "out", 6000)
    want = collections.Counter(
        (r[0], None if r[1] is None else r[1].decode().upper().encode()) for r in inputs
    )
    assert collections.Counter((m.key(), m.value()) for m in got) == want
