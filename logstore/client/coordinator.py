"""Group membership and committed offsets: Kafka's ``ConsumerCoordinator`` and its heartbeat thread.

The classic protocol (protocol type ``"consumer"``): FindCoordinator, then
JoinGroup (v4+: a first join is answered MEMBER_ID_REQUIRED with a member id,
and the member joins again with it), then SyncGroup; the leader runs the
assignor the coordinator chose over every member's subscription. Then
OffsetFetch for the assigned partitions, OffsetCommit, Heartbeat, LeaveGroup.

:class:`ConsumerCoordinator` is a state machine driven by :meth:`poll` on the
application's thread (as Kafka's is): JoinGroup and SyncGroup are futures
that poll() checks, so a poll never blocks on a rebalance past its timeout,
and the rebalance callbacks run on the application's thread. The states:

* UNJOINED: no generation; poll() prepares (EAGER: commit, then revoke every
  partition; COOPERATIVE: commit, revoke only unsubscribed topics' partitions)
  and sends JoinGroup;
* JOINING: JoinGroup in flight; the answer sends SyncGroup (the leader's
  with every member's assignment);
* SYNCING: SyncGroup in flight; the answer is the assignment: EAGER assigns
  it whole; COOPERATIVE revokes only what is no longer ours, assigns only
  what is new, and rejoins at once when it revoked anything;
* STABLE: the heartbeat thread heartbeats every ``heartbeat.interval.ms``.

The heartbeat thread (:class:`HeartbeatThread`) only reads and resets the
member's state, under the coordinator's lock, and wakes the application:
REBALANCE_IN_PROGRESS asks for a rejoin; UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION
reset the generation, and the partitions are *lost* (the next poll calls
``on_lost``, no commit); NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / no
answer within ``session.timeout.ms`` forget the coordinator, which is looked
up again. An application that does not poll within ``max.poll.interval.ms``
leaves the group (LeaveGroup, unless static: ``group.instance.id``), as
Kafka's heartbeat thread does; its next poll sees the partitions lost and
rejoins.

Requests to the coordinator go over their own connection
(:func:`~logstore.client.cluster.coordinator_link`), as Kafka's do.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any, Protocol

from logstore.client import assignors
from logstore.client.cluster import Cluster, coordinator_link
from logstore.client.config import ClientConfig, ConfigError
from logstore.client.consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from logstore.client.errors import KafkaError, KafkaException, local
from logstore.client.subscription import SubscriptionState, TopicPartitionKey
from logstore.client.types import TopicPartition

_log = logging.getLogger("logstore.client.consumer")

OFFSET_COMMIT = 8
OFFSET_FETCH = 9
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
PROTOCOL_TYPE = "consumer"

E = KafkaError
_NOT_COORDINATOR = {E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE}  # type: ignore[attr-defined]
_RETRY = {E.COORDINATOR_LOAD_IN_PROGRESS, E.REQUEST_TIMED_OUT, E.UNSTABLE_OFFSET_COMMIT,  # type: ignore[attr-defined]
          E._TRANSPORT, E._TIMED_OUT}  # type: ignore[attr-defined]  # fmt: skip
_FATAL = {E.FENCED_INSTANCE_ID, E.GROUP_AUTHORIZATION_FAILED, E.INVALID_GROUP_ID}  # type: ignore[attr-defined]


class MemberState(enum.Enum):
    UNJOINED = "unjoined"
    JOINING = "joining"
    SYNCING = "syncing"
    STABLE = "stable"


class RebalanceListener(Protocol):
    """What the coordinator tells the consumer (on the application's thread)."""

    def partitions_revoked(self, keys: list[TopicPartitionKey]) -> None: ...

    def partitions_assigned(self, keys: list[TopicPartitionKey]) -> None: ...

    def partitions_lost(self, keys: list[TopicPartitionKey]) -> None: ...

    def commit_before_rebalance(self) -> None: ...


class ConsumerCoordinator:
    """Membership of one consumer group, and its commits (see the module's docstring)."""

    def __init__(
        self,
        cluster: Cluster,
        config: ClientConfig,
        subscriptions: SubscriptionState,
        listener: RebalanceListener,
        wake: Callable[[], None],
    ) -> None:
        self.cluster = cluster
        self.config = config
        self.subscriptions = subscriptions
        self.listener = listener
        self.wake = wake
        self.group_id: str = config["group.id"]
        self.instance_id: str | None = config["group.instance.id"] or None
        self.session_timeout_ms = int(config["session.timeout.ms"])
        self.rebalance_timeout_ms = int(config["max.poll.interval.ms"])
        self.heartbeat_s = config.seconds("heartbeat.interval.ms")
        self.request_timeout_s = config.seconds("request.timeout.ms")
        self.backoff_s = config.seconds("retry.backoff.ms")
        self.backoff_max_s = config.seconds("retry.backoff.max.ms")
        self.rack = config["client.rack"] or None
        if self.heartbeat_s * 1000 >= self.session_timeout_ms:
            raise ConfigError(
                f"heartbeat.interval.ms={config['heartbeat.interval.ms']} must be below session.timeout.ms="
                f"{self.session_timeout_ms} (Kafka advises a third of it)"
            )
        names = [s.strip() for s in str(config["partition.assignment.strategy"]).split(",") if s.strip()]
        if not names:
            raise ConfigError("partition.assignment.strategy names no assignor")
        try:
            self.assignors = [assignors.get_assignor(n) for n in names]
        except ValueError as e:
            raise ConfigError(f"partition.assignment.strategy: {e}") from None
        # Kafka's rule: cooperative only when every configured assignor supports it.
        cooperative = all(a.protocol == "COOPERATIVE" for a in self.assignors)
        self.protocol = "COOPERATIVE" if cooperative else "EAGER"
        self._lock = threading.RLock()
        self.member_id = ""
        self.generation = -1
        self.protocol_name: str | None = None
        self.leader_id = ""
        self.state = MemberState.UNJOINED
        self.rejoin_reason: str | None = "first join"
        self.lost_reason: str | None = None
        self.poll_expired = False
        self.fatal: KafkaError | None = None
        self.errors: list[KafkaError] = []  # for the application, as error messages
        self.node: int | None = None
        self.last_poll = time.monotonic()
        self._prepared = False
        self._join: Future[Any] | None = None
        self._sync: Future[Any] | None = None
        self._retry_at = 0.0
        self._last_assignment: list[TopicPartitionKey] | None = None
        self._last_generation = -1
        self.leader_topics: dict[str, int] = {}  # what the leader assigned from (partition counts)
        self.leader_topics_subscribed: list[str] = []  # every topic a member subscribed to, at that time
        self._heartbeat: HeartbeatThread | None = None
        self._closed = False

    # -- the coordinator node --------------------------------------------------

    def coordinator(self, timeout: float | None = None) -> int:
        """The coordinator's connection id (FindCoordinator when unknown); KafkaException if none answers."""
        with self._lock:
            node = self.node
        if node is not None:
            return node
        found = self.cluster.coordinator(self.group_id, refresh=True)
        with self._lock:
            self.node = coordinator_link(found)
            return self.node

    def coordinator_dead(self, why: str) -> None:
        with self._lock:
            if self.node is not None:
                _log.info("group %s: coordinator unavailable (%s); looking it up again", self.group_id, why)
            self.node = None
        self.cluster.forget_coordinator(self.group_id)

    # -- the application's step ------------------------------------------------

    def poll(self) -> None:
        """One step of membership on the application's thread; never waits on a rebalance."""
        now = time.monotonic()
        with self._lock:
            self.last_poll = now
            expired, self.poll_expired = self.poll_expired, False
            lost, self.lost_reason = self.lost_reason, None
        if expired:
            self.errors.append(local("_MAX_POLL_EXCEEDED",
                                     "the application did not call poll within max.poll.interval.ms="
                                     f"{self.rebalance_timeout_ms}; it left the group and rejoins"))  # fmt: skip
        if lost is not None:
            owned = self.subscriptions.owned()
            if owned:
                self.listener.partitions_lost(owned)
        if self.fatal is not None or not self.subscriptions.subscribed:
            return
        if self._join is not None:
            if not self._join.done():
                return
            future, self._join = self._join, None
            self._on_join(future)
        if self._sync is not None:
            if not self._sync.done():
                return
            future, self._sync = self._sync, None
            self._on_sync(future)
        if self._join is not None or self._sync is not None:
            return
        with self._lock:
            need = self.rejoin_reason is not None and self.state in (MemberState.UNJOINED, MemberState.STABLE)
        if not need or time.monotonic() < self._retry_at:
            return
        try:
            self.coordinator()
        except KafkaException as e:
            self._retry(f"FindCoordinator: {e.error.str()}", e.error)
            return
        if not self._prepared:
            self._prepare()
            self._prepared = True
        self._send_join()

    def request_rejoin(self, reason: str) -> None:
        with self._lock:
            if self.rejoin_reason is None:
                self.rejoin_reason = reason
        self.wake()

    def _retry(self, why: str, error: KafkaError | None = None, backoff: float | None = None) -> None:
        _log.info("group %s: %s; retrying", self.group_id, why)
        self._retry_at = time.monotonic() + (self.backoff_s if backoff is None else backoff)
        with self._lock:
            self.state = MemberState.UNJOINED
            if self.rejoin_reason is None:
                self.rejoin_reason = why
        if error is not None and error.code() not in _RETRY and error.code() not in _NOT_COORDINATOR:
            self.errors.append(error)

    def _prepare(self) -> None:
        """Before a (re)join: commit, then revoke as the protocol says (Kafka's ``onJoinPrepare``)."""
        owned = self.subscriptions.owned()
        if not owned:
            return
        self.listener.commit_before_rebalance()
        if self.protocol == "EAGER":
            self.listener.partitions_revoked(owned)
        else:
            topics = set(self.subscriptions.subscribed_topics())
            gone = [k for k in owned if k[0] not in topics]
            if gone:
                self.listener.partitions_revoked(gone)

    def _send_join(self) -> None:
        topics = self.subscriptions.subscribed_topics()
        owned = sorted(self.subscriptions.owned())
        with self._lock:
            generation = self.generation
            member_id = self.member_id
            reason = self.rejoin_reason
            self.state = MemberState.JOINING
        protocols = []
        for assignor in self.assignors:
            user_data = assignor.user_data(self._last_assignment, self._last_generation)
            sub = Subscription(topics, user_data, owned, generation, self.rack)
            protocols.append({"name": assignor.name, "metadata": encode_subscription(sub, 3)})
        fields = {
            "group_id": self.group_id,
            "session_timeout": self.session_timeout_ms,
            "rebalance_timeout": self.rebalance_timeout_ms,
            "member_id": member_id,
            "group_instance_id": self.instance_id,
            "protocol_type": PROTOCOL_TYPE,
            "protocols": protocols,
            "reason": reason,
        }
        assert self.node is not None
        timeout = max(self.request_timeout_s, self.rebalance_timeout_ms / 1000 + 5)
        self._join = self.cluster.send(self.node, JOIN_GROUP, fields, timeout=timeout)
        self._join.add_done_callback(lambda _f: self.wake())

    def _on_join(self, future: Future[Any]) -> None:
        try:
            response = future.result()
        except KafkaException as e:
            self.coordinator_dead(f"JoinGroup: {e.error.str()}")
            self._retry("JoinGroup failed", e.error)
            return
        code = int(response.error_code)
        if code == 0:
            with self._lock:
                self.member_id = response.member_id
                self.generation = int(response.generation_id)
                self.protocol_name = response.protocol_name
                self.leader_id = response.leader
                self.state = MemberState.SYNCING
            assignments: list[dict[str, Any]] = []
            if response.leader == response.member_id and not getattr(response, "skip_assignment", False):
                try:
                    assignments = self._assign(response.protocol_name, response.members)
                except (ConsumerProtocolError, ValueError, KafkaException) as e:
                    self._retry(f"the assignment failed: {e}", local("_FAIL", f"group {self.group_id}: {e}"))
                    return
            self._send_sync(assignments)
            return
        if code == E.MEMBER_ID_REQUIRED:  # type: ignore[attr-defined]
            with self._lock:
                self.member_id = response.member_id
            self._send_join()
            return
        if code == E.UNKNOWN_MEMBER_ID:  # type: ignore[attr-defined]
            self._reset(member=True)
            self._send_join()
            return
        if code == E.ILLEGAL_GENERATION:  # type: ignore[attr-defined]
            self._reset(member=False)
            self._send_join()
            return
        if code in _NOT_COORDINATOR:
            self.coordinator_dead("JoinGroup answered " + KafkaError(code).name())
            self._retry("JoinGroup: coordinator moved")
            return
        if code in (E.REBALANCE_IN_PROGRESS, E.COORDINATOR_LOAD_IN_PROGRESS):  # type: ignore[attr-defined]
            self._retry("JoinGroup: " + KafkaError(code).name())
            return
        error = KafkaError(code, f"JoinGroup of group {self.group_id} failed: {KafkaError(code).name()}",
                           fatal=code in _FATAL)  # fmt: skip
        if code in _FATAL:
            self._fail(error)
            return
        self._retry(error.str(), error, backoff=self.backoff_max_s)

    def _assign(self, protocol: str, members: Iterable[Any]) -> list[dict[str, Any]]:
        """The leader's work: every member's partitions, by the assignor the coordinator chose."""
        group = [
            assignors.Member(m.member_id, decode_subscription(m.metadata), m.group_instance_id or None)
            for m in members
        ]
        topics = sorted({t for m in group for t in m.subscription.topics})
        counts: dict[str, int] = {}
        if topics:
            self.cluster.refresh(topics, auto_create=False)
            for topic in topics:
                meta = self.cluster.topic(topic, refresh=False)
                if meta is not None and meta.partitions:
                    counts[topic] = len(meta.partitions)
        self.leader_topics = counts
        self.leader_topics_subscribed = topics
        result = assignors.assign(protocol, group, counts)
        _log.info("group %s: leader assigned %s", self.group_id, {m: len(ps) for m, ps in result.items()})
        return [{"member_id": m, "assignment": encode_assignment(Assignment(ps))} for m, ps in result.items()]

    def _send_sync(self, assignments: list[dict[str, Any]]) -> None:
        with self._lock:
            fields = {
                "group_id": self.group_id,
                "generation_id": self.generation,
                "member_id": self.member_id,
                "group_instance_id": self.instance_id,
                "protocol_type": PROTOCOL_TYPE,
                "protocol_name": self.protocol_name,
                "assignments": assignments,
            }
            node = self.node
        assert node is not None
        timeout = max(self.request_timeout_s, self.rebalance_timeout_ms / 1000 + 5)
        self._sync = self.cluster.send(node, SYNC_GROUP, fields, timeout=timeout)
        self._sync.add_done_callback(lambda _f: self.wake())

    def _on_sync(self, future: Future[Any]) -> None:
        try:
            response = future.result()
        except KafkaException as e:
            self.coordinator_dead(f"SyncGroup: {e.error.str()}")
            self._retry("SyncGroup failed", e.error)
            return
        code = int(response.error_code)
        if code == 0:
            try:
                assignment = decode_assignment(response.assignment)
            except ConsumerProtocolError as e:
                self._retry(f"undecodable assignment: {e}", local("_BAD_MSG", str(e)))
                return
            self._complete(list(assignment.partitions))
            return
        if code == E.REBALANCE_IN_PROGRESS:  # type: ignore[attr-defined]
            self._retry("SyncGroup: the group is rebalancing again", backoff=0)
        elif code in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION):  # type: ignore[attr-defined]
            self._reset(member=code == E.UNKNOWN_MEMBER_ID)  # type: ignore[attr-defined]
            self._retry("SyncGroup: " + KafkaError(code).name(), backoff=0)
        elif code in _NOT_COORDINATOR:
            self.coordinator_dead("SyncGroup answered " + KafkaError(code).name())
            self._retry("SyncGroup: coordinator moved")
        elif code in _FATAL:
            self._fail(
                KafkaError(code, f"SyncGroup of group {self.group_id}: {KafkaError(code).name()}", fatal=True)
            )
        else:
            error = KafkaError(code, f"SyncGroup of group {self.group_id} failed: {KafkaError(code).name()}")
            self._retry(error.str(), error, backoff=self.backoff_max_s)

    def _complete(self, partitions: list[TopicPartitionKey]) -> None:
        """The new assignment: hand it to the consumer as the protocol says (Kafka's ``onJoinComplete``)."""
        assigned = sorted(set(partitions))
        owned = set(self.subscriptions.owned())
        with self._lock:
            self.state = MemberState.STABLE
            self.rejoin_reason = None
            generation = self.generation
        self._prepared = False
        self._last_assignment = assigned
        self._last_generation = generation
        self._start_heartbeat()
        if self.protocol == "COOPERATIVE":
            revoked = sorted(owned - set(assigned))
            added = [k for k in assigned if k not in owned]
        else:  # an eager member owns nothing here (it revoked before joining)
            revoked, added = sorted(owned), assigned
        # An application callback that raises still leaves the assignment whole (the error reaches poll()).
        try:
            if revoked:
                self.listener.partitions_revoked(revoked)
        finally:
            try:
                self.listener.partitions_assigned(added)
            finally:
                if revoked and self.protocol == "COOPERATIVE":
                    self.request_rejoin("partitions were revoked in a cooperative rebalance")

    def _reset(self, *, member: bool) -> None:
        """Forget the generation (and the member id); owned partitions are then lost."""
        with self._lock:
            self.generation = -1
            if member:
                self.member_id = ""
            self.state = MemberState.UNJOINED
            if self.rejoin_reason is None:
                self.rejoin_reason = "generation reset"
        if self.subscriptions.owned():
            owned = self.subscriptions.owned()
            self.listener.partitions_lost(owned)

    def _fail(self, error: KafkaError) -> None:
        _log.error("group %s: %s", self.group_id, error.str())
        self.fatal = error
        self.errors.append(error)
        with self._lock:
            self.state = MemberState.UNJOINED

    # -- the heartbeat thread's side -------------------------------------------

    def _start_heartbeat(self) -> None:
        if self._heartbeat is None and not self._closed:
            self._heartbeat = HeartbeatThread(self)
            self._heartbeat.start()
        elif self._heartbeat is not None:
            self._heartbeat.joined()

    def generation_and_member(self) -> tuple[int, str]:
        """The current generation (-1: none) and member id, read together."""
        with self._lock:
            return self.generation, self.member_id

    def heartbeat_snapshot(self) -> tuple[MemberState, int, str, float]:
        with self._lock:
            return self.state, self.generation, self.member_id, self.last_poll

    def on_heartbeat_error(self, code: int, generation: int) -> None:
        """Called by the heartbeat thread with an error answered for ``generation``."""
        with self._lock:
            if generation != self.generation or self.state != MemberState.STABLE:
                return  # an answer about a generation we already left
            if code == E.REBALANCE_IN_PROGRESS:  # type: ignore[attr-defined]
                if self.rejoin_reason is None:
                    self.rejoin_reason = "the group is rebalancing"
            elif code in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION, E.FENCED_INSTANCE_ID):  # type: ignore[attr-defined]
                self.generation = -1
                if code != E.ILLEGAL_GENERATION:  # type: ignore[attr-defined]
                    self.member_id = ""
                self.state = MemberState.UNJOINED
                self.rejoin_reason = f"heartbeat: {KafkaError(code).name()}"
                self.lost_reason = self.rejoin_reason
                if code == E.FENCED_INSTANCE_ID:  # type: ignore[attr-defined]
                    self.fatal = KafkaError(code, f"group {self.group_id}: another member took group.instance.id="
                                                  f"{self.instance_id}", fatal=True)  # fmt: skip
                    self.errors.append(self.fatal)
        self.wake()

    def on_poll_timeout(self) -> None:
        """``max.poll.interval.ms`` passed without a poll: leave (dynamic members), as Kafka's consumer does."""
        with self._lock:
            if self.state != MemberState.STABLE:
                return
            member_id, node = self.member_id, self.node
            self.generation = -1
            self.member_id = ""
            self.state = MemberState.UNJOINED
            self.rejoin_reason = self.lost_reason = "max.poll.interval.ms expired"
            self.poll_expired = True
        _log.warning("group %s: no poll within max.poll.interval.ms=%d; leaving the group",
                     self.group_id, self.rebalance_timeout_ms)  # fmt: skip
        if self.instance_id is None and node is not None and member_id:
            self.cluster.send(
                node, LEAVE_GROUP, self._leave_fields(member_id, "consumer poll timeout has expired")
            )
        self.wake()

    def _leave_fields(self, member_id: str, reason: str) -> dict[str, Any]:
        return {
            "group_id": self.group_id,
            "member_id": member_id,
            "members": [{"member_id": member_id, "group_instance_id": self.instance_id, "reason": reason}],
        }

    # -- leaving ---------------------------------------------------------------

    def leave(self, reason: str, timeout: float) -> None:
        """LeaveGroup (dynamic members only; static ones keep their place until the session times out)."""
        with self._lock:
            member_id, node = self.member_id, self.node
            joined = self.state != MemberState.UNJOINED or self._join is not None or self._sync is not None
            self.generation = -1
            self.member_id = ""
            self.state = MemberState.UNJOINED
            self.rejoin_reason = "left the group"
        self._join = self._sync = None
        self._prepared = False
        if self.instance_id is not None or not member_id or node is None or not joined:
            return
        try:
            response = self.cluster.request(
                node, LEAVE_GROUP, self._leave_fields(member_id, reason), timeout=timeout
            )
        except KafkaException as e:
            _log.info("group %s: LeaveGroup failed: %s", self.group_id, e)
            return
        if response.error_code:
            _log.info(
                "group %s: LeaveGroup answered %s", self.group_id, KafkaError(int(response.error_code)).name()
            )

    def close(self, timeout: float) -> None:
        self._closed = True
        heartbeat, self._heartbeat = self._heartbeat, None
        if heartbeat is not None:
            heartbeat.stop()
        if self.subscriptions.subscribed:
            self.leave("the consumer is closing", timeout)

    # -- offsets -----------------------------------------------------------------

    def _commit_fields(self, offsets: dict[TopicPartitionKey, tuple[int, str | None]]) -> dict[str, Any]:
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), (offset, metadata) in sorted(offsets.items()):
            topics.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "committed_offset": offset,
                    "committed_leader_epoch": -1,
                    "committed_metadata": metadata if metadata is not None else "",
                }
            )
        with self._lock:
            in_group = self.subscriptions.subscribed
            generation = self.generation if in_group else -1
            member_id = self.member_id if in_group else ""
        return {
            "group_id": self.group_id,
            "generation_id_or_member_epoch": generation,
            "member_id": member_id,
            "group_instance_id": self.instance_id if in_group else None,
            "retention_time": -1,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }

    def commit_async(
        self, offsets: dict[TopicPartitionKey, tuple[int, str | None]]
    ) -> Future[list[TopicPartition]]:
        """Send an OffsetCommit; the future settles with each partition and its error (None: committed)."""
        result: Future[list[TopicPartition]] = Future()
        try:
            node = self.coordinator()
        except KafkaException as e:
            result.set_result(self._failed(offsets, e.error))
            return result
        sent = self.cluster.send(node, OFFSET_COMMIT, self._commit_fields(offsets))

        def settle(done: Future[Any]) -> None:
            try:
                response = done.result()
            except KafkaException as e:
                self.coordinator_dead(f"OffsetCommit: {e.error.str()}")
                result.set_result(self._failed(offsets, e.error))
                return
            out = []
            for topic in response.topics:
                for p in topic.partitions:
                    key = (topic.name, int(p.partition_index))
                    tp = TopicPartition(key[0], key[1], offsets.get(key, (-1, None))[0])
                    code = int(p.error_code)
                    if code:
                        tp.error = KafkaError(code, f"commit {key[0]} [{key[1]}]: {KafkaError(code).name()}")
                        if code in _NOT_COORDINATOR:
                            self.coordinator_dead("OffsetCommit answered " + KafkaError(code).name())
                    out.append(tp)
            result.set_result(out)

        sent.add_done_callback(settle)
        return result

    @staticmethod
    def _failed(
        offsets: dict[TopicPartitionKey, tuple[int, str | None]], error: KafkaError
    ) -> list[TopicPartition]:
        out = []
        for (topic, partition), (offset, _) in sorted(offsets.items()):
            tp = TopicPartition(topic, partition, offset)
            tp.error = error
            out.append(tp)
        return out

    def commit_sync(
        self, offsets: dict[TopicPartitionKey, tuple[int, str | None]], timeout: float
    ) -> list[TopicPartition]:
        """Commit and wait; retriable errors (coordinator moved or loading) are retried until ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            future = self.commit_async(offsets)
            try:
                result = future.result(max(deadline - time.monotonic(), 0.001))
            except TimeoutError:
                raise KafkaException(
                    local("_TIMED_OUT", f"OffsetCommit: no answer within {timeout:.1f} s")
                ) from None
            retry = [
                tp
                for tp in result
                if tp.error is not None and (tp.error.code() in _RETRY or tp.error.code() in _NOT_COORDINATOR)
            ]
            if not retry or time.monotonic() + self.backoff_s >= deadline:
                return result
            time.sleep(self.backoff_s)

    def offset_fetch_async(self, keys: list[TopicPartitionKey], timeout: float | None = None) -> Future[Any]:
        node = self.coordinator()
        topics: dict[str, list[int]] = {}
        for topic, partition in keys:
            topics.setdefault(topic, []).append(partition)
        listed = [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]
        fields = {
            "group_id": self.group_id,
            "topics": listed,
            "groups": [{"group_id": self.group_id, "topics": listed}],
            "require_stable": self.config["isolation.level"] == "read_committed",
        }
        return self.cluster.send(node, OFFSET_FETCH, fields)

    def offset_fetch_result(
        self, future: Future[Any]
    ) -> dict[TopicPartitionKey, tuple[int, str | None, int]]:
        """Each partition's (committed offset or -1, metadata, error code) from a settled OffsetFetch.

        A group-level error (coordinator moved or loading) raises KafkaException.
        """
        response = future.result(0)
        body = response.groups[0] if getattr(response, "groups", None) else response
        code = int(getattr(body, "error_code", 0) or 0)
        if code:
            if code in _NOT_COORDINATOR:
                self.coordinator_dead("OffsetFetch answered " + KafkaError(code).name())
            raise KafkaException(
                KafkaError(code, f"OffsetFetch of group {self.group_id}: {KafkaError(code).name()}")
            )
        out = {}
        for topic in body.topics:
            for p in topic.partitions:
                out[(topic.name, int(p.partition_index))] = (
                    int(p.committed_offset),
                    p.metadata,
                    int(p.error_code),
                )
        return out

    def fetch_committed(
        self, keys: list[TopicPartitionKey], timeout: float
    ) -> dict[TopicPartitionKey, tuple[int, str | None, int]]:
        """OffsetFetch and wait, retrying while the coordinator moves or loads, up to ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                future = self.offset_fetch_async(keys)
                future.result(max(deadline - time.monotonic(), 0.001))
                return self.offset_fetch_result(future)
            except TimeoutError:
                raise KafkaException(
                    local("_TIMED_OUT", f"OffsetFetch: no answer within {timeout:.1f} s")
                ) from None
            except KafkaException as e:
                code = e.error.code()
                if code in _NOT_COORDINATOR or code in _TRANSPORT_LIKE:
                    self.coordinator_dead(f"OffsetFetch: {e.error.str()}")
                if (
                    not (code in _RETRY or code in _NOT_COORDINATOR)
                    or time.monotonic() + self.backoff_s >= deadline
                ):
                    raise
                time.sleep(self.backoff_s)


