"""What the consumer reads: Kafka's ``SubscriptionState``.

A consumer either *subscribes* (topic names and ``^regex`` patterns; the group
coordinator hands it partitions) or is *assigned* partitions by the
application (``assign()``, no group membership); never both at once.
:class:`SubscriptionState` holds that choice and, for every partition the
consumer currently owns, a :class:`TopicPartitionState`: the position (the
next offset to hand to the application), whether it is paused, what must
happen before it can be fetched (a committed-offset lookup, or a reset to
earliest/latest/a timestamp), the offset stored for the next commit, and the
watermarks the last fetch saw.

Invariants (checked by :meth:`SubscriptionState.check`): a partition is
*fetchable* only when its position is known, it is not paused and it carries
no error; a partition whose position is unknown has exactly one way forward:
``awaiting_committed``, a ``reset``, or an ``error`` (until a seek).

Every method is called on the application's thread, except that the fetcher's
response callbacks read partition states under :attr:`SubscriptionState.lock`;
mutations take the lock too. All operations are O(partitions touched).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from logstore.client.errors import KafkaError

TopicPartitionKey = tuple[str, int]

EARLIEST = "earliest"
LATEST = "latest"


@dataclass(frozen=True)
class OffsetReset:
    """A position to look up with ListOffsets: ``timestamp`` -2 (earliest), -1 (latest) or a time in ms."""

    timestamp: int

    @classmethod
    def of(cls, strategy: str) -> OffsetReset:
        if strategy == EARLIEST:
            return cls(-2)
        if strategy == LATEST:
            return cls(-1)
        raise ValueError(f"no offset reset for strategy {strategy!r}")


class TopicPartitionState:
    """One owned partition: the position and what stands between it and the next fetch."""

    __slots__ = (
        "awaiting_committed",
        "committed",
        "eof_sent",
        "error",
        "high_watermark",
        "last_stable_offset",
        "log_start_offset",
        "paused",
        "position",
        "reset",
        "stored",
        "stored_metadata",
    )

    def __init__(self) -> None:
        self.position: int | None = None
        self.awaiting_committed = False
        self.reset: OffsetReset | None = None
        self.error: KafkaError | None = None
        self.paused = False
        self.stored: int | None = None  # the offset the next commit() / auto-commit sends
        self.stored_metadata: str | None = None
        self.committed: int | None = None  # the last offset this consumer committed (or read back)
        self.high_watermark = -1
        self.log_start_offset = -1
        self.last_stable_offset = -1
        self.eof_sent = False

    @property
    def fetchable(self) -> bool:
        return self.position is not None and not self.paused and self.error is None

    def seek(self, offset: int) -> None:
        """Fetch from ``offset`` next (any pending lookup or error is dropped)."""
        self.position = offset
        self.reset = None
        self.awaiting_committed = False
        self.error = None
        self.eof_sent = False

    def reset_to(self, reset: OffsetReset) -> None:
        """Look the position up with ListOffsets before fetching again."""
        self.position = None
        self.reset = reset
        self.awaiting_committed = False
        self.error = None
        self.eof_sent = False

    def await_committed(self) -> None:
        """Read the group's committed offset (OffsetFetch) before fetching."""
        self.position = None
        self.reset = None
        self.awaiting_committed = True
        self.error = None

    def fail(self, error: KafkaError) -> None:
        """No fetching until the application seeks: no offset to start from (``auto.offset.reset=none``)."""
        self.position = None
        self.reset = None
        self.awaiting_committed = False
        self.error = error


