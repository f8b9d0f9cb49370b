"""The Prometheus endpoint (``metrics.listener``) of a real broker under real clients.

confluent-kafka produces a known load to a topic of several partitions while a
thread scrapes ``/metrics``; a consumer group consumes part of it and commits
chosen offsets; the scrapes are parsed with prometheus_client's own parser and
checked against what the clients saw (offsets, counts) and what is on disk
(the segments' bytes: what "bytes in" counts is the record batches appended,
header included, as Kafka's BytesInPerSec). Bad ``metrics.listener`` values stop
the broker at start with a message naming the key.
"""

from __future__ import annotations

import glob
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.kit.brokerkit import create_topic, free_port, wait_until

pytestmark = pytest.mark.integration

TOPIC = "metrics-topic"
PARTITIONS = 3
RECORDS = 3000
VALUE_SIZE = 200
GROUP = "metrics-group"


def scrape(url: str) -> dict[str, Any]:
    """``/metrics`` parsed: family name -> {(sample name, frozen labels): value}."""
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    families: dict[str, Any] = {}
    for family in text_string_to_metric_families(text):
        samples = families.setdefault(family.name, {})
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return families


def value(families: dict[str, Any], family: str, sample: str | None = None, **labels: str) -> float:
    """One sample's value; KeyError naming it if absent."""
    key = (sample or family, frozenset(labels.items()))
    try:
        return float(families[family][key])
    except KeyError:
        raise KeyError(f"no sample {key} in family {family}: {families.get(family)}") from None


def by_label(families: dict[str, Any], family: str, sample: str, label: str) -> dict[str, float]:
    return {
        dict(labels)[label]: v for (name, labels), v in families.get(family, {}).items() if name == sample
    }


@pytest.fixture
def metrics_broker(broker_factory: Any) -> Any:
    port = free_port()
    broker = broker_factory(
        {
            "metrics.listener": f"http://127.0.0.1:{port}",
            "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "1000",
        }
    )
    broker.metrics_url = f"http://127.0.0.1:{port}/metrics"
    return broker


