"""Record batches -> pyarrow: decode_arrow's throughput, and peers on the same rows.

Builds a record set in memory (``--mb`` MiB of v2 batches of ``--batch-bytes``
each, ``--value-bytes`` random values, ``--key-bytes`` keys or none, no
headers, uncompressed unless ``--codec``), then times, each as the median of
``--runs`` runs (wall clock, one thread):

- decode_arrow: record-set bytes to a pyarrow.RecordBatch of Spark's Kafka
  schema (the issue-11 bar: >= 2 GB/s for 100-byte values), with and without
  the CRC-32C check, and with headers asked for;
- peers: pyarrow reading the same rows (the decoded RecordBatch's columns)
  from a Parquet file in memory, uncompressed and snappy; and
  logstore's per-message path (decode_fetch, one Message per record);
- encode_arrow: the same rows back into record batches.

GB/s is record-set bytes (the Kafka bytes, for every line) per second, so
the lines compare as "rows of this record set per second".

    .venv/bin/python bench/arrow_bench.py --mb 256 --runs 5
"""

from __future__ import annotations

import argparse
import functools
import io
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from logstore._native import check, ffi, lib
from logstore.records.arrow import decode_arrow, encode_arrow
from logstore.records.fetch import decode_fetch


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=256, help="record-set size in MiB (default 256)")
    parser.add_argument("--runs", type=int, default=5, help="runs per line; the median is printed (>= 3)")
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--key-bytes", type=int, default=0, help="0: records without keys")
    parser.add_argument(
        "--batch-bytes", type=int, default=1 << 20, help="max bytes per batch (default 1 MiB)"
    )
    parser.add_argument("--codec", default="none", help="none, gzip, snappy, lz4, zstd")
    parser.add_argument("--skip-peers", action="store_true", help="only the decode_arrow lines")
    args = parser.parse_args(argv)
    if args.runs < 3:
        parser.error("--runs must be >= 3 (the median of at least three)")
    return args


def make_rows(args: argparse.Namespace) -> tuple[pa.Array | None, pa.Array]:
    """Keys and values for about --mb MiB of records: random bytes, built with numpy."""
    per_record = args.value_bytes + args.key_bytes + 8  # a record's framing is ~8 bytes
    n = args.mb * (1 << 20) // per_record
    rng = np.random.default_rng(11)

    def column(width: int) -> pa.Array:
        data = rng.integers(0, 256, n * width, dtype=np.uint8)
        offsets = np.arange(n + 1, dtype=np.int32) * width
        return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])

    return (column(args.key_bytes) if args.key_bytes else None), column(args.value_bytes)


def assign_offsets(joined: bytes) -> bytes:
    """encode_arrow's batches all start at offset 0: number them on, as a log does."""
    buf = bytearray(joined)
    last = ffi.new("int64_t *")
    check(lib.ls_assign_offsets(ffi.from_buffer(buf), len(buf), 0, -1, -1, last), "assigning offsets")
    return bytes(buf)


def median_seconds(fn: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def report(name: str, seconds: float, nbytes: int, rows: int) -> None:
    print(f"{name:<44} {nbytes / seconds / 1e9:7.2f} GB/s {rows / seconds / 1e6:8.1f} M rows/s  "
          f"({seconds * 1000:8.1f} ms median)", flush=True)  # fmt: skip


def parquet_bytes(table: pa.Table, compression: str) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression=compression)
    return sink.getvalue()


def read_parquet(data: bytes) -> pa.Table:
    return pq.read_table(pa.BufferReader(data))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    keys, values = make_rows(args)
    stamps = np.arange(len(values), dtype=np.int64) + 1_700_000_000_000
    batches = encode_arrow(keys, values, timestamps_ms=stamps, max_batch_bytes=args.batch_bytes,
                           compression=args.codec)  # fmt: skip
    records = assign_offsets(b"".join(batches))
    size, n = len(records), len(values)
    print(f"record set: {size / 2**20:.0f} MiB, {n:,} records of {args.value_bytes}-byte values"
          f"{f' and {args.key_bytes}-byte keys' if args.key_bytes else ', no keys'}, {len(batches)} batches "
          f"({args.codec}), {args.runs} runs; cpu count {os.cpu_count()}, pyarrow {pa.__version__}")  # fmt: skip
    rows, next_offset = decode_arrow(records, "topic", 0)
    assert (rows.num_rows, next_offset) == (n, n), (rows.num_rows, next_offset)

    def arrow(**kw: Any) -> Callable[[], Any]:
        return lambda: decode_arrow(records, "topic", 0, **kw)

    report("decode_arrow (CRC-32C checked)", median_seconds(arrow(), args.runs), size, n)
    report("decode_arrow (check_crc=False)", median_seconds(arrow(check_crc=False), args.runs), size, n)
    report(
        "decode_arrow (include_headers=True)", median_seconds(arrow(include_headers=True), args.runs), size, n
    )
    if not args.skip_peers:
        table = pa.Table.from_batches([rows])
        for compression in ["none", "snappy"]:
            data = parquet_bytes(table, compression)
            seconds = median_seconds(functools.partial(read_parquet, data), args.runs)
            report(f"peer: pq.read_table, in memory ({compression})", seconds, size, n)
        seconds = median_seconds(lambda: decode_fetch(records, "topic", 0, 0), args.runs)
        report("peer: decode_fetch (a Message per record)", seconds, size, n)
    seconds = median_seconds(
        lambda: encode_arrow(
            keys, values, timestamps_ms=stamps, max_batch_bytes=args.batch_bytes, compression=args.codec
        ),
        args.runs,
    )
    report("encode_arrow (rows -> record batches)", seconds, size, n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
