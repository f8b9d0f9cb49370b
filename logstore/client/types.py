"""The values the client hands out and takes in, shaped like confluent-kafka's.

:class:`TopicPartition` names a partition and carries an offset (and an
error, in commit results); :class:`Message` is one consumed record or one
delivery report. Offsets below zero are Kafka's logical offsets.
"""

from __future__ import annotations

from typing import Any

from logstore.client.errors import KafkaError

OFFSET_BEGINNING = -2
OFFSET_END = -1
OFFSET_STORED = -1000
OFFSET_INVALID = -1001

TIMESTAMP_NOT_AVAILABLE = 0
TIMESTAMP_CREATE_TIME = 1
TIMESTAMP_LOG_APPEND_TIME = 2


class TopicPartition:
    """A topic, partition, offset (and metadata, leader epoch, error) as confluent-kafka's.

    >>> TopicPartition("t", 1, 5)
    TopicPartition{topic=t,partition=1,offset=5,error=None}
    >>> sorted([TopicPartition("b", 0), TopicPartition("a", 2)])[0].topic
    'a'
    """

    __slots__ = ("error", "leader_epoch", "metadata", "offset", "partition", "topic")

    def __init__(
        self,
        topic: str,
        partition: int = -1,
        offset: int = OFFSET_INVALID,
        metadata: str | None = None,
        leader_epoch: int | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.metadata = metadata
        self.leader_epoch = leader_epoch
        self.error: KafkaError | None = None

    def _key(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TopicPartition):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other: TopicPartition) -> bool:
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"TopicPartition{{topic={self.topic},partition={self.partition},"
            f"offset={self.offset},error={self.error}}}"
        )


class Message:
    """A record as the application sees it: confluent-kafka's accessor methods.

    The consumer's hot path builds these in C (``logstore._speedups``); this
    class is the same shape for delivery reports and errors.
    """

    __slots__ = ("_error", "_headers", "_key", "_latency", "_offset", "_partition", "_timestamp",
                 "_topic", "_value")  # fmt: skip

    def __init__(
        self,
        topic: str | None,
        partition: int,
        offset: int,
        key: Any,
        value: Any,
        timestamp: tuple[int, int] = (TIMESTAMP_NOT_AVAILABLE, 0),
        headers: list[tuple[str, bytes | None]] | None = None,
        error: KafkaError | None = None,
        latency: float | None = None,
    ) -> None:
        self._topic = topic
        self._partition = partition
        self._offset = offset
        self._key = key
        self._value = value
        self._timestamp = timestamp
        self._headers = headers
        self._error = error
        self._latency = latency

    def topic(self) -> str | None:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> Any:
        return self._key

    def value(self) -> Any:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return self._timestamp

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return self._headers

    def error(self) -> KafkaError | None:
        return self._error

    def latency(self) -> float | None:
        return self._latency

    def len(self) -> int:
        return len(self._value) if self._value is not None else 0

    def __len__(self) -> int:
        return self.len()

    def set_value(self, value: Any) -> None:
        self._value = value

    def set_key(self, key: Any) -> None:
        self._key = key

    def set_headers(self, headers: list[tuple[str, bytes | None]] | None) -> None:
        self._headers = headers

    def __repr__(self) -> str:
        return (
            f"Message(topic={self._topic!r}, partition={self._partition}, offset={self._offset}, "
            f"key={self._key!r}, value={self._value!r}, error={self._error})"
        )