_TRANSPORT_LIKE = {E._TRANSPORT, E._TIMED_OUT, E._ALL_BROKERS_DOWN}  # type: ignore[attr-defined]


class HeartbeatThread(threading.Thread):
    """Heartbeats every ``heartbeat.interval.ms`` while the member is STABLE; checks ``max.poll.interval.ms``.

    It only reads the coordinator's state and reports errors to it (under its lock); it never
    calls the application. A heartbeat not answered successfully within ``session.timeout.ms``
    makes it forget the coordinator (looked up again on the next beat).
    """

    def __init__(self, coordinator: ConsumerCoordinator) -> None:
        super().__init__(name=f"logstore-heartbeat-{coordinator.group_id}", daemon=True)
        self.coordinator = coordinator
        self._stop_event = threading.Event()
        self._next = time.monotonic() + coordinator.heartbeat_s
        self._last_ok = time.monotonic()

    def joined(self) -> None:
        """A new generation: the first beat is due an interval from now."""
        self._next = time.monotonic() + self.coordinator.heartbeat_s
        self._last_ok = time.monotonic()

    def stop(self) -> None:
        self._stop_event.set()
        if threading.current_thread() is not self:
            self.join(5)

    def run(self) -> None:
        c = self.coordinator
        max_poll_s = c.rebalance_timeout_ms / 1000
        session_s = c.session_timeout_ms / 1000
        while not self._stop_event.is_set():
            now = time.monotonic()
            state, generation, member_id, last_poll = c.heartbeat_snapshot()
            if state != MemberState.STABLE or generation < 0:
                self._last_ok = now
                self._next = now + c.heartbeat_s
                self._stop_event.wait(min(c.heartbeat_s, 0.1))
                continue
            if now - last_poll > max_poll_s:
                c.on_poll_timeout()
                continue
            if now < self._next:
                self._stop_event.wait(min(self._next - now, max(last_poll + max_poll_s - now, 0.01)))
                continue
            self._next = now + c.heartbeat_s
            self._beat(generation, member_id, session_s)

    def _beat(self, generation: int, member_id: str, session_s: float) -> None:
        c = self.coordinator
        try:
            node = c.coordinator()
            fields = {"group_id": c.group_id, "generation_id": generation, "member_id": member_id,
                      "group_instance_id": c.instance_id}  # fmt: skip
            timeout = max(min(c.request_timeout_s, session_s), c.heartbeat_s)
            response = c.cluster.request(node, HEARTBEAT, fields, timeout=timeout)
        except KafkaException as e:
            c.coordinator_dead(f"heartbeat: {e.error.str()}")
            self._next = time.monotonic() + c.backoff_s
            self._check_session(session_s)
            return
        code = int(response.error_code)
        if code == 0:
            self._last_ok = time.monotonic()
            return
        if code in _NOT_COORDINATOR:
            c.coordinator_dead("heartbeat answered " + KafkaError(code).name())
            self._next = time.monotonic() + c.backoff_s
            self._check_session(session_s)
            return
        if code == E.REBALANCE_IN_PROGRESS:  # type: ignore[attr-defined]
            self._last_ok = time.monotonic()  # the coordinator counts a beat during a rebalance
        c.on_heartbeat_error(code, generation)

    def _check_session(self, session_s: float) -> None:
        if time.monotonic() - self._last_ok > session_s:
            _log.warning(
                "group %s: no heartbeat answered within session.timeout.ms", self.coordinator.group_id
            )
            self._last_ok = time.monotonic()


__all__ = ["ConsumerCoordinator", "HeartbeatThread", "MemberState", "RebalanceListener"]
