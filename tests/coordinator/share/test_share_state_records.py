"""``__share_group_state`` records: Kafka's byte layouts, folding snapshots and updates, and a
share coordinator brought back from what it wrote."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from logstore.coordinator.record_codec import OffsetsSchemaError, Record
from logstore.coordinator.share.share_config import ShareConfig
from logstore.coordinator.share.share_coordinator import ShareCoordinator
from logstore.coordinator.share.share_partition import RecordState, Snapshot, StateBatch
from logstore.coordinator.share.share_state_records import (
    SNAPSHOT,
    UPDATE,
    ShareStateKey,
    ShareStateValue,
    StateFolder,
)
from tests.coordinator.share.test_share_coordinator import Topics

pytestmark = pytest.mark.unit

A, K, X = RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED
TOPIC = uuid.UUID("00000000-0000-0000-0000-0000000000ab")


def test_key_and_value_layouts() -> None:
    key = ShareStateKey("g", TOPIC, 3)
    encoded = key.encode(SNAPSHOT)
    assert encoded == b"\x00\x00" + b"\x00\x01g" + TOPIC.bytes + b"\x00\x00\x00\x03"
    assert ShareStateKey.decode(key.encode(UPDATE)) == (UPDATE, key)
    value = ShareStateValue(7, 1, 2, 100, (StateBatch(100, 101, A, 3),), 5, 6)
    data = value.encode(SNAPSHOT)
    # version 0; snapshot epoch, state epoch, leader epoch, start, create, write; 1 batch (varint 2); tags
    assert data[:2] == b"\x00\x00" and data[2:14] == bytes.fromhex("00000007 00000001 00000002")
    assert data[-1] == 0 and data[-22] == 2  # no tagged fields; the batch array's compact length
    assert ShareStateValue.decode(SNAPSHOT, data) == value
    update = ShareStateValue(8, -1, 2, -1, (StateBatch(101, 101, K, 3),))
    assert ShareStateValue.decode(UPDATE, update.encode(UPDATE)) == update
    with pytest.raises(OffsetsSchemaError):
        ShareStateKey.decode(b"\x00\x05" + encoded[2:])
    with pytest.raises(OffsetsSchemaError):
        ShareStateValue.decode(SNAPSHOT, data[:-5])


def test_folding_snapshots_updates_and_tombstones() -> None:
    key = ShareStateKey("g", TOPIC, 0)
    folder = StateFolder()
    snapshot = ShareStateValue(0, 0, 0, 10, (StateBatch(10, 12, A, 1), StateBatch(13, 13, K, 1)), 1, 1)
    folder.add(key.encode(SNAPSHOT), snapshot.encode(SNAPSHOT))
    assert folder.states[key][2] == Snapshot(10, snapshot.batches)
    update = ShareStateValue(0, -1, 0, -1, (StateBatch(10, 10, K, 1), StateBatch(11, 11, X, 2)))
    folder.add(key.encode(UPDATE), update.encode(UPDATE))
    # 10 and 11 are done now: the start moves past them
    assert folder.states[key][2] == Snapshot(12, (StateBatch(12, 12, A, 1), StateBatch(13, 13, K, 1)))
    folder.add(key.encode(SNAPSHOT), None)
    assert key not in folder.states
    folder.add(key.encode(UPDATE), update.encode(UPDATE))  # an update without a snapshot: ignored
    assert key not in folder.states


def test_a_coordinator_comes_back_from_its_records() -> None:
    topics = Topics(t=1)
    written: list[tuple[str, Record]] = []
    config = ShareConfig(record_lock_duration_ms=1_000)

    def write(coordinator_key: str, records: list[Record]) -> None:
        written.extend((coordinator_key, record) for record in records)

    coordinator = ShareCoordinator(config, topics, topics.log_offsets, writer=write)
    assert coordinator.heartbeat(0, "g", "a", 0, ["t"]).error == ErrorCode.none
    assert written and written[-1][0] == f"g:{topics.ids['t']}:0"
    coordinator.acquire(0, "g", "a", "t", 0, [(0, 5)], 10)
    assert coordinator.acknowledge(1, "g", "a", "t", 0, [(0, 1, (1,)), (2, 2, (2,)), (3, 3, (3,))])[0] == (
        ErrorCode.none
    )
    before = coordinator.partitions[("g", "t", 0)]
    folder = StateFolder()
    for _, (key, value) in written:
        folder.add(key, value)
    again = ShareCoordinator(config, topics, topics.log_offsets, writer=write)
    assert again.restore(folder.states) == 1
    after = again.partitions[("g", "t", 0)]
    assert after.start_offset == before.start_offset == 2
    # 2 released: AVAILABLE after one delivery; 3 rejected: done; 4-5 acquired: back as AVAILABLE, counted
    assert [after.state_of(o) for o in range(2, 6)] == [(A, 1), (X, 1), (A, 1), (A, 1)]
    group = again.group("g")
    assert group is not None and group.state == "Empty"
    got = again.acquire(5, "g", "b", "t", 0, [(0, 5)], 10)
    assert [(r.first, r.last, r.delivery_count) for r in got] == [(2, 2, 2), (4, 5, 2)]
    written.clear()
    assert again.delete_group("g") == ErrorCode.none  # Empty: its members left at the restart
    assert [value for _, (_, value) in written] == [None]  # a tombstone for its share-partition
