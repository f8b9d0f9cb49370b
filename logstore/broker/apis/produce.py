"""Produce (key 0): validate each partition's batch in C and append it as it came.

Per partition, as Kafka's ``LogValidator`` and ``UnifiedLog.append`` do:

- the topic and partition must exist (UNKNOWN_TOPIC_OR_PARTITION);
- the records are exactly one v2 batch (magic 2, as produce v3+ requires),
  whose CRC and structure the native scanner checks (CORRUPT_MESSAGE);
- the batch fits the topic's ``max.message.bytes`` (MESSAGE_TOO_LARGE);
- with CreateTime, its timestamps lie within
  ``message.timestamp.before/after.max.ms`` of now (INVALID_TIMESTAMP);
- acks=-1 needs ``min.insync.replicas`` replicas in sync: here only the
  leader is (NOT_ENOUGH_REPLICAS when more are asked for);
- an idempotent batch (producer id >= 0) is checked against the producer's
  epoch and sequence; a duplicate returns its first append's offset.

The batch is then appended with offsets (and LogAppendTime) written into it;
fetches waiting on the partition are woken. acks=0 sends no response.
Topics with ``flush.messages=1`` fsync before answering, off the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.apis import Api, produce_codec
from logstore.broker.producers import last_sequence
from logstore.broker.server import Broker, RequestContext
from logstore.errors import LogstoreError
from logstore.protocol import RawBody
from logstore.protocol.errors import error_for
from logstore.records.batch import RecordBatch
from logstore.storage.log import Log

_log = logging.getLogger("logstore.broker")
_MAX_TIMESTAMP_AT = 35
_TIMESTAMP = struct.Struct(">q")


class PartitionResult:
    __slots__ = ("append_time", "base_offset", "error", "log_start", "message")

    def __init__(
        self,
        error: ErrorCode,
        base_offset: int = -1,
        append_time: int = -1,
        log_start: int = -1,
        message: str | None = None,
    ) -> None:
        self.error = error
        self.base_offset = base_offset
        self.append_time = append_time
        self.log_start = log_start
        self.message = message


def _check_batch(log: Log, records: bytes | memoryview | None, acks: int) -> PartitionResult | RecordBatch:
    if not records:
        return PartitionResult(ErrorCode.invalid_record, message="the request carries no record batch")
    try:
        batch = RecordBatch(memoryview(records))
    except struct.error:
        return PartitionResult(ErrorCode.corrupt_message, message="records shorter than a batch header")
    if batch.magic != 2:
        return PartitionResult(
            ErrorCode.unsupported_for_message_format, message=f"magic {batch.magic}; send v2 batches"
        )
    if batch.size != len(records):
        return PartitionResult(
            ErrorCode.invalid_record if batch.size < len(records) else ErrorCode.corrupt_message,
            message="a produce request must carry exactly one record batch per partition",
        )
    config = log.config
    if batch.size > config.max_message_bytes:
        return PartitionResult(
            ErrorCode.message_too_large,
            message=f"batch of {batch.size} bytes exceeds max.message.bytes={config.max_message_bytes}",
        )
    if config.message_timestamp_type == "CreateTime":
        now = int(time.time() * 1000)
        if (
            batch.max_timestamp - now > config.message_timestamp_after_max_ms
            or now - batch.base_timestamp > config.message_timestamp_before_max_ms
        ):
            return PartitionResult(ErrorCode.invalid_timestamp, message="timestamp out of the allowed range")
    if acks == -1 and config.min_insync_replicas > 1:
        return PartitionResult(
            ErrorCode.not_enough_replicas,
            message=f"1 replica in sync, min.insync.replicas={config.min_insync_replicas}",
        )
    return batch


async def append_partition(
    broker: Broker, topic: str, partition: int, records: bytes | memoryview | None, acks: int
) -> PartitionResult:
    log = broker.store.find_log(topic, partition)
    if log is None:
        return PartitionResult(ErrorCode.unknown_topic_or_partition)
    checked = _check_batch(log, records, acks)
    if isinstance(checked, PartitionResult):
        return checked
    batch = checked
    producer_id = batch.producer_id
    state = None
    sequence = (batch.base_sequence, last_sequence(batch.base_sequence, batch.last_offset_delta))
    if producer_id >= 0:
        state = broker.producer_state(topic, partition)
        error, duplicate = state.check(producer_id, batch.producer_epoch, *sequence)
        if error != ErrorCode.none:
            return PartitionResult(error, log_start=log.log_start_offset)
        if duplicate is not None:
            return PartitionResult(ErrorCode.none, duplicate.first_offset, -1, log.log_start_offset)
    # A large request's records are a writable view of its frame: offsets go in place.
    writable = isinstance(records, memoryview) and not records.readonly
    buffer: memoryview | bytearray = (
        records
        if isinstance(records, memoryview) and writable
        else bytearray(records or b"")  # (empty was refused above)
    )
    try:
        if log.config.flush_messages == 1:
            info = await asyncio.get_running_loop().run_in_executor(None, log.append_batch, buffer)
        else:
            info = log.append_batch(buffer)
    except (LogstoreError, OSError) as e:
        code = error_for(e)
        if code in (ErrorCode.unknown_server_error, ErrorCode.kafka_storage_error):
            _log.error("append to %s-%d failed: %s", topic, partition, e)
        return PartitionResult(code, message=str(e))
    if state is not None:
        state.record(producer_id, batch.producer_epoch, *sequence, info.first_offset, info.last_offset)
    broker.purgatory.notify((topic, partition))
    append_time = -1
    if log.config.message_timestamp_type == "LogAppendTime":
        (append_time,) = _TIMESTAMP.unpack_from(buffer, _MAX_TIMESTAMP_AT)
    return PartitionResult(ErrorCode.none, info.first_offset, append_time, log.log_start_offset)


async def handle(ctx: RequestContext, request: Any) -> Any:
    acks = request.acks
    if request.transactional_id is not None:
        error = ErrorCode.transactional_id_authorization_failed
    elif acks not in (0, 1, -1):
        error = ErrorCode.invalid_required_acks
    else:
        error = ErrorCode.none
    responses = []
    for topic in request.topic_data:
        partitions = []
        for data in topic.partition_data:
            if error != ErrorCode.none:
                result = PartitionResult(error)
            else:
                try:
                    result = await append_partition(ctx.broker, topic.name, data.index, data.records, acks)
                except Exception:  # one partition's bug must not fail the others, nor the connection
                    _log.exception("producing to %s-%d failed", topic.name, data.index)
                    result = PartitionResult(
                        ErrorCode.unknown_server_error, message="internal error; see broker log"
                    )
            partitions.append((data.index, result))
        responses.append((topic.name, partitions))
    if acks == 0:
        return None
    return RawBody(
        produce_codec.encode_body(
            ctx.version,
            [
                (
                    name,
                    [
                        (index, r.error, r.base_offset, r.append_time, r.log_start, r.message)
                        for index, r in partitions
                    ],
                )
                for name, partitions in responses
            ],
        )
    )


API = Api(key=0, name="Produce", min_version=3, max_version=10, handle=handle, decode=produce_codec.decode)
