"""Batched OffsetCommits on an in-process broker: one append per pass, answers after it, undo on failure."""

from __future__ import annotations

import asyncio
import contextlib
import io
import struct
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.offset_commit.v8 import request as oc
from kio.schema.offset_commit.v8.response import OffsetCommitResponse
from kio.serial import entity_reader, entity_writer

from logstore.broker.broker import Broker
from logstore.broker.config.broker_config import BrokerConfig
from logstore.broker.groups.offsets_topic import offsets_appender_of, read_partition
from logstore.coordinator.group.offsets_schemas import (
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    offset_commit_record,
)
from logstore.coordinator.internal_topics import OFFSETS_TOPIC, partition_for
from logstore.protocol import DeferredFrame
from logstore.storage.log import Log

pytestmark = pytest.mark.unit

GROUP = "g"


class _Connection:
    peer = "127.0.0.1:1"


def commit_frame(offset: int, correlation: int) -> bytes:
    """An OffsetCommit v8 request body frame (no size prefix) committing t-0 at ``offset``."""
    request = oc.OffsetCommitRequest(
        group_id=GROUP,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=(
            oc.OffsetCommitRequestTopic(
                name="t",
                partitions=(
                    oc.OffsetCommitRequestPartition(
                        partition_index=0,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    ),
                ),
            ),
        ),
    )
    body = io.BytesIO()
    entity_writer(type(request))(body, request)
    return struct.pack(">hhih", 8, 8, correlation, 1) + b"c" + b"\x00" + body.getvalue()


def answer(chunks: list[Any]) -> tuple[int, ErrorCode]:
    """(correlation id, the partition's error) of a response frame given as chunks."""
    (chunk,) = chunks
    frame = chunk.resolve() if isinstance(chunk, DeferredFrame) else chunk
    (correlation,) = struct.unpack_from(">i", frame, 4)
    response, _ = entity_reader(OffsetCommitResponse)(frame, 9)  # size, correlation id, tags
    return correlation, response.topics[0].partitions[0].error_code


@contextlib.asynccontextmanager
async def running_broker(data_dir: str) -> AsyncIterator[Broker]:
    broker = Broker(BrokerConfig.from_dict({"listeners": "PLAINTEXT://127.0.0.1:0"}), data_dir=data_dir)
    await broker.start()
    try:
        yield broker
    finally:
        await broker.close()


def committed(broker: Broker) -> int:
    assert broker.coordinator is not None
    return broker.coordinator.fetch_offsets(GROUP, [("t", 0)]).offsets[("t", 0)].offset


async def scenario(data_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    async with running_broker(data_dir) as broker:
        broker.store.create_topic("t", 1)
        log = broker.store.log(OFFSETS_TOPIC, partition_for(GROUP, 50))
        appends: list[int] = []
        real_append = Log.append

        def counting(self: Log, records: Any, *args: Any) -> Any:
            appends.append(len(list(records)))
            return real_append(self, records, *args)

        monkeypatch.setattr(Log, "append", counting)
        # Three commits in one pass: each is visible at once, all three share one append.
        frames = [
            await broker.handle(commit_frame(offset, n), _Connection()) for n, offset in enumerate((3, 4, 5))
        ]
        assert all(isinstance(f[0], DeferredFrame) for f in frames if f)
        assert committed(broker) == 5 and appends == []
        await asyncio.sleep(0)  # the pass ends: the batch is appended
        assert appends == [3]
        assert [answer(f) for f in frames if f] == [
            (0, ErrorCode.none),
            (1, ErrorCode.none),
            (2, ErrorCode.none),
        ]
        assert log.log_end_offset == 3

        # A batch that fails: its commits answer the error and the offsets come back.
        def failing(self: Log, records: Any, *args: Any) -> Any:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(Log, "append", failing)
        frames = [
            await broker.handle(commit_frame(offset, n), _Connection()) for n, offset in enumerate((8, 9))
        ]
        assert committed(broker) == 9  # applied before the append...
        errors = [answer(f)[1] for f in frames if f]  # ...answering forces the batch out
        assert errors == [ErrorCode.not_coordinator, ErrorCode.not_coordinator]
        assert committed(broker) == 5  # ...and undone when it failed
        assert log.log_end_offset == 3

        # A response written before the pass ends appends the batch first.
        monkeypatch.setattr(Log, "append", real_append)
        frame = await broker.handle(commit_frame(11, 7), _Connection())
        assert frame is not None and answer(frame) == (7, ErrorCode.none)
        assert log.log_end_offset == 4 and committed(broker) == 11
        offsets_appender_of(broker).flush()  # nothing left staged
        assert log.log_end_offset == 4


def test_commits_of_one_pass_share_an_append_and_fail_together(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    asyncio.run(scenario(str(tmp_path), monkeypatch))


async def ordering_and_undo(data_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    async with running_broker(data_dir) as broker:
        broker.store.create_topic("t", 2)
        log = broker.store.log(OFFSETS_TOPIC, partition_for(GROUP, 50))
        appender = offsets_appender_of(broker)
        # A commit too big to share a batch goes after what is already staged, not before.
        small = offset_commit_record(GROUP, "t", 0, OffsetCommitValue(5, -1, "", 0))
        later = OffsetCommitValue(10, -1, "", 0)
        big = [offset_commit_record(GROUP, "u", p, later) for p in range(10_000)]  # ~700 KB
        big.append(offset_commit_record(GROUP, "t", 0, later))
        first = appender.stage(GROUP, [small])
        second = appender.stage(GROUP, big)
        assert first.error == second.error == ErrorCode.none
        t0 = OffsetCommitKey(GROUP, "t", 0)
        values = [
            OffsetCommitValue.decode(value).offset
            for key, value in read_partition(log)
            if value and decode_key(key) == t0
        ]
        assert values == [5, 10]

        # A failed batch does not bring back an offset deleted after the commit was applied.
        assert broker.coordinator is not None
        other = broker.coordinator.commit_offsets(GROUP, -1, "", {("t", 1): (7, -1, "")})
        assert other == {("t", 1): ErrorCode.none}  # keeps the group alive after the delete below
        await broker.handle(commit_frame(15, 0), _Connection())
        await asyncio.sleep(0)  # appended: 15 is the committed offset to come back to
        frame = await broker.handle(commit_frame(20, 1), _Connection())
        assert committed(broker) == 20
        real_append = Log.append
        calls = []

        def first_fails(self: Log, records: Any, *args: Any) -> Any:
            calls.append(1)
            if len(calls) == 1:
                raise OSError(28, "No space left on device")
            return real_append(self, records, *args)

        monkeypatch.setattr(Log, "append", first_fails)
        deleted = broker.coordinator.delete_offsets(GROUP, [("t", 0)])
        assert deleted.error == ErrorCode.none and len(calls) == 2  # the staged batch, then the tombstone
        assert frame is not None and answer(frame) == (1, ErrorCode.not_coordinator)
        assert committed(broker) == -1


def test_a_big_commit_keeps_log_order_and_an_undo_keeps_a_later_delete(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    asyncio.run(ordering_and_undo(str(tmp_path), monkeypatch))
