"""The one request path (logstore/broker/dispatch.py): every request counted, quotas plugged in."""

from __future__ import annotations

import asyncio
import contextlib
import io
import struct
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse
from kio.serial import entity_reader, entity_writer

from logstore.broker.broker import Broker
from logstore.broker.config.broker_config import BrokerConfig
from logstore.security import KafkaPrincipal

pytestmark = pytest.mark.unit

METADATA_KEY = 3


class _Connection:
    """What dispatch needs of a connection: who sent the request, and where a throttle goes."""

    peer = "127.0.0.1:1"
    client_host = "127.0.0.1"
    closed = False
    listener_name = "PLAINTEXT"
    security_protocol = "PLAINTEXT"

    def __init__(self, user: str) -> None:
        self.principal = KafkaPrincipal("User", user)
        self.throttles: list[tuple[int, bool]] = []

    def throttle(self, throttle_ms: int, client_throttles: bool) -> None:
        self.throttles.append((throttle_ms, client_throttles))


def metadata_frame(correlation: int) -> bytes:
    """A Metadata v12 request frame without its size: no topics asked for."""
    request = MetadataRequest(topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    body = io.BytesIO()
    entity_writer(MetadataRequest)(body, request)
    return struct.pack(">hhih", METADATA_KEY, 12, correlation, 1) + b"c" + b"\x00" + body.getvalue()


def throttle_time_ms(chunks: list[Any]) -> int:
    frame = b"".join(bytes(chunk) for chunk in chunks)
    response, _ = entity_reader(MetadataResponse)(frame, 9)  # size, correlation id, tags
    return int(response.throttle_time.total_seconds() * 1000)


@contextlib.asynccontextmanager
async def running_broker(data_dir: str) -> AsyncIterator[Broker]:
    broker = Broker(BrokerConfig.from_dict({"listeners": "PLAINTEXT://127.0.0.1:0"}), data_dir=data_dir)
    await broker.start(listen=False)
    try:
        yield broker
    finally:
        await broker.close()


def served(broker: Broker) -> int:
    stats = broker.metrics.requests.get(METADATA_KEY)
    return 0 if stats is None else sum(stats.by_version)


def test_every_request_is_counted_with_quotas_active(tmp_path: Any) -> None:
    """One quota on one user: the requests of that user and of everyone else are still counted
    (the quota path once returned before the metrics)."""

    async def scenario() -> tuple[int, int, bool]:
        async with running_broker(str(tmp_path)) as broker:
            broker.quotas.set_configs({(("user", "alice"),): {"producer_byte_rate": 1_000_000.0}})
            before = served(broker)
            for n in range(20):
                await broker.handle(metadata_frame(n), _Connection("alice"))
                await broker.handle(metadata_frame(n), _Connection("bob"))
            return before, served(broker), broker.quotas.active

    before, after, active = asyncio.run(scenario())
    assert active
    assert after - before == 40


def test_a_request_quota_throttles_through_dispatch(tmp_path: Any) -> None:
    """request_percentage far below what Metadata costs: the answer carries the throttle time
    and the connection is told to mute for it (KIP-219: after answering, for Metadata v12);
    a user with no quota is never throttled."""

    async def scenario() -> tuple[list[int], list[tuple[int, bool]], list[tuple[int, bool]], int]:
        async with running_broker(str(tmp_path)) as broker:
            broker.quotas.set_configs({(("user", "alice"),): {"request_percentage": 0.0001}})
            alice, bob = _Connection("alice"), _Connection("bob")
            times = []
            for n in range(5):
                chunks = await broker.handle(metadata_frame(n), alice)
                assert chunks is not None
                times.append(throttle_time_ms(chunks))
                await broker.handle(metadata_frame(n), bob)
            return times, alice.throttles, bob.throttles, served(broker)

    times, alice, bob, count = asyncio.run(scenario())
    assert times[-1] > 0, times
    assert alice and all(client_throttles for _, client_throttles in alice)
    assert max(ms for ms, _ in alice) == max(times)
    assert bob == []
    assert count == 10
