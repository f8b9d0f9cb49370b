"""The embedded engine at work: append record batches to a segment, read them back.

Run with ``make run`` (or ``python -m logstore.examples.embedded [DIR]``).
Data goes to ``./data/example-0`` unless a directory is given; each run
starts the segment afresh.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

from logstore.records import Record, build_batch, parse_batches
from logstore.storage import LogSegment

RECORDS_PER_BATCH = 1000
BATCHES = 200


def main(argv: list[str]) -> int:
    directory = Path(argv[0] if argv else "data") / "example-0"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    values = [b"v" * 100] * RECORDS_PER_BATCH
    segment = LogSegment.create(str(directory), 0)
    started = time.perf_counter()
    offset = 0
    for _ in range(BATCHES):
        offset = segment.append(build_batch(values, base_offset=offset))
    segment.append(
        build_batch([Record(key=b"greeting", value=b"hello", headers=[("lang", b"en")])], base_offset=offset)
    )
    segment.flush()
    elapsed = time.perf_counter() - started
    print(
        f"appended {segment.next_offset:,} records ({segment.size / 1e6:.1f} MB) to {directory} "
        f"in {elapsed * 1000:.0f} ms, fsync included: {segment.next_offset / elapsed / 1e6:.1f}M records/s"
    )
    read = segment.read(12_345, max_bytes=1)
    assert read is not None
    batch = next(parse_batches(read.view))
    print(
        f"offset 12,345 lives in the batch at byte {read.position}: offsets {batch.base_offset}..{batch.last_offset}"
    )
    last = segment.read(segment.next_offset - 1, max_bytes=1 << 20)
    assert last is not None
    record = next(parse_batches(last.view)).records[-1]
    print(
        f"last record: offset {record.offset}, key {record.key!r}, value {record.value!r}, "
        f"headers {record.headers}"
    )
    segment.close()
    reopened = LogSegment.open(str(directory), 0)
    print(f"reopened: {reopened.offset_index.entries} index entries, next offset {reopened.next_offset:,}")
    reopened.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
