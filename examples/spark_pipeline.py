"""A data pipeline on Spark with logstore: JSON events in, counts per minute and action out.

Start a broker (``make run``), then in another shell:

    make spark-example                      # the streaming job, then the same as a batch job
    .venv/bin/python examples/spark_pipeline.py --mode stream --events 20000

What it does:

1. makes the topics ``events`` (3 partitions) and ``event-counts`` (1) if they are missing, and
   produces ``--events`` JSON events ``{"user": "u7", "action": "click", "ts": <ms>}`` spread over
   ten minutes of event time;
2. **stream**: ``readStream.format("logstore")`` of ``events``, ``from_json``, a watermark, a count
   per one-minute window and action, ``writeStream.format("logstore")`` of the counts to
   ``event-counts`` (exactly once), with ``Trigger.AvailableNow``;
3. **batch**: the same counts with ``spark.read`` / ``df.write`` (to ``event-counts-batch``);
4. prints both results, read back from the topics, and checks they agree.

Swap ``format("logstore")`` for ``format("kafka")`` and it is a Spark Kafka job as usual.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time

import logstore.spark
from logstore.client import Consumer, Producer, TopicPartition
from logstore.client.admin import AdminClient, NewTopic

ACTIONS = ("view", "click", "buy")
TICK = "tick"
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def ensure_topics(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = set(admin.list_topics(timeout=10).topics)
    wanted = [NewTopic(name, parts, 1) for name, parts in
              (("events", 3), ("event-counts", 1), ("event-counts-batch", 1)) if name not in existing]  # fmt: skip
    for future in admin.create_topics(wanted).values():
        future.result(30)


def produce_events(bootstrap: str, count: int, seed: int) -> None:
    rng = random.Random(seed)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 10})
    for i in range(count):
        ts = START_MS + rng.randrange(600_000)
        event = {"user": f"u{rng.randrange(100)}", "action": rng.choice(ACTIONS), "ts": ts}
        producer.produce("events", json.dumps(event).encode(), event["user"].encode(), timestamp=ts)
        if i % 10_000 == 0:
            producer.poll(0)
    # A tick an hour later moves the query's event-time watermark past every window, so the streaming
    # query (append mode: a window is written once, when it is complete) writes them all now.
    tick = {"user": "-", "action": TICK, "ts": START_MS + 3_600_000}
    producer.produce("events", json.dumps(tick).encode(), b"-", timestamp=tick["ts"])
    producer.flush(60)
    producer.close()
    print(f"produced {count} events (and a watermark tick) to 'events'")


def counts(df: object) -> object:
    """The pipeline's logic, the same for streaming and batch: events per minute and action."""
    from pyspark.sql import functions as F

    schema = "user string, action string, ts long"
    events = (df.select(F.from_json(F.col("value").cast("string"), schema).alias("e"))  # type: ignore[attr-defined]
              .select("e.*").withColumn("time", F.timestamp_millis("ts")))  # fmt: skip
    return (events.withWatermark("time", "1 minute")
            .groupBy(F.window("time", "1 minute"), "action").count()
            .where(F.col("action") != TICK)
            .select(F.concat_ws("/", F.date_format("window.start", "HH:mm"), "action").alias("key"),
                    F.to_json(F.struct(F.col("window.start").alias("minute"), "action", "count")).alias("value")))  # fmt: skip


def read_back(bootstrap: str, topic: str) -> dict[str, int]:
    """The count per key in ``topic`` (later values win, should a key come twice)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    latest: dict[str, int] = {}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        messages = consumer.consume(10_000, 1.0)
        if any(m.error() for m in messages):
            break
        for m in messages:
            latest[m.key().decode()] = json.loads(m.value())["count"]
    consumer.close()
    return latest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092", help="the broker (default: make run's)")
    parser.add_argument("--mode", choices=("stream", "batch", "both"), default="both")
    parser.add_argument("--events", type=int, default=10_000, help="events to produce first (0: none)")
    parser.add_argument("--checkpoint", default=None, help="the streaming query's checkpoint (default: a temp dir)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    ensure_topics(args.bootstrap)
    if args.events:
        produce_events(args.bootstrap, args.events, args.seed)
    spark = logstore.spark.session("local[2]", "logstore-example", **{"spark.sql.shuffle.partitions": "4"})
    spark.sparkContext.setLogLevel("ERROR")
    source = {"kafka.bootstrap.servers": args.bootstrap, "subscribe": "events", "startingOffsets": "earliest"}
    sink = {"kafka.bootstrap.servers": args.bootstrap}
    if args.mode in ("stream", "both"):
        checkpoint = args.checkpoint or os.path.join(tempfile.mkdtemp(prefix="logstore-example-"), "cp")
        stream = spark.readStream.format("logstore").options(**source).load()
        query = (counts(stream).writeStream.format("logstore").options(**sink)  # type: ignore[attr-defined]
                 .option("topic", "event-counts").option("checkpointLocation", checkpoint)
                 .outputMode("append").trigger(availableNow=True).start())  # fmt: skip
        query.awaitTermination()
        streamed = read_back(args.bootstrap, "event-counts")
        print(f"stream: {len(streamed)} (minute, action) counts in 'event-counts', e.g.",
              dict(list(sorted(streamed.items()))[:3]))  # fmt: skip
    if args.mode in ("batch", "both"):
        batch = spark.read.format("logstore").options(**source).load()
        counts(batch).write.format("logstore").mode("append").options(**sink).option("topic", "event-counts-batch").save()  # type: ignore[attr-defined]
        batched = read_back(args.bootstrap, "event-counts-batch")
        print(f"batch: {len(batched)} (minute, action) counts in 'event-counts-batch'")
    if args.mode == "both" and streamed != batched:
        print("the streaming and batch results differ", file=sys.stderr)
        return 1
    if args.mode == "both":
        print(f"streaming and batch agree on all {len(batched)} counts")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
