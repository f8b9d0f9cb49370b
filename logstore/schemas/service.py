"""The registry as a service: a :class:`Registry` kept in step with the journal of its records.

:class:`RegistryService` owns a :class:`~logstore.schemas.registry.Registry`
whose state changes only by reading the :class:`Journal` (on the broker: the
compacted ``_schemas`` topic, logstore/broker/schema_registry.py) from where it
last read. A write runs under one lock: catch up, compute the records
(``Registry`` operations), append them, then catch up again, so the state a
write answers from is the journal's and never runs ahead of it (Confluent's
``KafkaStore``: write, then wait until the reader has seen it). A read first
catches up (O(1) when nothing is new).

It knows no sockets and no topics: the HTTP layer (http.py) calls it, the
broker hands it a journal.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol, TypeVar

from logstore.schemas import errors
from logstore.schemas.records import Record
from logstore.schemas.registry import Registry, RegistryState

_log = logging.getLogger("logstore.schemas")

T = TypeVar("T")

READ_CHUNKS_MAX = 1 << 20
"""The most journal reads one catch-up makes (each returns at least one record or ends it)."""
WRITE_LOCK_TIMEOUT_S = 30.0
"""How long a write waits for the one before it (then 50002, operation timed out)."""


class Journal(Protocol):
    """Where the registry's records live, in order (the ``_schemas`` topic on the broker).

    Offsets rise; :meth:`end` is where readable records end (what is
    committed: the high watermark), :meth:`start` where they begin.
    """

    def start(self) -> int:
        """The first offset still held (above 0 only after records were deleted)."""
        ...

    def end(self) -> int:
        """The offset after the last readable record. O(1): called before every read."""
        ...

    def read(self, position: int) -> tuple[list[Record], int]:
        """Records from ``position`` up to at most :meth:`end` (a bounded chunk), and the position
        after them; ``position`` itself when nothing is there."""
        ...

    async def append(self, records: list[Record]) -> int:
        """Append ``records`` as one batch and return the offset after them once they are
        committed (readable below :meth:`end`); RegistryError (50001, 50002) if they are not."""
        ...

    async def writer(self) -> str | None:
        """None when this node writes; else the base URL of the node that does (a write is
        forwarded there). RegistryError 50004 when none is known."""
        ...


class RegistryService:
    """A :class:`Registry` over a :class:`Journal` (see the module doc).

    Invariants: ``position`` only rises, except when the journal is found
    shorter than it or starting above it (its records deleted or the topic
    remade): then the state is rebuilt from the journal's start; writes are
    serialized by one lock; no record is applied that the journal does not
    hold below its end.

    Crash policy: nothing is kept but the journal, so a restart replays it;
    an append that fails leaves the state as it was (the write answers
    50001), and a record the registry cannot read is skipped by
    :meth:`RegistryState.apply` (a newer registry's kind) or logged and
    skipped here (a corrupt one), never a reason to stop serving.
    """

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.registry = Registry()
        self.position = 0
        self.generation = 0  # rises whenever the state changes (caches of it, e.g. produce validation)
        self._lock = asyncio.Lock()

    def catch_up(self) -> int:
        """Apply what the journal holds past :attr:`position`; returns how many records."""
        journal = self.journal
        end = journal.end()
        if end == self.position:
            return 0
        start = journal.start()
        if end < self.position or self.position < start:
            _log.warning(
                "the schema journal now spans [%d, %d) but %d was read: rebuilding the registry from %d",
                start, end, self.position, start,
            )  # fmt: skip
            self.registry = Registry(RegistryState())
            self.position = start
            self.generation += 1
        applied = 0
        state = self.registry.state
        for _ in range(READ_CHUNKS_MAX):
            if self.position >= end:
                break
            records, after = journal.read(self.position)
            for key, value in records:
                try:
                    state.apply(key, value)
                except (KeyError, TypeError, ValueError) as e:
                    _log.error("skipping an unreadable schema record (key %r): %s", key[:200] if key else key, e)
            applied += len(records)
            if after <= self.position:
                break
            self.position = after
        if applied:
            self.generation += 1
        return applied

    async def write(self, operation: Callable[[Registry], tuple[T, list[Record]]]) -> T:
        """Run ``operation`` on the caught-up registry and append the records it returns; its
        result once they are applied. Only on the writer (:meth:`Journal.writer` is None)."""
        try:
            await asyncio.wait_for(self._lock.acquire(), WRITE_LOCK_TIMEOUT_S)
        except TimeoutError:
            raise errors.operation_timeout(
                f"the write before this one held the registry for more than {WRITE_LOCK_TIMEOUT_S:.0f} s; retry"
            ) from None
        try:
            self.catch_up()
            result, records = operation(self.registry)
            if records:
                after = await self.journal.append(records)
                self.catch_up()
                if self.position < after:
                    raise errors.store_error(
                        f"the records were appended up to offset {after} but only {self.position} could be "
                        "read back; retry"
                    )
            return result
        finally:
            self._lock.release()

    def read(self) -> Registry:
        """The registry, caught up with the journal (for a read)."""
        self.catch_up()
        return self.registry
