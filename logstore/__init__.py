"""logstore: an embedded storage engine for segmented commit logs in Kafka's format."""

from logstore.errors import (
    ClosedError,
    CorruptIndexError,
    CorruptRecordError,
    InvalidConfigError,
    LogstoreError,
    OffsetOutOfRangeError,
)
from logstore.records import Record, build_batch, parse_batches

__version__ = "0.1.0"

__all__ = [
    "ClosedError",
    "CorruptIndexError",
    "CorruptRecordError",
    "InvalidConfigError",
    "LogstoreError",
    "OffsetOutOfRangeError",
    "Record",
    "__version__",
    "build_batch",
    "parse_batches",
]
