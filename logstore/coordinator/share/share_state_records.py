"""The records of ``__share_group_state``: a share-partition's persisted state, in Kafka's layouts.

Kafka's share coordinator (4.x) writes two record types, each keyed by the
share-partition (group id, topic id, partition); the key's leading int16 is
the record type, the value's the value version (0):

- ShareSnapshot (type 0): the whole state. Value (flexible): SnapshotEpoch
  int32, StateEpoch int32, LeaderEpoch int32, StartOffset int64,
  CreateTimestamp int64, WriteTimestamp int64, StateBatches [FirstOffset
  int64, LastOffset int64, DeliveryState int8 (0 AVAILABLE, 2 ACKNOWLEDGED,
  4 ARCHIVED), DeliveryCount int16].
- ShareUpdate (type 1): a change on top of the latest snapshot. Value
  (flexible): SnapshotEpoch int32, LeaderEpoch int32, StartOffset int64 (-1:
  unchanged), StateBatches as above; its batches replace the state of the
  offsets they name, offsets below the new start offset are done.

A key with a null value (tombstone) deletes the share-partition's state (its
group was deleted). Tagged fields are written empty and skipped on reading
(Kafka 4.2 adds one, the delivery-complete count of KIP-1226).

This broker writes a ShareSnapshot on every change (compaction keeps the
latest per key), and reads both types: :class:`StateFolder` folds a
partition's records, in offset order, into the latest :class:`Snapshot` per
share-partition.

>>> key = ShareStateKey("g", uuid.UUID(int=1), 0)
>>> ShareStateKey.decode(key.encode(SNAPSHOT)) == (SNAPSHOT, key)
True
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from logstore.coordinator.internal_topics import SHARE_GROUP_STATE_TOPIC
from logstore.coordinator.record_codec import OffsetsSchemaError, Record, RecordReader, RecordWriter
from logstore.coordinator.share.share_partition import RecordState, Snapshot, StateBatch

__all__ = ["SHARE_GROUP_STATE_TOPIC", "ShareStateKey", "ShareStateValue", "StateFolder"]
SNAPSHOT, UPDATE = 0, 1
_PERSISTED_STATES = (RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass(frozen=True, slots=True)
class ShareStateKey:
    """A share-partition: (group, topic id, partition)."""

    group_id: str
    topic_id: uuid.UUID
    partition: int

    def encode(self, record_type: int) -> bytes:
        writer = RecordWriter(record_type, flexible=False)
        writer.string(self.group_id)
        writer.uuid(self.topic_id)
        writer.int32(self.partition)
        return bytes(writer.out)

    @classmethod
    def decode(cls, data: bytes) -> tuple[int, ShareStateKey]:
        """(record type, key); OffsetsSchemaError for another record type or short bytes."""
        reader = RecordReader(data, "a __share_group_state key")
        record_type = reader.int16()
        if record_type not in (SNAPSHOT, UPDATE):
            raise OffsetsSchemaError(f"unknown __share_group_state record type {record_type}")
        key = cls(reader.string(), reader.uuid(), reader.int32())
        return record_type, key

    def coordinator_key(self) -> str:
        """Kafka's share coordinator key, ``group:topicId:partition`` (FindCoordinator key type 2)."""
        return f"{self.group_id}:{self.topic_id}:{self.partition}"


