"""Running the asyncio client's tests under both event loops, each run bounded.

``LOOPS`` names the loops a test is parametrized over (asyncio's default loop and uvloop);
:func:`run` runs a coroutine to its end on a fresh loop of that kind, cut at ``timeout``
seconds (TimeoutError: a test never hangs).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import uvloop

T = TypeVar("T")

LOOPS = ("asyncio", "uvloop")


def run(main: Callable[[], Awaitable[T]], loop: str, timeout: float = 120.0) -> T:
    """``main()`` on a new event loop of kind ``loop``, cut at ``timeout`` seconds."""
    factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    if loop == "uvloop":
        factory = uvloop.new_event_loop
    else:
        assert loop == "asyncio", loop

    async def bounded() -> T:
        async with asyncio.timeout(timeout):
            return await main()

    with asyncio.Runner(loop_factory=factory) as runner:
        if loop == "uvloop":
            assert type(runner.get_loop()).__module__.startswith("uvloop"), runner.get_loop()
        else:
            assert not type(runner.get_loop()).__module__.startswith("uvloop")
        return runner.run(bounded())


def loop_kind() -> Any:
    """The running loop's kind, as :data:`LOOPS` names it."""
    return "uvloop" if type(asyncio.get_running_loop()).__module__.startswith("uvloop") else "asyncio"


def make_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    """Create ``topic`` with logstore's sync AdminClient, waiting for it (30 s at most)."""
    from logstore.client.admin import AdminClient, NewTopic

    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)], request_timeout=30)[topic].result(30)


def read_all(bootstrap: str, topic: str, partitions: int, count: int, timeout: float = 60.0) -> list[Any]:
    """At least ``count`` records of ``topic`` read from offset 0 with the sync Consumer (and any
    more that are there within a short grace), as (partition, offset, key, value, headers)."""
    import time

    from logstore.client import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < count and time.monotonic() < deadline:
            for m in consumer.consume(10_000, 0.5):
                assert m.error() is None, m.error()
                out.append((m.partition(), m.offset(), m.key(), m.value(), m.headers()))
        for m in consumer.consume(10_000, 0.5):  # nothing more than expected: a duplicate shows here
            out.append((m.partition(), m.offset(), m.key(), m.value(), m.headers()))
    finally:
        consumer.close()
    return out
