"""The broker's parts without a network: config, producer state, framing."""

from __future__ import annotations

import os
import struct

import pytest
from kio.schema.errors import ErrorCode

from logstore import Log, LogConfig, build_batch
from logstore.broker.config import BrokerConfig, parse_listeners, read_properties
from logstore.broker.producers import ProducerIds
from logstore.errors import InvalidConfigError
from logstore.protocol import ProtocolError, parse_header
from logstore.storage.producer_state import SEQUENCE_MAX, last_sequence
from logstore.storage.producer_state import ProducerStateManager as PartitionProducers

# -- config ---------------------------------------------------------------


def test_config_defaults_and_log_keys() -> None:
    config = BrokerConfig.from_dict({})
    assert config.node_id == 0
    assert config.num_partitions == 1
    assert config.auto_create_topics_enable is True
    assert config.log_defaults() == {"max.message.bytes": 1_048_588}
    config = BrokerConfig.from_dict(
        {
            "log.retention.hours": "2",
            "log.retention.ms": "5000",
            "log.segment.bytes": "1048576",
            "message.max.bytes": "999",
        }
    )
    topic = LogConfig.from_dict({}, defaults=config.log_defaults())
    # The finest unit wins, as in Kafka, whatever the order.
    assert topic.retention_ms == 5000
    assert topic.segment_bytes == 1_048_576
    assert topic.max_message_bytes == 999
    assert (
        LogConfig.from_dict(
            {}, BrokerConfig.from_dict({"log.retention.hours": "2"}).log_defaults()
        ).retention_ms
        == 7_200_000
    )


def test_config_rejects_bad_values_and_reports_unused_keys() -> None:
    with pytest.raises(InvalidConfigError, match=r"num\.partitions"):
        BrokerConfig.from_dict({"num.partitions": "0"})
    with pytest.raises(InvalidConfigError, match=r"auto\.create\.topics\.enable"):
        BrokerConfig.from_dict({"auto.create.topics.enable": "maybe"})
    with pytest.raises(InvalidConfigError, match=r"segment\.bytes"):
        BrokerConfig.from_dict({"log.segment.bytes": "-5"})
    with pytest.raises(InvalidConfigError, match=r"listener\.security\.protocol\.map"):
        BrokerConfig.from_dict({"listeners": "CLIENT://127.0.0.1:9093"})
    assert BrokerConfig.from_dict({"zookeeper.set.acl": "true"}).ignored == ["zookeeper.set.acl"]
    used = BrokerConfig.from_dict({"zookeeper.connect": "127.0.0.1:2181/k", "broker.rack": "r1"})
    assert used.ignored == [] and used.zookeeper_connect == "127.0.0.1:2181/k" and used.broker_rack == "r1"


def test_config_file_and_overrides(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "server.properties")
    with open(path, "w") as f:
        f.write("# comment\nbroker.id=4\nnum.partitions : 3\n! other comment\nlog.dirs=/tmp/a,/tmp/b\n")
    assert read_properties(path)["num.partitions"] == "3"
    config = BrokerConfig.load(path, ["num.partitions=5"], {"listeners": "PLAINTEXT://127.0.0.1:0"})
    assert (config.node_id, config.num_partitions, config.data_dir) == (4, 5, "/tmp/a")
    assert config.listeners == [("PLAINTEXT", "127.0.0.1", 0)]
    with pytest.raises(InvalidConfigError, match="key=value"):
        BrokerConfig.load(None, ["no-equals-sign"])


def test_parse_listeners() -> None:
    assert parse_listeners("PLAINTEXT://[::1]:9092, ssl://:9093") == [
        ("PLAINTEXT", "::1", 9092),
        ("SSL", "0.0.0.0", 9093),
    ]
    with pytest.raises(InvalidConfigError, match="twice"):  # Kafka: each listener a different name
        parse_listeners("PLAINTEXT://:9092,PLAINTEXT://:9093")
    with pytest.raises(InvalidConfigError):
        parse_listeners("127.0.0.1:9092")


# -- producer state -------------------------------------------------------


