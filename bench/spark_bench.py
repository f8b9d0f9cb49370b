"""The Spark data source beside Spark's Parquet reader, in one run: the issue's bars.

Starts ``python -m logstore broker`` on 127.0.0.1 (a free port, a fresh data
directory, removed afterwards) and one local Spark (``local[2]``), then for
each of ``--runs`` runs, with ``--rows`` rows of 100-byte values
(``--record-size``) in a 4-partition topic:

1. batch read from the broker: ``spark.read.format("logstore")`` of the topic
   into Spark's ``noop`` sink (every row materialized, nothing written);
2. batch read under ``path``: the same from the broker's data directory's
   segment files (the broker keeps running);
3. the peer: Spark reading the same rows (key, value, topic, partition,
   offset, timestamp, timestampType) from a Parquet file, into ``noop``; and
   the ceiling: a Python data source that does no work (``spark_ceiling.py``,
   prebuilt Arrow batches), Spark's own cost of rows from any Python source.
   Reads run three times each, interleaved (the JVM's JIT keeps warming);
   each figure is the median, each ratio is against Parquet in the same run;
4. batch write: a DataFrame of ``--rows`` rows cached in Spark, written with
   ``df.write.format("logstore")`` to a fresh topic;
5. streaming, exactly once: ``readStream`` of a topic of ``--stream-rows`` rows (``Trigger.AvailableNow``,
   ``maxOffsetsPerTrigger`` = ``--trigger-rows``) -> ``upper(value)`` ->
   ``writeStream.format("logstore")`` to a fresh topic; sustained = rows / time
   of the micro-batches after the first (Spark's own triggerExecution times;
   the first starts the Python workers), and the whole query's rows / wall
   time; the output is checked to hold every row;
6. without Spark: ``logstore.arrow.read_table`` of the topic from the data
   directory and from the broker: record-set bytes (the partitions' log
   bytes) per second.

A warm-up first runs one small job of each kind (a read, a write, a streaming
query): Spark's first job in a session pays for starting its Python workers and
its JIT (5-10 s here), which is not what these figures are about.

Figures are medians over the runs; ratios and the bars are printed, never
asserted. Every phase is bounded in time (``--phase-timeout``).

    .venv/bin/python bench/spark_bench.py              # 1M rows, 3 runs
    .venv/bin/python bench/spark_bench.py --quick      # 200K rows, 1 run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.broker_perf import BenchError, Broker

PARTITIONS = 4
BARS = {
    "read (broker)": 1.4e6,
    "write (broker)": 7e5,
    "stream exactly-once": 3e5,
}


def produce(bootstrap: str, topic: str, rows: int, size: int) -> None:
    from logstore.client import Producer
    from logstore.client.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1 << 20})
    value = b"v" * size
    step = 10_000
    for i in range(0, rows, step):
        n = min(step, rows - i)
        keys = [b"%08d" % (i + j) for j in range(n)]
        producer.produce_batch(topic, [value] * n, keys)
        producer.poll(0)
    if producer.flush(120):
        raise BenchError("the producer did not deliver every row within 120 s")
    producer.close()


def create(bootstrap: str, topic: str) -> None:
    from logstore.client.admin import AdminClient, NewTopic

    AdminClient({"bootstrap.servers": bootstrap}).create_topics([NewTopic(topic, PARTITIONS, 1)])[
        topic
    ].result(30)


def high_watermarks(bootstrap: str, topic: str) -> int:
    from logstore.client.ranges import RangeReader

    reader = RangeReader({"bootstrap.servers": bootstrap})
    try:
        return sum(latest for _, latest in reader.offsets(topic).values())
    finally:
        reader.close()


def timed(body: Callable[[], int], timeout: float, what: str) -> tuple[int, float]:
    start = time.perf_counter()
    rows = body()
    seconds = time.perf_counter() - start
    if seconds > timeout:
        raise BenchError(f"{what} took {seconds:.0f} s, over --phase-timeout {timeout:g} s")
    return rows, seconds


def log_bytes(data_dir: str, topic: str) -> int:
    total = 0
    for p in range(PARTITIONS):
        d = os.path.join(data_dir, f"{topic}-{p}")
        total += sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".log"))
    return total


def run_once(
    spark: Any, broker: Broker, args: argparse.Namespace, run: int, workdir: str
) -> dict[str, float]:
    topic = f"bench-{run}"
    produce(broker.bootstrap, topic, args.rows, args.record_size)
    src = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic}
    figures: dict[str, float] = {}

    def read_broker() -> int:
        spark.read.format("logstore").options(**src).load().write.format("noop").mode("overwrite").save()
        return args.rows

    def read_path() -> int:
        (spark.read.format("logstore").option("subscribe", topic).load(broker.data_dir)
         .write.format("noop").mode("overwrite").save())  # fmt: skip
        return args.rows

    parquet = os.path.join(workdir, f"rows-{run}.parquet")
    spark.read.format("logstore").options(**src).load().write.mode("overwrite").parquet(parquet)

    def read_parquet() -> int:
        spark.read.parquet(parquet).write.format("noop").mode("overwrite").save()
        return args.rows

    # Each read three times, interleaved (the JVM's JIT keeps warming between them): the
    # median of each, and each of ours against Parquet's in this same run.
    def read_ceiling() -> int:
        (spark.read.format("ceiling").option("rows", args.rows).option("partitions", PARTITIONS)
         .option("size", args.record_size).load().write.format("noop").mode("overwrite").save())  # fmt: skip
        return args.rows

    reads = (("read (broker)", read_broker), ("read (path)", read_path), ("read parquet (peer)", read_parquet),
             ("read no-op Python source (ceiling)", read_ceiling))  # fmt: skip
    speeds: dict[str, list[float]] = {name: [] for name, _ in reads}
    for _ in range(3):
        for name, body in reads:
            rows, seconds = timed(body, args.phase_timeout, name)
            speeds[name].append(rows / seconds)
    for name, _ in reads:
        figures[name] = statistics.median(speeds[name])
    for name in ("read (broker)", "read (path)", "read no-op Python source (ceiling)"):
        figures[f"{name} / Parquet"] = figures[name] / figures["read parquet (peer)"]

    out = f"bench-out-{run}"
    create(broker.bootstrap, out)
    frame = spark.read.parquet(parquet).selectExpr("key", "value").cache()
    frame.count()

    def write() -> int:
        frame.write.format("logstore").mode("append").option(
            "kafka.bootstrap.servers", broker.bootstrap
        ).option("topic", out).save()
        return args.rows

    rows, seconds = timed(write, args.phase_timeout, "write")
    figures["write (broker)"] = rows / seconds
    if high_watermarks(broker.bootstrap, out) != args.rows:
        raise BenchError(
            f"the batch write left {high_watermarks(broker.bootstrap, out)} rows, not {args.rows}"
        )
    frame.unpersist()

    streamed = f"bench-stream-{run}"
    stream_in = f"bench-stream-in-{run}"
    create(broker.bootstrap, streamed)
    produce(broker.bootstrap, stream_in, args.stream_rows, args.record_size)
    stream_src = {**src, "subscribe": stream_in}

    progress: list[dict[str, Any]] = []

    def stream() -> int:
        source = (spark.readStream.format("logstore").options(**stream_src).option("startingOffsets", "earliest")
                  .option("maxOffsetsPerTrigger", str(args.trigger_rows)).load())  # fmt: skip
        query = (source.selectExpr("key", "upper(cast(value as string)) as value").writeStream.format("logstore")
                 .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", streamed)
                 .option("checkpointLocation", os.path.join(workdir, f"cp-{run}"))
                 .trigger(availableNow=True).start())  # fmt: skip
        if not query.awaitTermination(args.phase_timeout):
            query.stop()
            raise BenchError("the streaming query did not finish within --phase-timeout")
        progress.extend(p for p in query.recentProgress if p["numInputRows"])
        return args.stream_rows

    rows, seconds = timed(stream, args.phase_timeout, "stream")
    figures["stream exactly-once (whole query)"] = rows / seconds
    # Sustained: the full micro-batches after the first (which starts Spark's Python workers and
    # JIT). The drain at the end, the few rows that maxOffsetsPerTrigger's proration leaves (as
    # Spark's Kafka source does), is one more micro-batch's fixed cost and no load: the whole
    # query's figure counts it.
    steady = [p for p in progress[1:] if p["numInputRows"] * 2 >= args.trigger_rows]
    steady_rows = sum(p["numInputRows"] for p in steady)
    steady_ms = sum(p["durationMs"]["triggerExecution"] for p in steady)
    figures["stream exactly-once"] = steady_rows / (steady_ms / 1000) if steady_ms else 0.0
    if high_watermarks(broker.bootstrap, streamed) != args.stream_rows:
        raise BenchError(
            f"the stream wrote {high_watermarks(broker.bootstrap, streamed)} rows, not {args.stream_rows}"
        )

    import logstore.arrow

    nbytes = log_bytes(broker.data_dir, topic)
    for name, source in (
        ("arrow table (path)", broker.data_dir),
        ("arrow table (broker)", {"bootstrap.servers": broker.bootstrap}),
    ):
        start = time.perf_counter()
        table = logstore.arrow.read_table(source, topic)
        seconds = time.perf_counter() - start
        if table.num_rows != args.rows:
            raise BenchError(f"{name}: {table.num_rows} rows, not {args.rows}")
        figures[name + " GB/s"] = nbytes / seconds / 1e9
        figures[name] = args.rows / seconds
        del table
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--phase-timeout", type=float, default=600)
    parser.add_argument("--stream-rows", type=int, default=2_000_000, help="rows the streaming query reads")
    parser.add_argument(
        "--trigger-rows",
        type=int,
        default=500_000,
        help="the streaming query's maxOffsetsPerTrigger (default 500,000)",
    )
    parser.add_argument("--quick", action="store_true", help="200K rows, 1 run")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.runs, args.stream_rows, args.trigger_rows = 200_000, 1, 400_000, 100_000
    import logstore.spark

    workdir = tempfile.mkdtemp(prefix="logstore-spark-bench-")
    broker = Broker(workdir, "asyncio", ["auto.create.topics.enable=false"])
    broker.start()
    spark = logstore.spark.session("local[2]", "logstore-bench", **{"spark.sql.shuffle.partitions": "4",
                                                                       "spark.driver.memory": "4g"})  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    # A top-level module (shipped with addPyFile): Spark's Python workers import it by that name.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from spark_ceiling import CeilingDataSource

    spark.dataSource.register(CeilingDataSource)
    spark.sparkContext.addPyFile(os.path.join(os.path.dirname(os.path.abspath(__file__)), "spark_ceiling.py"))
    runs: list[dict[str, float]] = []
    try:
        # A warm-up: Spark's first job pays for its JIT and Python workers.
        produce(broker.bootstrap, "warm-up", 10_000, args.record_size)
        warm = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": "warm-up"}
        spark.read.format("logstore").options(**warm).load().count()
        create(broker.bootstrap, "warm-up-out")
        (
            spark.read.format("logstore")
            .options(**warm)
            .load()
            .selectExpr("key", "value")
            .write.format("logstore")
            .mode("append")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", "warm-up-out")
            .save()
        )
        (spark.readStream.format("logstore").options(**warm).option("startingOffsets", "earliest")
         .option("maxOffsetsPerTrigger", "5000").load().selectExpr("key", "value").writeStream.format("logstore")
         .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", "warm-up-out")
         .option("checkpointLocation", os.path.join(workdir, "cp-warm-up")).trigger(availableNow=True)
         .start().awaitTermination(args.phase_timeout))  # fmt: skip
        for run in range(args.runs):
            figures = run_once(spark, broker, args, run, workdir)
            runs.append(figures)
            print(f"run {run + 1}/{args.runs}: " + ", ".join(f"{k} {v:,.2f}" if "GB/s" in k or "/ P" in k else f"{k} {v:,.0f}/s"
                                                           for k, v in figures.items()), flush=True)  # fmt: skip
            broker.check_alive()
    finally:
        spark.stop()
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    medians = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(f"\nmedians of {len(runs)} run(s), {args.rows:,} rows of {args.record_size} bytes, local[2]:")
    for name, value in medians.items():
        if name.endswith("/ Parquet"):
            print(f"  {name:36} {value:8.2f}x     (median of the runs' ratios; bar >= 0.5x)")
            continue
        if "GB/s" in name:
            print(f"  {name:36} {value:8.2f} GB/s  (bar >= 2 GB/s)")
            continue
        line = f"  {name:36} {value:12,.0f} rows/s"
        if name in BARS:
            line += (
                f"  (bar >= {BARS[name]:,.0f}/s{', and >= 0.5x Parquet' if name.startswith('read') else ''})"
            )
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"medians": medians, "runs": runs, "rows": args.rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
