"""Client quotas without a network: Kafka's entity precedence, the windowed rate and its throttle time."""

from __future__ import annotations

import datetime
from collections.abc import Mapping

import pytest

from logstore.broker.quotas.client_quotas import (
    DEFAULT,
    ClientQuotas,
    Entity,
    Rate,
    check_entity,
    check_filter,
    check_op,
    entity_path,
    with_throttle,
)
from logstore.protocol import RawBody, codec

pytestmark = pytest.mark.unit


class MemoryStore:
    def __init__(self, configs: dict[Entity, dict[str, float]]) -> None:
        self.configs = configs

    def load(self) -> dict[Entity, dict[str, float]]:
        return dict(self.configs)

    def save(self, changes: Mapping[Entity, Mapping[str, float]]) -> None:
        self.configs.update({k: dict(v) for k, v in changes.items()})


def e(**names: str) -> Entity:
    return tuple(sorted((k.replace("_", "-"), v) for k, v in names.items()))


# Kafka's precedence, most specific first; each row: the entities present -> the one that applies
# to (user=alice, client=app), and the (user, client) tags of the shared rate.
ALL = [
    (e(user="alice", client_id="app"), ("alice", "app")),
    (e(user="alice", client_id=DEFAULT), ("alice", "app")),
    (e(user="alice"), ("alice", "")),
    (e(user=DEFAULT, client_id="app"), ("alice", "app")),
    (e(user=DEFAULT, client_id=DEFAULT), ("alice", "app")),
    (e(user=DEFAULT), ("alice", "")),
    (e(client_id="app"), ("", "app")),
    (e(client_id=DEFAULT), ("", "app")),
]


@pytest.mark.parametrize("first", range(len(ALL)))
def test_precedence_table(first: int) -> None:
    """With the entities from ``first`` on configured, the ``first`` one wins."""
    configs = {entity: {"producer_byte_rate": 1000.0 + i} for i, (entity, _) in enumerate(ALL) if i >= first}
    quotas = ClientQuotas(MemoryStore(configs))
    entity, tags = ALL[first]
    assert quotas.quota_entity("alice", "app", "producer_byte_rate") == (entity, tags)
    assert quotas.resolve("alice", "app")["producer_byte_rate"].bound == 1000.0 + first


def test_each_key_resolves_on_its_own_and_others_are_not_matched() -> None:
    quotas = ClientQuotas(
        MemoryStore(
            {e(user="alice"): {"producer_byte_rate": 10.0}, e(client_id="app"): {"consumer_byte_rate": 20.0}}
        )
    )
    resolved = quotas.resolve("alice", "app")
    assert resolved["producer_byte_rate"].bound == 10 and resolved["consumer_byte_rate"].bound == 20
    assert "request_percentage" not in resolved
    assert quotas.resolve("bob", "other") == {}
    # a user quota is shared by that user's client ids; a default one is per user
    assert quotas.resolve("alice", "x")["producer_byte_rate"].rate is resolved["producer_byte_rate"].rate
    defaults = ClientQuotas(MemoryStore({e(user=DEFAULT): {"producer_byte_rate": 10.0}}))
    assert (
        defaults.resolve("a", "c")["producer_byte_rate"].rate
        is not defaults.resolve("b", "c")["producer_byte_rate"].rate
    )


def test_inactive_without_enforced_quotas() -> None:
    assert not ClientQuotas(MemoryStore({})).active
    assert not ClientQuotas(MemoryStore({e(ip="1.2.3.4"): {"connection_creation_rate": 3.0}})).active
    assert not ClientQuotas(MemoryStore({e(user="a"): {"controller_mutation_rate": 3.0}})).active
    assert ClientQuotas(MemoryStore({e(user="a"): {"request_percentage": 3.0}})).active


def test_rate_is_kafkas_windowed_rate() -> None:
    rate = Rate(samples=11, window_ms=1000)
    rate.record(1000, 0)
    # a fresh rate counts at least 10 full windows: 1000 / 10 s
    assert rate.measure(0) == pytest.approx(100)
    for t in range(1, 20):
        rate.record(1000, t * 1000)
    # 11 samples of 1000 over 10 elapsed seconds (the oldest sample starts 10 s before)
    assert rate.measure(19_000) == pytest.approx(1100)
    # idle for 11 windows: every sample expired
    assert rate.measure(40_000) == 0


