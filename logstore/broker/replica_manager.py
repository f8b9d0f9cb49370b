"""The ReplicaManager: appends and reads for the APIs (Kafka's ``ReplicaManager``).

API handlers never touch the Store's logs: Produce appends here, Fetch,
ListOffsets and DeleteRecords read and trim here. It holds this broker's
:class:`~logstore.broker.partition.Partition` objects, made on first use from
the Store's logs and the MetadataCache's partition state (a re-created topic
gets new ones: a Partition is tied to its Log), and the fetch purgatory that
appends wake.

Per partition, an append checks what Kafka's ``LogValidator`` and
``UnifiedLog.append`` check, in this order:

- the topic and partition exist here (UNKNOWN_TOPIC_OR_PARTITION);
- the records are exactly one v2 batch (magic 2, as produce v3+ requires),
  whose CRC and structure the native scanner checks (CORRUPT_MESSAGE);
- the batch fits the topic's ``max.message.bytes`` (MESSAGE_TOO_LARGE);
- with CreateTime, its timestamps lie within
  ``message.timestamp.before/after.max.ms`` of now (INVALID_TIMESTAMP);
- acks=-1 needs ``min.insync.replicas`` replicas in the ISR
  (NOT_ENOUGH_REPLICAS);
- an idempotent batch (producer id >= 0) is checked against the producer's
  epoch and sequence; a duplicate returns its first append's offset.

Disk work off the event loop: an append to a topic with ``flush.messages=1``
(an fsync per batch) runs in the default executor. Other appends write to the
page cache and stay on the loop (a thread hop costs more than the write).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Hashable, Iterable

from kio.schema.errors import ErrorCode

from logstore.broker.metadata_cache import MetadataCache
from logstore.broker.partition import Partition
from logstore.broker.producers import last_sequence
from logstore.broker.purgatory import Purgatory
from logstore.errors import LogstoreError, UnknownTopicError
from logstore.protocol.errors import error_for
from logstore.records.batch import RecordBatch
from logstore.storage.log import Log, ReadResult
from logstore.storage.log_manager import LogManager

_log = logging.getLogger("logstore.broker")
_MAX_TIMESTAMP_AT = 35
_TIMESTAMP = struct.Struct(">q")


class AppendResult:
    """One partition's answer to an append: Kafka's ``PartitionResponse``."""

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


class PartitionRead:
    """One partition's answer to a fetch: its error, HW, log start and what was read (or None)."""

    __slots__ = ("error", "high_watermark", "index", "log_start", "read")

    def __init__(self, index: int, error: ErrorCode, read: ReadResult | None = None) -> None:
        self.index = index
        self.error = error
        self.read = read
        self.high_watermark = -1
        self.log_start = -1


