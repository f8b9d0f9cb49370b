"""Kafka v2 record batches: build, parse, compress.

>>> batch = build_batch([(b"k", b"v")], base_offset=0, timestamp=1)
>>> [r.value for b in parse_batches(batch) for r in b.records]
[b'v']
"""

from logstore.records.batch import Columns, RecordBatch, columns_of, parse_batches
from logstore.records.builder import build_batch
from logstore.records.codecs import CODECS
from logstore.records.record import Header, Record

__all__ = [
    "CODECS",
    "Columns",
    "Header",
    "Record",
    "RecordBatch",
    "build_batch",
    "columns_of",
    "parse_batches",
]
