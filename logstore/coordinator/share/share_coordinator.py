"""The share coordinator of one broker: share groups, their share-partitions and share sessions.

What the share-group APIs call (KIP-932), without sockets:

- membership (:class:`~logstore.coordinator.share.share_membership.ShareMembership`):
  ShareGroupHeartbeat, ShareGroupDescribe, ListGroups, DeleteGroups;
- share-partitions (:class:`~logstore.coordinator.share.share_partition.SharePartition`),
  one per (group, topic, partition), made when a partition is first assigned
  (or fetched): the start offset is the log's end (``share.auto.offset.reset``
  latest, the default) or its start (earliest);
- share sessions, keyed by (group, member): ShareFetch with epoch 0 opens one
  (replacing any earlier one; what the member holds stays held, as in Kafka), each later
  request names the session's next epoch (1, 2, ... wrapping to 1) or gets
  INVALID_SHARE_SESSION_EPOCH, and a session that does not exist answers
  SHARE_SESSION_NOT_FOUND; epoch -1 (final) acknowledges and closes it,
  releasing what the member still holds (Kafka's ``ShareSessionCache``);
- acquisition and acknowledgement, with Kafka's errors: an acknowledgement of
  a record the member does not hold (never acquired, acknowledged already,
  its lock expired) is INVALID_RECORD_STATE for the partition and changes
  nothing in it;
- :meth:`tick`: members whose session timed out leave; acquisition locks past
  their deadline end (the records become AVAILABLE again, or ARCHIVED at the
  delivery limit).

``on_available(group, topic, partition)`` tells the broker that records of a
share-partition became available again (to wake waiting ShareFetches).

Persistence (Kafka's share coordinator and persister in one, in-process): every
call that changes a share-partition (made, records acquired, acknowledged,
released, locks ended, start moved) ends by handing ``writer`` a ShareSnapshot
record of it for ``__share_group_state``
(:mod:`~logstore.coordinator.share.share_state_records`; acquired records are
written AVAILABLE with their delivery count, so a crash redelivers them and
counts the delivery that was lost); a deleted group's share-partitions get
tombstones. :meth:`restore` brings the state back at start; the groups whose
state it brings are Empty share groups until members join. Crash policy: a
write that fails is logged and the state in memory goes on (the next change
writes the whole state again). Membership is not persisted (members rejoin).

Not thread-safe: every call comes from the broker's event loop.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from logstore.coordinator.group.consumer_membership import TopicCatalog
from logstore.coordinator.record_codec import Record
from logstore.coordinator.share.share_config import ShareConfig
from logstore.coordinator.share.share_membership import (
    ASSIGNOR_NAME,
    HeartbeatAnswer,
    ShareGroup,
    ShareMembership,
)
from logstore.coordinator.share.share_partition import (
    AcknowledgeType,
    AcquiredRecords,
    InvalidRecordStateError,
    SharePartition,
    Snapshot,
)
from logstore.coordinator.share.share_state_records import (
    ShareStateKey,
    ShareStateValue,
    snapshot_record,
    tombstone,
)
from logstore.errors import InvalidArgumentError, LogstoreError

_log = logging.getLogger("logstore.coordinator.share")

INITIAL_EPOCH, FINAL_EPOCH = 0, -1
SHARE = "share"
LATEST, EARLIEST = "latest", "earliest"
AUTO_OFFSET_RESET = "share.auto.offset.reset"

Key = tuple[str, str, int]  # (group, topic, partition)
TopicPartition = tuple[str, int]


@dataclass
class ShareSession:
    """One member's share session: the partitions it fetches and the epoch its next request names."""

    group_id: str
    member_id: str
    epoch: int
    partitions: dict[TopicPartition, None] = field(default_factory=dict)  # ordered set


@dataclass(frozen=True)
class SessionAnswer:
    error: ErrorCode
    message: str | None = None
    session: ShareSession | None = None
    final: bool = False


def next_epoch(epoch: int) -> int:
    """Kafka's ``ShareRequestMetadata.nextEpoch``: 0 -> 1 ... MAX -> 1."""
    return 1 if epoch >= 2**31 - 1 else epoch + 1


