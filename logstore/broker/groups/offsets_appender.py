"""Writes to ``__consumer_offsets``: :class:`OffsetsAppender` and the :class:`Ticket` of a staged commit.

The group coordinator's records reach the partitions through the appender
(with :meth:`Log.append`, so the topic's ``flush.messages`` and ``flush.ms``
make them durable like any other log), which batches the OffsetCommits of one
event-loop pass and wakes fetches waiting on the partition. offsets_topic.py builds
it with the coordinator.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from logstore.broker.replication.replica_manager import ReplicaManager
from logstore.coordinator.group.persistence import WriteError
from logstore.coordinator.group.txn_offsets import PendingTxnOffsets
from logstore.coordinator.internal_topics import OFFSETS_TOPIC, partition_for
from logstore.coordinator.record_codec import Record
from logstore.errors import LogstoreError, RecordTooLargeError

_log = logging.getLogger("logstore.broker")


class Ticket:
    """The outcome of one event-loop pass's batch on one ``__consumer_offsets`` partition."""

    __slots__ = ("_appender", "_on_failure", "error")

    def __init__(self, appender: OffsetsAppender) -> None:
        self._appender = appender
        self._on_failure: list[Callable[[], None]] = []
        self.error: ErrorCode | None = None  # None until the batch is appended

    def on_failure(self, undo: Callable[[], None]) -> None:
        self._on_failure.append(undo)

    def result(self) -> ErrorCode:
        """The batch's error code (appending it now if it is still staged)."""
        if self.error is None:
            self._appender.flush()
        assert self.error is not None
        return self.error

    def settle(self, error: ErrorCode) -> None:
        self.error = error
        if error != ErrorCode.none:
            for undo in reversed(self._on_failure):
                undo()
        self._on_failure.clear()


class OffsetsAppender:
    """Writes the coordinator's records to ``__consumer_offsets``.

    OffsetCommit records are *staged*: every commit that arrives in one pass
    of the event loop joins one batch per partition, appended by a callback
    at the end of the pass (``loop.call_soon``), before the responses of that
    pass are written (they are written by a later callback, or resolve their
    ticket first). A commit applies its offsets at once, so requests after it
    read them, and reverts them if its batch then fails; its response carries
    the batch's outcome. One append of N commits instead of N appends is what
    makes the commit path cheap.

    Every other write (group metadata, tombstones) goes through :meth:`write`,
    which first appends whatever is staged (a partition's records stay in
    the order they were made) and returns once its records are appended.
    Append errors become Kafka's: a batch over ``max.message.bytes`` is
    INVALID_COMMIT_OFFSET_SIZE, a storage error NOT_COORDINATOR, anything
    else COORDINATOR_NOT_AVAILABLE.
    """

    def __init__(self, replicas: ReplicaManager, partitions: int) -> None:
        self._replicas = replicas
        self.partitions = partitions
        self._staged: dict[int, tuple[list[Record], Ticket]] = {}
        self._staged_bytes: dict[int, int] = {}
        self._scheduled = False
        self.pending_txn = PendingTxnOffsets()  # TxnOffsetCommits awaiting their transaction's marker

    def _limit(self, partition: int) -> int:
        return self._replicas.log(OFFSETS_TOPIC, partition).config.max_message_bytes

    def stage(self, group_id: str, records: list[Record]) -> Ticket:
        """Add a commit's records to this pass's batch of the group's partition."""
        partition = partition_for(group_id, self.partitions)
        size = 32 * len(records)
        for key, value in records:
            size += len(key) + (len(value) if value else 0)
        limit = self._limit(partition)
        if size > limit // 2:  # too big to share a batch: on its own, now, after what is staged
            self.flush()
            ticket = Ticket(self)
            ticket.settle(self._append(partition, records))
            return ticket
        if self._staged_bytes.get(partition, 0) + size > limit // 2:
            self.flush()
        staged = self._staged.get(partition)
        if staged is None:
            staged = self._staged[partition] = ([], Ticket(self))
            self._staged_bytes[partition] = 0
        staged[0].extend(records)
        self._staged_bytes[partition] += size
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)
        return staged[1]

    def flush(self) -> None:
        """Append every staged batch and settle its ticket."""
        self._scheduled = False
        staged, self._staged = self._staged, {}
        self._staged_bytes = {}
        for partition, (records, ticket) in staged.items():
            ticket.settle(self._append(partition, records))

    def write(self, group_id: str, records: list[Record]) -> None:
        """The coordinator's :data:`Writer`: append now (after anything staged)."""
        if not records:
            return
        self.flush()
        error = self._append(partition_for(group_id, self.partitions), records)
        if error != ErrorCode.none:
            raise WriteError(error, f"appending to {OFFSETS_TOPIC} failed: {error.name}")

    def _append(self, partition: int, records: list[Record]) -> ErrorCode:
        try:
            self._replicas.log(OFFSETS_TOPIC, partition).append(records)
        except RecordTooLargeError as e:
            _log.error("appending to %s-%d failed: %s", OFFSETS_TOPIC, partition, e)
            return ErrorCode.invalid_commit_offset_size
        except OSError as e:
            _log.error("appending to %s-%d failed: %s", OFFSETS_TOPIC, partition, e)
            return ErrorCode.not_coordinator
        except LogstoreError as e:
            _log.error("appending to %s-%d failed: %s", OFFSETS_TOPIC, partition, e)
            return ErrorCode.coordinator_not_available
        except Exception:  # a ticket must settle whatever happens, or its answers never go out
            _log.exception("appending to %s-%d failed", OFFSETS_TOPIC, partition)
            return ErrorCode.coordinator_not_available
        self._replicas.appended(OFFSETS_TOPIC, partition)
        return ErrorCode.none
