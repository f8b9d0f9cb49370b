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
from logstore.storage.config import LogConfig
from logstore.storage.log import Log
from logstore.storage.read_only import ReadOnlyStore
from logstore.storage.store import Store

__version__ = "0.1.0"

__all__ = [
    "ClosedError",
    "CorruptIndexError",
    "CorruptRecordError",
    "InvalidConfigError",
    "Log",
    "LogConfig",
    "LogstoreError",
    "OffsetOutOfRangeError",
    "ReadOnlyStore",
    "Record",
    "Store",
    "__version__",
    "build_batch",
    "parse_batches",
]
