"""The Spark data source's options: Spark's Kafka connector's rules, and each bad option's message."""

from __future__ import annotations

import pytest

from logstore.spark.options import (
    OptionError,
    format_offsets,
    parse_sink_options,
    parse_source_options,
    read_offsets,
)

pytestmark = pytest.mark.unit

BROKER = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def parse(streaming: bool | None = False, **options: str) -> object:
    return parse_source_options({**BROKER, **options}, streaming=streaming)


def test_subscribe_defaults_follow_spark() -> None:
    batch = parse(subscribe="a, b")
    assert batch.subscription.topics == ("a", "b")
    assert (batch.starting, batch.ending) == ("earliest", "latest")
    assert batch.fail_on_data_loss and not batch.include_headers
    stream = parse(True, subscribe="a")
    assert stream.starting == "latest"
    assert parse(subscribePattern="ev.*").subscription.matches("events")
    assert not parse(subscribePattern="ev.*").subscription.matches("xevents")


def test_options_match_without_case_and_kafka_keys_reach_the_client() -> None:
    parsed = parse_source_options(
        {
            "KAFKA.BOOTSTRAP.SERVERS": "h:1",
            "subscribe": "t",
            "kafka.client.id": "x",
            "failondataloss": "false",
            "INCLUDEHEADERS": "true",
        },
        streaming=False,
    )
    assert parsed.client == {"bootstrap.servers": "h:1", "client.id": "x"}
    assert not parsed.fail_on_data_loss and parsed.include_headers


def test_assign_and_offsets_json() -> None:
    parsed = parse(
        assign='{"t": [1, 0], "u": [2]}',
        startingOffsets='{"t": {"0": 5, "1": -2}}',
        endingOffsets='{"t": {"0": -1}}',
    )
    assert parsed.subscription.assigned == (("t", 0), ("t", 1), ("u", 2))
    assert parsed.starting == {"t": {0: 5, 1: -2}}
    assert parsed.ending == {"t": {0: -1}}
    assert read_offsets(format_offsets({"t": {1: 3, 0: 2}})) == {"t": {0: 2, 1: 3}}
    assert format_offsets({"t": {1: 3}}) == {"t": {"1": 3}}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"subscribe": "t", "subscribePatern": "x"},
            "unknown option 'subscribePatern'.*did you mean subscribePattern",
        ),
        (
            {"subscribe": "t", "subscribePattern": "x"},
            "exactly one of subscribe, subscribePattern or assign.*subscribe and subscribePattern",
        ),
        ({}, r"exactly one of subscribe, subscribePattern or assign \(got none\)"),
        ({"subscribe": " , "}, "subscribe lists no topic"),
        ({"subscribePattern": "a("}, "not a valid regular expression"),
        ({"assign": "{bad"}, "assign is not valid JSON"),
        ({"assign": '{"t": ["x"]}'}, "needs a list of partition numbers"),
        ({"assign": "[1]"}, "must be a JSON object"),
        ({"subscribe": "t", "startingOffsets": '{"t": {"0": 1'}, "startingOffsets is not valid JSON"),
        (
            {"subscribe": "t", "startingOffsets": '{"t": {"zero": 1}}'},
            "partition 'zero' of topic 't' is not a partition number",
        ),
        ({"subscribe": "t", "startingOffsets": '{"t": {"0": "1"}}'}, r"t\[0\] = '1' is not a whole number"),
        ({"subscribe": "t", "startingOffsets": '{"t": {"0": -3}}'}, "is not an offset"),
        (
            {"subscribe": "t", "startingOffsets": "latest"},
            "startingOffsets=latest is not allowed in a batch query",
        ),
        (
            {"subscribe": "t", "startingOffsets": '{"t": {"0": -1}}'},
            "-1 \\(latest\\) is not allowed in a batch query",
        ),
        ({"subscribe": "t", "endingOffsets": "earliest"}, "endingOffsets cannot be earliest"),
        ({"subscribe": "t", "endingOffsets": '{"t": {"0": -2}}'}, "-2 \\(earliest\\) is not allowed"),
        ({"subscribe": "t", "maxOffsetsPerTrigger": "10"}, "maxOffsetsPerTrigger is for streaming queries"),
        ({"subscribe": "t", "minPartitions": "0"}, "minPartitions must be >= 1, not 0"),
        ({"subscribe": "t", "minPartitions": "x"}, "minPartitions must be a positive whole number"),
        ({"subscribe": "t", "failOnDataLoss": "yes"}, "failOnDataLoss must be true or false"),
        ({"subscribe": "t", "startingTimestamp": "soon"}, "startingTimestamp must be milliseconds"),
        ({"subscribe": "t", "startingOffsetsByTimestampStrategy": "x"}, "must be error or latest"),
        ({"subscribe": "t", "kafka.group.id": "g"}, "kafka.group.id is not supported"),
        ({"subscribe": "t", "kafka.auto.offset.reset": "earliest"}, "use startingOffsets"),
        (
            {"assign": '{"t": [0]}', "startingOffsets": '{"t": {"1": 0}}'},
            r"names t\[1\], which assign does not read",
        ),
    ],
)
def test_each_bad_option_says_what_to_do(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_source_options({**BROKER, **options}, streaming=False)


def test_streaming_only_and_batch_only_options() -> None:
    with pytest.raises(OptionError, match="endingOffsets is for batch queries"):
        parse(True, subscribe="t", endingOffsets="latest")
    assert parse(True, subscribe="t", maxOffsetsPerTrigger="7").max_offsets_per_trigger == 7
    # Before Spark says which query it plans, an option right for either role passes.
    assert parse(None, subscribe="t", maxOffsetsPerTrigger="7").streaming
    assert not parse(None, subscribe="t", endingOffsets="latest").streaming
    with pytest.raises(OptionError, match="maxOffsetsPerTrigger is for streaming"):
        parse(None, subscribe="t", endingOffsets="latest", maxOffsetsPerTrigger="7")


def test_where_the_data_is() -> None:
    with pytest.raises(OptionError, match=r"set kafka\.bootstrap\.servers .* or path"):
        parse_source_options({"subscribe": "t"}, streaming=False)
    with pytest.raises(OptionError, match=r"either path .* or kafka\.bootstrap\.servers, not both"):
        parse(path="/tmp/x", subscribe="t")
    assert parse_source_options({"path": "embedded:///d", "subscribe": "t"}, streaming=False).path == "/d"


def test_sink_options() -> None:
    sink = parse_sink_options({**BROKER, "topic": "out", "checkpointlocation": "/cp"}, streaming=True)
    assert (sink.topic, sink.checkpoint, sink.batch_bytes) == ("out", "/cp", 1 << 20)
    with pytest.raises(OptionError, match="unknown option 'subscribe' for the logstore sink"):
        parse_sink_options({**BROKER, "subscribe": "t"}, streaming=False)
    with pytest.raises(OptionError, match="option topic is empty"):
        parse_sink_options({**BROKER, "topic": " "}, streaming=False)
