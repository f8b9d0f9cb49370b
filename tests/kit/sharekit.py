"""Share groups (KIP-932) in tests: confluent-kafka ShareConsumers and the wire requests around them."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from tests.kit.wire import WireClient, request_class

LOCK_MS = 2_000
"""The short acquisition lock the share tests' brokers use (group.share.record.lock.duration.ms)."""


def describe_share_group(bootstrap: str, group_id: str) -> Any:
    """ShareGroupDescribe v1 of one group (its DescribedGroup)."""
    with WireClient(bootstrap) as client:
        response = client.call(request_class(77, 1)(group_ids=(group_id,), include_authorized_operations=False))
    return response.groups[0]


def assigned_members(bootstrap: str, group_id: str) -> int:
    """How many of the group's members have a partition assigned."""
    group = describe_share_group(bootstrap, group_id)
    return sum(1 for m in group.members if any(t.partitions for t in m.assignment.topic_partitions))


def share_consumer(bootstrap: str, group_id: str, topic: str, **config: Any) -> Any:
    """A subscribed confluent-kafka ShareConsumer (``config``: more settings, dots as underscores)."""
    from confluent_kafka import ShareConsumer

    settings = {"bootstrap.servers": bootstrap, "group.id": group_id}
    settings.update({name.replace("_", "."): value for name, value in config.items()})
    consumer = ShareConsumer(settings)
    consumer.subscribe([topic])
    return consumer


def join_all(bootstrap: str, group_id: str, consumers: Iterable[Any], timeout: float = 30) -> None:
    """Poll ``consumers`` (receiving nothing: nothing is produced yet) until each has an assignment,
    so that the share-partitions start at the log's end before the test produces."""
    consumers = list(consumers)
    deadline = time.monotonic() + timeout
    while assigned_members(bootstrap, group_id) < len(consumers):
        assert time.monotonic() < deadline, f"the {len(consumers)} share consumers did not all get assignments"
        for consumer in consumers:
            assert not list(consumer.poll(0.1)), "records arrived before any was produced"


def poll_until(
    consumers: list[Any], done: Callable[[], bool], on_message: Callable[[int, Any], None], timeout: float, what: str
) -> None:
    """Poll the consumers in turn (0.3 s each), handing each record to ``on_message(index, message)``,
    until ``done()``; AssertionError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        for index, consumer in enumerate(consumers):
            for message in consumer.poll(0.3):
                assert message.error() is None, message.error()
                on_message(index, message)
