"""How the client's threads reach an event loop: no thread per call, no polling.

The synchronous client completes work on its own threads (the producer's Sender, one reader
per connection, the heartbeat thread, the admin client's workers) and says so in one of two
ways, both bridged here:

- a :class:`concurrent.futures.Future` (a request's answer, a commit, an admin call):
  :func:`bridge` gives an asyncio future that settles on the loop when it does (one
  ``call_soon_threadsafe`` per future, from the thread that settles it). Cancelling the
  asyncio future never cancels the client's: the work goes on and its outcome is kept by
  whoever added callbacks to it (the callers say what that means for them).
- a wake-up (a delivery report queued, records landed in the fetcher): :class:`Waker` turns
  any number of calls from other threads into one ``call_soon_threadsafe`` per turn of the
  loop, running a callback on the loop's thread, which then does the work there (serving
  reports, collecting records) with no lock held across threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class Waker:
    """Coalesced wake-ups of an event loop from any thread: :meth:`wake` schedules ``callback``
    on the loop unless it is already scheduled and has not run yet.

    Invariant: after any :meth:`wake`, ``callback`` runs on the loop at least once after it
    (the flag is cleared before the callback runs, so a wake during the run schedules another).
    """

    __slots__ = ("_callback", "_closed", "_lock", "_loop", "_scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop, callback: Callable[[], Any]) -> None:
        self._loop = loop
        self._callback = callback
        self._scheduled = False
        self._closed = False
        self._lock = threading.Lock()

    def wake(self) -> None:
        """Any thread: have ``callback`` run on the loop soon. O(1); no-op after :meth:`close`."""
        with self._lock:
            if self._scheduled or self._closed:
                return
            self._scheduled = True
        try:
            self._loop.call_soon_threadsafe(self._run)
        except RuntimeError:  # the loop is closed: nobody is left to wake
            with self._lock:
                self._scheduled = False

    def _run(self) -> None:
        with self._lock:
            self._scheduled = False
        if not self._closed:
            self._callback()

    def close(self) -> None:
        self._closed = True


def bridge(future: Future[T], loop: asyncio.AbstractEventLoop | None = None) -> asyncio.Future[T]:
    """An asyncio future settled (on ``loop``, default the running one) as ``future`` is.

    Unlike :func:`asyncio.wrap_future`, cancelling the result does not cancel ``future``: the
    client's work, once started, finishes either way.
    """
    loop = loop or asyncio.get_running_loop()
    out: asyncio.Future[T] = loop.create_future()

    def copy(done: Future[T]) -> None:
        if out.done():
            return
        if done.cancelled():
            out.cancel()
            return
        error = done.exception()
        if error is not None:
            out.set_exception(error)
        else:
            out.set_result(done.result())

    def settled(done: Future[T]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed
            loop.call_soon_threadsafe(copy, done)

    future.add_done_callback(settled)
    return out


async def wait_for(future: Future[T], timeout: float | None) -> T:
    """Await ``future`` for up to ``timeout`` seconds (None: no limit); TimeoutError after.
    Cancelling the caller leaves ``future`` running (see :func:`bridge`)."""
    async with asyncio.timeout(timeout):
        return await bridge(future)
