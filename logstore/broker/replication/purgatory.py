"""Where fetches wait for data and acks=all produces for the ISR (Kafka's two purgatories).

A fetch that cannot yet return ``fetch.min.bytes`` waits on the partitions
it asked for, until an append to one of them wakes it or its
``fetch.max.wait.ms`` runs out; it then reads again.

A produce with acks=all waits on its partition for the high watermark to
reach the offset past its batch (:meth:`Purgatory.wait_replicated`). Those
waiters are kept in a heap by that offset: a notice that carries the new
high watermark wakes only the produces it completes (a pipelined producer
has many waiting on one partition, and waking each on every advance is
quadratic); a notice without one (leadership or ISR changed) wakes them all
to look again.

>>> import asyncio
>>> async def main():
...     purgatory = Purgatory()
...     waiter = asyncio.create_task(purgatory.wait([("t", 0)], timeout=5))
...     await asyncio.sleep(0)
...     purgatory.notify(("t", 0))
...     return await waiter
>>> asyncio.run(main())
True
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Hashable, Iterable


class Purgatory:
    """Waiters keyed by partition. O(1) to notify a partition with no waiters."""

    def __init__(self) -> None:
        self._waiters: dict[Hashable, set[asyncio.Future[None]]] = {}
        # Produces waiting for a partition's HW: (offset wanted, arrival, future), a heap per key.
        self._replicating: dict[Hashable, list[tuple[int, int, asyncio.Future[None]]]] = {}
        self._arrivals = itertools.count()
        # Notifications so far: a fetch that read before it waits, with an await between (a
        # pipelined long poll starts its wait in a task of its own), reads again when this moved.
        self.notified = 0

    async def wait(self, keys: Iterable[Hashable], timeout: float) -> bool:
        """Wait until one of ``keys`` is notified (True) or ``timeout`` seconds pass (False)."""
        if timeout <= 0:
            return False
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(keys)
        for key in keys:
            self._waiters.setdefault(key, set()).add(future)
        try:
            await asyncio.wait_for(future, timeout)
            return True
        except TimeoutError:
            return False
        finally:
            for key in keys:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(future)
                    if not waiters:
                        del self._waiters[key]

    async def wait_replicated(self, key: Hashable, offset: int, timeout: float) -> bool:
        """Wait until a notice on ``key`` says its HW reached ``offset``, or a notice with no HW,
        (True), or ``timeout`` seconds pass (False)."""
        if timeout <= 0:
            return False
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heap = self._replicating.setdefault(key, [])
        entry = (offset, next(self._arrivals), future)
        heapq.heappush(heap, entry)
        try:
            await asyncio.wait_for(future, timeout)
            return True  # a notice popped it
        except TimeoutError:
            self._forget(key, entry)
            return False
        except BaseException:
            self._forget(key, entry)
            raise

    def _forget(self, key: Hashable, entry: tuple[int, int, asyncio.Future[None]]) -> None:
        """Take a produce that stopped waiting (timed out, cancelled) out of its heap. O(waiters)."""
        heap = self._replicating.get(key)
        if heap is not None and entry in heap:
            heap.remove(entry)
            heapq.heapify(heap)
            if not heap:
                del self._replicating[key]

    def notify(self, key: Hashable, high_watermark: int | None = None) -> None:
        """Wake every fetch waiting on ``key`` (called after each append and HW move), and the
        produces the new ``high_watermark`` completes (every one of them when it is not given)."""
        self.notified += 1
        waiters = self._waiters.get(key)
        if waiters:
            for future in waiters:
                if not future.done():
                    future.set_result(None)
        heap = self._replicating.get(key)
        if heap:
            while heap and (high_watermark is None or heap[0][0] <= high_watermark):
                future = heapq.heappop(heap)[2]
                if not future.done():
                    future.set_result(None)
            if not heap:
                del self._replicating[key]

    def wake_all(self) -> None:
        for waiters in self._waiters.values():
            for future in waiters:
                if not future.done():
                    future.set_result(None)
        for heap in self._replicating.values():
            for _, _, future in heap:
                if not future.done():
                    future.set_result(None)
        self._replicating.clear()
