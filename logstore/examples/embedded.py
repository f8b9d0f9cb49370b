"""The embedded engine at work: a durable queue in a data directory.

Run with ``make run`` (or ``python -m logstore.examples.embedded [DIR]``).
Data goes to ``./data`` unless a directory is given. Each run appends to the
``events`` topic, reads from where the previous run stopped, and reports.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from logstore import Record, Store
from logstore.storage.store import UnknownTopicError

RECORDS_PER_BATCH = 1000
BATCHES = 200


def main(argv: list[str]) -> int:
    directory = Path(argv[0] if argv else "data")
    with Store(str(directory)) as store:
        try:
            log = store.log("events", 0)
        except UnknownTopicError:
            store.create_topic("events", partitions=1, config={"segment.bytes": 64 * 1024 * 1024})
            log = store.log("events", 0)
        start = log.log_end_offset
        values = [b"v" * 100] * RECORDS_PER_BATCH
        began = time.perf_counter()
        for _ in range(BATCHES):
            log.append(values)
        log.append([Record(key=b"greeting", value=b"hello", headers=[("lang", b"en")])])
        log.flush()
        elapsed = time.perf_counter() - began
        appended = log.log_end_offset - start
        print(
            f"appended {appended:,} records to {directory}/events-0 in {elapsed * 1000:.0f} ms "
            f"(fsync included): {appended / elapsed / 1e6:.1f}M records/s"
        )
        began = time.perf_counter()
        offset, read = start, 0
        for _ in range(appended):  # bounded: each read returns at least one record
            if offset >= log.log_end_offset:
                break
            records = log.read(offset).records
            read += len(records)
            offset = records[-1].offset + 1
        elapsed = time.perf_counter() - began
        print(f"read them back as records: {read / elapsed / 1e6:.1f}M records/s")
        last = log.get(log.log_end_offset - 1)
        assert last is not None
        print(
            f"last record: offset {last.offset}, key {last.key!r}, value {last.value!r}, headers {last.headers}"
        )
        print(
            f"log: {len(log.segments)} segment(s), offsets {log.log_start_offset:,}..{log.log_end_offset - 1:,}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