def test_metrics_follow_a_real_load(metrics_broker: Any) -> None:
    import confluent_kafka as ck

    broker, url = metrics_broker, metrics_broker.metrics_url
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)
    before = scrape(url)
    assert by_label(before, "logstore_topic_records_in", "logstore_topic_records_in_total", "topic").get(TOPIC, 0) == 0

    # Scrape every 50 ms while the producer runs (bounded in count and time).
    during: list[float] = []
    stop = threading.Event()
    scrape_errors: list[BaseException] = []

    def scraper() -> None:
        deadline = time.monotonic() + 60
        while not stop.is_set() and len(during) < 2000 and time.monotonic() < deadline:
            try:
                families = scrape(url)
            except BaseException as e:  # reported by the test
                scrape_errors.append(e)
                return
            records = by_label(families, "logstore_topic_records_in", "logstore_topic_records_in_total", "topic")
            during.append(records.get(TOPIC, 0.0))
            time.sleep(0.05)

    thread = threading.Thread(target=scraper, daemon=True)
    thread.start()
    producer = ck.Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.num.messages": 100, "acks": "all"}
    )
    delivered: dict[int, int] = {}  # partition -> the largest offset acknowledged
    failures: list[str] = []

    def on_delivery(error: Any, message: Any) -> None:
        if error is not None:
            failures.append(str(error))
        else:
            p = message.partition()
            delivered[p] = max(delivered.get(p, -1), message.offset())

    sent_value_bytes = 0
    for i in range(RECORDS):
        payload = (b"%08d" % i) * (VALUE_SIZE // 8)
        sent_value_bytes += len(payload)
        producer.produce(TOPIC, payload, key=b"k%d" % i, partition=i % PARTITIONS, on_delivery=on_delivery)
        if i % 100 == 99:  # many requests over ~1 s, so that scrapes fall between them
            producer.flush(30)
            time.sleep(0.03)
    assert producer.flush(30) == 0
    stop.set()
    thread.join(30)
    assert not failures, failures[:3]
    assert not scrape_errors, scrape_errors
    assert len(set(during)) >= 2, during  # the counts moved while scraped
    assert during == sorted(during), "records in went backwards between scrapes"
    ends = {p: delivered[p] + 1 for p in range(PARTITIONS)}
    assert sum(ends.values()) == RECORDS

    # A group consumes part of the records and commits chosen offsets.
    consumer = ck.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )
    try:
        consumer.subscribe([TOPIC])
        consumed = 0
        next_offsets: dict[int, int] = {}
        deadline = time.monotonic() + 60
        while consumed < RECORDS // 2 and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=500, timeout=1):
                assert message.error() is None, message.error()
                consumed += 1
                next_offsets[message.partition()] = message.offset() + 1
        assert consumed >= RECORDS // 2
        # Commit less than what was read, differently per partition, so that every lag is known.
        committed = {p: min(next_offsets.get(p, 0), ends[p] // (p + 2)) for p in range(PARTITIONS)}
        consumer.commit(
            offsets=[ck.TopicPartition(TOPIC, p, offset) for p, offset in committed.items()],
            asynchronous=False,
        )
        after = scrape(url)  # the consumer is still a member, its connection open

        # Records and bytes in: what was sent, and what the segments hold.
        records_in = value(after, "logstore_topic_records_in", "logstore_topic_records_in_total", topic=TOPIC)
        bytes_in = value(after, "logstore_topic_bytes_in", "logstore_topic_bytes_in_total", topic=TOPIC)
        assert records_in == RECORDS
        on_disk = sum(
            os.path.getsize(path)
            for p in range(PARTITIONS)
            for path in glob.glob(os.path.join(broker.data_dir, f"{TOPIC}-{p}", "*.log"))
        )
        assert bytes_in == on_disk
        assert sent_value_bytes < bytes_in < sent_value_bytes + RECORDS * 40  # batch and record overhead
        assert during[-1] <= RECORDS

        # Offsets per partition: what the producer was told.
        for p in range(PARTITIONS):
            labels = {"topic": TOPIC, "partition": str(p)}
            assert value(after, "logstore_log_end_offset", **labels) == ends[p]
            assert value(after, "logstore_high_watermark", **labels) == ends[p]
            assert value(after, "logstore_log_start_offset", **labels) == 0
            assert value(after, "logstore_log_size_bytes", **labels) > ends[p] * VALUE_SIZE
            group_labels = {"group": GROUP, **labels}
            assert value(after, "logstore_consumer_group_committed_offset", **group_labels) == committed[p]
            assert value(after, "logstore_consumer_group_lag", **group_labels) == ends[p] - committed[p]
        assert value(after, "logstore_consumer_group_members", group=GROUP) == 1
        states = by_label(after, "logstore_consumer_groups", "logstore_consumer_groups", "state")
        assert states.get("Stable", 0) >= 1

        # Out: the consumer read at least what it consumed, as whole batches.
        records_out = value(after, "logstore_topic_records_out", "logstore_topic_records_out_total", topic=TOPIC)
        bytes_out = value(after, "logstore_topic_bytes_out", "logstore_topic_bytes_out_total", topic=TOPIC)
        assert consumed <= records_out
        assert bytes_out >= consumed * VALUE_SIZE

        # Requests and their time histogram agree.
        requests = after["logstore_requests"]
        per_api: dict[str, float] = {}
        for (name, labels), count in requests.items():
            assert name == "logstore_requests_total"
            api = dict(labels)["api"]
            per_api[api] = per_api.get(api, 0) + count
        assert per_api["Produce"] >= RECORDS // 100
        assert per_api["Fetch"] > 0
        histogram = after["logstore_request_duration_seconds"]
        for api, count in per_api.items():
            assert value(after, "logstore_request_duration_seconds", "logstore_request_duration_seconds_count", api=api) == count
            buckets = sorted(
                (float(dict(labels)["le"]), v)
                for (name, labels), v in histogram.items()
                if name == "logstore_request_duration_seconds_bucket" and dict(labels)["api"] == api
            )
            assert [v for _, v in buckets] == sorted(v for _, v in buckets), f"{api}: buckets not cumulative"
            assert buckets[-1] == (float("inf"), count)
            assert value(after, "logstore_request_duration_seconds", "logstore_request_duration_seconds_sum", api=api) > 0
        # librdkafka's first JoinGroup is answered MEMBER_ID_REQUIRED (KIP-394): an error count.
        errors = after["logstore_request_errors"]
        assert errors[("logstore_request_errors_total", frozenset({("api", "JoinGroup"), ("error", "MEMBER_ID_REQUIRED")}))] >= 1

        # Connections: the consumer's are open; more were made than closed.
        assert value(after, "logstore_connections", listener="PLAINTEXT") >= 1
        created = value(after, "logstore_connections_created", "logstore_connections_created_total", listener="PLAINTEXT")
        closed = after["logstore_connections_closed"].get(
            ("logstore_connections_closed_total", frozenset({("listener", "PLAINTEXT")})), 0
        )
        assert created - closed == value(after, "logstore_connections", listener="PLAINTEXT")
        assert value(after, "logstore_under_replicated_partitions") == 0
        assert value(after, "logstore_leader_partitions") >= PARTITIONS
        assert value(after, "logstore_throttle_time_ms", "logstore_throttle_time_ms_total", quota_type="produce") == 0
    finally:
        consumer.close()

    # The group's members leave; its lag stays as committed.
    def empty() -> bool:
        families = scrape(url)
        return value(families, "logstore_consumer_group_members", group=GROUP) == 0

    wait_until(empty, "the group to have no members after the consumer closed", timeout=30)
    final = scrape(url)
    for p in range(PARTITIONS):
        labels = {"group": GROUP, "topic": TOPIC, "partition": str(p)}
        assert value(final, "logstore_consumer_group_lag", **labels) == ends[p] - committed[p]


def test_http_paths_and_methods(metrics_broker: Any) -> None:
    base = metrics_broker.metrics_url.rsplit("/", 1)[0]
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(base + "/nothing", timeout=10)
    assert missing.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as posted:
        urllib.request.urlopen(urllib.request.Request(base + "/metrics", data=b"x", method="POST"), timeout=10)
    assert posted.value.code == 405
    # A client that sends garbage or nothing is dropped; the endpoint and the broker go on.
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        raw.sendall(b"\x00\x01garbage\r\n\r\n")
        assert raw.recv(100).startswith(b"HTTP/1.1 400")
    assert "logstore_requests" in scrape(metrics_broker.metrics_url)
    assert metrics_broker.alive


def _start_fails(tmp_path: Any, listener: str) -> str:
    port = free_port()
    result = subprocess.run(
        [
            sys.executable, "-m", "logstore", "broker", "--data-dir", str(tmp_path / "data"),
            "--listeners", f"PLAINTEXT://127.0.0.1:{port}", "--event-loop", "asyncio",
            "--override", f"metrics.listener={listener}",
        ],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0, result.stdout
    return result.stderr


@pytest.mark.parametrize(
    "listener", ["https://127.0.0.1:9404", "127.0.0.1:9404", "http://127.0.0.1", "http://127.0.0.1:70000", "http://:9404"]
)
def test_bad_metrics_listener_stops_the_start(tmp_path: Any, listener: str) -> None:
    stderr = _start_fails(tmp_path, listener)
    assert "metrics.listener" in stderr, stderr
    assert "Traceback" not in stderr, stderr


def test_metrics_port_taken_stops_the_start(tmp_path: Any) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        stderr = _start_fails(tmp_path, f"http://127.0.0.1:{port}")
    assert f"metrics.listener: cannot listen on http://127.0.0.1:{port}" in stderr, stderr
    assert "Traceback" not in stderr, stderr
