"""The ``__transaction_state`` records: a transactional id's state, as Kafka stores it.

:class:`TransactionMetadata` is one transactional id's state (Kafka's
``TransactionMetadata``), :class:`TxnState` its state with the byte Kafka
stores. Records (Kafka's ``TransactionLogKey``/``TransactionLogValue``): the
key is version 0 + the transactional id (int16-length string); the value
version 0 is producer id int64, producer epoch int16, timeout int32, state
int8, partitions (int32-count array of topic string + int32-count array of
int32, -1 = null), last update time int64, start time int64. Version 1
(flexible, compact lengths, tagged fields) is read as well. An expired id is
a tombstone.

>>> metadata = TransactionMetadata("t", 7, 0, 60_000, TxnState.ONGOING, {("a", 0)})
>>> decode_transaction_value("t", transaction_value(metadata)) == metadata
True
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from logstore.coordinator.record_codec import OffsetsSchemaError, RecordReader, RecordWriter

NO_EPOCH = -1

TopicPartition = tuple[str, int]


class TxnState(enum.IntEnum):
    """Kafka's TransactionState, with the byte ``__transaction_state`` stores."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def wire_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use ("Ongoing", "CompleteCommit", ...)."""
        return "".join(part.capitalize() for part in self.name.split("_"))


@dataclass
class TransactionMetadata:
    """One transactional id's state (Kafka's ``TransactionMetadata``)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    last_producer_epoch: int = NO_EPOCH  # the epoch before the last bump: a retried InitProducerId
    pending: bool = False  # a write for this id is in flight: others get CONCURRENT_TRANSACTIONS

    def copy(self) -> TransactionMetadata:
        return TransactionMetadata(
            self.transactional_id, self.producer_id, self.producer_epoch, self.timeout_ms, self.state,
            set(self.partitions), self.start_ms, self.last_update_ms, self.last_producer_epoch,
        )  # fmt: skip


KEY_VERSION = 0
VALUE_VERSION = 0


def transaction_key(transactional_id: str) -> bytes:
    writer = RecordWriter(KEY_VERSION, flexible=False)
    writer.string(transactional_id)
    return bytes(writer.out)


def decode_transaction_key(data: bytes) -> str:
    reader = RecordReader(data, "a __transaction_state key")
    version = reader.int16()
    if version != KEY_VERSION:
        raise OffsetsSchemaError(f"a __transaction_state key of version {version}; only 0 exists")
    return reader.string()


def transaction_value(metadata: TransactionMetadata) -> bytes:
    writer = RecordWriter(VALUE_VERSION, flexible=False)
    writer.int64(metadata.producer_id)
    writer.int16(metadata.producer_epoch)
    writer.int32(metadata.timeout_ms)
    writer.out += bytes([int(metadata.state)])
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(metadata.partitions):
        by_topic.setdefault(topic, []).append(partition)
    writer.array_length(len(by_topic))
    for topic, partitions in by_topic.items():
        writer.string(topic)
        writer.array_length(len(partitions))
        for partition in partitions:
            writer.int32(partition)
    writer.int64(metadata.last_update_ms)
    writer.int64(metadata.start_ms)
    return bytes(writer.out)


def decode_transaction_value(transactional_id: str, data: bytes) -> TransactionMetadata:
    """A value of version 0 or 1 (flexible: its tagged fields are skipped)."""
    reader = RecordReader(data, f"the __transaction_state value of {transactional_id!r}")
    version = reader.int16()
    if version not in (0, 1):
        raise OffsetsSchemaError(f"a __transaction_state value of version {version}; 0 and 1 exist")
    reader.flexible = version >= 1
    producer_id, epoch, timeout = reader.int64(), reader.int16(), reader.int32()
    state_byte = reader._take(1)[0]
    try:
        state = TxnState(state_byte)
    except ValueError:
        raise OffsetsSchemaError(f"transaction state {state_byte} is not one of Kafka's") from None
    partitions: set[TopicPartition] = set()
    count = reader._length(wide=True)
    for _ in range(count or 0):
        topic = reader.string()
        for _ in range(reader.array_length()):
            partitions.add((topic, reader.int32()))
        reader.tagged_fields()
    last_update, start = reader.int64(), reader.int64()
    reader.tagged_fields()
    return TransactionMetadata(transactional_id, producer_id, epoch, timeout, state, partitions, start, last_update)
