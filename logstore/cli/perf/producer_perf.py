"""``logstore perf produce``: Kafka's ``kafka-producer-perf-test``, in Python (its lines, line for line).

It calls ``Producer.produce`` in a tight loop (``poll(0)`` every
:data:`POLL_EVERY` records, and on ``BufferError`` a short ``poll`` until the
queue has room). The payload is one random string of uppercase letters of
``--record-size`` bytes, sent as every record's value without a key (as Kafka's
tool does). Latency is librdkafka's own per-message figure
(``Message.latency()``: from ``produce()`` to the broker's acknowledgement),
read in the delivery report; average and maximum are over every record, the
percentiles over a sample kept in a preallocated array of at most
:data:`MAX_LATENCY_SAMPLES` entries (every k-th report, k =
``num_records // MAX_LATENCY_SAMPLES`` rounded up, as Kafka samples). Every
:data:`REPORT_INTERVAL_S` a line for that window is printed; at the end one
line for the whole run, whose rate is over the time from the first
``produce`` to the last delivery report.
"""

from __future__ import annotations

import math
import random
import string
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from logstore.cli._clients import kafka_reason, stderr_line
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

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message

REPORT_INTERVAL_S = 5.0
MAX_LATENCY_SAMPLES = 500_000
POLL_EVERY = 1024  # records between two poll(0) calls of an unthrottled producer
FLUSH_TIMEOUT_S = 30.0
BROKERS_DOWN_ABORT_S = 10.0



@dataclass
class ProduceResult:
    """What a producer run did; ``records`` counts acknowledged records only."""

    records: int
    failed: int
    unsent: int
    elapsed_s: float
    record_size: int
    avg_latency_ms: float
    max_latency_ms: float
    percentiles_ms: dict[float, float]
    stopped: str = ""  # "", "duration-limit", "interrupted"
    first_errors: list[str] = field(default_factory=list)

    @property
    def records_per_s(self) -> float:
        return self.records / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.records_per_s * self.record_size / MB

    def summary(self) -> str:
        """The final line of kafka-producer-perf-test."""
        p = [int(self.percentiles_ms.get(q, 0.0)) for q in (0.5, 0.95, 0.99, 0.999)]
        return (
            f"{self.records} records sent, {self.records_per_s:f} records/sec "
            f"({self.mb_per_s:.2f} MB/sec), {self.avg_latency_ms:.2f} ms avg latency, "
            f"{self.max_latency_ms:.2f} ms max latency, {p[0]} ms 50th, {p[1]} ms 95th, "
            f"{p[2]} ms 99th, {p[3]} ms 99.9th."
        )


def percentiles(samples: Sequence[float], quantiles: Sequence[float]) -> dict[float, float]:
    """Kafka's nearest-rank rule: ``sorted[int(q * n)]``."""
    if not samples:
        return dict.fromkeys(quantiles, 0.0)
    ordered = sorted(samples)
    return {q: ordered[min(int(q * len(ordered)), len(ordered) - 1)] for q in quantiles}


def payload(record_size: int, seed: int | None = None) -> bytes:
    """Random uppercase letters, as kafka-producer-perf-test sends."""
    rng = random.Random(seed)
    return "".join(rng.choices(string.ascii_uppercase, k=record_size)).encode()


