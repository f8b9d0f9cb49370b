"""The coordinator's time: milliseconds since the epoch and one-shot timers.

:class:`LoopClock` runs timers on the running asyncio loop;
:class:`ManualClock` moves only when a test advances it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


class TimerHandle(Protocol):
    """A scheduled callback; ``cancel`` is idempotent."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    """Milliseconds since the epoch and one-shot timers."""

    def now_ms(self) -> int: ...

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle: ...


class LoopClock:
    """Wall-clock time; timers on the running asyncio loop (so call it from the loop)."""

    def now_ms(self) -> int:
        """The wall clock in milliseconds. O(1)."""
        return int(time.time() * 1000)

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` on the loop after ``delay_ms`` (at once if negative). O(log timers)."""
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, callback)


@dataclass(order=True)
class _ManualTimer:
    deadline: int
    sequence: int
    callback: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock that moves only when told: :meth:`advance` runs the timers that come due.

    Timers fire in deadline order (ties in scheduling order), with
    :meth:`now_ms` at their deadline; timers they schedule fire in the same
    call if due.

    >>> clock = ManualClock()
    >>> fired = []
    >>> _ = clock.call_later(10, lambda: fired.append(clock.now_ms()))
    >>> clock.advance(9); fired
    []
    >>> clock.advance(1); fired
    [10]
    """

    def __init__(self, start_ms: int = 0) -> None:
        self._now = start_ms
        self._timers: list[_ManualTimer] = []
        self._sequence = itertools.count()

    def now_ms(self) -> int:
        """The clock's time. O(1)."""
        return self._now

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` once the clock reaches now + ``delay_ms``. O(log timers)."""
        timer = _ManualTimer(self._now + max(delay_ms, 0), next(self._sequence), callback)
        heapq.heappush(self._timers, timer)
        return timer

    def advance(self, delta_ms: int) -> None:
        """Move time forward by ``delta_ms``, firing every timer due by then.

        O((fired + cancelled due timers) × log timers), plus what the callbacks do.
        """
        target = self._now + delta_ms
        while self._timers and self._timers[0].deadline <= target:
            timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                self._now = max(self._now, timer.deadline)
                timer.callback()
        self._now = target

    def pending(self) -> int:
        """How many timers are scheduled and not cancelled. O(timers)."""
        return sum(1 for timer in self._timers if not timer.cancelled)


class Repeating:
    """``action`` every ``interval_ms`` on ``clock`` from :meth:`start` until :meth:`stop` (the
    offset-expiry passes of classic and KIP-848 groups). An action that raises still gets its next
    run. O(1) per call."""

    def __init__(self, clock: Clock, interval_ms: int, action: Callable[[], None]) -> None:
        self._clock = clock
        self._interval_ms = interval_ms
        self._action = action
        self._handle: TimerHandle | None = None

    def start(self) -> None:
        if self._handle is None:
            self._schedule()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _schedule(self) -> None:
        def run() -> None:
            self._handle = None
            try:
                self._action()
            finally:
                self._schedule()

        self._handle = self._clock.call_later(self._interval_ms, run)
