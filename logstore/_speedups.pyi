from collections.abc import Iterable, Sequence

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