@dataclass(frozen=True, slots=True)
class ShareStateValue:
    """A ShareSnapshot's or ShareUpdate's value (an update has no state epoch or timestamps)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]
    create_timestamp: int = -1
    write_timestamp: int = -1

    def encode(self, record_type: int) -> bytes:
        writer = RecordWriter(0, flexible=True)
        writer.int32(self.snapshot_epoch)
        if record_type == SNAPSHOT:
            writer.int32(self.state_epoch)
        writer.int32(self.leader_epoch)
        writer.int64(self.start_offset)
        if record_type == SNAPSHOT:
            writer.int64(self.create_timestamp)
            writer.int64(self.write_timestamp)
        writer.array_length(len(self.batches))
        for batch in self.batches:
            assert batch.state in _PERSISTED_STATES and batch.first <= batch.last, batch
            writer.int64(batch.first)
            writer.int64(batch.last)
            writer.int8(int(batch.state))
            writer.int16(batch.delivery_count)
            writer.tagged_fields()
        writer.tagged_fields()
        return bytes(writer.out)

    @classmethod
    def decode(cls, record_type: int, data: bytes) -> ShareStateValue:
        reader = RecordReader(data, "a __share_group_state value")
        version = reader.int16()
        if version != 0:
            raise OffsetsSchemaError(f"unknown __share_group_state value version {version}")
        reader.flexible = True
        snapshot_epoch = reader.int32()
        state_epoch = reader.int32() if record_type == SNAPSHOT else -1
        leader_epoch = reader.int32()
        start_offset = reader.int64()
        created = written = -1
        if record_type == SNAPSHOT:
            created, written = reader.int64(), reader.int64()
        batches = []
        for _ in range(reader.array_length()):
            first, last, state, count = reader.int64(), reader.int64(), reader.int8(), reader.int16()
            reader.tagged_fields()
            if state not in _PERSISTED_STATES or first > last:
                raise OffsetsSchemaError(f"a state batch {first}-{last} with state {state}")
            batches.append(StateBatch(first, last, RecordState(state), count))
        reader.tagged_fields()
        return cls(snapshot_epoch, state_epoch, leader_epoch, start_offset, tuple(batches), created, written)


def snapshot_record(key: ShareStateKey, value: ShareStateValue) -> Record:
    return key.encode(SNAPSHOT), value.encode(SNAPSHOT)


def tombstone(key: ShareStateKey) -> Record:
    return key.encode(SNAPSHOT), None


class StateFolder:
    """Folds ``__share_group_state`` records, in offset order, into each share-partition's latest
    state: :attr:`states` (key -> (snapshot epoch, state epoch, Snapshot)). O(records x batches)."""

    def __init__(self) -> None:
        self.states: dict[ShareStateKey, tuple[int, int, Snapshot]] = {}

    def add(self, key_bytes: bytes, value_bytes: bytes | None) -> None:
        """One record; OffsetsSchemaError for bytes that are not one."""
        record_type, key = ShareStateKey.decode(key_bytes)
        if value_bytes is None:
            self.states.pop(key, None)
            return
        value = ShareStateValue.decode(record_type, value_bytes)
        if record_type == SNAPSHOT:
            self.states[key] = (value.snapshot_epoch, value.state_epoch, Snapshot(value.start_offset, value.batches))
            return
        found = self.states.get(key)
        if found is None:
            return  # an update without its snapshot (compacted away): Kafka ignores it too
        self.states[key] = (found[0], found[1], _overlay(found[2], value))


def _overlay(base: Snapshot, update: ShareStateValue) -> Snapshot:
    """``base`` with ``update``'s start offset and batches applied (runs re-formed from offsets)."""
    start = base.start_offset if update.start_offset < 0 else update.start_offset
    states: dict[int, tuple[RecordState, int]] = {}
    for batch in (*base.batches, *update.batches):
        for offset in range(max(batch.first, start), batch.last + 1):
            states[offset] = (batch.state, batch.delivery_count)
    runs: list[StateBatch] = []
    for offset in sorted(states):
        state, count = states[offset]
        if runs and runs[-1].last == offset - 1 and (runs[-1].state, runs[-1].delivery_count) == (state, count):
            runs[-1] = StateBatch(runs[-1].first, offset, state, count)
        else:
            runs.append(StateBatch(offset, offset, state, count))
    # offsets between runs (never delivered) end the in-flight window there
    contiguous: list[StateBatch] = []
    expected = start
    for run in runs:
        if run.first != expected:
            break
        contiguous.append(run)
        expected = run.last + 1
    while contiguous and contiguous[0].state != RecordState.AVAILABLE and contiguous[0].first == start:
        start = contiguous.pop(0).last + 1  # leading done runs: the start moves past them
    return Snapshot(start, tuple(contiguous))
