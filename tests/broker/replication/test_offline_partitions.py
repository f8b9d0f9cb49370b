"""The partitions of a failed log directory answer KAFKA_STORAGE_ERROR on every data API (Produce,
Fetch, ListOffsets, DeleteRecords, OffsetForLeaderEpoch) while the other directory's answer as
before, and the broker's metric says which directory is offline. A broker in this process with two
log.dirs; the directory is failed through the LogManager's LogDirFailureChannel, as its I/O would
(tests/broker/replication/test_log_dir_failure.py fails a real disk)."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from logstore import build_batch
from logstore.broker import Broker, BrokerConfig
from logstore.protocol.codec import from_dict
from tests.kit.brokerkit import broker_thread, free_port
from tests.kit.wire import WireClient, request_class

pytestmark = pytest.mark.integration

STORAGE = ErrorCode.kafka_storage_error


@pytest.fixture
def two_dir_broker(tmp_path: Path) -> Iterator[tuple[Broker, str]]:
    port = free_port()
    config = BrokerConfig.from_dict({"listeners": f"PLAINTEXT://127.0.0.1:{port}", "num.partitions": 2})
    broker = Broker(config, data_dir=f"{tmp_path / 'a'},{tmp_path / 'b'}")
    with broker_thread(broker):
        yield broker, f"127.0.0.1:{port}"


def req(key: int, version: int, **values: Any) -> Any:
    return from_dict(request_class(key, version), values)


def answers(client: WireClient, partition: int) -> dict[str, ErrorCode]:
    """Each data API's error code for partition ``partition`` of topic t."""
    batch = build_batch([b"v"])
    produced = client.call(req(0, 8, acks=1, timeout=5000, transactional_id=None, topic_data=[
        {"name": "t", "partition_data": [{"index": partition, "records": batch}]}]))  # fmt: skip
    fetched = client.call(req(1, 11, replica_id=-1, max_wait=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                              session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[], topics=[
        {"topic": "t", "partitions": [{"partition": partition, "current_leader_epoch": -1, "fetch_offset": 0,
                                       "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]))  # fmt: skip
    listed = client.call(req(2, 5, replica_id=-1, isolation_level=0, topics=[
        {"name": "t", "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                      "timestamp": -1}]}]))  # fmt: skip
    deleted = client.call(req(21, 2, timeout=5000, topics=[
        {"name": "t", "partitions": [{"partition_index": partition, "offset": 0}]}]))  # fmt: skip
    epochs = client.call(req(23, 4, replica_id=-1, topics=[
        {"topic": "t", "partitions": [{"partition": partition, "current_leader_epoch": -1, "leader_epoch": 0}]}]))
    return {
        "produce": produced.responses[0].partition_responses[0].error_code,
        "fetch": fetched.responses[0].partitions[0].error_code,
        "list_offsets": listed.topics[0].partitions[0].error_code,
        "delete_records": deleted.topics[0].partitions[0].error_code,
        "offset_for_leader_epoch": epochs.topics[0].partitions[0].error_code,
    }


def test_a_failed_dirs_partitions_answer_kafka_storage_error(two_dir_broker: tuple[Broker, str]) -> None:
    broker, bootstrap = two_dir_broker
    with WireClient(bootstrap) as client:
        metadata = client.call(req(3, 12, topics=[{"topic_id": None, "name": "t"}], allow_auto_topic_creation=True,
                                   include_topic_authorized_operations=False))  # fmt: skip
        assert metadata.topics[0].error_code == ErrorCode.none
        manager = broker.log_manager
        where = {p: manager.dir_of("t", p) for p in (0, 1)}
        assert set(where.values()) == set(broker.log_dirs)  # one partition in each directory
        assert all(code == ErrorCode.none for p in (0, 1) for code in answers(client, p).values())
        failed = where[1]
        assert failed is not None
        manager.dir_failures.fail(failed, OSError(errno.EIO, "Input/output error"))
        assert answers(client, 1) == dict.fromkeys(
            ("produce", "fetch", "list_offsets", "delete_records", "offset_for_leader_epoch"), STORAGE
        )
        assert all(code == ErrorCode.none for code in answers(client, 0).values())  # the other dir serves
        text = broker.metrics.exposition().decode()
        assert f'logstore_log_dir_offline{{dir="{failed}"}} 1.0' in text
        assert f'logstore_log_dir_offline{{dir="{where[0]}"}} 0.0' in text
        # A new topic's partitions all go to the online directory.
        client.call(req(3, 12, topics=[{"topic_id": None, "name": "u"}], allow_auto_topic_creation=True,
                        include_topic_authorized_operations=False))  # fmt: skip
        assert {manager.dir_of("u", p) for p in (0, 1)} == {where[0]}