class ReplicaManager:
    """This broker's partitions: appends, reads and the fetch purgatory (see the module doc)."""

    def __init__(
        self, logs: LogManager, metadata: MetadataCache, node_id: int, producer_id_expiration_ms: int
    ) -> None:
        self.logs_by_partition = logs
        self.metadata = metadata
        self.node_id = node_id
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.purgatory = Purgatory()
        self._partitions: dict[tuple[str, int], Partition] = {}

    # -- partitions ----------------------------------------------------------

    def partition(self, topic: str, index: int) -> Partition | None:
        """The partition if this broker holds its log, else None. O(1)."""
        log = self.logs_by_partition.find_log(topic, index)
        if log is None:
            return None
        found = self._partitions.get((topic, index))
        state = self.metadata.partition_state(topic, index)
        if found is not None and found.log is log:
            if state is not None:
                found.state = state
            return found
        if state is None:  # the log is here, the cache not yet (a topic made this instant)
            return None
        made = Partition(topic, index, log, state, self.producer_id_expiration_ms)
        self._partitions[(topic, index)] = made
        return made

    def leader_partition(self, topic: str, index: int) -> Partition | ErrorCode:
        """The partition if this broker leads it; else UNKNOWN_TOPIC_OR_PARTITION (no such
        partition) or NOT_LEADER_OR_FOLLOWER (another broker leads it, or none does). O(1)."""
        partition = self.partition(topic, index)
        if partition is not None and partition.state.leader == self.node_id:
            return partition
        if self.metadata.partition_state(topic, index) is not None:
            return ErrorCode.not_leader_or_follower
        return ErrorCode.unknown_topic_or_partition

    def find_log(self, topic: str, index: int) -> Log | None:
        """The partition's Log if this broker leads it, else None. O(1)."""
        partition = self.leader_partition(topic, index)
        return partition.log if isinstance(partition, Partition) else None

    def log(self, topic: str, index: int) -> Log:
        """The partition's Log; UnknownTopicError if this broker holds no such partition. O(1)."""
        found = self.find_log(topic, index)
        if found is None:
            raise UnknownTopicError(f"this broker holds no partition {index} of topic {topic!r}")
        return found

    def appended(self, topic: str, index: int) -> None:
        """Wake the fetches waiting on a partition that was appended to outside :meth:`append`."""
        self.purgatory.notify((topic, index))

    def logs(self) -> dict[tuple[str, int], Log]:
        """Every partition's Log (DescribeLogDirs). O(P)."""
        return self.logs_by_partition.logs()

    def forget_topic(self, name: str) -> None:
        """Drop the partitions of a deleted topic (their producer state goes with them). O(P)."""
        for key in [key for key in self._partitions if key[0] == name]:
            del self._partitions[key]

    # -- appends -------------------------------------------------------------

    async def append(
        self, topic: str, index: int, records: bytes | memoryview | None, acks: int
    ) -> AppendResult:
        """Validate and append one partition's batch (see the module doc); wakes its fetches."""
        partition = self.leader_partition(topic, index)
        if not isinstance(partition, Partition):
            return AppendResult(partition)
        log = partition.log
        checked = _check_batch(partition, records, acks)
        if isinstance(checked, AppendResult):
            return checked
        batch = checked
        producer_id = batch.producer_id
        state = None
        sequence = (batch.base_sequence, last_sequence(batch.base_sequence, batch.last_offset_delta))
        if producer_id >= 0:
            state = partition.producers
            error, duplicate = state.check(producer_id, batch.producer_epoch, *sequence)
            if error != ErrorCode.none:
                return AppendResult(error, log_start=log.log_start_offset)
            if duplicate is not None:
                return AppendResult(ErrorCode.none, duplicate.first_offset, -1, log.log_start_offset)
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
                _log.error("append to %s-%d failed: %s", topic, index, e)
            return AppendResult(code, message=str(e))
        if state is not None:
            state.record(producer_id, batch.producer_epoch, *sequence, info.first_offset, info.last_offset)
        partition.check_offsets()
        self.purgatory.notify((topic, index))
        append_time = -1
        if log.config.message_timestamp_type == "LogAppendTime":
            (append_time,) = _TIMESTAMP.unpack_from(buffer, _MAX_TIMESTAMP_AT)
        return AppendResult(ErrorCode.none, info.first_offset, append_time, log.log_start_offset)

    # -- reads ---------------------------------------------------------------

    def read(self, topic: str, index: int, offset: int, limit: int, first: bool, upto: str) -> PartitionRead:
        """Up to ``limit`` bytes of whole batches from ``offset`` (at least one batch when
        ``first``: Kafka's rule that a fetch makes progress), up to the HW or the log end."""
        partition = self.leader_partition(topic, index)
        if not isinstance(partition, Partition):
            return PartitionRead(index, partition)
        log = partition.log
        result = PartitionRead(index, ErrorCode.none)
        result.high_watermark = log.high_watermark
        result.log_start = log.log_start_offset
        if limit <= 0 and not first:
            return result
        try:
            read = log.read(offset, max(limit, 1), upto=upto)
        except (LogstoreError, OSError) as e:
            result.error = error_for(e)
            return result
        if read.size and (first or read.size <= limit):
            result.read = read
        return result

    async def wait_for_data(self, keys: Iterable[Hashable], timeout: float) -> bool:
        """Wait until an append to one of ``keys`` (topic, partition) or ``timeout`` seconds."""
        return await self.purgatory.wait(keys, timeout)

    def wake_all(self) -> None:
        """Wake every waiting fetch (the broker is closing)."""
        self.purgatory.wake_all()


def _check_batch(
    partition: Partition, records: bytes | memoryview | None, acks: int
) -> AppendResult | RecordBatch:
    if not records:
        return AppendResult(ErrorCode.invalid_record, message="the request carries no record batch")
    try:
        batch = RecordBatch(memoryview(records))
    except struct.error:
        return AppendResult(ErrorCode.corrupt_message, message="records shorter than a batch header")
    if batch.magic != 2:
        return AppendResult(
            ErrorCode.unsupported_for_message_format, message=f"magic {batch.magic}; send v2 batches"
        )
    if batch.size != len(records):
        return AppendResult(
            ErrorCode.invalid_record if batch.size < len(records) else ErrorCode.corrupt_message,
            message="a produce request must carry exactly one record batch per partition",
        )
    config = partition.log.config
    if batch.size > config.max_message_bytes:
        return AppendResult(
            ErrorCode.message_too_large,
            message=f"batch of {batch.size} bytes exceeds max.message.bytes={config.max_message_bytes}",
        )
    if config.message_timestamp_type == "CreateTime":
        now = int(time.time() * 1000)
        if (
            batch.max_timestamp - now > config.message_timestamp_after_max_ms
            or now - batch.base_timestamp > config.message_timestamp_before_max_ms
        ):
            return AppendResult(ErrorCode.invalid_timestamp, message="timestamp out of the allowed range")
    in_sync = len(partition.state.isr)
    if acks == -1 and config.min_insync_replicas > in_sync:
        return AppendResult(
            ErrorCode.not_enough_replicas,
            message=f"{in_sync} replica(s) in sync, min.insync.replicas={config.min_insync_replicas}",
        )
    return batch
