from collections.abc import Iterable, Sequence
from typing import Any, final

from logstore.client.errors import KafkaError
from logstore.errors import LogstoreError

STOP_COMPRESSED: int

# The failures this module reports, one table (native/speedups_errors.c): code ->
# (name, class of logstore.errors, hint). Each raises "message; hint".
# Malformed record bytes raise RecordDecodeError (a CorruptRecordError and a
# ValueError), bad arguments InvalidArgumentError (a ValueError); wrong
# argument types stay TypeError, and ints outside their C type OverflowError.
ERRORS: dict[int, tuple[str, type[LogstoreError], str]]
ERR_BATCH_CORRUPT: int
ERR_RECORD_MALFORMED: int
ERR_RECORD_COUNT: int
ERR_TRAILING_BYTES: int
ERR_HEADER_NAME: int
ERR_NUM_PARTITIONS: int
ERR_POSITION: int
ERR_INDEX_COUNT: int
ERR_BATCH_FIELDS: int

class Record:
    """Record(key=None, value=None, headers=(), timestamp=None, offset=-1)"""

    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> tuple[tuple[str, bytes | None], ...]: ...
    @property
    def timestamp(self) -> int | None: ...
    @property
    def offset(self) -> int: ...
    def __init__(
        self,
        key: bytes | None = None,
        value: bytes | None = None,
        headers: Sequence[tuple[str, bytes | None]] = (),
        timestamp: int | None = None,
        offset: int = -1,
    ) -> None: ...

@final
class Message:
    """Message(topic, partition, offset, key, value, timestamp=(0, 0), headers=None, error=None, latency=None)

    A consumed record or a delivery report, with confluent-kafka's accessors.
    Not subclassable; partition, offset and timestamp are stored as C ints.
    """

    def __init__(
        self,
        topic: str | None,
        partition: int,
        offset: int,
        key: Any,
        value: Any,
        timestamp: tuple[int, int] = (0, 0),
        headers: list[tuple[str, bytes | None]] | None = None,
        error: KafkaError | None = None,
        latency: float | None = None,
    ) -> None: ...
    def topic(self) -> str | None: ...
    def partition(self) -> int: ...
    def offset(self) -> int: ...
    def key(self) -> Any: ...
    def value(self) -> Any: ...
    def timestamp(self) -> tuple[int, int]:
        """(type, ms): type 0 not available, 1 create time, 2 log append time."""
    def headers(self) -> list[tuple[str, bytes | None]] | None:
        """None when the record has no headers."""
    def error(self) -> KafkaError | None: ...
    def latency(self) -> float | None: ...
    def len(self) -> int:
        """len(value), 0 when the value is None."""
    def __len__(self) -> int: ...
    def set_value(self, value: Any) -> None: ...
    def set_key(self, key: Any) -> None: ...
    def set_headers(self, headers: list[tuple[str, bytes | None]] | None) -> None: ...

def decode_messages(
    section: bytes | bytearray | memoryview,
    count: int,
    offset_delta_max: int,
    base_offset: int,
    base_timestamp: int,
    log_append: bool,
    log_append_time: int,
    timestamp_type: int,
    topic: str,
    partition: int,
    min_offset: int,
) -> list[Message]:
    """decode_records' pass building Messages; records below min_offset are skipped.

    RecordDecodeError (ERR_RECORD_COUNT, ERR_RECORD_MALFORMED, ERR_TRAILING_BYTES,
    ERR_HEADER_NAME) when the section does not hold count well-formed records.
    """

def decode_fetch_batches(
    buf: bytes | bytearray | memoryview, position: int, topic: str, partition: int, min_offset: int
) -> tuple[list[Message], int, int, int]:
    """(messages, position, next_offset, stop) of the whole uncompressed batches from position.

    stop: 0 at the end, LS_ERR_INCOMPLETE at a torn last batch, STOP_COMPRESSED at
    a compressed batch (checked; decode it and call again after it),
    LS_ERR_CORRUPT / LS_ERR_CRC at a bad batch. next_offset -1: no batch consumed.
    Bad bytes are reported by stop, never raised; InvalidArgumentError (ERR_POSITION)
    when position is outside buf.
    """

