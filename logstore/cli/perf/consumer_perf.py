"""``logstore perf consume``: Kafka's ``kafka-consumer-perf-test``, in Python (its header and row).

Without ``--group`` it assigns every partition of the topic from
offset 0 with no group protocol at all (``auto.offset.reset=earliest`` if 0
is gone); with ``--group`` it subscribes and counts the time to the first
assignment as ``rebalance.time.ms``. It reads with ``Consumer.consume``
in batches of up to :data:`CONSUME_BATCH` messages; bytes are value plus key
sizes (MB = 2**20 bytes, as in Kafka). The run ends at ``--messages``
messages, after ``--timeout`` ms without a message, or at
``--duration-limit``; ``end.time`` is when the last message arrived.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from datetime import datetime
from types import ModuleType
from typing import Any

from logstore.cli._clients import stderr_line
from logstore.cli.perf.perf_client import (
    DEFAULT_BOOTSTRAP,
    MB,
    PerfError,
    Printer,
    check_topic,
    confluent_kafka,
    make_client,
    stdout_line,
)

CONSUME_BATCH = 10_000
CONSUMER_HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)


@dataclass
class ConsumeResult:
    """What a consumer run read; times are wall clock (seconds since the epoch)."""

    messages: int
    bytes: int
    start: float
    end: float
    rebalance_s: float
    timed_out: bool = False
    stopped: str = ""

    @property
    def elapsed_s(self) -> float:
        return max(self.end - self.start, 1e-9)

    @property
    def fetch_s(self) -> float:
        return max(self.elapsed_s - self.rebalance_s, 1e-9)

    def row(self) -> str:
        """The row of kafka-consumer-perf-test (under :data:`CONSUMER_HEADER`)."""
        mb = self.bytes / MB
        return (
            f"{_kafka_time(self.start)}, {_kafka_time(self.end)}, {mb:.4f}, {mb / self.elapsed_s:.4f}, "
            f"{self.messages}, {self.messages / self.elapsed_s:.4f}, {round(self.rebalance_s * 1000)}, "
            f"{round(self.fetch_s * 1000)}, {mb / self.fetch_s:.4f}, {self.messages / self.fetch_s:.4f}"
        )


def _kafka_time(t: float) -> str:
    """``yyyy-MM-dd HH:mm:ss:SSS`` in local time, as Kafka prints it."""
    stamp = datetime.fromtimestamp(t)
    return stamp.strftime("%Y-%m-%d %H:%M:%S:") + f"{stamp.microsecond // 1000:03d}"


def _consumer_defaults(kafka: ModuleType, group: str | None) -> dict[str, Any]:
    config: dict[str, Any] = {
        # confluent-kafka wants a group.id even for assign(); without --group it is never used.
        "group.id": group or f"logstore-perf-{os.getpid()}",
        "enable.auto.commit": group is not None,
        "auto.offset.reset": "earliest",
    }
    if kafka.libversion()[1] >= 0x020400FF:
        # librdkafka pauses fetching for 1 s whenever its prefetch queue holds
        # queued.min.messages; that throttles a fast reader (Java has no such pause).
        config["fetch.queue.backoff.ms"] = 1
    return config


def consume_perf(
    topic: str,
    messages: int,
    bootstrap: str = DEFAULT_BOOTSTRAP,
    group: str | None = None,
    timeout_ms: int = 10_000,
    props: dict[str, str] | None = None,
    duration_limit_s: float | None = None,
    header: bool = True,
    out: Printer = stdout_line,
    err: Printer = stderr_line,
) -> ConsumeResult:
    """Read ``messages`` messages of ``topic``; prints Kafka's header and row to ``out``."""
    if messages < 1:
        raise PerfError("--messages must be at least 1")
    if timeout_ms < 1:
        raise PerfError("--timeout must be at least 1 ms")
    kafka = confluent_kafka()
    config = {"bootstrap.servers": bootstrap, **_consumer_defaults(kafka, group), **(props or {})}
    bootstrap = str(config["bootstrap.servers"])
    assigned_at: list[float] = []

    def on_assign(consumer: Any, partitions: list[Any]) -> None:
        if partitions and not assigned_at:
            assigned_at.append(time.time())

    consumer = make_client(kafka.Consumer, config, "--consumer-props")
    count = 0
    nbytes = 0
    timed_out = False
    stopped = ""
    try:
        partitions = check_topic(consumer, topic, bootstrap, must_exist=True)
        start = time.time()
        if group is None:
            consumer.assign([kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
            assigned_at.append(start)
        else:
            consumer.subscribe([topic], on_assign=on_assign)
        error_of = kafka.Message.error
        key_of = kafka.Message.key
        eof = kafka.KafkaError._PARTITION_EOF
        timeout_s = timeout_ms / 1000
        deadline = time.monotonic() + duration_limit_s if duration_limit_s is not None else math.inf
        last = time.monotonic()
        end = start
        try:
            while count < messages:
                now = time.monotonic()
                if now >= deadline:
                    stopped = "duration-limit"
                    break
                wait = min(1.0, timeout_s - (now - last), deadline - now)
                if wait <= 0:
                    timed_out = True
                    break
                batch = consumer.consume(num_messages=min(CONSUME_BATCH, messages - count), timeout=wait)
                if not batch:
                    continue
                if any(map(error_of, batch)):
                    batch = _drop_errors(batch, eof, err)
                last = time.monotonic()
                end = time.time()
                count += len(batch)
                nbytes += sum(map(len, batch)) + sum(map(len, filter(None, map(key_of, batch))))
        except KeyboardInterrupt:
            stopped = "interrupted"
    finally:
        consumer.close()
    rebalance = (assigned_at[0] - start) if assigned_at else (end - start)
    result = ConsumeResult(count, nbytes, start, end, max(rebalance, 0.0), timed_out, stopped)
    if header:
        out(CONSUMER_HEADER)
    out(result.row())
    if timed_out:
        err(
            f"WARNING: Exiting before consuming the expected number of messages ({count} of {messages}): "
            f"timeout ({timeout_ms} ms) exceeded. You can use the --timeout option to increase the timeout."
        )
        if group is not None and not assigned_at:
            err(
                f"group {group!r} got no partitions: does the broker support consumer groups? "
                "Without --group every partition is read with no group."
            )
    elif stopped == "duration-limit":
        err(f"stopped after --duration-limit {duration_limit_s:g} s ({count} of {messages} messages)")
    elif stopped == "interrupted":
        err(f"interrupted after {count} of {messages} messages")
    return result


def _drop_errors(batch: list[Any], eof: int, err: Printer) -> list[Any]:
    """Messages without errors; a fatal or topic-level error stops the run."""
    kept = []
    for msg in batch:
        error = msg.error()
        if error is None:
            kept.append(msg)
        elif error.code() != eof:
            if error.fatal() or error.code() in (3, 29):  # UNKNOWN_TOPIC_OR_PART, TOPIC_AUTHORIZATION_FAILED
                raise PerfError(f"consuming {msg.topic()!r} failed: {error.str()}")
            err(f"consumer error (continuing): {error.str()}")
    return kept
