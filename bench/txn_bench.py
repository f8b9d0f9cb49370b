"""Transactions' bar (issue 13): transactional produce vs idempotent, read_committed vs read_uncommitted.

One run starts one broker on 127.0.0.1 and measures with confluent-kafka
(100-byte values, one partition), ``--runs`` times, interleaved:

- **idempotent produce** (acks=all, enable.idempotence) — the yardstick;
- **transactional produce**: the same producer settings with a
  ``transactional.id``, 1,000 records per transaction (begin, 1,000
  ``produce``, ``commit_transaction``); bar: >= 50% of idempotent;
- **read_uncommitted consume** of the transactional topic (its markers
  included) — the yardstick;
- **read_committed consume** of the same topic; bar: >= 90% of
  read_uncommitted. By default every transaction commits, so both read the
  same records; ``--abort-every 3`` aborts every third transaction (the
  read_committed consumer then also reads and skips the aborted batches: a
  third more bytes per record delivered, which is not the bar's comparison).

Figures go to stderr as they come and as a table at the end (medians of the
runs, and the median of per-run ratios). Usage::

    .venv/bin/python bench/txn_bench.py [--runs 3] [--records 1000000] [--txn-records 1000] [--abort-every 0]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.broker_perf import (
    CONNECT_TIMEOUT_S,
    POLL_EVERY,
    BenchError,
    Broker,
    Phase,
    consume_confluent,
    produce_confluent,
    timed,
)

RECORD_BYTES = 100
TIMEOUT_S = 300.0


def produce_transactional(
    broker: Broker, topic: str, records: int, per_txn: int, abort_every: int, label: str
) -> tuple[Phase, int]:
    """(phase, records committed): ``records`` sent in transactions of ``per_txn``; every
    ``abort_every``-th transaction aborted (0: none)."""
    from confluent_kafka import Producer

    producer = Producer({
        "bootstrap.servers": broker.bootstrap, "transactional.id": f"bench-{time.monotonic_ns()}",
        "linger.ms": 5, "batch.size": 1_048_576, "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
    })  # fmt: skip
    producer.init_transactions(CONNECT_TIMEOUT_S)
    producer.list_topics(topic, timeout=CONNECT_TIMEOUT_S)
    value = b"x" * RECORD_BYTES
    committed = 0

    def body() -> tuple[int, int]:
        nonlocal committed
        deadline = time.monotonic() + TIMEOUT_S
        produce, poll = producer.produce, producer.poll
        sent = 0
        number = 0
        while sent < records:
            number += 1
            producer.begin_transaction()
            count = min(per_txn, records - sent)
            for i in range(count):
                while True:
                    try:
                        produce(topic, value, partition=0)
                        break
                    except BufferError:
                        poll(0.005)
                if not i % POLL_EVERY:
                    poll(0)
            if abort_every and number % abort_every == 0:
                producer.flush(TIMEOUT_S)  # the aborted records reach the log, for the consumers to skip
                producer.abort_transaction(TIMEOUT_S)
            else:
                producer.commit_transaction(TIMEOUT_S)
                committed += count
            sent += count
            if time.monotonic() > deadline:
                raise BenchError(f"{label}: {sent} of {records} sent in {TIMEOUT_S:g} s")
        return records, records * RECORD_BYTES

    phase = timed(broker, label, body)
    return phase, committed


def consume(broker: Broker, topic: str, records: int, isolation: str, label: str) -> Phase:
    from bench import broker_perf

    saved = dict(broker_perf.CONSUMER_CONFIG)
    broker_perf.CONSUMER_CONFIG["isolation.level"] = isolation
    try:
        return consume_confluent(broker, topic, records, TIMEOUT_S, label)
    finally:
        broker_perf.CONSUMER_CONFIG.clear()
        broker_perf.CONSUMER_CONFIG.update(saved)


def one_run(args: argparse.Namespace, broker: Broker, run: int) -> dict[str, Phase]:
    value = b"x" * RECORD_BYTES
    idem_topic, txn_topic = f"idem-{run}", f"txn-{run}"
    phases: dict[str, Phase] = {}
    from bench import broker_perf

    saved = dict(broker_perf.PRODUCER_CONFIG)
    broker_perf.PRODUCER_CONFIG["enable.idempotence"] = True
    try:
        phases["idempotent produce"] = produce_confluent(broker, idem_topic, args.records, value, "all", TIMEOUT_S, "idempotent")
    finally:
        broker_perf.PRODUCER_CONFIG.clear()
        broker_perf.PRODUCER_CONFIG.update(saved)
    phases["transactional produce"], committed = produce_transactional(
        broker, txn_topic, args.records, args.txn_records, args.abort_every, "transactional"
    )
    transactions = -(-args.records // args.txn_records)
    # read_uncommitted sees every record (aborted ones too); markers are not records.
    phases["read_uncommitted consume"] = consume(broker, txn_topic, args.records, "read_uncommitted", "uncommitted")
    phases["read_committed consume"] = consume(broker, txn_topic, committed, "read_committed", "committed")
    for name, phase in phases.items():
        print(f"run {run}: {name:26} {phase.records_per_s:>12,.0f} rec/s  ({phase.records:,} in {phase.seconds:.2f} s)",
              file=sys.stderr)  # fmt: skip
    print(f"run {run}: {transactions} transactions, {committed:,} records committed", file=sys.stderr)
    return phases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])  # fmt: skip
    parser.add_argument("--runs", type=int, default=3, help="interleaved runs (default 3; the figure is the median)")
    parser.add_argument("--records", type=int, default=1_000_000, help="records per phase (default 1,000,000)")
    parser.add_argument("--txn-records", type=int, default=1_000, help="records per transaction (default 1,000)")
    parser.add_argument("--abort-every", type=int, default=0, help="abort every n-th transaction (default 0: none)")
    parser.add_argument("--event-loop", default="auto", help="the broker's --event-loop (default auto)")
    args = parser.parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="txn-bench-")
    os.makedirs(os.path.join(workdir, "broker"))
    broker = Broker(os.path.join(workdir, "broker"), args.event_loop, ["num.partitions=1"])
    runs: list[dict[str, Phase]] = []
    try:
        broker.start()
        for run in range(1, args.runs + 1):
            runs.append(one_run(args, broker, run))
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    table: dict[str, Any] = {}
    for name in runs[0]:
        table[name] = statistics.median(r[name].records_per_s for r in runs)
    produce_ratio = statistics.median(
        r["transactional produce"].records_per_s / r["idempotent produce"].records_per_s for r in runs
    )
    consume_ratio = statistics.median(
        r["read_committed consume"].records_per_s / r["read_uncommitted consume"].records_per_s for r in runs
    )
    print(f"\n| workload | records/s (median of {len(runs)}) |\n|---|---:|")
    for name, rate in table.items():
        print(f"| {name} | {rate:,.0f} |")
    print(f"\ntransactional / idempotent produce: {produce_ratio:.2f}x (bar >= 0.50)")
    print(f"read_committed / read_uncommitted consume: {consume_ratio:.2f}x (bar >= 0.90)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
