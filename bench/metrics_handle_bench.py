"""The metrics' cost per request, measured where it is paid: ``Broker.handle`` in one process.

The throughput of bench/metrics_overhead.py varies by ±20% from run to run on a
shared VM, more than the metrics can cost; this measures the broker's own time
per request instead, without sockets or clients. An embedded :class:`Broker`
(no listener) serves, through ``Broker.handle`` (decode, handler, encode: the
path the metrics time), ``--requests`` requests of each kind, timed in CPU time
of the serving thread (``time.thread_time``: time spent descheduled on a busy
machine is left out), and the least of ``--repeats`` timings is kept, in
microseconds per request:

- ``produce``: Produce v9, acks=1, one batch of 10 records of 100 B to one
  partition (appended; the segment grows);
- ``fetch``: Fetch v12 of one partition from offset 0, max 64 KiB (whole
  batches of 10 records, copied from the segment map);
- ``metadata``: Metadata v12 for one topic.

Two trees are compared in the same run: this checkout, and ``--baseline-tree``
(e.g. the commit before the metrics, unpacked with ``git archive`` and the C
extensions copied in), each run as a child process (``PYTHONPATH``, and the
working directory, set to the tree), alternately ``--rounds`` times; figures
are the medians over the rounds and, as a shared machine's other work only
ever adds time, the least over the rounds; the ratio this/baseline is the
metrics' cost.

Examples::

    .venv/bin/python bench/metrics_handle_bench.py --baseline-tree /tmp/base
    .venv/bin/python bench/metrics_handle_bench.py --child    # one tree, this process
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import io
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _frame(request: Any, correlation_id: int = 1) -> bytes:
    """A request frame without its size prefix (what Broker.handle takes)."""
    from kio.serial import entity_writer

    cls = type(request)
    client_id = b"metrics-bench"
    header = struct.pack(">hhih", cls.__api_key__, cls.__version__, correlation_id, len(client_id)) + client_id
    if cls.__flexible__:
        header += b"\x00"
    body = io.BytesIO()
    entity_writer(cls)(body, request)
    return header + body.getvalue()


async def _measure(requests: int, repeats: int) -> dict[str, float]:
    from kio.schema.fetch.v12 import request as fetch
    from kio.schema.metadata.v12 import request as metadata
    from kio.schema.produce.v9 import request as produce

    from logstore.broker.broker import Broker
    from logstore.broker.config.broker_config import BrokerConfig
    from logstore.broker.network.connection import Connection
    from logstore.records import build_batch

    data_dir = tempfile.mkdtemp(prefix="logstore-metrics-handle-")
    broker = Broker(BrokerConfig.from_dict({"listeners": "PLAINTEXT://127.0.0.1:0"}), data_dir=data_dir)
    await broker.start(listen=False)
    try:
        assert broker.store is not None
        broker.store.create_topic("bench", 1)
        await asyncio.sleep(0.1)
        connection = Connection(broker)
        batch = build_batch([os.urandom(100) for _ in range(10)])
        frames = {
            "produce": _frame(
                produce.ProduceRequest(
                    transactional_id=None,
                    acks=1,
                    timeout=datetime.timedelta(seconds=30),
                    topic_data=(
                        produce.TopicProduceData(
                            name="bench", partition_data=(produce.PartitionProduceData(index=0, records=batch),)
                        ),
                    ),
                )
            ),
            "fetch": _frame(
                fetch.FetchRequest(
                    max_wait=datetime.timedelta(milliseconds=0),
                    min_bytes=0,
                    max_bytes=65536,
                    session_id=0,
                    session_epoch=-1,
                    topics=(
                        fetch.FetchTopic(
                            topic="bench",
                            partitions=(fetch.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=65536),),
                        ),
                    ),
                    forgotten_topics_data=(),
                    rack_id="",
                )
            ),
            "metadata": _frame(
                metadata.MetadataRequest(
                    topics=(metadata.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name="bench"),),
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                )
            ),
        }
        results: dict[str, float] = {}
        for name, frame in frames.items():
            for _ in range(requests // 10):  # warm-up (and, for fetch, data to read)
                await broker.handle(frame if name != "fetch" else frames["produce"], connection)
            timings = []
            for _ in range(repeats):
                started = time.thread_time()
                for _ in range(requests):
                    await broker.handle(frame, connection)
                timings.append((time.thread_time() - started) / requests * 1e6)
            results[name] = min(timings)  # the least disturbed timing (a shared machine)
        log = broker.log_manager.find_log("bench", 0)
        assert log is not None and log.log_end_offset >= requests * repeats * 10, "the produces were not appended"
        assert broker.metadata.partition_count("bench") == 1
        return results
    finally:
        await broker.close()
        import shutil

        shutil.rmtree(data_dir, ignore_errors=True)


def _child(tree: str, requests: int, repeats: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": tree}
    command = [sys.executable, os.path.abspath(__file__), "--child", "--requests", str(requests),
               "--repeats", str(repeats)]  # fmt: skip
    out = subprocess.run(command, env=env, cwd=tree, capture_output=True, text=True, timeout=600, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="bench/metrics_handle_bench.py",
        description="Microseconds per request in Broker.handle, this tree against a baseline tree.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--baseline-tree", help="the checkout to compare with (PYTHONPATH=PATH)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per tree")
    parser.add_argument("--requests", type=int, default=5000, help="requests per timing")
    parser.add_argument("--repeats", type=int, default=5, help="timings per round (the median is kept)")
    parser.add_argument("--child", action="store_true", help="measure this process's tree and print JSON")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(asyncio.run(_measure(args.requests, args.repeats))))
        return 0
    if not args.baseline_tree:
        parser.error("give --baseline-tree (or --child)")
    trees = {"this": ROOT, "baseline": os.path.abspath(args.baseline_tree)}
    rounds: dict[str, list[dict[str, float]]] = {"this": [], "baseline": []}
    for round_ in range(args.rounds):
        for name in (("this", "baseline") if round_ % 2 == 0 else ("baseline", "this")):
            rounds[name].append(_child(trees[name], args.requests, args.repeats))
            print(f"round {round_} {name:>8}: " + ", ".join(f"{k} {v:.1f} us" for k, v in rounds[name][-1].items()),
                  file=sys.stderr)  # fmt: skip
    print(f"{'':>9} {'median over rounds':>38}   {'least over rounds':>38}")
    print(f"{'request':>9} {'this us':>9} {'baseline us':>12} {'this/baseline':>14}   "
          f"{'this us':>9} {'baseline us':>12} {'this/baseline':>14}")  # fmt: skip
    for kind in rounds["this"][0]:
        this = statistics.median(r[kind] for r in rounds["this"])
        base = statistics.median(r[kind] for r in rounds["baseline"])
        least_this = min(r[kind] for r in rounds["this"])
        least_base = min(r[kind] for r in rounds["baseline"])
        print(f"{kind:>9} {this:>9.2f} {base:>12.2f} {this / base:>13.3f}x   "
              f"{least_this:>9.2f} {least_base:>12.2f} {least_this / least_base:>13.3f}x")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
