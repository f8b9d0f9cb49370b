"""Where fetches wait for data (Kafka's fetch purgatory).

A fetch that cannot yet return ``fetch.min.bytes`` waits on the partitions
it asked for, until an append to one of them wakes it or its
``fetch.max.wait.ms`` runs out; it then reads again.

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
from collections.abc import Hashable, Iterable


class Purgatory:
    """Waiters keyed by partition. O(1) to notify a partition with no waiters."""

    def __init__(self) -> None:
        self._waiters: dict[Hashable, set[asyncio.Future[None]]] = {}
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

    def notify(self, key: Hashable) -> None:
        """Wake every fetch waiting on ``key`` (called after each append)."""
        self.notified += 1
        waiters = self._waiters.get(key)
        if waiters:
            for future in waiters:
                if not future.done():
                    future.set_result(None)

    def wake_all(self) -> None:
        for waiters in self._waiters.values():
            for future in waiters:
                if not future.done():
                    future.set_result(None)
