"""``spark.read`` / ``df.write`` with format("logstore"): round trips against a broker and a data dir."""

from __future__ import annotations

import collections
import datetime
import os
from typing import Any

import pytest

from tests.kit.sparkkit import consume_all, create, produce, spark_rows

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.spark]


def reader(spark: Any, broker: Any, **options: str) -> Any:
    r = spark.read.format("logstore").option("kafka.bootstrap.servers", broker.bootstrap)
    for key, value in options.items():
        r = r.option(key, value)
    return r.load()


def test_batch_read_from_a_broker_gives_every_column(spark: Any, broker: Any) -> None:
    create(broker.bootstrap, "events", 3)
    expected = produce(broker.bootstrap, "events", 3000)
    df = reader(spark, broker, subscribe="events", includeHeaders="true")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    assert spark_rows(df) == expected
    # Without includeHeaders: no headers column, the rest the same.
    plain = reader(spark, broker, subscribe="events")
    assert "headers" not in plain.columns
    assert [r[:7] for r in spark_rows(plain)] == [r[:7] for r in expected]


def test_batch_read_straight_from_a_data_dir_while_the_broker_runs(spark: Any, broker: Any) -> None:
    create(broker.bootstrap, "events", 2)
    expected = produce(broker.bootstrap, "events", 2000)
    df = (spark.read.format("logstore").option("subscribe", "events").option("includeHeaders", "true")
          .load(broker.data_dir))  # fmt: skip
    assert spark_rows(df) == expected


def test_offset_ranges_timestamps_and_min_partitions(spark: Any, broker: Any) -> None:
    create(broker.bootstrap, "t", 2)
    expected = produce(broker.bootstrap, "t", 400)
    by_part = {p: [r for r in expected if r[3] == p] for p in (0, 1)}
    df = reader(
        spark,
        broker,
        subscribe="t",
        startingOffsets='{"t": {"0": 10, "1": -2}}',
        endingOffsets='{"t": {"0": 50, "1": -1}}',
    )
    got = spark_rows(df)
    assert got == [(*r[:7], ()) for r in by_part[0][10:50] + by_part[1]]
    # minPartitions splits the two ranges into 8 tasks; the rows are the same.
    split = reader(spark, broker, subscribe="t", minPartitions="8")
    assert split.rdd.getNumPartitions() == 8
    assert len(spark_rows(split)) == 400
    # startingOffsetsByTimestamp: timestamps are 1_700_000_000_000 + i.
    first_p0 = by_part[0][100]
    stamp = int(first_p0[5].replace(tzinfo=datetime.UTC).timestamp() * 1000)
    timed = reader(spark, broker, subscribe="t", startingTimestamp=str(stamp))
    rows = spark_rows(timed)
    assert min(r[4] for r in rows if r[3] == 0) == first_p0[4]
    assert all(r[5] >= first_p0[5] for r in rows)
    # assign reads just the partitions named.
    only = reader(spark, broker, assign='{"t": [1]}')
    assert {r[3] for r in spark_rows(only)} == {1}


def test_batch_write_then_read_back_through_a_broker(spark: Any, broker: Any) -> None:
    create(broker.bootstrap, "out", 3)
    data = [(f"k{i}".encode() if i % 4 else None, f"v{i}".encode(), [("src", f"{i}".encode())] if i % 3 == 0 else [])
            for i in range(5000)]  # fmt: skip
    df = spark.createDataFrame(
        data, "key binary, value binary, headers array<struct<key: string, value: binary>>"
    )
    df.write.format("logstore").mode("append").option("kafka.bootstrap.servers", broker.bootstrap).option(
        "topic", "out"
    ).save()
    got = consume_all(broker.bootstrap, "out", len(data))
    assert collections.Counter(
        (m.key(), m.value(), tuple(m.headers() or ())) for m in got
    ) == collections.Counter((k, v, tuple(h)) for k, v, h in data)
    # Keyed rows went where Kafka's murmur2 partitioner puts them.
    from logstore._speedups import partition_for_key

    assert all(m.partition() == partition_for_key(m.key(), 3) for m in got if m.key() is not None)


def test_batch_write_with_topic_and_partition_columns_and_string_values(spark: Any, broker: Any) -> None:
    create(broker.bootstrap, "a", 2)
    create(broker.bootstrap, "b", 2)
    rows = [("a" if i % 2 else "b", i % 2, f"s{i}") for i in range(200)]
    df = spark.createDataFrame(rows, "topic string, partition int, value string")
    df.write.format("logstore").mode("append").option("kafka.bootstrap.servers", broker.bootstrap).save()
    for topic in ("a", "b"):
        got = consume_all(broker.bootstrap, topic, 100)
        want = sorted((p, v.encode()) for t, p, v in rows if t == topic)
        assert sorted((m.partition(), m.value()) for m in got) == want


def test_write_and_read_a_data_dir_with_no_broker(spark: Any, tmp_path: Any) -> None:
    from logstore import Store

    path = str(tmp_path / "store")
    with Store(path, scheduler=False) as store:
        store.create_topic("local", partitions=2)
    rows = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(3000)]
    df = spark.createDataFrame(rows, "key binary, value binary")
    df.write.format("logstore").mode("append").option("topic", "local").save(path)
    back = spark.read.format("logstore").option("subscribe", "local").load(path)
    got = spark_rows(back)
    assert sorted((r[0], r[1]) for r in got) == sorted(rows)
    assert {r[2] for r in got} == {"local"} and {r[6] for r in got} == {0}
    # The Store reads them too, each partition's offsets dense from 0.
    with Store(path, scheduler=False) as store:
        for p in (0, 1):
            offsets = [r.offset for r in store.log("local", p).read(0)]
            assert offsets == list(range(len(offsets)))
            assert len(offsets) == sum(1 for r in got if r[3] == p)
    assert os.path.isdir(path)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"subscribe": "t", "subscribePattern": "t.*"},
            "exactly one of subscribe, subscribePattern or assign",
        ),
        ({"subscribe": "t", "startingOffsets": '{"t": {"0": 1'}, "startingOffsets is not valid JSON"),
        (
            {"subscribe": "t", "startingOffset": "earliest"},
            "unknown option 'startingoffset'.*did you mean startingOffsets",
        ),
        ({"assign": '{"t": "0"}'}, "needs a list of partition numbers"),
    ],
)
def test_bad_options_fail_when_the_dataframe_is_made(spark: Any, broker: Any, options: dict[str, str],
                                                      message: str) -> None:  # fmt: skip
    import re

    with pytest.raises(Exception, match=message) as caught:
        reader(spark, broker, **options)
    assert re.search(message, str(caught.value))


def test_missing_partitions_in_offsets_json_fail_before_the_job(spark: Any, broker: Any) -> None:
    create(broker.bootstrap, "t", 2)
    df = reader(spark, broker, subscribe="t", startingOffsets='{"t": {"0": 0}}')
    with pytest.raises(Exception, match=r"startingOffsets gives offsets for some partitions but not t\[1\]"):
        df.collect()