def test_throttle_time_is_kafkas() -> None:
    """QuotaUtils.throttleTime: (observed - quota) / quota * window. Kafka's test: 100 vs 50 over 3 samples -> 2000 ms."""
    rate = Rate(samples=3, window_ms=1000)
    rate.record(200, 0)  # 200 over the 2 s minimum window: 100/s
    assert rate.throttle_ms(50, 0, 10_000) == 2000
    assert rate.throttle_ms(100, 0, 10_000) == 0
    assert rate.throttle_ms(50, 0, 500) == 500  # capped


def test_the_request_quota_is_capped_at_one_window_and_the_byte_rates_at_the_whole() -> None:
    """Kafka's ClientRequestQuotaManager bounds a request-time throttle at one window
    (quota.window.size.seconds); the byte rates' throttle is bounded by all the samples here."""
    quotas = ClientQuotas(
        MemoryStore({e(user="a"): {"request_percentage": 1.0, "producer_byte_rate": 1.0}}),
        samples=11,
        window_seconds=2,
    )
    resolved = quotas.resolve("a", "app")
    # far over both bounds: uncapped, either throttle would be hours
    assert quotas.record(resolved, "request_percentage", 1e6, 0) == 2_000
    assert quotas.record(resolved, "producer_byte_rate", 1e6, 0) == 22_000
    # within the bound: no throttle at all
    fresh = ClientQuotas(
        MemoryStore({e(user="b"): {"request_percentage": 50.0}}), samples=11, window_seconds=2
    )
    assert fresh.record(fresh.resolve("b", "app"), "request_percentage", 10.0, 0) == 0


def test_entity_paths_are_kafkas_znodes() -> None:
    assert entity_path(e(user="alice", client_id="app")) == "users/alice/clients/app"
    assert entity_path(e(user=DEFAULT)) == "users/<default>"
    assert entity_path(e(client_id="a b*")) == "clients/a%20b%2A"
    assert entity_path(e(ip="1.2.3.4")) == "ips/1.2.3.4"


def test_validation() -> None:
    assert check_entity([("user", None), ("client-id", "x")])[0] == e(user=DEFAULT, client_id="x")
    assert check_entity([("user", "a"), ("ip", "1.1.1.1")])[0] is None
    assert check_op(e(user="a"), "request_percentage", 12.5, False) is None
    assert check_op(e(user="a"), "producer_byte_rate", 12.5, False)
    assert check_op(e(user="a"), "bogus", 1, True)
    assert check_filter([("user", 0, "a"), ("client-id", 2, None)]) is None
    assert check_filter([("topic", 2, None)]) == (35, "Custom entity type 'topic' not supported")


def test_throttle_is_written_into_responses() -> None:
    module = codec(3, 12).response_module
    response = module.MetadataResponse(
        throttle_time=datetime.timedelta(0), brokers=(), cluster_id=None, controller_id=0, topics=()
    )
    assert with_throttle(response, 250, 3, 12, True).throttle_time == datetime.timedelta(milliseconds=250)
    body = RawBody(b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00" + b"\x00")  # v9+: ..., throttle, tags
    assert with_throttle(body, 7, 0, 9, True) == b"\x00\x00\x00\x00\x00\x00\x00\x07\x00"
    commit = RawBody(b"\x00\x00\x00\x00\x00")
    assert with_throttle(commit, 9, 8, 8, True) == b"\x00\x00\x00\x09\x00"
    assert with_throttle(commit, 9, 8, 2, False) == commit  # no throttle_time_ms before v3


@pytest.mark.parametrize("version", [4, 7, 11, 12])
def test_a_throttled_fetch_is_answered_empty(version: int) -> None:
    """Kafka's getThrottledResponse: no partitions, the throttle time, the session id kept only
    for an incremental fetch; it encodes at every served version."""
    from types import SimpleNamespace

    from logstore.broker.quotas.client_quotas import _throttled_fetch
    from logstore.protocol import codec, encode_response

    c = codec(1, version)
    for session_id, epoch, kept in ((9, 3, 9), (0, -1, 0), (9, 0, 0)):
        response = _throttled_fetch(c, SimpleNamespace(session_id=session_id, session_epoch=epoch), 250)
        assert response.responses == ()
        assert response.throttle_time.total_seconds() * 1000 == 250
        if version >= 7:
            assert response.session_id == kept
        assert b"".join(bytes(chunk) for chunk in encode_response(c, 7, response))
