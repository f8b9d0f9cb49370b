"""A delivery report's ``latency()``: seconds from ``produce()`` to the acknowledgement, as
confluent-kafka reports it; each record's enqueue time is kept only once a report is wanted."""

from __future__ import annotations

import time
from typing import Any

import pytest

from logstore.client import Producer
from tests.kit.brokerkit import BrokerProcess

pytestmark = pytest.mark.integration

LINGER_MS = 50


def _latencies(reports: list[tuple[Any, Any]]) -> list[float]:
    assert reports and all(err is None for err, _ in reports), [err for err, _ in reports if err][:3]
    return [msg.latency() for _, msg in reports]


def test_per_record_callbacks_get_each_records_own_latency(broker: BrokerProcess) -> None:
    """Records produced 20 ms apart into one batch that lingers 50 ms: the first waited longest."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": LINGER_MS})
    producer.produce("warm", b"w")
    producer.flush(10)
    assert not producer._acc.times  # no callback yet: nothing kept
    reports: list[tuple[Any, Any]] = []
    start = time.monotonic()
    for i in range(3):
        producer.produce("lat", b"v%d" % i, partition=0, on_delivery=lambda e, m: reports.append((e, m)))
        time.sleep(0.02)
    producer.produce("lat", b"h", partition=0, headers={"k": b"v"}, on_delivery=lambda e, m: reports.append((e, m)))
    assert producer.flush(10) == 0
    elapsed = time.monotonic() - start
    latencies = _latencies(reports)
    assert [m.value() for _, m in reports] == [b"v0", b"v1", b"v2", b"h"]  # the last by the general path
    assert all(0 < lat <= elapsed for lat in latencies), latencies
    assert latencies[0] > latencies[1] > latencies[2] > latencies[3]
    assert latencies[0] - latencies[2] == pytest.approx(0.04, abs=0.015)  # produced 40 ms apart


def test_a_default_callback_and_produce_batch_report_latency(broker: BrokerProcess) -> None:
    reports: list[tuple[Any, Any]] = []
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": LINGER_MS, "on_delivery": lambda e, m: reports.append((e, m))}
    )
    assert producer._acc.times
    producer.produce("lat2", b"a")
    producer.produce_batch("lat2", [b"b", b"c"])
    assert producer.flush(10) == 0
    assert all(0 < lat < 5 for lat in _latencies(reports))


@pytest.mark.parametrize("only_errors", [False, True])
def test_no_enqueue_time_is_kept_without_a_report(broker: BrokerProcess, only_errors: bool) -> None:
    """Fire and forget (no callback anywhere), or reports of failures only: no time is taken."""
    config: dict[str, Any] = {"bootstrap.servers": broker.bootstrap, "linger.ms": LINGER_MS}
    if only_errors:
        config |= {"delivery.report.only.error": True, "on_delivery": lambda e, m: None}
    producer = Producer(config)
    producer.produce("lat3", b"w")  # the topic's metadata first: the records below go into batches
    assert producer.flush(10) == 0
    producer.produce("lat3", b"x", on_delivery=(lambda e, m: None) if only_errors else None)
    producer.produce("lat3", b"y", headers={"k": b"v"})
    batches = [b for state in producer._acc.topics.values() for queue in state.queues for b in queue]
    assert batches and all(b.times is None for b in batches)
    assert not producer._acc.times
    assert producer.flush(10) == 0
