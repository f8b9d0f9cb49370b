"""``logstore produce`` and ``logstore consume``: Kafka's console producer and consumer.

They take the client library as an argument (``logstore.client`` by default,
or ``confluent_kafka``: the two have one API, so the code is the same), and
print what ``kafka-console-producer`` and ``kafka-console-consumer`` print.

- ``produce``: one record per line of stdin; ``parse.key=true`` splits each line
  at ``key.separator`` (default tab) into key and value; lines are handed over
  :data:`PRODUCE_BATCH` at a time (``produce_batch`` where the library has it).
- ``consume``: from the committed offsets of ``--group``, or (without a group)
  every partition from its end, or its start with ``--from-beginning``; stops
  at ``--max-messages``, after ``--timeout-ms`` with nothing new, or on Ctrl-C;
  then "Processed a total of N messages" on stderr, as Kafka's. Values only,
  by default; ``print.key``, ``print.offset``, ``print.partition``,
  ``print.timestamp`` and ``print.headers`` add fields as Kafka's
  DefaultMessageFormatter does, and ``--format`` takes a template of its own
  (``{topic} {partition} {offset} {timestamp} {key} {value} {headers}``).
  Output goes to stdout in one write per fetched batch.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, BinaryIO

import click

from logstore.cli._clients import ConsoleError, client_call
from logstore.cli._options import (
    BOOTSTRAP_OPTION,
    CONSOLE_CLIENT_OPTION,
    click_errors,
    client_library,
    props_option_value,
)

CONSUME_BATCH = 10_000
PRODUCE_BATCH = 10_000


def _unescape(text: str) -> str:
    return text.encode("utf-8").decode("unicode_escape")


# --------------------------------------------------------------------------- produce


def produce_lines(
    kafka: ModuleType,
    config: dict[str, Any],
    topic: str,
    source: BinaryIO,
    props: dict[str, str],
    *,
    timeout: float,
    err: Callable[[str], None],
) -> tuple[int, int]:
    """Send one record per line of ``source``; returns (delivered, failed)."""
    parse_key = props.get("parse.key", "false").lower() == "true"
    separator = _unescape(props.get("key.separator", "\t")).encode()
    failed = [0]

    def report(error: Any, message: Any) -> None:
        if error is not None:
            failed[0] += 1
            if failed[0] <= 10:
                err(f"error delivering a record to {topic}: {error.str()}")

    producer = client_call("bad producer configuration", lambda: kafka.Producer(config))
    sent = 0
    # logstore's produce_batch(topic, values, keys=...) encodes a list in C; confluent's takes other arguments.
    batch_api = producer.produce_batch if kafka.__name__ == "logstore.client" else None
    pending_values: list[bytes] = []
    pending_keys: list[bytes | None] = []

    def drain() -> None:
        nonlocal sent
        if not pending_values:
            return
        if batch_api is not None:
            client_call(f"producing to {topic}", lambda: batch_api(topic, pending_values,
                                                                   keys=pending_keys if parse_key else None,
                                                                   on_delivery=report))  # fmt: skip
        else:
            for key, value in zip(pending_keys, pending_values, strict=True):
                while True:
                    try:
                        producer.produce(topic, value=value, key=key, on_delivery=report)
                        break
                    except BufferError:
                        producer.poll(0.1)
        sent += len(pending_values)
        pending_values.clear()
        pending_keys.clear()
        producer.poll(0)

    for raw in source:
        line = raw.rstrip(b"\r\n")
        key: bytes | None = None
        if parse_key:
            key, sep, line = line.partition(separator)
            if not sep:
                raise ConsoleError(
                    f"line {sent + len(pending_values) + 1} has no key separator {separator!r} (parse.key=true)"
                )
        pending_values.append(line)
        pending_keys.append(key)
        if len(pending_values) >= PRODUCE_BATCH:
            drain()
    drain()
    left = producer.flush(timeout)
    if left:
        err(f"{left} records were not delivered within {timeout:g} s")
    return sent - failed[0] - left, failed[0] + left


# --------------------------------------------------------------------------- consume


@dataclass
class Format:
    """How a consumed record is printed (Kafka's DefaultMessageFormatter, or a template)."""

    template: str | None = None
    print_key: bool = False
    print_offset: bool = False
    print_partition: bool = False
    print_timestamp: bool = False
    print_headers: bool = False
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"

    @classmethod
    def of(cls, props: dict[str, str], template: str | None) -> Format:
        def flag(name: str) -> bool:
            return props.get(name, "false").lower() == "true"

        return cls(
            template=template,
            print_key=flag("print.key"),
            print_offset=flag("print.offset"),
            print_partition=flag("print.partition"),
            print_timestamp=flag("print.timestamp"),
            print_headers=flag("print.headers"),
            key_separator=_unescape(props.get("key.separator", "\t")).encode(),
            line_separator=_unescape(props.get("line.separator", "\n")).encode(),
        )

    @property
    def values_only(self) -> bool:
        return self.template is None and not (self.print_key or self.print_offset or self.print_partition
                                              or self.print_timestamp or self.print_headers)  # fmt: skip

    def render(self, messages: list[Any]) -> bytes:
        """The output for one batch of messages, as one bytes object."""
        if self.values_only:  # the fast path: values and separators only
            sep = self.line_separator
            return sep.join([m.value() or b"" for m in messages]) + sep
        return b"".join([self._one(m) for m in messages])

    def _one(self, m: Any) -> bytes:
        key, value = m.key(), m.value()
        if self.template is not None:
            headers = m.headers() or []
            text = self.template.format(
                topic=m.topic(), partition=m.partition(), offset=m.offset(), timestamp=m.timestamp()[1],
                key=_text(key), value=_text(value),
                headers=",".join(f"{k}:{_text(v)}" for k, v in headers),
            )  # fmt: skip
            return text.encode() + self.line_separator
        sep = self.key_separator
        parts: list[bytes] = []
        if self.print_timestamp:
            kind, ts = m.timestamp()
            name = {1: "CreateTime", 2: "LogAppendTime"}.get(kind, "NO_TIMESTAMP")
            parts.append(f"{name}:{ts}".encode() + sep)
        if self.print_partition:
            parts.append(f"Partition:{m.partition()}".encode() + sep)
        if self.print_offset:
            parts.append(f"Offset:{m.offset()}".encode() + sep)
        if self.print_headers:
            headers = m.headers() or []
            parts.append((",".join(f"{k}:{_text(v)}" for k, v in headers) or "NO_HEADERS").encode() + sep)
        if self.print_key:
            parts.append((key if key is not None else b"null") + sep)
        parts.append((value if value is not None else b"null") + self.line_separator)
        return b"".join(parts)


def _text(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", "replace")


def consume_records(
    kafka: ModuleType,
    config: dict[str, Any],
    topic: str,
    out: BinaryIO,
    fmt: Format,
    *,
    group: str | None,
    from_beginning: bool,
    partition: int | None,
    max_messages: int | None,
    timeout_ms: int | None,
    connect_timeout: float,
) -> int:
    """Print records of ``topic`` to ``out``; returns how many."""
    config = dict(config)
    config.setdefault("auto.offset.reset", "earliest" if from_beginning else "latest")
    config.setdefault("group.id", group or f"logstore-console-consumer-{int(time.time() * 1000) % 100000}")
    if group is None:
        config.setdefault("enable.auto.commit", False)
    consumer = client_call("bad consumer configuration", lambda: kafka.Consumer(config))
    try:
        if group is None:
            metadata = client_call(f"cannot reach a broker at {config.get('bootstrap.servers')}",
                                   lambda: consumer.list_topics(topic, timeout=connect_timeout))  # fmt: skip
            entry = metadata.topics.get(topic)
            if entry is None or entry.error is not None:
                raise ConsoleError(
                    f"topic {topic!r} does not exist; create it with: logstore topics create --topic {topic}"
                )
            start = kafka.OFFSET_BEGINNING if from_beginning else kafka.OFFSET_END
            chosen = [partition] if partition is not None else sorted(entry.partitions)
            consumer.assign([kafka.TopicPartition(topic, p, start) for p in chosen])
        else:
            consumer.subscribe([topic])
        return _consume_loop(consumer, out, fmt, max_messages, timeout_ms)
    finally:
        consumer.close()


def _consume_loop(
    consumer: Any, out: BinaryIO, fmt: Format, max_messages: int | None, timeout_ms: int | None
) -> int:
    count = 0
    idle_since = time.monotonic()
    while max_messages is None or count < max_messages:
        want = CONSUME_BATCH if max_messages is None else min(CONSUME_BATCH, max_messages - count)
        messages = consumer.consume(want, 0.5)
        good = [m for m in messages if m.error() is None]
        for m in messages:
            if m.error() is not None and not _benign(m.error()):
                raise ConsoleError(f"consume failed: {m.error().str()}")
        if good:
            out.write(fmt.render(good))
            count += len(good)
            idle_since = time.monotonic()
        elif timeout_ms is not None and (time.monotonic() - idle_since) * 1000 >= timeout_ms:
            break
    out.flush()
    return count


def _benign(error: Any) -> bool:
    return bool(error.code() == -191)  # _PARTITION_EOF


def stdin_binary() -> BinaryIO:
    return sys.stdin.buffer


def stdout_binary() -> BinaryIO:
    return sys.stdout.buffer


# --------------------------------------------------------------------------- the commands


@click.command()
@click.option("--topic", required=True, help="The topic to write to.")
@BOOTSTRAP_OPTION
@CONSOLE_CLIENT_OPTION
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE",
              help="parse.key=true splits each line at key.separator (default a tab) into key and value.")  # fmt: skip
@click.option("--producer-property", "producer_properties", multiple=True, metavar="KEY=VALUE",
              help="A producer config key (repeatable), e.g. acks=all, linger.ms=5, compression.type=lz4.")  # fmt: skip
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=60, show_default=True,
              help="Seconds to wait at the end for every record to be acknowledged.")  # fmt: skip