def encode_plain(
    values: Sequence[object],
    base_offset: int,
    timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int,
    attributes: int,
) -> bytes | None:
    """A whole uncompressed batch, or None when a record is not plain (bytes or a
    (key, value) pair of bytes | None). InvalidArgumentError (ERR_BATCH_FIELDS)
    for a negative base_offset or codec bits in attributes."""

def decode_records(
    section: bytes | bytearray | memoryview,
    count: int,
    offset_delta_max: int,
    base_offset: int,
    base_timestamp: int,
    log_append: bool,
    log_append_time: int,
) -> list[Record]:
    """One Record per record of a batch's (decompressed) records section.

    RecordDecodeError (ERR_RECORD_COUNT, ERR_RECORD_MALFORMED, ERR_TRAILING_BYTES,
    ERR_HEADER_NAME) when the section does not hold count well-formed records.
    """

def record_at(
    log: bytes | memoryview | object,
    index: object,
    index_count: int,
    base_offset: int,
    offset: int,
    cache: dict[int, bytes],
) -> Record | bool | None:
    """The record with offset; None if none has it, False if its batch is compressed.

    RecordDecodeError (ERR_BATCH_CORRUPT, ERR_RECORD_MALFORMED, ERR_HEADER_NAME)
    for a damaged batch; InvalidArgumentError (ERR_INDEX_COUNT).
    """

def locate(log: object, index: object, index_count: int, base_offset: int, offset: int) -> int:
    """(position << 32) | size of the batch holding offset, or a negative LS_ERR_* code;
    InvalidArgumentError (ERR_INDEX_COUNT) when index_count exceeds the index."""

def murmur2(data: bytes | bytearray | memoryview, /) -> int:
    """Kafka's ``Utils.murmur2`` (seed 0x9747b28c): a signed 32-bit int, as Java returns it."""

def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int, /) -> int:
    """``(murmur2(key) & 0x7fffffff) % num_partitions``; InvalidArgumentError (a ValueError,
    ERR_NUM_PARTITIONS) unless 1 <= num_partitions < 2**31, TypeError unless an int."""

def partition_for_keys(
    keys: Iterable[bytes | bytearray | memoryview | None], num_partitions: int, /
) -> list[int]:
    """``partition_for_key`` of each key, -1 for a None key (left to the sticky partitioner)."""

# The producer's fast path (native/speedups_accumulator.c, and speedups_lock.c's Lock).

RECORD_OVERHEAD: int
"""An upper bound of a plain record's framing in a v2 batch (accumulator.RECORD_OVERHEAD)."""

@final
class Lock:
    """threading.Lock's methods; FastProduce tries it from C (the accumulator's lock)."""

    def __init__(self) -> None: ...
    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool: ...
    def release(self) -> None: ...
    def locked(self) -> bool: ...
    def __enter__(self) -> bool: ...
    def __exit__(self, *exc: object) -> None: ...

class AccumulatorCore:
    """The C fields of RecordAccumulator: ``lock`` and ``topics`` are made here (read-only)."""

    @property
    def lock(self) -> Lock: ...
    @property
    def topics(self) -> dict[str, Any]: ...  # name -> accumulator.TopicState
    records: int
    bytes: int
    batch_size: int
    batch_records: int
    buffer_memory: int
    max_records: int

class TopicStateCore:
    """The C fields of the accumulator's TopicState."""

    open: list[Any]  # per partition: its open ProducerBatch, or None
    n: int
    keyless: int
    hashed: bool

class ProducerBatchCore:
    """The C fields of ProducerBatch."""

    records: list[Any]
    callbacks: list[tuple[int, Any]] | None
    size: int
    closed: bool

@final
class FastProduce:
    """FastProduce(accumulator, fallback, max_record, plain=True): a Producer's produce().

    Appends a plain record to its partition's open batch in C; every other call goes to
    ``fallback`` with the same arguments.
    """

    plain: bool
    @property
    def appended(self) -> int: ...
    @property
    def fallback(self) -> Any: ...
    def __init__(
        self, accumulator: AccumulatorCore, fallback: Any, max_record: int, plain: bool = True
    ) -> None: ...
    def __call__(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int = -1,
        on_delivery: Any = None,
        timestamp: int = 0,
        headers: Any = None,
        callback: Any = None,
    ) -> None: ...
