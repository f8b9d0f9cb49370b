from collections.abc import Iterable, Sequence
from typing import Any, final

from logstore.client.errors import KafkaError

STOP_COMPRESSED: int

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
    """decode_records' pass building Messages; records below min_offset are skipped."""

def decode_fetch_batches(
    buf: bytes | bytearray | memoryview, position: int, topic: str, partition: int, min_offset: int
) -> tuple[list[Message], int, int, int]:
    """(messages, position, next_offset, stop) of the whole uncompressed batches from position.

    stop: 0 at the end, LS_ERR_INCOMPLETE at a torn last batch, STOP_COMPRESSED at
    a compressed batch (checked; decode it and call again after it),
    LS_ERR_CORRUPT / LS_ERR_CRC at a bad batch. next_offset -1: no batch consumed.
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
) -> bytes | None: ...
def decode_records(
    section: bytes | bytearray | memoryview,
    count: int,
    offset_delta_max: int,
    base_offset: int,
    base_timestamp: int,
    log_append: bool,
    log_append_time: int,
) -> list[Record]: ...
def record_at(
    log: bytes | memoryview | object,
    index: object,
    index_count: int,
    base_offset: int,
    offset: int,
    cache: dict[int, bytes],
) -> Record | bool | None: ...
def locate(log: object, index: object, index_count: int, base_offset: int, offset: int) -> int: ...
def murmur2(data: bytes | bytearray | memoryview, /) -> int:
    """Kafka's ``Utils.murmur2`` (seed 0x9747b28c): a signed 32-bit int, as Java returns it."""

def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int, /) -> int:
    """``(murmur2(key) & 0x7fffffff) % num_partitions``; ValueError unless 1 <= num_partitions < 2**31."""

def partition_for_keys(
    keys: Iterable[bytes | bytearray | memoryview | None], num_partitions: int, /
) -> list[int]:
    """``partition_for_key`` of each key, -1 for a None key (left to the sticky partitioner)."""
