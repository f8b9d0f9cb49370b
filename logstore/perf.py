"""``logstore perf produce`` and ``logstore perf consume``: Kafka's perf tools, in Python.

They drive any Kafka-protocol broker (a ``logstore broker`` or Kafka itself)
with logstore's client or confluent-kafka (``--client``), imported only when a command runs, and
print what ``kafka-producer-perf-test`` and ``kafka-consumer-perf-test`` print,
so their output can be compared line for line.

Producer: ``Producer.produce`` in a tight loop (``poll(0)`` every
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

Consumer: without ``--group`` it assigns every partition of the topic from
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
import random
import string
import time
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import ModuleType
from typing import TYPE_CHECKING, Any

from logstore._clients import kafka_reason, selected_module, stderr_line
from logstore.errors import LogstoreError

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message

REPORT_INTERVAL_S = 5.0
MAX_LATENCY_SAMPLES = 500_000
POLL_EVERY = 1024  # records between two poll(0) calls of an unthrottled producer
CONNECT_TIMEOUT_S = 10.0
FLUSH_TIMEOUT_S = 30.0
BROKERS_DOWN_ABORT_S = 10.0
CONSUME_BATCH = 10_000
MB = 1024 * 1024
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
CONSUMER_HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)

Printer = Callable[[str], None]


class PerfError(LogstoreError):
    """A perf run cannot start or cannot go on; the message says what to do."""


def _stdout(line: str) -> None:
    print(line, flush=True)


def confluent_kafka() -> ModuleType:
    return selected_module("logstore perf", PerfError)


def parse_props(items: Iterable[str], option: str) -> dict[str, str]:
    """``["acks=1", "linger.ms=5"]`` -> ``{"acks": "1", "linger.ms": "5"}``."""
    props: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise PerfError(f"{option} takes KEY=VALUE (a librdkafka config name), got {item!r}")
        props[key.strip()] = value.strip()
    return props


def _unreachable(bootstrap: str, error: object) -> PerfError:
    return PerfError(
        f"cannot reach a broker at {bootstrap} within {CONNECT_TIMEOUT_S:g} s ({error}); "
        f"start one (logstore broker --listeners PLAINTEXT://{bootstrap}) "
        "or pass --bootstrap-server HOST:PORT"
    )


def _client(factory: Callable[[dict[str, Any]], Any], config: dict[str, Any], option: str) -> Any:
    kafka = confluent_kafka()
    try:
        return factory(config)
    except (kafka.KafkaException, ValueError, TypeError) as e:
        raise PerfError(f"bad client configuration ({kafka_reason(e)}); check {option}") from None


def _check_topic(client: Any, topic: str, bootstrap: str, must_exist: bool) -> int:
    """Connects (bounded in time); returns the topic's partition count (0: unknown)."""
    kafka = confluent_kafka()
    try:
        metadata = client.list_topics(topic, timeout=CONNECT_TIMEOUT_S)
    except kafka.KafkaException as e:
        raise _unreachable(bootstrap, kafka_reason(e)) from None
    entry = metadata.topics.get(topic)
    if entry is None or entry.error is not None:
        if must_exist:
            reason = entry.error.str() if entry is not None and entry.error is not None else "not in metadata"
            raise PerfError(
                f"topic {topic!r} is not on the broker at {bootstrap} ({reason}); "
                f"produce to it first (logstore perf produce --topic {topic} ...)"
            )
        return 0
    return len(entry.partitions)


# --------------------------------------------------------------------------- produce


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
    out: Printer = _stdout,
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
    producer = _client(kafka.Producer, config, "--producer-props")
    _check_topic(producer, topic, bootstrap, must_exist=False)

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


# --------------------------------------------------------------------------- consume


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
    out: Printer = _stdout,
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

    consumer = _client(kafka.Consumer, config, "--consumer-props")
    count = 0
    nbytes = 0
    timed_out = False
    stopped = ""
    try:
        partitions = _check_topic(consumer, topic, bootstrap, must_exist=True)
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
