"""The broker's produce and fetch paths below the wire, in-process: CPU per call.

``ReplicaManager.append`` (what Produce does per partition: validation, producer
state, the append) of batches as an idempotent producer sends them (producer id,
sequences; values of 100 bytes), and ``ReplicaManager.read`` of up to 1 MiB from
a random offset (what Fetch does per partition), over a real Store in a
temporary directory. For each batch size (records per batch): one warm-up round,
then ``--rounds`` rounds of ``--appends`` appends and as many reads; CPU time
(``time.process_time``) per call, the median of the rounds.

It uses only the ReplicaManager's public methods, so the same file runs on an
older tree (``cd OLD && .venv/bin/python /path/to/partition_paths.py``): that is
how docs/benchmarks.md compares branches. No network, no client: the broker's
own cost per batch, without the noise of a client sharing the cores.

    .venv/bin/python bench/partition_paths.py
    .venv/bin/python bench/partition_paths.py --sizes 1,1000 --rounds 7
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time

from logstore.broker.metadata_cache import MetadataCache
from logstore.broker.replication.replica_manager import ReplicaManager
from logstore.records import build_batch
from logstore.storage.store import Store

NODE = 7


def measure(records_per_batch: int, appends: int, rounds: int) -> tuple[float, float]:
    """(append us, read us): CPU per call, medians of ``rounds`` after one warm-up round."""
    with tempfile.TemporaryDirectory() as directory, Store(directory + "/data", scheduler=False) as store:
        store.create_topic("t", partitions=1)
        cache = MetadataCache("bench")
        cache.track_store(store, NODE)
        replicas = ReplicaManager(store.log_manager, cache, NODE, 60_000)
        loop = asyncio.new_event_loop()
        sequence = 0
        append_us: list[float] = []
        read_us: list[float] = []
        for round_ in range(rounds + 1):
            batches = []
            for _ in range(appends):
                raw = build_batch(
                    [b"x" * 100] * records_per_batch, producer_id=3, producer_epoch=0, base_sequence=sequence
                )
                batches.append(memoryview(bytearray(raw)))  # a request's writable buffer
                sequence += records_per_batch

            async def produce(batches: list[memoryview] = batches) -> None:
                for batch in batches:
                    result = await replicas.append("t", 0, batch, 1)
                    assert result.error == 0, result.error

            started = time.process_time()
            loop.run_until_complete(produce())
            appended = time.process_time() - started
            end = replicas.log("t", 0).log_end_offset
            offset = 0
            started = time.process_time()
            for _ in range(appends):
                replicas.read("t", 0, offset % end, 1 << 20, True, "high_watermark")
                offset += 7919
            read = time.process_time() - started
            if round_:  # the first round warms up
                append_us.append(appended / appends * 1e6)
                read_us.append(read / appends * 1e6)
        loop.close()
    return statistics.median(append_us), statistics.median(read_us)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1,10,1000,4000", help="records per batch, comma-separated")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--appends", type=int, default=0, help="per round (default: 200,000 records, 200 to 5,000 batches)")
    args = parser.parse_args()
    print("records/batch  append us  read (1 MiB) us   (CPU per call, medians)")
    for size in (int(s) for s in args.sizes.split(",")):
        appends = args.appends or max(200, min(5000, 200_000 // size))
        append_us, read_us = measure(size, appends, args.rounds)
        print(f"{size:>13}  {append_us:>9.1f}  {read_us:>15.1f}")


if __name__ == "__main__":
    main()