def produce_perf(
    topic: str,
    num_records: int,
    record_size: int,
    throughput: float = -1,
    bootstrap: str = DEFAULT_BOOTSTRAP,
    props: dict[str, str] | None = None,
    duration_limit_s: float | None = None,
    out: Printer = stdout_line,
    err: Printer = stderr_line,
) -> ProduceResult:
    """Send ``num_records`` records of ``record_size`` bytes; prints Kafka's lines to ``out``.

    ``throughput`` > 0 caps records/s; sending stops at ``duration_limit_s``
    (then waits at most :data:`FLUSH_TIMEOUT_S` for outstanding reports).
    Raises :class:`PerfError` when the broker is unreachable or lost.
    """
    if num_records < 1:
        raise PerfError("--num-records must be at least 1")
    if record_size < 0:
        raise PerfError("--record-size must be 0 or more")
    kafka = confluent_kafka()
    all_down_code = kafka.KafkaError._ALL_BROKERS_DOWN
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, **(props or {})}
    bootstrap = str(config["bootstrap.servers"])

    # Delivery-report state: closure cells, the cheapest thing to update per record.
    sampling = max(1, math.ceil(num_records / MAX_LATENCY_SAMPLES))
    samples = array("d", bytes(8 * min(num_records, MAX_LATENCY_SAMPLES)))
    capacity = len(samples)
    n_samples = 0
    delivered = 0
    failed = 0
    first_errors: list[str] = []
    window_count = 0
    window_latency = 0.0
    window_max = 0.0
    fatal: KafkaError | None = None
    brokers_down_at: tuple[float, int] | None = None  # (when, delivered then)

    def on_delivery(error: KafkaError | None, msg: Message) -> None:
        nonlocal delivered, failed, n_samples, window_count, window_latency, window_max
        if error is not None:
            failed += 1
            if len(first_errors) < 5:
                first_errors.append(error.str())
            return
        latency = msg.latency()
        ms = latency * 1000.0 if latency is not None else 0.0
        delivered += 1
        window_count += 1
        window_latency += ms
        if ms > window_max:
            window_max = ms
        if not delivered % sampling and n_samples < capacity:
            samples[n_samples] = ms
            n_samples += 1

    def on_error(error: KafkaError) -> None:
        nonlocal fatal, brokers_down_at
        if error.fatal():
            fatal = error
        elif error.code() == all_down_code and brokers_down_at is None:
            brokers_down_at = (time.monotonic(), delivered)

    config["on_delivery"] = on_delivery
    config["error_cb"] = on_error
    producer = make_client(kafka.Producer, config, "--producer-props")
    check_topic(producer, topic, bootstrap, must_exist=False)

    value = payload(record_size)
    produce = producer.produce
    poll = producer.poll
    total_count = 0
    total_latency = 0.0
    total_max = 0.0
    start = time.monotonic()
    window_start = start
    deadline = start + duration_limit_s if duration_limit_s is not None else math.inf
    stopped = ""

    def roll_window(now: float, show: bool) -> None:
        nonlocal window_count, window_latency, window_max, window_start
        nonlocal total_count, total_latency, total_max
        count, latency_sum, latency_max = window_count, window_latency, window_max
        window_count, window_latency, window_max = 0, 0.0, 0.0
        total_count += count
        total_latency += latency_sum
        total_max = max(total_max, latency_max)
        if show:
            elapsed = max(now - window_start, 1e-9)
            rate = count / elapsed
            avg = latency_sum / count if count else 0.0
            out(
                f"{count} records sent, {rate:.1f} records/sec ({rate * record_size / MB:.2f} MB/sec), "
                f"{avg:.1f} ms avg latency, {latency_max:.1f} ms max latency."
            )
        window_start = now

    def check(now: float) -> None:
        nonlocal brokers_down_at
        if fatal is not None:
            raise PerfError(f"the producer failed: {fatal.str()}")
        if brokers_down_at is not None:
            since, delivered_then = brokers_down_at
            if delivered != delivered_then:
                brokers_down_at = None
            elif now - since > BROKERS_DOWN_ABORT_S:
                raise PerfError(
                    f"lost the broker at {bootstrap}: no connection for {BROKERS_DOWN_ABORT_S:g} s; "
                    "is it still running?"
                )
        if now - window_start >= REPORT_INTERVAL_S:
            roll_window(now, True)

    throttled = throughput > 0
    mask = 0 if throttled else POLL_EVERY - 1
    sent = 0
    try:
        while sent < num_records:
            try:
                produce(topic, value)
            except BufferError:  # the local queue is full: serve reports until there is room
                poll(0.005)
                now = time.monotonic()
                check(now)
                if now >= deadline:
                    stopped = "duration-limit"
                    break
                continue
            except kafka.KafkaException as e:
                raise PerfError(
                    f"cannot produce to {topic!r}: {kafka_reason(e)} "
                    "(a --record-size above message.max.bytes? raise it with --producer-props)"
                ) from None
            sent += 1
            if not sent & mask:
                poll(0)
                now = time.monotonic()
                if throttled:  # sleep once ahead by 2 ms or more (Kafka's ThroughputThrottler)
                    ahead = start + sent / throughput - now
                    while ahead >= 0.002:
                        poll(min(ahead, 0.1))
                        now = time.monotonic()
                        ahead = start + sent / throughput - now
                check(now)
                if now >= deadline:
                    stopped = "duration-limit"
                    break
        flush_deadline = time.monotonic() + FLUSH_TIMEOUT_S
        while len(producer) and time.monotonic() < flush_deadline:
            producer.flush(0.5)
            check(time.monotonic())
    except KeyboardInterrupt:
        stopped = "interrupted"
        producer.flush(min(FLUSH_TIMEOUT_S, 5.0))
    end = time.monotonic()
    unsent = len(producer)
    roll_window(end, False)
    result = ProduceResult(
        records=delivered,
        failed=failed,
        unsent=unsent,
        elapsed_s=end - start,
        record_size=record_size,
        avg_latency_ms=total_latency / total_count if total_count else 0.0,
        max_latency_ms=total_max,
        percentiles_ms=percentiles(samples[:n_samples], (0.5, 0.95, 0.99, 0.999)),
        stopped=stopped,
        first_errors=first_errors,
    )
    if stopped == "duration-limit":
        err(f"stopped sending after --duration-limit {duration_limit_s:g} s ({sent} of {num_records} sent)")
    elif stopped == "interrupted":
        err(f"interrupted after {sent} of {num_records} records")
    if unsent:
        err(f"{unsent} records had no delivery report after {FLUSH_TIMEOUT_S:g} s; is the broker overloaded?")
    if failed:
        err(f"{failed} records failed; first errors: " + "; ".join(first_errors))
    out(result.summary())
    return result
