"""Helpers of the Spark tests: records produced with known contents, rows read back, compared."""

from __future__ import annotations

import datetime
from typing import Any

from logstore.client import Consumer, Producer, TopicPartition
from logstore.client.admin import AdminClient, NewTopic

Row = tuple[Any, ...]


def create(bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(30)


def produce(bootstrap: str, topic: str, count: int, *, start: int = 0, headers: bool = True,
            partition: int | None = None) -> list[Row]:  # fmt: skip
    """``count`` records (every 7th keyless, every 5th with headers, every 11th a null value).

    Returns the rows Spark's Kafka schema gives for them, from the delivery reports:
    (key, value, topic, partition, offset, timestamp, timestampType, headers).
    """
    rows: list[Row] = []

    def report(error: Any, message: Any) -> None:
        assert error is None, error
        kind, ms = message.timestamp()
        rows.append((message.key(), message.value(), message.topic(), message.partition(), message.offset(),
                     datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).replace(tzinfo=None),
                     kind - 1, tuple(message.headers() or ())))  # fmt: skip

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        key = None if i % 7 == 0 else f"key-{i}".encode()
        value = None if i % 11 == 3 else f"value-{i}".encode() * (1 + i % 3)
        hdrs = [("h", f"{i}".encode()), ("n", None)] if headers and i % 5 == 0 else None
        kwargs: dict[str, Any] = {"timestamp": 1_700_000_000_000 + i}
        if partition is not None:
            kwargs["partition"] = partition
        producer.produce(topic, value, key, headers=hdrs, on_delivery=report, **kwargs)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    producer.close()
    return sorted(rows, key=lambda r: (r[3], r[4]))


def spark_rows(df: Any) -> list[Row]:
    """A DataFrame of Spark's Kafka schema as rows comparable with :func:`produce`'s."""
    out = []
    for r in df.collect():
        headers = (
            tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in r["headers"] or ())
            if "headers" in r
            else ()
        )
        out.append((None if r.key is None else bytes(r.key), None if r.value is None else bytes(r.value), r.topic,
                    r.partition, r.offset, r.timestamp, r.timestampType, headers))  # fmt: skip
    return sorted(out, key=lambda r: (r[2], r[3], r[4]))


def consume_all(bootstrap: str, topic: str, expected: int, timeout: float = 60) -> list[Any]:
    """Every message of ``topic`` (read until ``expected`` arrived and the end is reached)."""
    import time

    consumer = Consumer({"bootstrap.servers": bootstrap, "enable.partition.eof": True})
    meta = consumer.list_topics(topic, timeout=10).topics[topic]
    parts = [TopicPartition(topic, p, 0) for p in meta.partitions]
    consumer.assign(parts)
    out: list[Any] = []
    eof: set[int] = set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for m in consumer.consume(10_000, 0.5):
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    eof.add(m.partition())
                    continue
                raise AssertionError(m.error())
            out.append(m)
        if len(out) >= expected and len(eof) == len(parts):
            break
    consumer.close()
    return out
