"""A streaming pipeline run as its own driver process, for the kill -9 test.

    python stream_child.py <bootstrap> <checkpoint> <mode: run|drain>

Reads topic ``in`` (logstore source, 500 offsets a trigger), upper-cases
each value, writes topic ``out`` (logstore sink, exactly once). ``run``
goes on until killed; ``drain`` runs Trigger.AvailableNow and exits.
"""

from __future__ import annotations

import sys

import logstore.spark


def main() -> None:
    bootstrap, checkpoint, mode = sys.argv[1:4]
    spark = logstore.spark.session("local[2]", "logstore-kill-test", **{"spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    source = (spark.readStream.format("logstore").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", "in").option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "500").load())  # fmt: skip
    out = source.selectExpr("key", "upper(cast(value as string)) as value")
    writer = (out.writeStream.format("logstore").option("kafka.bootstrap.servers", bootstrap)
              .option("topic", "out").option("checkpointLocation", checkpoint))  # fmt: skip
    if mode == "drain":
        writer.trigger(availableNow=True).start().awaitTermination()
    else:
        query = writer.trigger(processingTime="100 milliseconds").start()
        print("started", flush=True)
        query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
