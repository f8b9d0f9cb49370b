"""The values the client hands out and takes in, shaped like confluent-kafka's.

:class:`TopicPartition` names a partition and carries an offset (and an
error, in commit results); :class:`Message` is one consumed record or one
delivery report. Offsets below zero are Kafka's logical offsets.

``Message`` is the C type ``logstore._speedups.Message``: the consumer's hot
path (``logstore.records.fetch.decode_fetch``) builds it straight from a
Fetch response's bytes, with no per-record Python. It has confluent-kafka's
accessor methods -- ``topic() partition() offset() key() value()
timestamp() headers() error() latency() len()`` and ``len(msg)`` -- and
``set_value``/``set_key``/``set_headers``; its constructor is
``Message(topic, partition, offset, key, value, timestamp=(0, 0),
headers=None, error=None, latency=None)``, positional or by keyword, for
delivery reports and errors. ``timestamp()`` is ``(type, ms)`` (type 0 not
available, 1 create time, 2 log append time); ``headers()`` is None when
there are none, else a list of ``(str, bytes | None)``. Like confluent's, it
cannot be subclassed; partition, offset and the timestamp are stored as C
ints (so they must be ints).

>>> m = Message("t", 0, 5, b"k", b"value", timestamp=(TIMESTAMP_CREATE_TIME, 1000))
>>> (m.topic(), m.partition(), m.offset(), m.key(), m.value(), m.timestamp(), m.headers(), len(m))
('t', 0, 5, b'k', b'value', (1, 1000), None, 5)
"""

from __future__ import annotations

from logstore._speedups import Message as Message
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