class ShareCoordinator:
    """Share groups on one broker (see the module doc).

    ``log_offsets(topic, partition)``: (log start, high watermark) of a partition this broker
    leads, or None. ``group_configs``: each group's overrides of the share configs
    (``share.auto.offset.reset``, ``share.record.lock.duration.ms``, ``share.delivery.count.limit``).
    """

    def __init__(
        self,
        config: ShareConfig,
        catalog: TopicCatalog,
        log_offsets: Callable[[str, int], tuple[int, int] | None],
        on_available: Callable[[str, str, int], None] = lambda group, topic, partition: None,
        writer: Callable[[str, list[Record]], None] | None = None,
        clock_ms: Callable[[], int] = lambda: 0,
    ) -> None:
        self.config = config
        self.catalog = catalog
        self.membership = ShareMembership(config, catalog, self._member_gone)
        self.partitions: dict[Key, SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self._log_offsets = log_offsets
        self._on_available = on_available
        self.group_configs: dict[str, dict[str, str]] = {}  # group -> share config name -> value
        self._writer = writer
        self._clock_ms = clock_ms  # wall clock, for the snapshots' timestamps
        self._dirty: set[Key] = set()  # changed since the last write
        self._epochs: dict[Key, tuple[int, int]] = {}  # (snapshot epoch, state epoch) last written

    # -- groups --------------------------------------------------------------------

    def heartbeat(
        self,
        now_ms: int,
        group_id: str,
        member_id: str,
        member_epoch: int,
        subscribed: Iterable[str] | None,
        rack_id: str | None = None,
        client_id: str = "",
        client_host: str = "",
    ) -> HeartbeatAnswer:
        """ShareGroupHeartbeat; the partitions assigned get their share-partitions (the start
        offset fixed now, by ``share.auto.offset.reset``)."""
        answer = self.membership.heartbeat(
            now_ms, group_id, member_id, member_epoch, subscribed=subscribed, rack_id=rack_id,
            client_id=client_id, client_host=client_host,
        )  # fmt: skip
        if answer.error == ErrorCode.none:
            for topic, partitions in answer.assigned.items():
                for partition in partitions:
                    self.share_partition(group_id, topic, partition)
        self._flush()
        return answer

    def group(self, group_id: str) -> ShareGroup | None:
        return self.membership.groups.get(group_id)

    def groups(self) -> list[ShareGroup]:
        return list(self.membership.groups.values())

    def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of a share group: Empty only; its share-partitions go with it."""
        error = self.membership.delete_group(group_id)
        if error == ErrorCode.none:
            gone = []
            for key in [key for key in self.partitions if key[0] == group_id]:
                del self.partitions[key]
                self._dirty.discard(key)
                self._epochs.pop(key, None)
                state_key = self._state_key(key)
                if state_key is not None:
                    gone.append((state_key.coordinator_key(), [tombstone(state_key)]))
            self._write(gone)
        return error

    def assignor_name(self) -> str:
        return ASSIGNOR_NAME

    # -- share-partitions ----------------------------------------------------------------

    def share_partition(self, group_id: str, topic: str, partition: int) -> SharePartition | None:
        """The group's share-partition of ``topic``-``partition``, made if missing (None when this
        broker does not lead the partition). Its start follows the log's start up. O(1)."""
        key = (group_id, topic, partition)
        found = self.partitions.get(key)
        offsets = self._log_offsets(topic, partition)
        if found is None:
            if offsets is None:
                return None
            reset = (self.group_configs.get(group_id, {}).get(AUTO_OFFSET_RESET) or LATEST).lower()
            start = offsets[0] if reset == EARLIEST else offsets[1]
            found = self.partitions[key] = SharePartition(
                start,
                delivery_count_limit=self._int_config(group_id, "share.delivery.count.limit",
                                                      self.config.delivery_count_limit),
                lock_duration_ms=self._int_config(group_id, "share.record.lock.duration.ms",
                                                  self.config.record_lock_duration_ms),
                max_in_flight=self.config.partition_max_record_locks,
            )  # fmt: skip
            self._dirty.add(key)
        elif offsets is not None and found.start_offset < offsets[0]:
            found.move_start(offsets[0])  # retention deleted records not yet delivered
            self._dirty.add(key)
        return found

    def lock_duration_ms(self, group_id: str) -> int:
        return self._int_config(group_id, "share.record.lock.duration.ms", self.config.record_lock_duration_ms)

    def acquire(
        self,
        now_ms: int,
        group_id: str,
        member_id: str,
        topic: str,
        partition: int,
        fetched: Sequence[tuple[int, int]],
        max_records: int,
    ) -> list[AcquiredRecords]:
        """Acquire for ``member_id`` up to ``max_records`` of the records in ``fetched`` (a log read's
        batch ranges). O(offsets fetched)."""
        share_partition = self.share_partition(group_id, topic, partition)
        if share_partition is None:
            return []
        share_partition.expire(now_ms)
        acquired = share_partition.acquire(member_id, fetched, max_records, now_ms)
        if acquired:
            self._dirty.add((group_id, topic, partition))
        self._flush()
        return acquired

    def acknowledge(
        self,
        now_ms: int,
        group_id: str,
        member_id: str,
        topic: str,
        partition: int,
        batches: Sequence[tuple[int, int, Sequence[int]]],
    ) -> tuple[ErrorCode, str | None]:
        """Apply one partition's acknowledgement batches, all or nothing: INVALID_RECORD_STATE for
        a record the member does not hold, INVALID_REQUEST for a malformed batch."""
        share_partition = self.partitions.get((group_id, topic, partition))
        if share_partition is None:
            return ErrorCode.invalid_record_state, f"no records of {topic}-{partition} were delivered in group {group_id}"
        for _first, _last, types in batches:
            if any(not 0 <= kind <= AcknowledgeType.REJECT for kind in types):
                return ErrorCode.invalid_request, f"unknown acknowledge type in {list(types)}"
        share_partition.expire(now_ms)  # a lock that ended is not acknowledged after the fact
        released_before = share_partition.counts()
        try:
            share_partition.acknowledge(member_id, batches)
        except InvalidRecordStateError as e:
            return ErrorCode.invalid_record_state, str(e)
        except InvalidArgumentError as e:
            return ErrorCode.invalid_request, str(e)
        if share_partition.counts() != released_before:
            self._on_available(group_id, topic, partition)
        self._dirty.add((group_id, topic, partition))
        self._flush()
        return ErrorCode.none, None

    # -- sessions ------------------------------------------------------------------------

    def fetch_session(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        add: Iterable[TopicPartition],
        forget: Iterable[TopicPartition],
        acknowledging: bool,
    ) -> SessionAnswer:
        """The share session a ShareFetch runs in (Kafka's ``SharePartitionManager.newContext``)."""
        key = (group_id, member_id)
        wanted = list(add)
        if epoch == FINAL_EPOCH:
            if wanted:
                return SessionAnswer(ErrorCode.invalid_request, "a final ShareFetch may not fetch partitions")
            found = self.sessions.get(key)
            if found is None:
                return SessionAnswer(ErrorCode.share_session_not_found, "no such share session")
            return SessionAnswer(ErrorCode.none, None, found, final=True)
        if epoch == INITIAL_EPOCH:
            if acknowledging:
                return SessionAnswer(ErrorCode.invalid_request, "acknowledgements in a ShareFetch opening a session")
            if not self.membership.is_member(group_id, member_id):
                return SessionAnswer(
                    ErrorCode.unknown_member_id, f"member {member_id} is not in share group {group_id}"
                )
            if key not in self.sessions and len(self.sessions) >= self.config.max_share_sessions:
                return SessionAnswer(ErrorCode.share_session_limit_reached, "too many share sessions")
            opened = self.sessions[key] = ShareSession(group_id, member_id, next_epoch(INITIAL_EPOCH))
            opened.partitions.update(dict.fromkeys(wanted))
            return SessionAnswer(ErrorCode.none, None, opened)
        session = self.sessions.get(key)
        if session is None:
            return SessionAnswer(ErrorCode.share_session_not_found, "no such share session")
        if session.epoch != epoch:
            return SessionAnswer(
                ErrorCode.invalid_share_session_epoch, f"expected share session epoch {session.epoch}, got {epoch}"
            )
        for gone in forget:
            session.partitions.pop(gone, None)
        session.partitions.update(dict.fromkeys(wanted))
        session.epoch = next_epoch(session.epoch)
        return SessionAnswer(ErrorCode.none, None, session)

    def acknowledge_session(self, group_id: str, member_id: str, epoch: int) -> SessionAnswer:
        """The share session a ShareAcknowledge runs in (``acknowledgeSessionUpdate``)."""
        if epoch == INITIAL_EPOCH:
            return SessionAnswer(ErrorCode.invalid_share_session_epoch, "ShareAcknowledge cannot open a session")
        session = self.sessions.get((group_id, member_id))
        if session is None:
            return SessionAnswer(ErrorCode.share_session_not_found, "no such share session")
        if epoch == FINAL_EPOCH:
            return SessionAnswer(ErrorCode.none, None, session, final=True)
        if session.epoch != epoch:
            return SessionAnswer(
                ErrorCode.invalid_share_session_epoch, f"expected share session epoch {session.epoch}, got {epoch}"
            )
        session.epoch = next_epoch(session.epoch)
        return SessionAnswer(ErrorCode.none, None, session)

    def close_session(self, group_id: str, member_id: str) -> int:
        """End the member's share session; what it holds goes back. Returns how many records."""
        self.sessions.pop((group_id, member_id), None)
        released = self._release(group_id, member_id)
        self._flush()
        return released

    # -- time ----------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Members past their session timeout leave; acquisition locks past their deadline end.
        O(members + in-flight records)."""
        self.membership.expire(now_ms)
        for (group_id, topic, partition), share_partition in self.partitions.items():
            deadline = share_partition.next_deadline()
            if deadline is not None and deadline <= now_ms and share_partition.expire(now_ms):
                self._dirty.add((group_id, topic, partition))
                self._on_available(group_id, topic, partition)
        self._flush()

    # -- inside --------------------------------------------------------------------------

    def _member_gone(self, group_id: str, member_id: str) -> None:
        self.close_session(group_id, member_id)

    def _release(self, group_id: str, member_id: str) -> int:
        released = 0
        for (group, topic, partition), share_partition in self.partitions.items():
            if group == group_id:
                count = share_partition.release_member(member_id)
                if count:
                    released += count
                    self._dirty.add((group, topic, partition))
                    self._on_available(group, topic, partition)
        return released

    def _int_config(self, group_id: str, name: str, default: int) -> int:
        value = self.group_configs.get(group_id, {}).get(name)
        return default if value is None else int(value)

    def restore(self, states: dict[ShareStateKey, tuple[int, int, Snapshot]]) -> int:
        """Bring back share-partitions from ``__share_group_state`` (see the module doc); a state
        whose topic is gone is skipped. Returns how many. O(in-flight records)."""
        restored = 0
        for state_key, (snapshot_epoch, state_epoch, snapshot) in states.items():
            topic = self.catalog.topic_name(state_key.topic_id)
            if topic is None:
                continue
            group_id = state_key.group_id
            key = (group_id, topic, state_key.partition)
            self.partitions[key] = SharePartition.restore(
                snapshot,
                delivery_count_limit=self._int_config(group_id, "share.delivery.count.limit",
                                                      self.config.delivery_count_limit),
                lock_duration_ms=self.lock_duration_ms(group_id),
                max_in_flight=self.config.partition_max_record_locks,
            )  # fmt: skip
            self._epochs[key] = (snapshot_epoch, state_epoch)
            self.membership.groups.setdefault(group_id, ShareGroup(group_id))
            restored += 1
        return restored

    def _state_key(self, key: Key) -> ShareStateKey | None:
        topic_id = self.topic_id(key[1])
        return None if topic_id is None else ShareStateKey(key[0], topic_id, key[2])

    def _flush(self) -> None:
        """Write a ShareSnapshot of every share-partition changed since the last write."""
        if not self._dirty:
            return
        dirty, self._dirty = self._dirty, set()
        if self._writer is None:
            return
        now = self._clock_ms()
        writes = []
        for key in sorted(dirty):
            share_partition = self.partitions.get(key)
            state_key = self._state_key(key)
            if share_partition is None or state_key is None:
                continue
            snapshot = share_partition.snapshot()
            epoch, state_epoch = self._epochs.get(key, (-1, 0))
            self._epochs[key] = (epoch + 1, state_epoch)
            value = ShareStateValue(epoch + 1, state_epoch, 0, snapshot.start_offset, snapshot.batches, now, now)
            writes.append((state_key.coordinator_key(), [snapshot_record(state_key, value)]))
        self._write(writes)

    def _write(self, writes: list[tuple[str, list[Record]]]) -> None:
        if self._writer is None:
            return
        for coordinator_key, records in writes:
            try:
                self._writer(coordinator_key, records)
            except (LogstoreError, OSError) as e:  # crash policy: the next change writes it all again
                _log.error("could not write share state %s to __share_group_state: %s", coordinator_key, e)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        described = self.catalog.describe_topic(topic)
        return None if described is None else described[0]
