"""What ``logstore perf produce`` and ``logstore perf consume`` share: the client they drive, its errors.

They drive any Kafka-protocol broker (a ``logstore broker`` or Kafka itself)
with logstore's client or confluent-kafka (``--client``), imported only when a command runs.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from logstore.cli._clients import kafka_reason, selected_module, unreachable
from logstore.errors import LogstoreError

CONNECT_TIMEOUT_S = 10.0
MB = 1024 * 1024
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

Printer = Callable[[str], None]


class PerfError(LogstoreError):
    """A perf run cannot start or cannot go on; the message says what to do."""


def stdout_line(line: str) -> None:
    print(line, flush=True)


def confluent_kafka() -> ModuleType:
    return selected_module("logstore perf", PerfError)


def make_client(factory: Callable[[dict[str, Any]], Any], config: dict[str, Any], option: str) -> Any:
    """``factory(config)`` (a Producer or Consumer); a bad setting is a PerfError naming ``option``."""
    kafka = confluent_kafka()
    try:
        return factory(config)
    except (kafka.KafkaException, ValueError, TypeError) as e:
        raise PerfError(f"bad client configuration ({kafka_reason(e)}); check {option}") from None


def check_topic(client: Any, topic: str, bootstrap: str, must_exist: bool) -> int:
    """Connects (bounded in time); returns the topic's partition count (0: unknown)."""
    kafka = confluent_kafka()
    try:
        metadata = client.list_topics(topic, timeout=CONNECT_TIMEOUT_S)
    except kafka.KafkaException as e:
        raise PerfError(unreachable(bootstrap, CONNECT_TIMEOUT_S, kafka_reason(e))) from None
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
