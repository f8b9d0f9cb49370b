"""Every client call keeps its timeout off the happy path: no broker at the address (refused), or
one that accepts and never answers (silent). logstore's client beside confluent-kafka's, which
is the reference (librdkafka: ``message.timeout.ms`` runs whether or not a broker was reached)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import confluent_kafka.admin
import pytest

import logstore.client
import logstore.client.admin
from tests.kit.brokerkit import BrokerProcess

pytestmark = pytest.mark.integration

CLIENTS = {"logstore": logstore.client, "confluent": confluent_kafka}


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections (the kernel completes the handshake) and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    yield sock.getsockname()[1]
    sock.close()


@pytest.fixture
def refused_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # bound once, never listened on: connections are refused
    return int(port)


def _address(kind: str, silent_port: int, refused_port: int) -> str:
    return f"127.0.0.1:{silent_port if kind == 'silent' else refused_port}"


@pytest.mark.parametrize("client", sorted(CLIENTS))
@pytest.mark.parametrize("kind", ["refused", "silent"])
def test_a_record_times_out_after_delivery_timeout_with_no_broker_answering(
    client: str, kind: str, silent_port: int, refused_port: int
) -> None:
    kafka: Any = CLIENTS[client]
    reports: list[tuple[float, Any]] = []
    producer = kafka.Producer(
        {"bootstrap.servers": _address(kind, silent_port, refused_port), "delivery.timeout.ms": 2000}
    )
    start = time.monotonic()
    producer.produce("t", b"x", on_delivery=lambda err, msg: reports.append((time.monotonic() - start, err)))
    left = producer.flush(10)
    took = time.monotonic() - start
    assert left == 0, f"{client}: a record still queued after flush(10)"
    assert len(reports) == 1
    at, error = reports[0]
    assert error is not None and error.code() == kafka.KafkaError._MSG_TIMED_OUT, error
    assert 1.9 <= at <= 3.5 and took <= 3.6, f"{client}/{kind}: reported at {at:.1f} s, flush took {took:.1f} s"


@pytest.mark.parametrize("client", sorted(CLIENTS))
@pytest.mark.parametrize("kind", ["refused", "silent"])
def test_consumer_poll_and_list_topics_keep_their_timeouts(
    client: str, kind: str, silent_port: int, refused_port: int
) -> None:
    kafka: Any = CLIENTS[client]
    consumer = kafka.Consumer(
        {"bootstrap.servers": _address(kind, silent_port, refused_port), "group.id": "g", "error_cb": lambda e: None}
    )
    try:
        consumer.subscribe(["t"])
        for _ in range(2):  # the second poll finds the connection attempt of the first going on, or failed
            start = time.monotonic()
            message = consumer.poll(1.0)
            took = time.monotonic() - start
            assert took <= 1.6, f"{client}/{kind}: poll(1.0) took {took:.1f} s"
            assert message is None or message.error() is not None
        start = time.monotonic()
        with pytest.raises(kafka.KafkaException):
            consumer.list_topics(timeout=1.0)
        took = time.monotonic() - start
        assert took <= 1.6, f"{client}/{kind}: list_topics(timeout=1.0) took {took:.1f} s"
    finally:
        consumer.close()  # librdkafka waits up to session.timeout.ms for a coordinator that is gone


ADMINS = {"logstore": (logstore.client.admin.AdminClient, logstore.client.admin.NewTopic),
          "confluent": (confluent_kafka.admin.AdminClient, confluent_kafka.admin.NewTopic)}  # fmt: skip


@pytest.mark.parametrize("client", sorted(ADMINS))
@pytest.mark.parametrize("kind", ["refused", "silent"])
def test_admin_calls_keep_their_request_timeout(client: str, kind: str, silent_port: int, refused_port: int) -> None:
    admin_class, new_topic = ADMINS[client]
    admin = admin_class({"bootstrap.servers": _address(kind, silent_port, refused_port)})
    calls = {
        "create_topics": lambda: admin.create_topics([new_topic("x", 1, 1)], request_timeout=1.0)["x"].result(10),
        "describe_cluster": lambda: admin.describe_cluster(request_timeout=1.0).result(10),
        "list_topics": lambda: admin.list_topics(timeout=1.0),
    }
    for name, call in calls.items():
        start = time.monotonic()
        with pytest.raises(kafka_exceptions(client)):
            call()
        took = time.monotonic() - start
        assert took <= 1.6, f"{client}/{kind}: {name} with a 1 s timeout took {took:.1f} s"


def kafka_exceptions(client: str) -> tuple[type[BaseException], ...]:
    return (CLIENTS[client].KafkaException,)  # not TimeoutError: the call itself gave up in time


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_broker_that_dies_mid_request(client: str, tmp_path: Any) -> None:
    """kill -9 with a record in flight and a consumer in its group: the record's report comes at
    delivery.timeout.ms, poll keeps its timeout, and error_cb says the broker is gone."""
    kafka: Any = CLIENTS[client]
    broker = BrokerProcess(str(tmp_path / "data")).start()
    errors: list[str] = []
    on_error = lambda e: errors.append(e.name())  # noqa: E731
    producer = kafka.Producer({"bootstrap.servers": broker.bootstrap, "delivery.timeout.ms": 3000,
                               "linger.ms": 50, "error_cb": on_error})  # fmt: skip
    consumer = kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "session.timeout.ms": 6000,
                               "auto.offset.reset": "earliest", "error_cb": on_error})  # fmt: skip
    try:
        producer.produce("t", b"first")
        assert producer.flush(10) == 0
        consumer.subscribe(["t"])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # in the group, reading
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                break
        else:
            pytest.fail("the consumer read nothing")
        broker.kill()
        killed = time.monotonic()
        reports: list[tuple[float, Any]] = []
        producer.produce("t", b"second", on_delivery=lambda err, msg: reports.append((time.monotonic() - killed, err)))
        assert producer.flush(10) == 0
        (at, error), = reports
        assert error is not None and error.code() == kafka.KafkaError._MSG_TIMED_OUT and 2.5 <= at <= 4.0, (at, error)
        for _ in range(3):
            start = time.monotonic()
            consumer.poll(1.0)
            assert time.monotonic() - start <= 1.6
        assert {"_ALL_BROKERS_DOWN", "_TRANSPORT"} & set(errors), errors
    finally:
        consumer.close()  # librdkafka waits up to session.timeout.ms for a coordinator that is gone
