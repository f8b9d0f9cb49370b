"""A Python data source that does no work: the ceiling of any Python data source's read.

Each task yields the same prebuilt Arrow batches (the Kafka schema, 100-byte
values, built once per Python worker), so what ``spark_bench`` measures for
it is Spark's own cost of taking rows from a Python data source (the worker
hand-off, Arrow to the JVM, rows out of Arrow) and nothing of logstore's.
logstore's reads cannot beat it; how close they come is what is left to win.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

BATCH_ROWS = 62_500
_BATCHES: dict[tuple[int, int], pa.RecordBatch] = {}


def _batch(rows: int, size: int) -> pa.RecordBatch:
    """``rows`` rows of the Kafka schema, made once per worker and kept."""
    found = _BATCHES.get((rows, size))
    if found is None:
        columns = [
            pa.array([b"%08d" % i for i in range(rows)], pa.binary()),
            pa.array([b"v" * size] * rows, pa.binary()),
            pa.array(["ceiling"] * rows, pa.string()),
            pa.array(np.zeros(rows, dtype=np.int32)),
            pa.array(np.arange(rows, dtype=np.int64)),
            pa.array(np.arange(rows, dtype=np.int64), pa.timestamp("us", tz="UTC")),
            pa.array(np.zeros(rows, dtype=np.int32)),
        ]
        names = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
        found = _BATCHES[(rows, size)] = pa.RecordBatch.from_arrays(columns, names=names)
    return found


class CeilingReader(DataSourceReader):
    def __init__(self, rows: int, partitions: int, size: int) -> None:
        self.rows, self.parts, self.size = rows, partitions, size

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(self.parts)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        left = self.rows // self.parts + (1 if partition.value < self.rows % self.parts else 0)
        for _ in range(left // BATCH_ROWS + 1):  # bounded: each pass yields >= 1 row or stops
            if left <= 0:
                return
            batch = _batch(BATCH_ROWS, self.size)
            yield batch if left >= BATCH_ROWS else batch.slice(0, left)
            left -= BATCH_ROWS


class CeilingDataSource(DataSource):
    """``spark.read.format("ceiling").option("rows", N).option("partitions", P).option("size", S)``."""

    @classmethod
    def name(cls) -> str:
        return "ceiling"

    def schema(self) -> str:
        return (
            "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
            "timestampType int"
        )

    def reader(self, schema: Any) -> DataSourceReader:
        options = self.options
        return CeilingReader(int(options["rows"]), int(options["partitions"]), int(options.get("size", 100)))
