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


class ConsumerGroupMetadata:
    """What a transactional producer needs of a consumer's group membership
    (``Consumer.consumer_group_metadata()``, for ``Producer.send_offsets_to_transaction``).

    confluent-kafka hands out an opaque object; this one is Kafka's
    ``ConsumerGroupMetadata``, read-only: ``group_id``, ``generation_id`` (-1 outside a
    generation), ``member_id`` ("" when not a member) and ``group_instance_id`` (static
    membership, or None). The group coordinator refuses a transactional offset commit
    whose generation or member is stale (KIP-447), so a zombie consumer's producer
    cannot commit offsets.

    >>> ConsumerGroupMetadata("g", 3, "m-1")
    ConsumerGroupMetadata(group_id='g', generation_id=3, member_id='m-1', group_instance_id=None)
    """

    __slots__ = ("generation_id", "group_id", "group_instance_id", "member_id")

    def __init__(
        self,
        group_id: str,
        generation_id: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
    ) -> None:
        if not isinstance(group_id, str) or not group_id:
            raise TypeError(f"group_id must be a non-empty str, not {group_id!r}")
        self.group_id = group_id
        self.generation_id = int(generation_id)
        self.member_id = member_id or ""
        self.group_instance_id = group_instance_id or None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConsumerGroupMetadata):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def _fields(self) -> tuple[str, int, str, str | None]:
        return (self.group_id, self.generation_id, self.member_id, self.group_instance_id)

    def __repr__(self) -> str:
        return (
            f"ConsumerGroupMetadata(group_id={self.group_id!r}, generation_id={self.generation_id}, "
            f"member_id={self.member_id!r}, group_instance_id={self.group_instance_id!r})"
        )
