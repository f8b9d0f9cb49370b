"""Followers fetch from leaders (Kafka's ``ReplicaFetcherManager`` and ``ReplicaFetcherThread``).

One :class:`ReplicaFetcher` per leader broker, an asyncio task on the
broker's loop with one :class:`~logstore.broker.network.inter_broker.BrokerChannel`,
fetches every partition this broker follows from that leader. A partition
joins a fetcher when this broker becomes its follower (at the leader epoch
the controller gave it) and leaves when it becomes leader, the leader moves,
or the topic goes.

Each partition first **truncates** (KIP-101, KIP-279): it asks the leader
with OffsetForLeaderEpoch for the end offset of its own latest epoch, and cuts
its log to where the two logs agree. Only then does it **fetch**, from its log
end offset, with its ``replica_id`` (so the leader counts its progress and
serves past the high watermark) and the leader epoch it knows (a leader at
another epoch answers FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH, and the
partition waits for the controller's next word). Fetched batches are appended
as they are, offsets and epochs the leader's
(:meth:`~logstore.storage.log.Log.append_as_follower`), so replicas stay
byte-identical; the follower's high watermark is the leader's, capped at its
own log end.

Why truncation before fetching: a follower may hold records the old leader
never committed; appending after them would make the logs diverge. The epoch
cache says exactly where they diverge, where Kafka's old rule (truncate to the
high watermark) could lose committed records or keep divergent ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from logstore.broker.network.inter_broker import BrokerChannel, ChannelError
from logstore.broker.replication.partition import Partition
from logstore.errors import LogstoreError

_log = logging.getLogger("logstore.replication")

EARLY_RETRIES = 20
EARLY_RETRY_S = 0.05
_NOT_YET_LEADER = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.unknown_leader_epoch})

FETCH, OFFSET_FOR_LEADER_EPOCH = 1, 23
FETCH_VERSION, EPOCH_VERSION = 12, 4
UNDEFINED_EPOCH = -1
_TRUNCATION_ROUNDS = 8  # KIP-279: each round moves to an older epoch; a few suffice


@dataclass(frozen=True, slots=True)
class FetcherSettings:
    """Kafka's replica.fetch.* settings (milliseconds and bytes)."""

    wait_max_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 1_048_576
    response_max_bytes: int = 10_485_760
    backoff_ms: int = 1_000
    socket_timeout_ms: int = 30_000


class FetchState:
    """One followed partition: where to fetch from, at which leader epoch, and whether it must
    truncate first (or is held back until ``ready_at`` after an error)."""

    __slots__ = ("early_retries", "leader_epoch", "partition", "ready_at", "truncating")

    def __init__(self, partition: Partition, leader_epoch: int) -> None:
        self.partition = partition
        self.leader_epoch = leader_epoch
        self.truncating = True
        self.ready_at = 0.0
        self.early_retries = 0  # quick retries spent on a leader not yet told it leads

    @property
    def key(self) -> tuple[str, int]:
        return self.partition.topic, self.partition.index


class Follower(Protocol):
    """What a fetcher tells the replica manager that runs it (the ReplicaManager)."""

    @property
    def node_id(self) -> int: ...

    def appended(self, topic: str, index: int) -> None:
        """Records were appended to the partition's log (waiting fetches wake)."""
        ...

    def follower_high_watermark(self, partition: Partition, leader_hw: int, leader_log_start: int) -> None:
        """The leader's HW and log start after a fetch."""
        ...