def test_sequences_wrap() -> None:
    assert last_sequence(SEQUENCE_MAX, 0) == SEQUENCE_MAX
    assert last_sequence(SEQUENCE_MAX, 1) == 0
    state = PartitionProducers()
    state.record(1, 0, SEQUENCE_MAX - 4, SEQUENCE_MAX, 0, 4)
    assert state.check(1, 0, 0, 9) == (ErrorCode.none, None)
    assert state.check(1, 0, 1, 9)[0] == ErrorCode.out_of_order_sequence_number


def test_epochs_and_duplicates() -> None:
    state = PartitionProducers()
    # An unknown producer may start anywhere (its earlier batches may have been deleted), as in Kafka.
    assert state.check(5, 0, 3, 3) == (ErrorCode.none, None)
    for i in range(7):
        state.record(5, 0, i * 10, i * 10 + 9, i * 100, i * 100 + 9)
    assert state.check(5, 0, 60, 69)[1] is not None  # the last five are remembered
    assert state.check(5, 0, 20, 29)[1] is not None
    assert state.check(5, 0, 10, 19) == (
        ErrorCode.out_of_order_sequence_number,
        None,
    )  # sixth back: forgotten
    assert state.check(5, 0, 70, 79) == (ErrorCode.none, None)
    assert state.check(5, 1, 0, 0) == (ErrorCode.none, None)  # a new epoch starts at 0
    assert state.check(5, 1, 5, 5)[0] == ErrorCode.out_of_order_sequence_number
    state.record(5, 1, 0, 0, 700, 700)
    assert state.check(5, 0, 70, 79)[0] == ErrorCode.invalid_producer_epoch


def test_state_rebuilt_from_the_log(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "t-0")
    with Log.open(path, {"segment.bytes": 2048}) as log:
        for i in range(40):
            # Alternate an idempotent producer (id 9) with plain batches.
            pid = 9 if i % 2 == 0 else -1
            seq = (i // 2) * 3 if pid >= 0 else -1
            batch = build_batch(
                [b"a" * 50, b"b", b"c"],
                producer_id=pid,
                producer_epoch=0 if pid >= 0 else -1,
                base_sequence=seq,
            )
            log.append_batch(batch)
        assert len(log.segments) >= 2
        expected_offsets = [(i * 3, i * 3 + 2) for i in range(0, 40, 2)]
    with Log.open(path) as log:
        state = PartitionProducers.rebuild(log)
    entry = state.entries[9]
    assert entry.epoch == 0
    assert [(b.first_offset, b.last_offset) for b in entry.batches] == expected_offsets[-5:]
    assert [(b.first_sequence, b.last_sequence) for b in entry.batches] == [
        (s * 3, s * 3 + 2) for s in range(15, 20)
    ]
    assert state.check(9, 0, 60, 62) == (ErrorCode.none, None)
    assert state.check(9, 0, 57, 59)[1].first_offset == 114  # type: ignore[union-attr]
    assert set(state.entries) == {9}


def test_producer_ids_are_never_reused(tmp_path: object) -> None:
    ids = ProducerIds(str(tmp_path))
    first = [ids.allocate() for _ in range(1500)]
    assert first == list(range(1500))
    again = ProducerIds(str(tmp_path))  # a restart skips the rest of the reserved block
    assert again.allocate() == 2000


# -- framing --------------------------------------------------------------


def test_parse_header_v1_and_v2() -> None:
    frame = struct.pack(">hhih", 3, 1, 77, 3) + b"abc" + b"body"
    header = parse_header(frame, flexible=False)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (3, 1, 77, "abc")
    assert frame[header.body_offset :] == b"body"
    flexible = struct.pack(">hhih", 3, 9, 5, -1) + b"\x01\x00\x02zz" + b"B"
    header = parse_header(flexible, flexible=True)
    assert header.client_id is None
    assert flexible[header.body_offset :] == b"B"


@pytest.mark.parametrize(
    "frame",
    [
        b"\x00\x03\x00\x01",
        struct.pack(">hhih", 3, 1, 1, 50) + b"short",
        struct.pack(">hhih", 3, 1, 1, -7),
        struct.pack(">hhih", 3, 9, 1, -1) + b"\x01\x00\x7f",
        struct.pack(">hhih", 3, 9, 1, -1) + b"\xff\xff\xff\xff\xff\xff",
    ],
)
def test_parse_header_rejects_bad_frames(frame: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse_header(frame, flexible=True)
