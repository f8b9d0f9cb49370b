"""The cluster controller over ZooKeeper (Kafka's ``KafkaController``, ZooKeeper mode).

Every broker runs one; the broker that creates the ephemeral ``/controller``
first is the active controller, with the epoch it bumped in
``/controller_epoch`` (one transaction, :meth:`KafkaZkClient.try_become_controller`).
The active controller:

- creates topics: assigns replicas over the live brokers (rack-aware,
  :mod:`~logstore.cluster.assignment`), writes the assignment, then each
  partition's first state (leader: the first live replica; ISR: the live
  replicas; leader epoch 0);
- reacts to brokers leaving (their ``/brokers/ids`` znode gone): every
  partition they led gets a new leader from its ISR
  (:func:`~logstore.cluster.election.offline_partition_leader`, unclean
  election only with ``unclean.leader.election.enable``), with its leader
  epoch bumped; the replicas they held leave every ISR;
- moves leaderships off a broker in controlled shutdown;
- treats a replica in a broker's failed log dir (``/admin/offline_log_dirs``,
  :meth:`KafkaZkClient.report_offline_log_dir`) as it treats a replica on a
  broker that left: it leaves the ISR, a partition it led gets a new leader
  (Kafka's offline-replica handling, ``onReplicasBecomeOffline``);
- changes ISRs when leaders ask (AlterPartition, :meth:`alter_partition`):
  the leader at its epoch, the partition epoch (the state znode's version)
  current, the new ISR live replicas with the leader in it.

Fencing: every partition-state write is one ZooKeeper transaction that checks
``/controller_epoch`` is still at the version this controller made it (as
Kafka does since KAFKA-6082), and is conditional on the state znode's
version the controller read; it carries the controller epoch. A controller
that was replaced (a zombie: paused past its session, a new one elected)
writes nothing and stands down (:class:`ControllerMovedError`); a state that
moved on is read again.

How brokers learn of changes: they watch the znodes (topics, partition states,
``/brokers/ids``) rather than receiving LeaderAndIsr and UpdateMetadata
requests; each state znode carries the leader epoch and controller epoch
Kafka's requests would carry.

Not thread-safe: the broker calls it from one thread (kazoo's watch thread).
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import NoReturn

from kazoo.exceptions import KazooException, NodeExistsError
from kio.schema.errors import ErrorCode

from logstore.broker.cluster_member import PREFERRED, NotControllerError
from logstore.cluster.assignment import assign_replicas
from logstore.cluster.election import (
    controlled_shutdown_leader,
    offline_partition_leader,
    preferred_replica_leader,
)
from logstore.cluster.zk import FencedControllerError, KafkaZkClient, LeaderAndIsr, TopicAssignment, ZkError
from logstore.errors import TopicExistsError, UnknownTopicError

_log = logging.getLogger("logstore.cluster")

NO_LEADER = -1


def _invalid_target(target: tuple[int, ...], live: Collection[int]) -> str | None:
    """Why a reassignment's target replicas are refused (Kafka's messages), or None."""
    if not target:
        return "Empty replica list specified in partition reassignment."
    if len(set(target)) != len(target):
        return f"Duplicate replica ids in partition reassignment replica list: {list(target)}"
    if any(b < 0 for b in target):
        return f"Invalid broker id in replica list: {list(target)}"
    if any(b not in live for b in target):
        return (
            f"Replica assignment has brokers that are not alive. Replica list: {list(target)}, "
            f"live broker list: {sorted(live)}"
        )
    return None


class ControllerMovedError(ZkError, NotControllerError):
    """Another broker became controller with a higher epoch: this one must stand down."""


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """What one pass of elections did: partitions with a new state, and those left without a leader."""

    changed: dict[tuple[str, int], LeaderAndIsr]
    leaderless: list[tuple[str, int]]


class ZkController:
    """This broker's controller: idle until :meth:`elect` wins (see the module doc)."""

    def __init__(self, zk: KafkaZkClient, broker_id: int, *, unclean_leader_election: bool = False) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.unclean_leader_election = unclean_leader_election
        self.epoch: int | None = None  # set while this broker is the active controller
        self.epoch_version = -1  # /controller_epoch's znode version when this broker won it
        self.shutting_down: set[int] = set()  # brokers in controlled shutdown: never added to an ISR

    @property
    def active(self) -> bool:
        return self.epoch is not None

    def elect(self) -> bool:
        """Try to become the controller; True if this broker is it now (with a fresh epoch)."""
        if self.active and self.zk.controller_id() == self.broker_id:
            return True
        won = self.zk.try_become_controller(self.broker_id)
        self.epoch, self.epoch_version = won if won is not None else (None, -1)
        if self.epoch is not None:
            _log.info("broker %d is the controller, epoch %d", self.broker_id, self.epoch)
        return self.epoch is not None

    def resign(self) -> None:
        """Stop acting as controller (and free ``/controller`` if this broker holds it)."""
        if self.active:
            self.zk.resign_controller(self.broker_id)
        self.epoch = None

    def session_lost(self) -> None:
        """The ZooKeeper session expired: ``/controller`` went with it, and so did this controllership."""
        if self.epoch is not None:
            _log.warning(
                "broker %d stops being the controller (epoch %d): its session expired",
                self.broker_id,
                self.epoch,
            )
        self.epoch, self.epoch_version = None, -1

    def _check_active(self) -> int:
        if self.epoch is None:
            raise ControllerMovedError(f"broker {self.broker_id} is not the controller")
        return self.epoch

    # -- topics --------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        config: Mapping[str, str] | None = None,
        *,
        assignment: Mapping[int, list[int]] | None = None,
        topic_id: uuid.UUID | None = None,
    ) -> TopicAssignment:
        """Assign, write and elect the first leaders of a new topic; TopicExistsError if it exists.

        ``assignment``: replicas chosen by the caller (CreateTopics' manual
        assignment), else Kafka's rack-aware assignment over the live brokers.
        """
        epoch = self._check_active()
        live = self.zk.live_brokers()
        if assignment is None:
            racks = {b: reg.rack for b, reg in live.items()}
            assignment = assign_replicas(racks, partitions, replication_factor)
        made = TopicAssignment(topic_id or uuid.uuid4(), {p: tuple(r) for p, r in assignment.items()})
        try:
            self.zk.create_topic(name, made, dict(config or {}))
        except NodeExistsError:
            raise TopicExistsError(f"topic {name!r} already exists") from None
        for partition, replicas in sorted(made.partitions.items()):
            self._init_partition(name, partition, replicas, live, epoch)
        return made

    def _init_partition(
        self, topic: str, partition: int, replicas: tuple[int, ...], live: Collection[int], epoch: int
    ) -> LeaderAndIsr:
        isr = tuple(b for b in replicas if b in live)
        leader = isr[0] if isr else NO_LEADER
        state = LeaderAndIsr(leader, 0, isr or (), epoch)
        try:
            return self.zk.create_partition_state(topic, partition, state, self._fence())
        except NodeExistsError:  # a controller before this one got this far
            found = self.zk.partition_state(topic, partition)
            assert found is not None
            return found

    def add_partitions(self, name: str, total: int, replication_factor: int | None = None) -> TopicAssignment:
        """Grow ``name`` to ``total`` partitions, new replicas continuing Kafka's assignment."""
        epoch = self._check_active()
        current = self.zk.topic_assignment(name)
        if current is None:
            raise UnknownTopicError(f"unknown topic {name!r}")
        count = len(current.partitions)
        factor = replication_factor or len(current.partitions[0])
        live = self.zk.live_brokers()
        extra = assign_replicas(
            {b: reg.rack for b, reg in live.items()}, total - count, factor, start_partition=count
        )
        grown = dataclasses.replace(
            current, partitions={**current.partitions, **{p: tuple(r) for p, r in extra.items()}}
        )
        self.zk.set_topic_assignment(name, grown)
        for partition in range(count, total):
            self._init_partition(name, partition, grown.partitions[partition], live, epoch)
        return grown

    # -- brokers leaving -----------------------------------------------------

    def on_brokers_changed(self, shutting_down: Collection[int] | None = None) -> ElectionResult:
        """Elect new leaders where the leader is gone (or shutting down), and take dead (or
        shutting-down) replicas out of every ISR. One pass over every partition: O(P x R) reads;
        the writes are sent together (:meth:`KafkaZkClient.update_partition_states`), and one
        whose state moved on meanwhile is decided again on its own.
        ``shutting_down``: the brokers in controlled shutdown (default: those last given)."""
        epoch = self._check_active()
        brokers = set(self.zk.live_brokers())
        lost = self.zk.offline_replicas()  # replicas in failed log dirs
        if shutting_down is not None:
            self.shutting_down = set(shutting_down) & brokers
        leaving = set(self.shutting_down)
        changed: dict[tuple[str, int], LeaderAndIsr] = {}
        leaderless: list[tuple[str, int]] = []
        pending: list[tuple[str, int, tuple[int, ...], LeaderAndIsr, int]] = []
        reassigning: list[tuple[str, int]] = []

        def settle(topic: str, partition: int, new: LeaderAndIsr | None, offline: bool) -> None:
            if new is not None:
                changed[(topic, partition)] = new
            if offline:
                leaderless.append((topic, partition))

        for topic in self.zk.topics():
            assignment = self.zk.topic_assignment(topic)
            if assignment is None:
                continue
            for partition, replicas in sorted(assignment.partitions.items()):
                if assignment.reassigning(partition):
                    reassigning.append((topic, partition))
                live = brokers - lost.get((topic, partition), set())
                state = self.zk.partition_state(topic, partition)
                if state is None:  # a partition without a state yet: made here, one at a time
                    settle(topic, partition, *self._reelect(topic, partition, replicas, live, leaving, epoch))
                    continue
                new, offline = self._decide(state, replicas, live, leaving, epoch)
                if new is None:
                    settle(topic, partition, None, offline)
                else:
                    pending.append((topic, partition, replicas, new, state.zk_version))
        try:
            written = self.zk.update_partition_states(
                [(t, p, n, v) for t, p, _, n, v in pending], self._fence()
            )
        except FencedControllerError as e:
            self._stand_down(e)
        for (topic, partition, replicas, _, _), done in zip(pending, written, strict=True):
            if done is None:  # the state moved on since it was read: again, on its own
                live = brokers - lost.get((topic, partition), set())
                settle(topic, partition, *self._reelect(topic, partition, replicas, live, leaving, epoch))
            else:
                self._log_state(topic, partition, done)
                settle(topic, partition, done, done.leader == NO_LEADER)
        for topic, partition in reassigning:  # a new controller finishes what it can
            found = self.zk.topic_assignment(topic)
            if found is not None and found.reassigning(partition):
                self._maybe_complete(topic, partition, found)
        return ElectionResult(changed, leaderless)

    def _decide(
        self, state: LeaderAndIsr, replicas: tuple[int, ...], live: set[int], leaving: set[int], epoch: int
    ) -> tuple[LeaderAndIsr | None, bool]:
        """(the state to write, or None; whether the partition is left without a leader if
        nothing is written), the rules of the module doc. Pure: O(replicas)."""
        staying = live - leaving
        if state.leader in staying and all(b in staying for b in state.isr):
            return None, False
        if state.leader in staying:  # the leader stays: only the ISR shrinks (same leader epoch)
            isr = tuple(b for b in state.isr if b in staying)
            return LeaderAndIsr(state.leader, state.leader_epoch, isr, epoch), False
        if leaving:
            chosen = controlled_shutdown_leader(replicas, state.isr, live, leaving)
        else:
            chosen = offline_partition_leader(replicas, state.isr, live, self.unclean_leader_election)
        if chosen is None and state.leader == NO_LEADER:
            return None, True  # already offline: nothing to write
        if chosen is None and state.leader in live:
            return None, False  # in controlled shutdown, alone in the ISR: it leads until it goes
        if chosen is None:
            # No replica may lead: offline, the ISR kept for when one of it returns.
            return LeaderAndIsr(NO_LEADER, state.leader_epoch + 1, state.isr, epoch), True
        return LeaderAndIsr(chosen[0], state.leader_epoch + 1, chosen[1], epoch), False

    def _reelect(
        self,
        topic: str,
        partition: int,
        replicas: tuple[int, ...],
        live: set[int],
        leaving: set[int],
        epoch: int,
    ) -> tuple[LeaderAndIsr | None, bool]:
        """One partition, read and written on its own: (its new state if one was written,
        whether it is left without a leader)."""
        for _ in range(5):  # bounded: each retry follows a newer znode version
            state = self.zk.partition_state(topic, partition)
            if state is None:
                made = self._init_partition(topic, partition, replicas, live - leaving, epoch)
                return made, made.leader == NO_LEADER
            new, offline = self._decide(state, replicas, live, leaving, epoch)
            if new is None:
                return None, offline
            written = self._write(topic, partition, new, state.zk_version)
            if written is not None:
                self._log_state(topic, partition, written)
                return written, written.leader == NO_LEADER
        raise ZkError(f"{topic}-{partition}: the partition state kept changing under the controller")

    @staticmethod
    def _log_state(topic: str, partition: int, state: LeaderAndIsr) -> None:
        _log.info(
            "%s-%d: leader %d, leader epoch %d, isr %s",
            topic, partition, state.leader, state.leader_epoch, list(state.isr),
        )  # fmt: skip

    # -- ISR changes (AlterPartition) -------------------------------------------

    def alter_partition(
        self,
        topic: str,
        partition: int,
        leader: int,
        leader_epoch: int,
        isr: tuple[int, ...],
        partition_epoch: int,
    ) -> tuple[ErrorCode, LeaderAndIsr | None]:
        """A leader's ISR change, checked as Kafka's controller checks AlterPartition (see the
        module doc): (NONE, the written state) or (the error, the current state or None).

        ZooKeeper out of reach (the connection lost mid-call, the session gone) is NOT_CONTROLLER,
        which the leader retries after its backoff at whichever broker controls then. It used to
        escape as an exception that closed the leader's connection with a traceback (found by
        ``bench/chaos.py``'s network faults: a controller cut off from ZooKeeper, or its
        connections reset)."""
        try:
            return self._alter_partition(topic, partition, leader, leader_epoch, isr, partition_epoch)
        except KazooException as e:
            _log.warning(
                "%s-%d: AlterPartition from leader %d to %s not decided: ZooKeeper out of reach (%s)",
                topic, partition, leader, list(isr), type(e).__name__,
            )  # fmt: skip
            return ErrorCode.not_controller, None

    def _alter_partition(
        self,
        topic: str,
        partition: int,
        leader: int,
        leader_epoch: int,
        isr: tuple[int, ...],
        partition_epoch: int,
    ) -> tuple[ErrorCode, LeaderAndIsr | None]:
        if self.epoch is None:
            return ErrorCode.not_controller, None
        state = self.zk.partition_state(topic, partition)
        assignment = self.zk.topic_assignment(topic)
        if state is None or assignment is None or partition not in assignment.partitions:
            return ErrorCode.unknown_topic_or_partition, None
        if leader_epoch != state.leader_epoch:
            stale = leader_epoch < state.leader_epoch
            return (ErrorCode.fenced_leader_epoch if stale else ErrorCode.unknown_leader_epoch), state
        if leader != state.leader:
            return ErrorCode.not_leader_or_follower, state
        if partition_epoch != state.zk_version:
            return ErrorCode.invalid_update_version, state
        replicas = assignment.partitions[partition]
        if leader not in isr or not set(isr) <= set(replicas) or len(set(isr)) != len(isr):
            return ErrorCode.invalid_request, state
        live = set(self.zk.live_brokers()) - self.zk.offline_replicas().get((topic, partition), set())
        if any(b not in live or b in self.shutting_down for b in isr if b not in state.isr):
            return ErrorCode.ineligible_replica, state
        written = self._write(
            topic, partition, LeaderAndIsr(leader, leader_epoch, isr, self.epoch), state.zk_version
        )
        if written is None:
            return ErrorCode.invalid_update_version, self.zk.partition_state(topic, partition)
        _log.info("%s-%d: isr %s (asked by leader %d)", topic, partition, list(isr), leader)
        if assignment.reassigning(partition):  # a new replica in sync may finish a reassignment
            self._maybe_complete(topic, partition, assignment)  # its new state reaches the leader by watch
        return ErrorCode.none, written

    # -- preferred and unclean elections (ElectLeaders, auto.leader.rebalance.enable) --------

    def elect_leaders(
        self, election_type: int, partitions: Collection[tuple[str, int]] | None
    ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """Kafka's ``processReplicaLeaderElection``, for an admin's ElectLeaders: per partition
        NONE (a new leader written), ELECTION_NOT_NEEDED (the preferred replica leads, or for an
        unclean election the leader is alive), PREFERRED_LEADER_NOT_AVAILABLE or
        ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION (being
        deleted). ``partitions`` None: every partition. O(partitions x replicas) ZooKeeper reads."""
        epoch = self._check_active()
        live = set(self.zk.live_brokers()) - self.shutting_down
        offline = self.zk.offline_replicas()
        deleting = set(self.zk.topics_to_delete())
        assignments: dict[str, TopicAssignment | None] = {}
        if partitions is None:
            partitions = []
            for topic in self.zk.topics():
                assignments[topic] = found = self.zk.topic_assignment(topic)
                if found is not None:
                    partitions.extend((topic, p) for p in sorted(found.partitions))
        results: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
        for topic, partition in partitions:
            if topic not in assignments:
                assignments[topic] = self.zk.topic_assignment(topic)
            assignment = assignments[topic]
            if assignment is None or partition not in assignment.partitions:
                results[(topic, partition)] = (
                    ErrorCode.unknown_topic_or_partition, "The partition does not exist."
                )  # fmt: skip
            elif topic in deleting:
                results[(topic, partition)] = (
                    ErrorCode.invalid_topic_exception,
                    "The topic is being deleted",
                )
            else:
                replicas = assignment.partitions[partition]
                results[(topic, partition)] = self._elect(
                    topic, partition, replicas, election_type, live - offline.get((topic, partition), set()), epoch
                )
        return results

    def _elect(
        self,
        topic: str,
        partition: int,
        replicas: tuple[int, ...],
        election_type: int,
        live: set[int],
        epoch: int,
    ) -> tuple[ErrorCode, str | None]:
        for _ in range(5):  # bounded: each retry follows a newer znode version
            state = self.zk.partition_state(topic, partition)
            if state is None:
                return ErrorCode.unknown_topic_or_partition, "The partition does not exist."
            if election_type == PREFERRED:
                if state.leader == replicas[0]:
                    return ErrorCode.election_not_needed, None
                chosen = preferred_replica_leader(replicas, state.isr, live)
                if chosen is None:
                    return ErrorCode.preferred_leader_not_available, (
                        f"Failed to elect leader for partition {topic}-{partition} under strategy "
                        "PreferredReplicaPartitionLeaderElectionStrategy"
                    )
            else:
                if state.leader != NO_LEADER and state.leader in live:
                    return ErrorCode.election_not_needed, None
                chosen = offline_partition_leader(replicas, state.isr, live, unclean=True)
                if chosen is None:
                    return ErrorCode.eligible_leaders_not_available, (
                        f"Failed to elect leader for partition {topic}-{partition} under strategy "
                        "OfflinePartitionLeaderElectionStrategy(true)"
                    )
            new = LeaderAndIsr(chosen[0], state.leader_epoch + 1, chosen[1], epoch)
            if self._write(topic, partition, new, state.zk_version) is not None:
                kind = "preferred" if election_type == PREFERRED else "unclean"
                _log.info(
                    "%s-%d: %s election: leader %d, leader epoch %d, isr %s",
                    topic, partition, kind, new.leader, new.leader_epoch, list(new.isr),
                )  # fmt: skip
                return ErrorCode.none, None
        raise ZkError(f"{topic}-{partition}: the partition state kept changing under the controller")

    def rebalance_leaders(self, imbalance_percentage: int) -> list[tuple[str, int]]:
        """Kafka's ``checkAndTriggerAutoLeaderRebalance``: for each broker, the share of the
        partitions it is preferred for that it does not lead; above ``imbalance_percentage`` %,
        a preferred election for those where it is alive and in sync. Partitions being reassigned
        or deleted are left alone. Returns the partitions that got their preferred leader back.
        O(partitions x replicas) ZooKeeper reads (every ``leader.imbalance.check.interval.seconds``)."""
        epoch = self._check_active()
        live = set(self.zk.live_brokers()) - self.shutting_down
        deleting = set(self.zk.topics_to_delete())
        preferred: dict[int, int] = {}
        imbalanced: dict[int, list[tuple[str, int, tuple[int, ...], LeaderAndIsr]]] = {}
        for topic in self.zk.topics():
            assignment = self.zk.topic_assignment(topic)
            if assignment is None or topic in deleting:
                continue
            for partition, replicas in sorted(assignment.partitions.items()):
                state = self.zk.partition_state(topic, partition)
                if state is None or not replicas or assignment.reassigning(partition):
                    continue
                preferred[replicas[0]] = preferred.get(replicas[0], 0) + 1
                if state.leader != replicas[0]:
                    imbalanced.setdefault(replicas[0], []).append((topic, partition, replicas, state))
        moved: list[tuple[str, int]] = []
        for broker, behind in sorted(imbalanced.items()):
            ratio = len(behind) / preferred[broker]
            if broker not in live or ratio * 100 <= imbalance_percentage:
                continue
            _log.info("broker %d leads %d of the %d partitions it is preferred for: rebalancing",
                      broker, preferred[broker] - len(behind), preferred[broker])  # fmt: skip
            for topic, partition, replicas, state in behind:
                if broker in state.isr:
                    error, _ = self._elect(topic, partition, replicas, PREFERRED, live, epoch)
                    if error == ErrorCode.none:
                        moved.append((topic, partition))
        return moved

    # -- reassignment (AlterPartitionReassignments, KIP-455) ---------------------------------

    def alter_reassignments(
        self, changes: Mapping[tuple[str, int], Sequence[int] | None]
    ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """Start (target replicas) or cancel (None) reassignments, as Kafka's controller does:

        - the partition's replicas become the target followed by the original replicas not in
          it; the target's new replicas are ``adding`` (they create their logs and follow the
          leader), the originals not in the target ``removing`` (written to the topic znode);
        - once every target replica is in the ISR (:meth:`_maybe_complete`, checked at each
          ISR change) the leader moves into the target if it is not there (epoch bumped), the
          ISR keeps only target replicas, and the replicas become the target: the removed
          brokers stop fetching and delete their logs;
        - a new target for a partition in reassignment replaces the old one (from the original
          replicas); a cancellation reverts to the original replicas.

        Per partition: NONE, INVALID_REPLICA_ASSIGNMENT (empty, duplicate, negative or
        non-live brokers), UNKNOWN_TOPIC_OR_PARTITION, NO_REASSIGNMENT_IN_PROGRESS (a
        cancellation with none). O(changes) ZooKeeper writes."""
        epoch = self._check_active()
        live = set(self.zk.live_brokers())
        deleting = set(self.zk.topics_to_delete())
        results: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
        by_topic: dict[str, dict[int, Sequence[int] | None]] = {}
        for (topic, partition), target in changes.items():
            by_topic.setdefault(topic, {})[partition] = target
        for topic, partitions in sorted(by_topic.items()):
            assignment = None if topic in deleting else self.zk.topic_assignment(topic)
            for partition, target in sorted(partitions.items()):
                key = (topic, partition)
                if assignment is None or partition not in assignment.partitions:
                    results[key] = (ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
                    continue
                if target is None:
                    if not assignment.reassigning(partition):
                        results[key] = (
                            ErrorCode.no_reassignment_in_progress,
                            f"Unable to cancel reassignment of {topic}-{partition}: no reassignment is in progress.",
                        )  # fmt: skip
                        continue
                    target = assignment.original(partition)
                else:
                    problem = _invalid_target(tuple(target), live)
                    if problem is not None:
                        results[key] = (ErrorCode.invalid_replica_assignment, problem)
                        continue
                assignment = self._reassign(topic, partition, assignment, tuple(target), epoch)
                results[key] = (ErrorCode.none, None)
        return results

    def _reassign(
        self, topic: str, partition: int, assignment: TopicAssignment, target: tuple[int, ...], epoch: int
    ) -> TopicAssignment:
        original = (
            assignment.original(partition)
            if assignment.reassigning(partition)
            else assignment.partitions[partition]
        )
        replicas = target + tuple(b for b in original if b not in target)
        adding = tuple(b for b in target if b not in original)
        removing = tuple(b for b in original if b not in target)
        if set(assignment.partitions[partition]) - set(replicas):  # a replaced reassignment's additions
            self._narrow(topic, partition, replicas, epoch)
        assignment = assignment.with_partition(partition, replicas, adding, removing)
        self.zk.set_topic_assignment(topic, assignment)
        _log.info("%s-%d: reassigning to %s (adding %s, removing %s)",
                  topic, partition, list(target), list(adding), list(removing))  # fmt: skip
        return self._maybe_complete(topic, partition, assignment)

    def _maybe_complete(self, topic: str, partition: int, assignment: TopicAssignment) -> TopicAssignment:
        """Finish a partition's reassignment if every target replica is in its ISR (else wait)."""
        if not assignment.reassigning(partition):
            return assignment
        target = assignment.target(partition)
        state = self.zk.partition_state(topic, partition)
        if state is None or not all(b in state.isr for b in target):
            return assignment
        if not self._narrow(topic, partition, target, self._check_active()):
            return assignment
        done = assignment.with_partition(partition, target)
        self.zk.set_topic_assignment(topic, done)
        _log.info("%s-%d: reassignment done, replicas %s", topic, partition, list(target))
        return done

    def _narrow(self, topic: str, partition: int, keep: tuple[int, ...], epoch: int) -> bool:
        """Keep only ``keep`` in the partition's ISR, the leader moved into it if it is outside
        (Kafka's reassignment election: the first of ``keep`` alive and in sync; epoch bumped).
        False if no replica of ``keep`` may lead now (the state is left as it is)."""
        live = set(self.zk.live_brokers())
        for _ in range(5):  # bounded: each retry follows a newer znode version
            state = self.zk.partition_state(topic, partition)
            if state is None:
                return False
            isr = tuple(b for b in state.isr if b in keep)
            if state.leader in keep and state.leader in live:
                if isr == state.isr:
                    return True
                new = LeaderAndIsr(state.leader, state.leader_epoch, isr, epoch)
            else:
                leader = next((b for b in keep if b in live and b in isr), None)
                if leader is None:
                    return False
                new = LeaderAndIsr(leader, state.leader_epoch + 1, isr, epoch)
            if self._write(topic, partition, new, state.zk_version) is not None:
                self._log_state(topic, partition, new)
                return True
        raise ZkError(f"{topic}-{partition}: the partition state kept changing under the controller")

    def list_reassignments(
        self, partitions: Collection[tuple[str, int]] | None
    ) -> dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
        """(replicas, adding, removing) of the partitions in reassignment (among ``partitions``,
        or all). O(topics) ZooKeeper reads."""
        self._check_active()
        wanted = None if partitions is None else set(partitions)
        topics = self.zk.topics() if wanted is None else sorted({t for t, _ in wanted})
        found: dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = {}
        for topic in topics:
            assignment = self.zk.topic_assignment(topic)
            if assignment is None:
                continue
            for partition, replicas in sorted(assignment.partitions.items()):
                if assignment.reassigning(partition) and (wanted is None or (topic, partition) in wanted):
                    found[(topic, partition)] = (
                        replicas, assignment.adding.get(partition, ()), assignment.removing.get(partition, ())
                    )  # fmt: skip
        return found

    def _fence(self) -> int:
        if self.epoch is None:
            raise ControllerMovedError(f"broker {self.broker_id} is not the controller")
        return self.epoch_version

    def _write(self, topic: str, partition: int, state: LeaderAndIsr, version: int) -> LeaderAndIsr | None:
        """A conditional write; None if the state moved on. ControllerMovedError if this controller
        was replaced (its epoch's znode version is checked in the same transaction)."""
        try:
            return self.zk.update_partition_state(topic, partition, state, version, self._fence())
        except FencedControllerError as e:
            self._stand_down(e)

    def _stand_down(self, e: Exception) -> NoReturn:
        stale, self.epoch, self.epoch_version = self.epoch, None, -1
        raise ControllerMovedError(
            f"broker {self.broker_id} was controller at epoch {stale} and was replaced ({e}); standing down"
        ) from None