class SubscriptionState:
    """The consumer's subscription or manual assignment, and its partitions' states (see the module)."""

    NONE = "none"
    SUBSCRIBED = "subscribed"
    USER_ASSIGNED = "user-assigned"

    def __init__(self, default_reset: str) -> None:
        assert default_reset in (EARLIEST, LATEST, "none"), default_reset
        self.default_reset = default_reset
        self.mode = self.NONE
        self.topics: frozenset[str] = frozenset()  # named topics
        self.patterns: tuple[re.Pattern[str], ...] = ()  # "^..." subscriptions
        self.matched: frozenset[str] = frozenset()  # topics the patterns matched at the last metadata refresh
        self.assignment: dict[TopicPartitionKey, TopicPartitionState] = {}
        self.lock = threading.RLock()

    # -- subscription --------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> bool:
        """Subscribe to ``topics`` (``^`` starts a regex); True when the subscription changed."""
        names = list(topics)
        if self.mode == self.USER_ASSIGNED:
            raise ValueError("subscribe() after assign(): call unassign() first (they are exclusive)")
        explicit = frozenset(t for t in names if not t.startswith("^"))
        patterns = tuple(re.compile(t) for t in names if t.startswith("^"))
        changed = (
            self.mode != self.SUBSCRIBED
            or explicit != self.topics
            or [p.pattern for p in patterns] != [p.pattern for p in self.patterns]
        )
        self.mode = self.SUBSCRIBED
        self.topics = explicit
        self.patterns = patterns
        if changed:
            self.matched = frozenset()
        return changed

    @property
    def subscribed(self) -> bool:
        return self.mode == self.SUBSCRIBED

    @property
    def user_assigned(self) -> bool:
        return self.mode == self.USER_ASSIGNED

    def match(self, available: Iterable[str]) -> bool:
        """Match the patterns against the cluster's (non-internal) topic names; True when the set changed."""
        if not self.patterns:
            return False
        matched = frozenset(t for t in available if any(p.search(t) for p in self.patterns))
        changed = matched != self.matched
        self.matched = matched
        return changed

    def subscribed_topics(self) -> list[str]:
        """The topics this member asks the group for: the named ones and those the patterns match."""
        return sorted(self.topics | self.matched)

    def unsubscribe(self) -> list[TopicPartitionKey]:
        """Drop the subscription or manual assignment; returns the partitions that were owned."""
        with self.lock:
            owned = list(self.assignment)
            self.assignment = {}
        self.mode = self.NONE
        self.topics = frozenset()
        self.patterns = ()
        self.matched = frozenset()
        return owned

    # -- assignment ----------------------------------------------------------

    def assign_from_user(self, partitions: Iterable[tuple[TopicPartitionKey, int | None]]) -> None:
        """Manual assignment: exactly these partitions, each with a start (None: the committed offset)."""
        if self.mode == self.SUBSCRIBED:
            raise ValueError("assign() while subscribed: call unsubscribe() first (they are exclusive)")
        self.mode = self.USER_ASSIGNED
        with self.lock:
            old = self.assignment
            self.assignment = {}
            for key, _ in partitions:
                self.assignment[key] = old.get(key) or TopicPartitionState()

    def add(self, keys: Iterable[TopicPartitionKey]) -> list[TopicPartitionKey]:
        """Own these partitions too (a group assignment); returns the ones that are new."""
        added = []
        with self.lock:
            for key in keys:
                if key not in self.assignment:
                    self.assignment[key] = TopicPartitionState()
                    added.append(key)
        return added

    def remove(self, keys: Iterable[TopicPartitionKey]) -> list[TopicPartitionKey]:
        """Stop owning these partitions; returns the ones that were owned."""
        removed = []
        with self.lock:
            for key in keys:
                if self.assignment.pop(key, None) is not None:
                    removed.append(key)
        return removed

    def clear(self) -> list[TopicPartitionKey]:
        with self.lock:
            owned = list(self.assignment)
            self.assignment = {}
        return owned

    def state(self, key: TopicPartitionKey) -> TopicPartitionState | None:
        return self.assignment.get(key)

    def owned(self) -> list[TopicPartitionKey]:
        return list(self.assignment)

    # -- positions -----------------------------------------------------------

    def awaiting_committed(self) -> list[TopicPartitionKey]:
        return [k for k, s in self.assignment.items() if s.awaiting_committed]

    def awaiting_reset(self) -> dict[TopicPartitionKey, OffsetReset]:
        return {k: s.reset for k, s in self.assignment.items() if s.reset is not None}

    def no_committed_offset(self, key: TopicPartitionKey, state: TopicPartitionState) -> None:
        """The group has no offset for ``key``: apply ``auto.offset.reset`` (``none`` fails the partition)."""
        if self.default_reset == "none":
            state.fail(KafkaError(KafkaError._NO_OFFSET,  # type: ignore[attr-defined]
                                  f"{key[0]} [{key[1]}]: no committed offset and auto.offset.reset=none"))  # fmt: skip
        else:
            state.reset_to(OffsetReset.of(self.default_reset))

    def out_of_range(
        self, key: TopicPartitionKey, state: TopicPartitionState, offset: int
    ) -> KafkaError | None:
        """A fetch at ``offset`` was out of range: reset, or (``none``) fail with the error returned."""
        if self.default_reset == "none":
            error = KafkaError(KafkaError.OFFSET_OUT_OF_RANGE,  # type: ignore[attr-defined]
                               f"{key[0]} [{key[1]}]: fetch offset {offset} is out of range and "
                               "auto.offset.reset=none")  # fmt: skip
            state.fail(error)
            return error
        state.reset_to(OffsetReset.of(self.default_reset))
        return None

    def stored_offsets(self) -> dict[TopicPartitionKey, tuple[int, str | None]]:
        """The offsets to commit: each owned partition's stored offset (``enable.auto.offset.store``: its position)."""
        return {
            k: (s.stored, s.stored_metadata)
            for k, s in self.assignment.items()
            if s.stored is not None and s.stored >= 0
        }

    def check(self) -> bool:
        """The invariants in the module's docstring (for asserts and tests)."""
        for key, s in self.assignment.items():
            if s.position is None:
                pending = int(s.awaiting_committed) + int(s.reset is not None) + int(s.error is not None)
                assert pending == 1, f"{key}: unknown position with {pending} ways forward"
        return True
