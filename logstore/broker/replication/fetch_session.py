"""Fetch sessions (KIP-227): incremental fetches, Kafka's ``FetchManager`` and ``FetchSessionCache``.

A client that fetches the same partitions again and again may open a
*session*: its first fetch (session id 0, epoch 0) lists every partition and
gets a session id; each later fetch (that id, epoch 1, 2, ...) lists only
the partitions whose fetch offset or limits changed, and ``forgotten_topics``
those it drops. The broker reads every partition of the session, and answers
only those with something new: records, an error, or a changed high
watermark, last stable offset or log start offset. Epoch -1 (FINAL) closes a
session and fetches without one.

Errors (the whole response): FETCH_SESSION_ID_NOT_FOUND for an id the
cache does not hold (evicted, or another broker's), INVALID_FETCH_SESSION_EPOCH
for an epoch other than the expected one; the client then starts over with a
full fetch. A full cache (``max.incremental.fetch.session.cache.slots``,
Kafka's 1,000) evicts the least recently used session, so a new session is
always given.

Complexity: :meth:`FetchSessionCache.resolve` is O(partitions in the
request + the session's partitions); eviction O(1) (an ordered dict).
"""

from __future__ import annotations

import collections
import random
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
NO_SESSION = 0

Key = tuple[str, int]


@dataclass
class FetchItem:
    """One partition to read: where from, how much, and the epoch the client knows."""

    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    # What the last response told the client (a session's partitions only): None = nothing yet.
    sent: tuple[int, int, int] | None = None  # (high watermark, last stable offset, log start)


@dataclass
class FetchSession:
    """One client's session: its partitions in the order they were added, and the next epoch."""

    id: int
    epoch: int
    partitions: dict[Key, FetchItem] = field(default_factory=dict)


@dataclass
class FetchContext:
    """How to serve one Fetch: the partitions to read, and which of them to answer.

    ``incremental``: answer only the partitions with something new (and
    remember what was sent); otherwise answer all. ``error`` fails the whole
    request; ``session_id`` goes back to the client.
    """

    items: list[FetchItem]
    session_id: int = NO_SESSION
    incremental: bool = False
    error: ErrorCode = ErrorCode.none
    session: FetchSession | None = None

    def rotate(self, served: list[FetchItem]) -> None:
        """Partitions that returned records go to the end of their session's order, so that a
        response limit does not starve the partitions after them (Kafka's rotation)."""
        if self.session is None:
            return
        partitions = self.session.partitions
        for item in served:
            key = (item.topic, item.partition)
            if partitions.get(key) is item:
                partitions[key] = partitions.pop(key)


def _items(request: Any) -> list[FetchItem]:
    return [
        FetchItem(t.topic, int(p.partition), int(p.fetch_offset), int(p.partition_max_bytes),
                  int(getattr(p, "current_leader_epoch", -1)))
        for t in request.topics
        for p in t.partitions
    ]  # fmt: skip


class FetchSessionCache:
    """Sessions by id, least recently used first (see the module doc). The event loop's."""

    def __init__(self, slots: int = 1000) -> None:
        self.slots = slots
        self._sessions: collections.OrderedDict[int, FetchSession] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def _new_id(self) -> int:
        for _ in range(64):  # ids are random positive int32s; a clash is vanishingly rare
            candidate = random.randint(1, 2**31 - 1)
            if candidate not in self._sessions:
                return candidate
        raise RuntimeError("no free fetch session id after 64 draws")

    def resolve(self, request: Any) -> FetchContext:
        """The context of one Fetch request (a v7+ one carries session fields; older ones have none)."""
        session_id = int(getattr(request, "session_id", NO_SESSION))
        epoch = int(getattr(request, "session_epoch", FINAL_EPOCH))
        if epoch == FINAL_EPOCH:
            self._sessions.pop(session_id, None)
            return FetchContext(_items(request))
        if epoch == INITIAL_EPOCH:
            self._sessions.pop(session_id, None)
            if self.slots <= 0:
                return FetchContext(_items(request))
            while len(self._sessions) >= self.slots:
                self._sessions.popitem(last=False)
            items = _items(request)
            created = FetchSession(self._new_id(), INITIAL_EPOCH + 1, {(i.topic, i.partition): i for i in items})
            self._sessions[created.id] = created
            return FetchContext(list(created.partitions.values()), created.id, incremental=False, session=created)
        session = self._sessions.get(session_id)
        if session is None:
            return FetchContext([], error=ErrorCode.fetch_session_id_not_found)
        if epoch != session.epoch:
            return FetchContext([], session_id, error=ErrorCode.invalid_fetch_session_epoch)
        self._sessions.move_to_end(session_id)
        for item in _items(request):
            known = session.partitions.get((item.topic, item.partition))
            if known is not None:
                item.sent = known.sent
            session.partitions[(item.topic, item.partition)] = item
        for forgotten in getattr(request, "forgotten_topics_data", ()) or ():
            for index in forgotten.partitions:
                session.partitions.pop((forgotten.topic, int(index)), None)
        session.epoch = session.epoch + 1 if session.epoch < 2**31 - 1 else 1
        return FetchContext(list(session.partitions.values()), session_id, incremental=True, session=session)


def answer(item: FetchItem, error: ErrorCode, size: int, marks: tuple[int, int, int], incremental: bool) -> bool:
    """Whether a partition goes into the response (always in a full fetch; in an incremental
    one when it has records, an error, or new marks); remembers the marks sent."""
    send = not incremental or size > 0 or error != ErrorCode.none or marks != item.sent
    if send:
        item.sent = marks
    return send