def produce(topic: str, bootstrap_server: str, client_name: str, properties: tuple[str, ...],
            producer_properties: tuple[str, ...], timeout: float) -> None:  # fmt: skip
    """Send each line of stdin as a record, like kafka-console-producer.

    \b
    printf 'a\\nb\\n' | logstore produce --topic events
    printf 'k1:v1\\n' | logstore produce --topic events --property parse.key=true --property key.separator=:
    """
    kafka = client_library(client_name, "logstore produce")
    config = {"bootstrap.servers": bootstrap_server,
              **props_option_value(producer_properties, "--producer-property")}  # fmt: skip
    props = props_option_value(properties, "--property")
    with click_errors():
        delivered, failed = produce_lines(kafka, config, topic, stdin_binary(), props, timeout=timeout,
                                          err=lambda line: click.echo(line, err=True))  # fmt: skip
    if failed:
        raise click.ClickException(f"{failed} records failed ({delivered} delivered)")


@click.command()
@click.option("--topic", required=True, help="The topic to read.")
@BOOTSTRAP_OPTION
@CONSOLE_CLIENT_OPTION
@click.option(
    "--group", default=None, help="Read as a member of this group, from its committed offsets (committing)."
)
@click.option(
    "--from-beginning",
    is_flag=True,
    help="Without a committed offset, start at the log start (else at the end).",
)
@click.option(
    "--partition", type=click.IntRange(min=0), default=None, help="Only this partition (without --group)."
)
@click.option(
    "--max-messages", type=click.IntRange(min=1), default=None, help="Stop after this many records."
)
@click.option(
    "--timeout-ms", type=click.IntRange(min=1), default=None, help="Stop after this long with no new record."
)
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE",
              help="print.key, print.offset, print.partition, print.timestamp, print.headers (=true), "
                   "key.separator, line.separator: Kafka's DefaultMessageFormatter.")  # fmt: skip
