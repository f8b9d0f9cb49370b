"""``logstore topics``, ``logstore produce`` and ``logstore consume``: Kafka's console tools.

They take the client library as an argument (``logstore.client`` by default,
or ``confluent_kafka``: the two have one API, so the code is the same), and
print what ``kafka-topics``, ``kafka-console-producer`` and
``kafka-console-consumer`` print.

- ``topics``: list, create, delete, describe (Kafka's two-level layout: a topic
  line, then one line per partition), alter (partitions and configs).
- ``produce``: one record per line of stdin; ``parse.key=true`` splits each line
  at ``key.separator`` (default tab) into key and value; ``--batch`` lines are
  handed over at once (``produce_batch`` where the library has it).
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

import importlib
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, BinaryIO

from logstore._clients import kafka_reason
from logstore.errors import LogstoreError

CONSUME_BATCH = 10_000
PRODUCE_BATCH = 10_000


class ConsoleError(LogstoreError):
    """A console command cannot go on; the message says what to do."""


def parse_props(items: Iterable[str], option: str) -> dict[str, str]:
    """``["a=1", "b=x=y"]`` -> ``{"a": "1", "b": "x=y"}``; anything else is an error naming ``option``."""
    props: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConsoleError(f"{option} takes KEY=VALUE, got {item!r}")
        props[key.strip()] = value
    return props


def _unescape(text: str) -> str:
    return text.encode("utf-8").decode("unicode_escape")


def _call(what: str, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as e:  # the library's KafkaException, or a bad argument
        raise ConsoleError(f"{what}: {kafka_reason(e)}") from None


# --------------------------------------------------------------------------- topics


class Topics:
    """kafka-topics over an AdminClient of ``kafka``."""

    def __init__(
        self, kafka: ModuleType, bootstrap: str, timeout: float, props: dict[str, str] | None = None
    ) -> None:
        self.kafka = kafka
        self.api = importlib.import_module(
            f"{kafka.__name__}.admin"
        )  # confluent_kafka.admin is not an attribute
        self.timeout = timeout
        self.admin = _call("bad client configuration", lambda: self.api.AdminClient(
            {"bootstrap.servers": bootstrap, **(props or {})}))  # fmt: skip
        self.bootstrap = bootstrap

    def _metadata(self, topic: str | None = None) -> Any:
        return _call(f"cannot reach a broker at {self.bootstrap}",
                     lambda: self.admin.list_topics(topic, timeout=self.timeout))  # fmt: skip

    def _wait(self, futures: dict[Any, Any], what: str, ignore: int | None = None) -> None:
        for key, future in futures.items():
            try:
                future.result(self.timeout)
            except Exception as e:
                error: Any = e.args[0] if e.args else None
                if ignore is not None and hasattr(error, "code") and error.code() == ignore:
                    continue
                raise ConsoleError(f"{what} {key}: {kafka_reason(e)}") from None

    def names(self, exclude_internal: bool = False) -> list[str]:
        names = sorted(self._metadata().topics)
        return [n for n in names if not (exclude_internal and n.startswith("__"))]

    def create(self, topic: str, partitions: int, replication: int, configs: dict[str, str],
               if_not_exists: bool) -> None:  # fmt: skip
        new = self.api.NewTopic(topic, num_partitions=partitions, replication_factor=replication,
                                        config=configs)  # fmt: skip
        ignore = self.kafka.KafkaError.TOPIC_ALREADY_EXISTS if if_not_exists else None
        self._wait(self.admin.create_topics([new], request_timeout=self.timeout), "creating topic", ignore)

    def delete(self, topic: str, if_exists: bool) -> None:
        ignore = self.kafka.KafkaError.UNKNOWN_TOPIC_OR_PART if if_exists else None
        self._wait(self.admin.delete_topics([topic], request_timeout=self.timeout), "deleting topic", ignore)

    def describe(self, topic: str | None) -> list[str]:
        metadata = self._metadata(topic)
        names = [topic] if topic is not None else sorted(metadata.topics)
        lines: list[str] = []
        for name in names:
            entry = metadata.topics.get(name)
            if entry is None or entry.error is not None:
                reason = (
                    entry.error.str() if entry is not None and entry.error is not None else "unknown topic"
                )
                raise ConsoleError(f"topic {name!r}: {reason}; list them with: logstore topics list")
            configs = self._configs(name)
            partitions = [entry.partitions[p] for p in sorted(entry.partitions)]
            replication = len(partitions[0].replicas) if partitions else 0
            shown = ",".join(f"{k}={v}" for k, v in sorted(configs.items()))
            lines.append(f"Topic: {name}\tPartitionCount: {len(partitions)}\t"
                         f"ReplicationFactor: {replication}\tConfigs: {shown}")  # fmt: skip
            for p in partitions:
                lines.append(
                    f"\tTopic: {name}\tPartition: {p.id}\tLeader: {p.leader}\t"
                    f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isrs))}"
                )
        return lines

    def _configs(self, topic: str) -> dict[str, str]:
        """The topic's configs set for it (not broker defaults), as kafka-topics shows them."""
        resource = self.api.ConfigResource(self.api.ResourceType.TOPIC, topic)
        futures = self.admin.describe_configs([resource])
        entries = _call(
            f"describing configs of {topic}", lambda: next(iter(futures.values())).result(self.timeout)
        )
        dynamic = self.api.ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        return {name: entry.value for name, entry in entries.items()
                if getattr(entry.source, "value", entry.source) == dynamic}  # fmt: skip

    def alter(self, topic: str, partitions: int | None, set_configs: dict[str, str],
              delete_configs: Sequence[str]) -> None:  # fmt: skip
        admin = self.api
        if partitions is not None:
            futures = self.admin.create_partitions([admin.NewPartitions(topic, partitions)],
                                                   request_timeout=self.timeout)  # fmt: skip
            self._wait(futures, "adding partitions to")
        if set_configs or delete_configs:
            entries = [admin.ConfigEntry(k, v, incremental_operation=admin.AlterConfigOpType.SET)
                       for k, v in set_configs.items()]  # fmt: skip
            entries += [admin.ConfigEntry(k, None, incremental_operation=admin.AlterConfigOpType.DELETE)
                        for k in delete_configs]  # fmt: skip
            resource = admin.ConfigResource(admin.ResourceType.TOPIC, topic, incremental_configs=entries)
            self._wait(self.admin.incremental_alter_configs([resource]), "altering configs of")


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

    producer = _call("bad producer configuration", lambda: kafka.Producer(config))
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
            _call(f"producing to {topic}", lambda: batch_api(topic, pending_values,
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
    consumer = _call("bad consumer configuration", lambda: kafka.Consumer(config))
    try:
        if group is None:
            metadata = _call(f"cannot reach a broker at {config.get('bootstrap.servers')}",
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
