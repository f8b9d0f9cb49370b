"""BrokerMetrics without a broker: the counted families, the extension points, the listener's syntax."""

from __future__ import annotations

import pytest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.parser import text_string_to_metric_families

from logstore.broker.apis import registry
from logstore.broker.config.broker_config import BrokerConfig, parse_metrics_listener
from logstore.broker.metrics.broker_metrics import LATENCY_BUCKETS, BrokerMetrics
from logstore.errors import InvalidConfigError

pytestmark = pytest.mark.unit


def samples(metrics: BrokerMetrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = metrics.exposition().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


class Response:
    def __init__(self, error_code: int) -> None:
        self.error_code = error_code


def test_requests_histogram_and_errors() -> None:
    metrics = BrokerMetrics()
    produce, heartbeat = registry()[0], registry()[12]
    metrics.observe(produce, 9, 0.00005, None)  # below the first bound
    metrics.observe(produce, 9, 0.0001, None)  # on a bound: counted in it (le)
    metrics.observe(produce, 10, 3.0, None)
    metrics.observe(produce, 10, 60.0, None)  # past the last bound: +Inf only
    metrics.error(produce, 3)
    metrics.observe(heartbeat, 4, 0.001, Response(27))  # REBALANCE_IN_PROGRESS
    metrics.observe(heartbeat, 4, 0.001, Response(0))
    found = samples(metrics)
    assert found[("logstore_requests_total", frozenset({("api", "Produce"), ("version", "9")}))] == 2
    assert found[("logstore_requests_total", frozenset({("api", "Produce"), ("version", "10")}))] == 2
    bucket = "logstore_request_duration_seconds_bucket"
    assert found[(bucket, frozenset({("api", "Produce"), ("le", "0.0001")}))] == 2
    assert found[(bucket, frozenset({("api", "Produce"), ("le", "2.5")}))] == 2
    assert found[(bucket, frozenset({("api", "Produce"), ("le", "5.0")}))] == 3
    assert found[(bucket, frozenset({("api", "Produce"), ("le", "10.0")}))] == 3
    assert found[(bucket, frozenset({("api", "Produce"), ("le", "+Inf")}))] == 4
    assert found[("logstore_request_duration_seconds_count", frozenset({("api", "Produce")}))] == 4
    assert found[("logstore_request_duration_seconds_sum", frozenset({("api", "Produce")}))] == pytest.approx(63.00015)
    errors = "logstore_request_errors_total"
    assert found[(errors, frozenset({("api", "Produce"), ("error", "UNKNOWN_TOPIC_OR_PARTITION")}))] == 1
    assert found[(errors, frozenset({("api", "Heartbeat"), ("error", "REBALANCE_IN_PROGRESS")}))] == 1
    assert len([k for k in found if k[0] == errors]) == 2  # NONE is not an error
    assert len([k for k in found if k[0] == bucket and ("api", "Produce") in k[1]]) == len(LATENCY_BUCKETS) + 1


def test_versions_of_one_api_answer_in_different_shapes() -> None:
    """FindCoordinator v3 has a top-level error_code, v4+ a list of coordinators and none: the
    first answer seen must not decide for the others (a v4 answer once closed the connection)."""
    metrics = BrokerMetrics()
    find = registry()[10]
    metrics.observe(find, 3, 0.001, Response(15))  # COORDINATOR_NOT_AVAILABLE
    metrics.observe(find, 4, 0.001, object())  # no error_code at all
    metrics.observe(find, 3, 0.001, Response(15))
    found = samples(metrics)
    errors = ("logstore_request_errors_total", frozenset({("api", "FindCoordinator"), ("error", "COORDINATOR_NOT_AVAILABLE")}))
    assert found[errors] == 2
    assert found[("logstore_request_duration_seconds_count", frozenset({("api", "FindCoordinator")}))] == 3


def test_an_error_before_any_request_of_its_api_is_kept() -> None:
    metrics = BrokerMetrics()
    metrics.error(registry()[1], 1)  # Fetch OFFSET_OUT_OF_RANGE before the first Fetch is observed
    found = samples(metrics)
    assert found[("logstore_request_errors_total", frozenset({("api", "Fetch"), ("error", "OFFSET_OUT_OF_RANGE")}))] == 1


def test_traffic_connections_isr_and_throttle() -> None:
    metrics = BrokerMetrics()
    metrics.traffic.produced("a", 1000, 10)
    metrics.traffic.produced("a", 500, 5)
    metrics.traffic.fetched("a", 700, 7, replica=False)
    metrics.traffic.fetched("a", 300, 3, replica=True)
    metrics.connection_opened("PLAINTEXT")
    metrics.connection_opened("PLAINTEXT")
    metrics.connection_closed("PLAINTEXT")
    metrics.isr_changed((1, 2, 3), (1, 2))
    metrics.isr_changed((1, 2), (1, 2, 3))
    metrics.isr_changed((1, 2), (2, 1))  # a reorder is neither
    metrics.throttled("fetch", 20)
    metrics.throttled("fetch", 5.5)
    found = samples(metrics)
    topic = frozenset({("topic", "a")})
    assert found[("logstore_topic_bytes_in_total", topic)] == 1500
    assert found[("logstore_topic_records_in_total", topic)] == 15
    assert found[("logstore_topic_bytes_out_total", topic)] == 700
    assert found[("logstore_topic_records_out_total", topic)] == 7
    assert found[("logstore_topic_replication_bytes_out_total", topic)] == 300
    listener = frozenset({("listener", "PLAINTEXT")})
    assert found[("logstore_connections_created_total", listener)] == 2
    assert found[("logstore_connections_closed_total", listener)] == 1
    assert found[("logstore_isr_shrinks_total", frozenset())] == 1
    assert found[("logstore_isr_expands_total", frozenset())] == 1
    assert found[("logstore_throttle_time_ms_total", frozenset({("quota_type", "fetch")}))] == 25.5
    assert found[("logstore_throttle_time_ms_total", frozenset({("quota_type", "produce")}))] == 0


def test_other_modules_metrics_share_the_registry() -> None:
    metrics = BrokerMetrics()
    first = metrics.counter("logstore_sasl_failures", "SASL failures.", ["mechanism"])
    assert metrics.counter("logstore_sasl_failures", "SASL failures.", ["mechanism"]) is first
    first.labels("PLAIN").inc(2)
    with pytest.raises(ValueError, match="already a Counter"):
        metrics.gauge("logstore_sasl_failures", "x")
    metrics.gauge("logstore_acl_entries", "ACL entries.").set(7)

    def broken() -> list[GaugeMetricFamily]:
        raise RuntimeError("a bug in a collector")

    def fine() -> list[GaugeMetricFamily]:
        return [GaugeMetricFamily("logstore_quota_entities", "Quota entities.", value=3)]

    metrics.add_collector(broken)
    metrics.add_collector(fine)
    found = samples(metrics)  # the broken collector is left out; the scrape goes on
    assert found[("logstore_sasl_failures_total", frozenset({("mechanism", "PLAIN")}))] == 2
    assert found[("logstore_acl_entries", frozenset())] == 7
    assert found[("logstore_quota_entities", frozenset())] == 3
    assert BrokerMetrics().registry is not metrics.registry


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", None),
        ("  ", None),
        ("http://127.0.0.1:9404", ("127.0.0.1", 9404)),
        ("http://localhost:0/", ("localhost", 0)),
        ("http://[::1]:9404", ("::1", 9404)),
        ("http://0.0.0.0:65535", ("0.0.0.0", 65535)),
    ],
)
def test_listener_values(value: str, expected: tuple[str, int] | None) -> None:
    assert parse_metrics_listener(value) == expected


@pytest.mark.parametrize(
    "value",
    ["https://127.0.0.1:9404", "127.0.0.1:9404", "http://127.0.0.1", "http://127.0.0.1:65536",
     "http://:9404", "http://h:9404/metrics", "PLAINTEXT://127.0.0.1:9404", "http://a b:1"],
)  # fmt: skip
def test_bad_listener_values_name_the_key(value: str) -> None:
    with pytest.raises(InvalidConfigError, match=r"metrics\.listener"):
        parse_metrics_listener(value)
    with pytest.raises(InvalidConfigError, match=r"metrics\.listener"):
        BrokerConfig.from_dict({"metrics.listener": value})


def test_the_endpoint_is_off_by_default() -> None:
    assert BrokerConfig.from_dict({}).values["metrics.listener"] == ""