@click.option("--format", "template", default=None,
              help="A template instead: {topic} {partition} {offset} {timestamp} {key} {value} {headers}.")  # fmt: skip
@click.option("--consumer-property", "consumer_properties", multiple=True, metavar="KEY=VALUE",
              help="A consumer config key (repeatable).")  # fmt: skip
@click.option("--connect-timeout", type=click.FloatRange(min=0, min_open=True), default=15, show_default=True,
              help="Seconds to wait for the broker at the start.")  # fmt: skip
def consume(topic: str, bootstrap_server: str, client_name: str, group: str | None, from_beginning: bool,
            partition: int | None, max_messages: int | None, timeout_ms: int | None,
            properties: tuple[str, ...], template: str | None, consumer_properties: tuple[str, ...],
            connect_timeout: float) -> None:  # fmt: skip
    """Print records to stdout, like kafka-console-consumer.

    \b
    logstore consume --topic events --from-beginning --max-messages 10
    logstore consume --topic events --group g --property print.key=true --property print.offset=true
    logstore consume --topic events --from-beginning --format '{partition}/{offset} {key}={value}'

    It stops at --max-messages, after --timeout-ms with nothing new, or on
    Ctrl-C, and prints "Processed a total of N messages" on stderr.
    """
    if partition is not None and group is not None:
        raise click.UsageError("--partition reads without a group; drop --group or --partition")
    kafka = client_library(client_name, "logstore consume")
    config = {"bootstrap.servers": bootstrap_server,
              **props_option_value(consumer_properties, "--consumer-property")}  # fmt: skip
    fmt = Format.of(props_option_value(properties, "--property"), template)
    count = 0
    try:
        with click_errors():
            count = consume_records(
                kafka, config, topic, stdout_binary(), fmt, group=group, from_beginning=from_beginning,
                partition=partition, max_messages=max_messages, timeout_ms=timeout_ms,
                connect_timeout=connect_timeout)  # fmt: skip
    except KeyboardInterrupt:
        pass
    finally:
        click.echo(f"Processed a total of {count} messages", err=True)

