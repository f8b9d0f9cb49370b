"""A Partition: one topic-partition as this broker holds it (Kafka's ``Partition``).

It owns the partition's :class:`~logstore.storage.log.Log`, the producer
state of its idempotent producers (rebuilt from the log on first use), and
its leadership: leader epoch, replica set and ISR, as the controller last
said (its :class:`~logstore.broker.metadata_cache.PartitionState`).

As **leader** (replicated: a broker of a cluster) it keeps each follower's
progress (:class:`ReplicaProgress`: its log end offset, from the offset it
fetches at, and when it was last caught up) and from them:

- the **high watermark**: the smallest log end offset in the ISR, counting a
  follower whose addition is in flight (Kafka's "maximal ISR": the HW must
  never pass a replica that may already be in the ISR);
- **ISR changes**: a follower out of the ISR whose log end has reached the
  HW (and this leader's epoch) is added; one not caught up for
  ``replica.lag.time.max.ms`` is removed. Both go to the controller
  (AlterPartition); one change in flight at a time.

As **follower** it holds no progress; the replica fetcher appends to its
log and moves its HW to the leader's (capped at its own log end).

Alone (one broker, no cluster) the HW is the log end offset, as today.

Invariant, asserted at each append and HW move: ``log_start_offset <=
high_watermark <= log_end_offset``. Crash policy: a Partition keeps nothing
on disk of its own: the Log recovers itself (its leader-epoch cache
included), the HW comes back from ``replication-offset-checkpoint`` (a lower
bound: it advances again as followers fetch), and the producer state is
rebuilt from the Log.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from logstore.broker.metadata_cache import PartitionState
from logstore.broker.producers import PartitionProducers
from logstore.storage.log import Log

UNKNOWN_OFFSET = -1


class ReplicaProgress:
    """A follower as its leader sees it (Kafka's ``Replica``): log end offset (-1 until it fetches),
    when it last was caught up, and the leader's log end at its previous fetch."""

    __slots__ = ("broker_id", "last_caught_up_ms", "last_fetch_leader_end", "last_fetch_ms", "log_end_offset")

    def __init__(self, broker_id: int, last_caught_up_ms: int) -> None:
        self.broker_id = broker_id
        self.log_end_offset = UNKNOWN_OFFSET
        self.last_caught_up_ms = last_caught_up_ms
        self.last_fetch_leader_end = UNKNOWN_OFFSET
        self.last_fetch_ms = 0

    def fetched(self, offset: int, leader_end: int, now_ms: int) -> None:
        """A fetch at ``offset`` (so every offset below it is on the follower). Kafka's rule for
        "caught up": it reached the leader's end now, or the end the leader had at its last fetch."""
        if offset >= leader_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif offset >= self.last_fetch_leader_end >= 0:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = offset
        self.last_fetch_leader_end = leader_end
        self.last_fetch_ms = now_ms


class Partition:
    """One topic-partition on this broker (see the module doc). Not thread-safe: the event loop's."""

    __slots__ = (
        "_producers",
        "index",
        "is_leader",
        "leader_epoch_start",
        "log",
        "node_id",
        "pending_isr",
        "producer_id_expiration_ms",
        "remotes",
        "replicated",
        "state",
        "topic",
    )

    def __init__(
        self,
        topic: str,
        index: int,
        log: Log,
        state: PartitionState,
        producer_id_expiration_ms: int,
        node_id: int = 0,
        replicated: bool = False,
    ) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.state = state
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.node_id = node_id
        self.replicated = replicated
        self.is_leader = not replicated and state.leader == node_id
        self.remotes: dict[int, ReplicaProgress] = {}
        self.pending_isr: tuple[int, ...] | None = None  # an AlterPartition in flight
        self.leader_epoch_start = UNKNOWN_OFFSET
        self._producers: PartitionProducers | None = None

    def __repr__(self) -> str:
        role = "leader" if self.is_leader else "follower"
        return f"Partition({self.topic}-{self.index}, {role}, epoch {self.state.leader_epoch}, isr {self.state.isr})"

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def producers(self) -> PartitionProducers:
        """The idempotence state, rebuilt from the log on first use. O(log's producer batches) once."""
        if self._producers is None:
            self._producers = PartitionProducers.rebuild(self.log, self.producer_id_expiration_ms)
        return self._producers

    def check_offsets(self) -> None:
        """Assert ``log_start_offset <= high_watermark <= log_end_offset``."""
        start, hw, end = self.log.log_start_offset, self.log.high_watermark, self.log.log_end_offset
        assert start <= hw <= end, f"{self.topic}-{self.index}: log start {start}, HW {hw}, LEO {end}"

    def check_leader_epoch(self, current: int) -> ErrorCode:
        """A request's ``current_leader_epoch`` against ours (KIP-320): -1 skips the check."""
        if current < 0 or current == self.state.leader_epoch or not self.replicated:
            return ErrorCode.none
        return (
            ErrorCode.fenced_leader_epoch
            if current < self.state.leader_epoch
            else ErrorCode.unknown_leader_epoch
        )

    # -- leadership ------------------------------------------------------------

    def make_leader(self, state: PartitionState, now_ms: int) -> None:
        """Lead at ``state``'s epoch: the epoch starts at our log end (in the epoch cache now, as
        Kafka does, so followers asking OffsetForLeaderEpoch see where the last one ended); every
        follower's progress is unknown until it fetches (those in the ISR count as caught up now)."""
        assert state.leader == self.node_id, (state, self.node_id)
        self.state = state
        self.is_leader = True
        self.pending_isr = None
        # Followers append without keeping producer state: rebuilt from the log on first use.
        self._producers = None
        if self.log.latest_epoch < state.leader_epoch:
            self.log.assign_epoch(state.leader_epoch)  # Kafka's maybeAssignEpochStartOffset
        self.leader_epoch_start = self.log.log_end_offset
        self.remotes = {
            b: ReplicaProgress(b, now_ms if b in state.isr else 0)
            for b in state.replicas
            if b != self.node_id
        }
        self.maybe_advance_high_watermark()

    def make_follower(self, state: PartitionState) -> None:
        """Follow ``state``'s leader (or nobody, with NO_LEADER): no progress kept, no ISR requests."""
        assert state.leader != self.node_id, (state, self.node_id)
        self.state = state
        self.is_leader = False
        self.pending_isr = None
        self.remotes = {}
        self._producers = None

    def update_state(self, state: PartitionState) -> None:
        """The controller's word at the same leader epoch (an ISR change, a partition epoch)."""
        assert (
            state.leader_epoch == self.state.leader_epoch and (state.leader == self.node_id) == self.is_leader
        )
        self.state = state
        if self.pending_isr is not None and tuple(sorted(self.pending_isr)) == tuple(sorted(state.isr)):
            self.pending_isr = None
        for b in state.replicas:
            if self.is_leader and b != self.node_id and b not in self.remotes:
                self.remotes[b] = ReplicaProgress(b, 0)

    # -- the leader's bookkeeping ---------------------------------------------

    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR, with a replica whose addition is in flight (it may already be in)."""
        isr = self.state.isr
        if self.pending_isr is None:
            return isr
        return isr + tuple(b for b in self.pending_isr if b not in isr)

    def follower_fetched(self, broker_id: int, offset: int, now_ms: int) -> bool:
        """Record a follower's fetch at ``offset``; True if the HW moved. O(replicas)."""
        remote = self.remotes.get(broker_id)
        if remote is None:
            return False
        remote.fetched(offset, self.log.log_end_offset, now_ms)
        return self.maybe_advance_high_watermark()

    def maybe_advance_high_watermark(self) -> bool:
        """HW = the smallest log end offset in the maximal ISR; it never moves back. O(replicas)."""
        if not self.is_leader or not self.replicated:
            return False
        new = self.log.log_end_offset
        for b in self.maximal_isr():
            if b != self.node_id:
                remote = self.remotes.get(b)
                new = min(new, remote.log_end_offset if remote is not None else UNKNOWN_OFFSET)
        if new <= self.log.high_watermark:
            return False
        self.log.high_watermark = new
        self.check_offsets()
        return True

    def isr_to_expand(self, broker_id: int) -> tuple[int, ...] | None:
        """The ISR with ``broker_id`` added, if it is out of it and has caught up to the HW and to
        this leader's epoch (Kafka's ``isFollowerInSync``); else None."""
        remote = self.remotes.get(broker_id)
        if remote is None or self.pending_isr is not None or broker_id in self.state.isr:
            return None
        end = remote.log_end_offset
        if end >= self.log.high_watermark and end >= self.leader_epoch_start:
            return (*self.state.isr, broker_id)
        return None

    def isr_to_shrink(self, now_ms: int, lag_ms: int) -> tuple[int, ...] | None:
        """The ISR without followers not caught up for ``lag_ms``, if any are; else None."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        late = [b for b in self.state.isr if b != self.node_id and now_ms - self._caught_up_ms(b) > lag_ms]
        if not late:
            return None
        return tuple(b for b in self.state.isr if b not in late)

    def _caught_up_ms(self, broker_id: int) -> int:
        remote = self.remotes.get(broker_id)
        return remote.last_caught_up_ms if remote is not None else 0
