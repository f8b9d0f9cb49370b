"""The bridge between the client's threads and an event loop: Waker and bridge(), under both loops."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future

import pytest

from logstore.client.aio.bridge import Waker, bridge, wait_for
from tests.kit.aiokit import LOOPS, run

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("loop", LOOPS)
def test_waker_coalesces_wakes_from_threads_and_never_misses_one(loop: str) -> None:
    async def main() -> None:
        runs: list[int] = []
        woke = asyncio.Event()

        def callback() -> None:
            runs.append(1)
            woke.set()

        waker = Waker(asyncio.get_running_loop(), callback)
        threads = [threading.Thread(target=lambda: [waker.wake() for _ in range(1000)]) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        async with asyncio.timeout(10):
            await woke.wait()
        await asyncio.sleep(0.05)
        assert 1 <= len(runs) < 4000  # coalesced: far fewer runs than wakes
        before = len(runs)
        woke.clear()
        threading.Thread(target=waker.wake).start()  # a wake after the runs: runs once more
        async with asyncio.timeout(10):
            await woke.wait()
        assert len(runs) == before + 1
        waker.close()
        waker.wake()
        await asyncio.sleep(0.05)
        assert len(runs) == before + 1  # closed: no more runs

    run(main, loop)


@pytest.mark.parametrize("loop", LOOPS)
def test_bridge_settles_from_another_thread(loop: str) -> None:
    async def main() -> None:
        ok: Future[int] = Future()
        bad: Future[int] = Future()
        threading.Timer(0.05, ok.set_result, (7,)).start()
        threading.Timer(0.05, bad.set_exception, (ValueError("no"),)).start()
        assert await bridge(ok) == 7
        with pytest.raises(ValueError, match="no"):
            await bridge(bad)

    run(main, loop)


@pytest.mark.parametrize("loop", LOOPS)
def test_cancelling_the_bridge_leaves_the_clients_future_running(loop: str) -> None:
    async def main() -> None:
        work: Future[int] = Future()
        task = asyncio.ensure_future(bridge(work))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not work.cancelled() and not work.done()
        work.set_result(1)  # the client's thread settles it later: nothing breaks
        await asyncio.sleep(0.01)
        gone: Future[int] = Future()
        out = bridge(gone)
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await out

    run(main, loop)


@pytest.mark.parametrize("loop", LOOPS)
def test_wait_for_keeps_its_timeout(loop: str) -> None:
    async def main() -> None:
        never: Future[int] = Future()
        started = asyncio.get_running_loop().time()
        with pytest.raises(TimeoutError):
            await wait_for(never, 0.2)
        assert asyncio.get_running_loop().time() - started < 5
        assert not never.done()

    run(main, loop)
