"""The purgatory (logstore/broker/replication/purgatory.py): acks=all produces woken by the HW they wait for."""

from __future__ import annotations

import asyncio

import pytest

from logstore.broker.replication.purgatory import Purgatory

pytestmark = pytest.mark.unit

KEY = ("t", 0)


async def settle() -> None:
    """Let the woken waiters run (wait_for resumes its caller a few loop passes later)."""
    for _ in range(10):
        await asyncio.sleep(0)


def test_a_high_watermark_wakes_only_the_produces_it_completes() -> None:
    async def scenario() -> tuple[list[int], list[int], list[int]]:
        purgatory = Purgatory()
        woken: list[int] = []

        async def produce(offset: int) -> None:
            if await purgatory.wait_replicated(KEY, offset, 5):
                woken.append(offset)

        tasks = [asyncio.create_task(produce(offset)) for offset in (15, 5, 10)]
        await settle()
        purgatory.notify(KEY, 4)  # below every one
        await settle()
        before = list(woken)
        purgatory.notify(KEY, 10)
        await settle()
        at_ten = sorted(woken)
        purgatory.notify(KEY)  # no HW given (leadership or ISR changed): every one looks again
        await asyncio.gather(*tasks)
        return before, at_ten, sorted(woken)

    before, at_ten, after = asyncio.run(scenario())
    assert before == []
    assert at_ten == [5, 10]
    assert after == [5, 10, 15]


def test_a_produce_that_times_out_or_is_cancelled_leaves_nothing_behind() -> None:
    async def scenario() -> tuple[bool, int]:
        purgatory = Purgatory()
        timed_out = await purgatory.wait_replicated(KEY, 7, 0.01)
        cancelled = asyncio.create_task(purgatory.wait_replicated(KEY, 8, 5))
        await asyncio.sleep(0)
        cancelled.cancel()
        await asyncio.gather(cancelled, return_exceptions=True)
        return timed_out, len(purgatory._replicating)

    timed_out, left = asyncio.run(scenario())
    assert timed_out is False
    assert left == 0