class ReplicaFetcher:
    """Every partition this broker follows on one leader (see the module doc)."""

    def __init__(
        self, manager: Follower, leader: int, host: str, port: int, settings: FetcherSettings
    ) -> None:
        self.manager = manager
        self.leader = leader
        self.settings = settings
        self.channel = BrokerChannel(leader, host, port, f"replica-fetcher-{manager.node_id}-{leader}")
        self.states: dict[tuple[str, int], FetchState] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def __repr__(self) -> str:
        return (
            f"ReplicaFetcher(broker {self.manager.node_id} from {self.leader}, {len(self.states)} partitions)"
        )

    def add(self, partition: Partition, leader_epoch: int) -> None:
        """Follow ``partition`` at ``leader_epoch`` (truncating first)."""
        self.states[(partition.topic, partition.index)] = FetchState(partition, leader_epoch)
        self._changed.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=repr(self))

    def remove(self, key: tuple[str, int]) -> None:
        self.states.pop(key, None)
        self._changed.set()

    async def close(self) -> None:
        """Stop fetching. The loop also checks a flag: Python 3.11's ``wait_for`` can swallow a
        cancellation that lands as its inner call completes, and the loop would run on."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, asyncio.TimeoutError, Exception):
                await asyncio.wait_for(self._task, 5)
        self.channel.close()

    # -- the loop ------------------------------------------------------------

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._closed:
            now = loop.time()
            ready = [s for s in self.states.values() if s.ready_at <= now]
            if not ready:
                self._changed.clear()
                wake = min((s.ready_at for s in self.states.values()), default=now + 1) - now
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), max(wake, 0.01))
                continue
            try:
                truncating = [s for s in ready if s.truncating]
                if truncating:
                    await self._truncate(truncating)
                else:
                    await self._fetch(ready)
            except ChannelError as e:
                _log.info("%s: %s; retrying in %d ms", self, e, self.settings.backoff_ms)
                self._hold(ready)
            except Exception:  # one bad answer must not end replication
                _log.exception("%s: a fetch round failed; retrying", self)
                self._hold(ready)

    def _hold(self, states: list[FetchState], early: bool = False) -> None:
        """Hold ``states`` back for ``replica.fetch.backoff.ms``. ``early``: the leader does not
        know yet that it leads (NOT_LEADER_OR_FOLLOWER, or an epoch it has not seen): the
        controller's word reaches it within milliseconds, so the first
        :data:`EARLY_RETRIES` retries come after :data:`EARLY_RETRY_S` (a failover's first
        acks=all acknowledgement waits for this follower)."""
        now = asyncio.get_running_loop().time()
        for state in states:
            if early and state.early_retries < EARLY_RETRIES:
                state.early_retries += 1
                state.ready_at = now + min(EARLY_RETRY_S, self.settings.backoff_ms / 1000)
            else:
                state.ready_at = now + self.settings.backoff_ms / 1000

    # -- truncation (KIP-101, KIP-279) -------------------------------------

    async def _truncate(self, states: list[FetchState]) -> None:
        loop = asyncio.get_running_loop()
        for _ in range(_TRUNCATION_ROUNDS):
            now = loop.time()
            asking = [s for s in states if s.truncating and s.ready_at <= now and self.states.get(s.key) is s]
            if not asking:
                return
            answers = await self._epoch_end_offsets(asking)
            for state in asking:
                self._truncate_one(state, *answers.get(state.key, (ErrorCode.unknown_server_error, -1, -1)))

    async def _epoch_end_offsets(
        self, states: list[FetchState]
    ) -> dict[tuple[str, int], tuple[ErrorCode, int, int]]:
        topics: dict[str, list[dict[str, Any]]] = {}
        for state in states:
            topics.setdefault(state.partition.topic, []).append(
                {
                    "partition": state.partition.index,
                    "current_leader_epoch": state.leader_epoch,
                    "leader_epoch": state.partition.log.latest_epoch,
                }
            )
        request = {
            "replica_id": self.manager.node_id,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        }
        response = await self.channel.request(
            OFFSET_FOR_LEADER_EPOCH, EPOCH_VERSION, request, self.settings.socket_timeout_ms / 1000
        )
        return {
            (topic.topic, p.partition): (p.error_code, p.leader_epoch, p.end_offset)
            for topic in response.topics
            for p in topic.partitions
        }

    def _truncate_one(self, state: FetchState, error: ErrorCode, epoch: int, end_offset: int) -> None:
        """Cut the log to where it agrees with the leader's (Kafka's ``getOffsetTruncationState``)."""
        if error != ErrorCode.none:
            _log.info("%s-%d: the leader answers %s to OffsetForLeaderEpoch; waiting", *state.key, error.name)
            self._hold([state], early=error in _NOT_YET_LEADER)
            return
        log = state.partition.log
        asked = log.latest_epoch
        if asked == UNDEFINED_EPOCH or epoch == UNDEFINED_EPOCH or end_offset < 0:
            # No epoch to compare: Kafka's fallback, the high watermark (a known-committed point).
            target, done = log.high_watermark, True
        elif epoch == asked:
            target, done = min(end_offset, log.log_end_offset), True
        else:
            # The leader has no entry for our epoch: it answered its largest epoch below ours.
            ours, our_end = log.end_offset_for_epoch(epoch)
            if ours == epoch:
                target, done = min(end_offset, our_end), True
            else:  # we lack that epoch too: cut to our end for it, and ask again
                target, done = min(our_end if ours >= 0 else log.high_watermark, log.log_end_offset), False
        if target < log.log_end_offset:
            removed = log.truncate_to(target)
            _log.info(
                "%s-%d: truncated to offset %d (%d bytes) after leader epoch %d",
                *state.key, target, removed, state.leader_epoch,
            )  # fmt: skip
        state.truncating = not done

    # -- fetching --------------------------------------------------------------

    async def _fetch(self, states: list[FetchState]) -> None:
        settings = self.settings
        topics: dict[str, list[dict[str, Any]]] = {}
        sent: dict[tuple[str, int], FetchState] = {}
        for state in states:
            log = state.partition.log
            sent[state.key] = state
            topics.setdefault(state.partition.topic, []).append(
                {
                    "partition": state.partition.index,
                    "current_leader_epoch": state.leader_epoch,
                    "fetch_offset": log.log_end_offset,
                    "last_fetched_epoch": -1,
                    "log_start_offset": log.log_start_offset,
                    "partition_max_bytes": settings.max_bytes,
                }
            )
        request = {
            "cluster_id": None,
            "replica_id": self.manager.node_id,
            "max_wait": settings.wait_max_ms,
            "min_bytes": settings.min_bytes,
            "max_bytes": settings.response_max_bytes,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        timeout = settings.socket_timeout_ms / 1000 + settings.wait_max_ms / 1000
        response = await self.channel.request(FETCH, FETCH_VERSION, request, timeout)
        for topic in response.responses:
            for data in topic.partitions:
                found = sent.get((topic.topic, data.partition_index))
                if found is not None and self.states.get(found.key) is found:
                    self._process(found, data)

    def _process(self, state: FetchState, data: Any) -> None:
        error = data.error_code
        log = state.partition.log
        if error == ErrorCode.none:
            records = data.records
            try:
                if records:
                    log.append_as_follower(records)
                    self.manager.appended(*state.key)
                self.manager.follower_high_watermark(
                    state.partition, data.high_watermark, data.log_start_offset
                )
            except (LogstoreError, OSError) as e:
                _log.error(
                    "%s-%d: appending what the leader sent failed: %s; truncating again", *state.key, e
                )
                state.truncating = True
                self._hold([state])
        elif error == ErrorCode.offset_out_of_range:
            self._out_of_range(state, data)
        else:
            if error not in (
                ErrorCode.not_leader_or_follower,
                ErrorCode.fenced_leader_epoch,
                ErrorCode.unknown_leader_epoch,
            ):
                _log.warning("%s-%d: the leader answers %s", *state.key, error.name)
            self._hold([state], early=error in _NOT_YET_LEADER)

    def _out_of_range(self, state: FetchState, data: Any) -> None:
        """Below the leader's log start: start over at it. Above its end: truncate again."""
        log = state.partition.log
        if log.log_end_offset < data.log_start_offset:
            log.truncate_fully_and_start_at(data.log_start_offset)
            _log.info(
                "%s-%d: behind the leader's log start; now starting at %d", *state.key, data.log_start_offset
            )
        else:
            state.truncating = True
