"""Client quotas and connection limits on a real broker process, with real clients.

Quotas are set with AlterClientQuotas over the wire (kio requests; neither confluent-kafka
nor kafka-python has the client-quota admin calls). The brokers here measure rates over
``quota.window.num=3`` samples of 1 s (Kafka's default is 11): the rate then settles within
a few seconds, so the throttled runs stay short. Every loop is bounded in count and time.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from logstore.protocol import from_dict
from tests.kit.brokerkit import BrokerProcess, create_topic, set_broker_config, wait_until
from tests.kit.quotakit import alter, describe, described, entity, op, set_quota
from tests.kit.wire import WireClient, request_class

pytestmark = pytest.mark.integration

SHORT_WINDOWS = {"quota.window.num": "3", "quota.window.size.seconds": "1"}


# -- AlterClientQuotas / DescribeClientQuotas -------------------------------------------------------


def test_alter_and_describe_with_kafka_match_types(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    response = alter(
        b,
        [
            {"entity": entity(user="alice"), "ops": [op("producer_byte_rate", 1024)]},
            {"entity": entity(user="alice", client_id="app"), "ops": [op("consumer_byte_rate", 2048)]},
            {"entity": entity(user=None), "ops": [op("request_percentage", 50.5)]},
            {"entity": entity(client_id=None), "ops": [op("producer_byte_rate", 4096)]},
            {"entity": entity(ip="10.0.0.1"), "ops": [op("connection_creation_rate", 5)]},
        ],
    )
    assert [e.error_code for e in response.entries] == [ErrorCode.none] * 5
    everything = described(describe(b, []))
    assert everything == {
        (("user", "alice"),): {"producer_byte_rate": 1024.0},
        (("client-id", "app"), ("user", "alice")): {"consumer_byte_rate": 2048.0},
        (("user", None),): {"request_percentage": 50.5},
        (("client-id", None),): {"producer_byte_rate": 4096.0},
        (("ip", "10.0.0.1"),): {"connection_creation_rate": 5.0},
    }
    exact = [{"entity_type": "user", "match_type": 0, "match": "alice"}]
    assert set(described(describe(b, exact))) == {
        (("user", "alice"),),
        (("client-id", "app"), ("user", "alice")),
    }
    assert set(described(describe(b, exact, strict=True))) == {(("user", "alice"),)}
    default_user = [{"entity_type": "user", "match_type": 1, "match": None}]
    assert set(described(describe(b, default_user, strict=True))) == {(("user", None),)}
    specified_client = [{"entity_type": "client-id", "match_type": 2, "match": None}]
    assert set(described(describe(b, specified_client))) == {
        (("client-id", "app"), ("user", "alice")),
        (("client-id", None),),
    }
    # validate_only changes nothing; remove drops a key (and the entity with its last key)
    alter(b, [{"entity": entity(user="alice"), "ops": [op("producer_byte_rate", 1)]}], validate_only=True)
    assert described(describe(b, exact, strict=True)) == {
        (("user", "alice"),): {"producer_byte_rate": 1024.0}
    }
    alter(b, [{"entity": entity(user="alice"), "ops": [op("producer_byte_rate", remove=True)]}])
    assert described(describe(b, exact, strict=True)) == {}
    # v0 (not flexible) answers the same
    assert (("user", None),) in described(describe(b, default_user, version=0))


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ({"entity": entity(user="a"), "ops": [op("no_such_quota", 1)]}, "Invalid configuration key"),
        (
            {"entity": entity(group="g"), "ops": [op("producer_byte_rate", 1)]},
            "Unhandled client quota entity type",
        ),
        ({"entity": entity(user="a") + entity(user="b"), "ops": [op("producer_byte_rate", 1)]}, "Duplicate"),
        ({"entity": entity(user="a", ip="1.2.3.4"), "ops": [op("connection_creation_rate", 1)]}, "IP entity"),
        ({"entity": entity(user="a"), "ops": [op("producer_byte_rate", 10.5)]}, "must be a Long"),
        ({"entity": entity(user="a"), "ops": [op("producer_byte_rate", -1)]}, "greater than 0"),
        (
            {"entity": entity(user="a"), "ops": [op("connection_creation_rate", 1)]},
            "Invalid configuration key",
        ),
        ({"entity": entity(ip="not-an-ip"), "ops": [op("connection_creation_rate", 1)]}, "not a valid IP"),
        ({"entity": [], "ops": [op("producer_byte_rate", 1)]}, "empty"),
        (
            {"entity": entity(user="a"), "ops": [op("producer_byte_rate", 1), op("producer_byte_rate", 2)]},
            "Duplicate",
        ),
    ],
)
def test_bad_alter_entries_get_invalid_request(
    broker: BrokerProcess, entry: dict[str, Any], why: str
) -> None:
    good = {"entity": entity(user="ok"), "ops": [op("producer_byte_rate", 100)]}
    response = alter(broker.bootstrap, [entry, good])
    bad, fine = response.entries
    assert bad.error_code == ErrorCode.invalid_request and why in (bad.error_message or ""), bad
    assert fine.error_code == ErrorCode.none  # entries stand alone
    assert (("user", "ok"),) in described(describe(broker.bootstrap, []))


@pytest.mark.parametrize(
    ("components", "code"),
    [
        ([{"entity_type": "user", "match_type": 0, "match": None}], ErrorCode.invalid_request),
        ([{"entity_type": "user", "match_type": 1, "match": "x"}], ErrorCode.invalid_request),
        ([{"entity_type": "user", "match_type": 2, "match": None}] * 2, ErrorCode.invalid_request),
        (
            [
                {"entity_type": "user", "match_type": 2, "match": None},
                {"entity_type": "ip", "match_type": 2, "match": None},
            ],
            ErrorCode.invalid_request,
        ),
        ([{"entity_type": "", "match_type": 2, "match": None}], ErrorCode.invalid_request),
        ([{"entity_type": "group", "match_type": 2, "match": None}], ErrorCode.unsupported_version),
        ([{"entity_type": "user", "match_type": 7, "match": None}], ErrorCode.invalid_request),
    ],
)
def test_bad_describe_filters_get_kafka_codes(
    broker: BrokerProcess, components: list[Any], code: ErrorCode
) -> None:
    response = describe(broker.bootstrap, components)
    assert response.error_code == code and response.entries is None, response


def test_quotas_survive_a_restart(broker: BrokerProcess) -> None:
    set_quota(
        broker.bootstrap, {"user": "bob", "client_id": "x"}, producer_byte_rate=5000, request_percentage=20
    )
    assert broker.stop() == 0
    broker.restart()
    assert described(describe(broker.bootstrap, [])) == {
        (("client-id", "x"), ("user", "bob")): {"producer_byte_rate": 5000.0, "request_percentage": 20.0}
    }


# -- throttling -----------------------------------------------------------------------------------


def _stats_throttle(stats: list[dict[str, Any]]) -> int:
    """The largest throttle time librdkafka saw from a broker (its statistics' ``throttle`` window)."""
    return max(
        (b["throttle"]["max"] for s in stats for b in s["brokers"].values() if b.get("nodeid", -1) >= 0),
        default=0,
    )


def test_producer_byte_rate_throttles_confluent_kafka(broker_factory: Any) -> None:
    from confluent_kafka import Producer

    from tests.kit.brokerkit import free_port

    metrics_port = free_port()
    broker = broker_factory({**SHORT_WINDOWS, "metrics.listener": f"http://127.0.0.1:{metrics_port}"})
    b = broker.bootstrap
    create_topic(b, "q-produce", 1)
    quota = 100_000
    set_quota(b, {"client_id": "throttled-producer"}, producer_byte_rate=quota)
    stats: list[dict[str, Any]] = []
    throttled: list[int] = []
    acked: list[tuple[float, int]] = []
    producer = Producer(
        {
            "bootstrap.servers": b,
            "client.id": "throttled-producer",
            "linger.ms": 5,
            "batch.size": 16_384,
            "statistics.interval.ms": 500,
            "stats_cb": lambda text: stats.append(json.loads(text)),
            "throttle_cb": lambda event: throttled.append(int(event.throttle_time * 1000)),
        }
    )
    value = b"v" * 1000

    def delivered(error: Any, message: Any) -> None:
        if error is None:
            acked.append((time.monotonic(), len(message.value())))

    started = time.monotonic()
    run_s = 9.0
    while time.monotonic() - started < run_s:  # bounded in time; the queue bounds memory
        try:
            producer.produce("q-produce", value, on_delivery=delivered)
        except BufferError:
            producer.poll(0.05)
            continue
        producer.poll(0)
        if len(producer) > 2000:
            producer.poll(0.05)
    producer.flush(30)
    # The rate after the first windows: Kafka's windowed rate lets a first burst through.
    settled = [(t, n) for t, n in acked if started + 3 <= t <= started + run_s]
    rate = sum(n for _, n in settled) / (run_s - 3)
    assert 0.5 * quota <= rate <= 1.5 * quota, (rate, quota)
    assert throttled and max(throttled) > 0
    assert _stats_throttle(stats) > 0
    # the broker's metrics count the throttle time it decided, by quota type
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as page:
        families = {f.name: f for f in text_string_to_metric_families(page.read().decode())}
    by_type = {s.labels["quota_type"]: s.value for s in families["logstore_throttle_time_ms"].samples
               if s.name.endswith("_total")}  # fmt: skip
    assert by_type.get("produce", 0) >= max(throttled), by_type
    # an unthrottled client id is not held back
    fast = Producer({"bootstrap.servers": b, "client.id": "free", "linger.ms": 5})
    t0 = time.monotonic()
    for _ in range(3000):
        fast.produce("q-produce", value)
        fast.poll(0)
    assert fast.flush(30) == 0
    assert time.monotonic() - t0 < 5


def test_consumer_byte_rate_throttles_fetch(broker_factory: Any) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    broker = broker_factory(SHORT_WINDOWS)
    b = broker.bootstrap
    create_topic(b, "q-fetch", 1)
    # small batches: a fetch returns at least one whole batch, and a 1 MB one would be
    # throttled in steps of seconds (still Kafka's arithmetic, but coarse over 3 windows)
    producer = Producer({"bootstrap.servers": b, "linger.ms": 5, "batch.size": 16_384})
    value = b"f" * 1000
    for _ in range(4000):
        while True:
            try:
                producer.produce("q-fetch", value)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(30) == 0
    quota = 200_000
    set_quota(b, {"client_id": "throttled-consumer"}, consumer_byte_rate=quota)
    stats: list[dict[str, Any]] = []
    consumer = Consumer(
        {
            "bootstrap.servers": b,
            "group.id": "q-fetch-group",
            "client.id": "throttled-consumer",
            "enable.auto.commit": False,
            "fetch.max.bytes": 100_000,
            "message.max.bytes": 100_000,
            "max.partition.fetch.bytes": 100_000,
            "statistics.interval.ms": 500,
            "stats_cb": lambda text: stats.append(json.loads(text)),
        }
    )
    consumer.assign([TopicPartition("q-fetch", 0, 0)])
    got: list[tuple[float, int]] = []
    started = time.monotonic()
    run_s = 8.0
    try:
        while time.monotonic() - started < run_s:
            for message in consumer.consume(num_messages=1000, timeout=0.2):
                if message.error() is None:
                    got.append((time.monotonic(), len(message.value() or b"")))
    finally:
        consumer.close()
    settled = sum(n for t, n in got if t >= started + 3)
    rate = settled / (run_s - 3)
    assert 0.4 * quota <= rate <= 1.6 * quota, (rate, quota)
    assert _stats_throttle(stats) > 0


def _metadata(client: WireClient, version: int) -> tuple[int, float]:
    request = from_dict(request_class(3, version), {"topics": [], "allow_auto_topic_creation": False})
    started = time.monotonic()
    response = client.call(request)
    return int(response.throttle_time.total_seconds() * 1000), time.monotonic() - started


def test_request_percentage_mutes_new_clients_and_delays_old_ones(broker_factory: Any) -> None:
    broker = broker_factory(SHORT_WINDOWS)
    set_quota(broker.bootstrap, {"client_id": "wire-test"}, request_percentage=0.5)
    with WireClient(broker.bootstrap) as client:
        throttles: list[int] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(throttles):
            throttles.append(_metadata(client, 6)[0])  # KIP-219 version: the answer comes at once
        assert any(throttles), "no throttle within 10 s"
        throttle = throttles[-1]
        # the connection is muted now: the next request waits about that long
        _, waited = _metadata(client, 6)
        assert waited >= throttle / 1000 * 0.7, (waited, throttle)
    with WireClient(broker.bootstrap) as old:
        deadline = time.monotonic() + 10
        seen = []
        while time.monotonic() < deadline:
            throttle, took = _metadata(old, 5)  # before KIP-219: the answer itself is held back
            seen.append((throttle, took))
            if throttle:
                assert took >= throttle / 1000 * 0.7, (throttle, took)
                break
        assert any(t for t, _ in seen)


def test_user_quota_wins_over_client_id_quota(broker_factory: Any) -> None:
    """ANONYMOUS (every connection before SASL) has a user quota; the client-id one does not apply."""
    broker = broker_factory(SHORT_WINDOWS)
    set_quota(broker.bootstrap, {"client_id": "wire-test"}, request_percentage=0.5)
    set_quota(broker.bootstrap, {"user": "ANONYMOUS"}, request_percentage=1000)
    with WireClient(broker.bootstrap) as client:
        started = time.monotonic()
        throttles = [_metadata(client, 6)[0] for _ in range(300)]
        assert not any(throttles)
        assert time.monotonic() - started < 10


# -- connection limits --------------------------------------------------------------------------


API_VERSIONS_V0 = struct.pack(">ihhih", 10 + 4, 18, 0, 1, 4) + b"test"


def _answers(sock: socket.socket, timeout: float) -> bool:
    """Whether ``sock`` answers an ApiVersions v0 within ``timeout`` (False: closed or silent)."""
    sock.settimeout(timeout)
    try:
        sock.sendall(API_VERSIONS_V0)
        head = sock.recv(4)
    except (TimeoutError, OSError):
        return False
    return len(head) == 4


def test_max_connections_per_ip_closes_the_next_connection(broker_factory: Any) -> None:
    broker = broker_factory({"max.connections.per.ip": "3"})
    socks = [socket.create_connection(("127.0.0.1", broker.port)) for _ in range(3)]
    try:
        assert all(_answers(s, 5) for s in socks)
        extra = socket.create_connection(("127.0.0.1", broker.port))
        assert not _answers(extra, 5)
        extra.close()
        socks.pop().close()
        time.sleep(0.3)
        again = socket.create_connection(("127.0.0.1", broker.port))
        socks.append(again)
        assert _answers(again, 5)
    finally:
        for s in socks:
            s.close()
    assert "already has the maximum of 3 connections" in broker.log_text()


def test_connection_limits_follow_dynamic_broker_configs(broker: BrokerProcess) -> None:
    """max.connections.per.ip set at runtime (IncrementalAlterConfigs on the broker) applies to the next connection."""
    set_broker_config(broker.bootstrap, "max.connections.per.ip", "3")  # its admin's connections are closed
    time.sleep(0.5)
    socks = [socket.create_connection(("127.0.0.1", broker.port)) for _ in range(4)]
    try:
        answered = [_answers(s, 5) for s in socks]
    finally:
        for s in socks:
            s.close()
    assert answered == [True, True, True, False]


def test_max_connections_parks_the_next_connection_until_a_slot_frees(broker_factory: Any) -> None:
    broker = broker_factory({"max.connections": "2"})
    socks = [socket.create_connection(("127.0.0.1", broker.port)) for _ in range(2)]
    try:
        assert all(_answers(s, 5) for s in socks)
        waiting = socket.create_connection(("127.0.0.1", broker.port))
        socks.append(waiting)
        assert not _answers(waiting, 1.0)  # accepted, not served
        socks.pop(0).close()
        waiting.settimeout(5)
        assert len(waiting.recv(4)) == 4  # served once a slot freed
    finally:
        for s in socks:
            s.close()


def test_max_connection_creation_rate_delays_but_refuses_none(broker_factory: Any) -> None:
    broker = broker_factory({"max.connection.creation.rate": "5", **SHORT_WINDOWS})
    count = 20
    socks = [socket.create_connection(("127.0.0.1", broker.port)) for _ in range(count)]
    answered: list[float] = []
    started = time.monotonic()
    try:

        def ask(s: socket.socket) -> None:
            if _answers(s, 15):
                answered.append(time.monotonic() - started)

        threads = [threading.Thread(target=ask, args=(s,)) for s in socks]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
    finally:
        for s in socks:
            s.close()
    assert len(answered) == count
    # 5/s over at least 2 windows: ~10 at once, then ~5 a second
    assert max(answered) >= 1.0, sorted(answered)


def test_ip_connection_creation_rate_closes_connections_over_it(broker_factory: Any) -> None:
    broker = broker_factory(SHORT_WINDOWS)
    set_quota(broker.bootstrap, {"ip": "127.0.0.1"}, connection_creation_rate=2)
    socks = [socket.create_connection(("127.0.0.1", broker.port)) for _ in range(10)]
    try:
        answered = [_answers(s, 5) for s in socks]
    finally:
        for s in socks:
            s.close()
    # 2/s over at least 2 windows: about 4 pass, the rest are closed after the throttle time
    assert 2 <= sum(answered) <= 6, answered
    assert "connection_creation_rate=2/s exceeded for 127.0.0.1" in broker.log_text()
    time.sleep(3.5)  # the samples of the burst expire (the admin connection counts too)
    set_quota(broker.bootstrap, {"ip": "127.0.0.1"}, connection_creation_rate=1000)
    fresh = [socket.create_connection(("127.0.0.1", broker.port)) for _ in range(5)]
    try:
        assert all(_answers(s, 5) for s in fresh)
    finally:
        for s in fresh:
            s.close()


# -- idle connections -----------------------------------------------------------------------------


def test_a_thousand_idle_connections_stay_open_and_metadata_is_answered(broker: BrokerProcess) -> None:
    socks = []
    try:
        for _ in range(1000):
            s = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
            s.sendall(API_VERSIONS_V0)
            socks.append(s)
        for s in socks:  # every ApiVersions answered
            (size,) = struct.unpack(">i", _recv(s, 4))
            _recv(s, size)
        with WireClient(broker.bootstrap) as client:
            for _ in range(20):
                _metadata(client, 6)
        assert all(_answers(s, 10) for s in socks[::50])
        assert broker.alive
    finally:
        for s in socks:
            s.close()
    wait_until(lambda: broker.alive, "the broker to stay up", timeout=2)


def _recv(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        assert chunk, "closed"
        data += chunk
    return data


# -- logstore's AdminClient and `logstore quotas` ---------------------------------------------------


def test_admin_client_and_cli(broker: BrokerProcess) -> None:
    import subprocess
    import sys

    from logstore.client.admin import AdminClient
    from logstore.client.errors import KafkaException

    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        (ok, bad) = admin.alter_client_quotas(
            [({"user": "carol"}, {"producer_byte_rate": 2048}), ({"user": "dave"}, {"bogus": 1})]
        )
        assert ok.result(10) is None
        with pytest.raises(KafkaException, match="Invalid configuration key bogus"):
            bad.result(10)
        assert admin.describe_client_quotas([("user", "carol")]).result(10) == {
            (("user", "carol"),): {"producer_byte_rate": 2048.0}
        }
        assert (("user", "carol"),) in admin.describe_client_quotas([("user", "*")], strict=True).result(10)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "logstore", "quotas", *args, "--bootstrap-server", broker.bootstrap],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    done = cli("alter", "--client-default", "--add-config", "consumer_byte_rate=4096,request_percentage=12.5")
    assert done.returncode == 0, done.stderr
    shown = cli("describe", "--client-default")
    assert (
        "Quota configs for client-id <default> are consumer_byte_rate=4096, request_percentage=12.5"
        in shown.stdout
    )
    refused = cli("alter", "--user", "x", "--add-config", "producer_byte_rate=1.5")
    assert refused.returncode == 1 and "must be a Long value" in refused.stderr
    assert cli("alter", "--user", "x", "--delete-config", "producer_byte_rate").returncode == 0
    assert "--add-config" in cli("alter", "--help").stdout
