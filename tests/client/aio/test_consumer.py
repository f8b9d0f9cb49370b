"""AIOConsumer against a real broker process on 127.0.0.1 and in-process (embedded), under
asyncio's loop and uvloop: groups, getmany, async for, commits, cancellation in the middle of
each call (nothing lost, nothing twice), timeouts kept."""

from __future__ import annotations

import asyncio
import pathlib
import random
import time
import uuid
from collections.abc import Iterator

import pytest

from logstore.client import OFFSET_INVALID, KafkaError, KafkaException, Message, Producer, TopicPartition
from logstore.client.aio import AIOConsumer, AIOProducer
from tests.conftest import FAST_GROUPS
from tests.kit.aiokit import LOOPS, make_topic, run
from tests.kit.brokerkit import BrokerProcess, free_port, stop_all

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tcp_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(str(tmp_path_factory.mktemp("aio-consumer") / "data"), FAST_GROUPS).start()
    yield broker
    stop_all([broker])


@pytest.fixture(params=["tcp", "embedded"])
def bootstrap(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> str:
    if request.param == "tcp":
        return str(request.getfixturevalue("tcp_broker").bootstrap)
    return f"embedded://{tmp_path}/store"


def fill(bootstrap: str, partitions: int, n: int) -> str:
    """A new topic with ``n`` records (values b"0".. b"n-1", spread over the partitions)."""
    topic = f"aio-{uuid.uuid4().hex[:10]}"
    make_topic(bootstrap, topic, partitions)
    with Producer({"bootstrap.servers": bootstrap}) as p:
        for i in range(n):
            p.produce(topic, b"%d" % i, partition=i % partitions)
        assert p.flush(60) == 0
    return topic


def group_config(bootstrap: str, **more: object) -> dict[str, object]:
    return {"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, **more}  # fmt: skip


def values(messages: list[Message]) -> list[int]:
    return [int(m.value()) for m in messages]


@pytest.mark.parametrize("loop", LOOPS)
def test_group_getmany_commit_and_committed(bootstrap: str, loop: str) -> None:
    n = 3000
    topic = fill(bootstrap, 3, n)
    config = group_config(bootstrap, **{"enable.auto.commit": False})

    async def main() -> None:
        async with AIOConsumer(config) as c:
            await c.subscribe([topic])
            got: list[Message] = []
            deadline = time.monotonic() + 60
            while len(got) < n and time.monotonic() < deadline:
                batches = await c.getmany(timeout_ms=1000, max_records=700)
                for tp, records in batches.items():
                    assert all(m.partition() == tp.partition and m.topic() == tp.topic for m in records)
                    assert [m.offset() for m in records] == sorted(m.offset() for m in records)
                    got += records
            assert sorted(values(got)) == list(range(n))
            assert await c.getmany(timeout_ms=300) == {}
            result = await c.commit()
            assert result is not None and sorted((tp.partition, tp.offset) for tp in result) == [(0, 1000), (1, 1000), (2, 1000)]
            committed = await c.committed([TopicPartition(topic, p) for p in range(3)])
            assert [tp.offset for tp in committed] == [1000, 1000, 1000]
            positions = await c.position([TopicPartition(topic, p) for p in range(3)])
            assert [tp.offset for tp in positions] == [1000, 1000, 1000]
        async with AIOConsumer(config) as again:  # the same group resumes at the commit: nothing left
            await again.subscribe([topic])
            assert await again.getmany(timeout_ms=2000) == {}

    run(main, loop)


@pytest.mark.parametrize("loop", LOOPS)
def test_async_for_and_auto_commit_of_what_was_handed_out(bootstrap: str, loop: str) -> None:
    """``async for`` yields every record once; auto-commit on close commits what was handed out,
    not what was buffered."""
    n = 1000
    topic = fill(bootstrap, 1, n)
    config = group_config(bootstrap)

    async def main() -> None:
        seen: list[int] = []
        async with AIOConsumer(config) as c:
            await c.subscribe([topic])
            async for m in c:
                seen.append(int(m.value()))
                if len(seen) == 300:
                    break
        assert seen == list(range(300))
        async with AIOConsumer(config) as c:
            await c.subscribe([topic])
            async for m in c:
                seen.append(int(m.value()))
                if len(seen) == n:
                    break
        assert seen == list(range(n))

    run(main, loop)


@pytest.mark.parametrize("loop", LOOPS)
def test_cancelled_getmany_and_anext_lose_nothing(bootstrap: str, loop: str) -> None:
    """Records produced while getmany / __anext__ calls are cancelled at random moments: every
    record is returned by some call exactly once."""
    n = 2000
    topic = f"aio-{uuid.uuid4().hex[:10]}"
    make_topic(bootstrap, topic, 2)
    rng = random.Random(25)

    async def main() -> None:
        async with AIOProducer({"bootstrap.servers": bootstrap, "linger.ms": 1}) as p, \
                AIOConsumer(group_config(bootstrap)) as c:  # fmt: skip
            await c.subscribe([topic])

            async def produce() -> None:
                for i in range(0, n, 50):
                    await p.produce_batch(topic, [b"%d" % j for j in range(i, i + 50)], partition=(i // 50) % 2)
                    await asyncio.sleep(0.002)

            producing = asyncio.create_task(produce())
            got: list[int] = []
            cancelled = 0
            deadline = time.monotonic() + 90
            while len(got) < n and time.monotonic() < deadline:
                if rng.random() < 0.5:
                    task = asyncio.create_task(c.getmany(timeout_ms=rng.choice([0, 5, 50]), max_records=rng.randint(1, 300)))
                else:
                    task = asyncio.create_task(c.getone())
                await asyncio.sleep(rng.choice([0, 0, 0.0005, 0.002]))
                task.cancel()
                try:
                    result = await task
                except asyncio.CancelledError:
                    cancelled += 1
                    continue
                if isinstance(result, dict):
                    for records in result.values():
                        got += values(records)
                else:
                    got.append(int(result.value()))
            await producing
            while True:  # anything left over is returned by plain calls
                rest = await c.getmany(timeout_ms=500)
                if not rest:
                    break
                for records in rest.values():
                    got += values(records)
            assert cancelled > 10
            assert sorted(got) == list(range(n)), (len(got), len(set(got)))

    run(main, loop, timeout=180)


@pytest.mark.parametrize("loop", LOOPS)
def test_a_cancelled_commit_is_all_or_nothing(bootstrap: str, loop: str) -> None:
    topic = fill(bootstrap, 3, 30)
    config = group_config(bootstrap, **{"enable.auto.commit": False})
    parts = [TopicPartition(topic, p) for p in range(3)]

    async def main() -> None:
        async with AIOConsumer(config) as c:
            await c.assign([TopicPartition(topic, p, 0) for p in range(3)])
            previous = OFFSET_INVALID
            outcomes = set()
            for attempt in range(1, 9):
                offset = attempt
                task = asyncio.create_task(c.commit(offsets=[TopicPartition(topic, p, offset) for p in range(3)]))
                for _ in range(attempt % 4):
                    await asyncio.sleep(0)
                task.cancel()
                try:
                    await task
                    outcomes.add("done")
                except asyncio.CancelledError:
                    outcomes.add("cancelled")
                await asyncio.sleep(0.3)  # a request in flight lands
                committed = [tp.offset for tp in await c.committed(parts)]
                assert len(set(committed)) == 1, committed  # never half
                assert committed[0] in (previous, offset)
                previous = committed[0]
            assert "cancelled" in outcomes

    run(main, loop)


@pytest.mark.parametrize("loop", LOOPS)
def test_assign_seek_and_error_events(bootstrap: str, loop: str) -> None:
    topic = fill(bootstrap, 1, 100)

    async def main() -> None:
        async with AIOConsumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "none"}) as c:
            await c.assign([TopicPartition(topic, 0, 90)])
            got = await c.consume(1000, 10)
            assert values(got) == list(range(90, 100))
            await c.seek(TopicPartition(topic, 0, 5))
            first = await c.getone()
            assert first.offset() == 5
            await c.seek(TopicPartition(topic, 0, 10_000))  # out of range, no reset: an error event
            with pytest.raises(KafkaException):
                for _ in range(50):
                    await c.getmany(timeout_ms=200)

    run(main, loop)


@pytest.mark.parametrize("loop", LOOPS)
def test_no_broker_keeps_the_timeouts(loop: str) -> None:
    bootstrap = f"127.0.0.1:{free_port()}"

    async def main() -> None:
        heard: list[KafkaError] = []
        config = group_config(bootstrap, **{"socket.connection.setup.timeout.ms": 300})
        c = AIOConsumer(config)
        quiet = AIOConsumer(group_config(bootstrap, error_cb=heard.append))
        await quiet.subscribe(["nowhere"])
        assert await quiet.getmany(timeout_ms=500) == {}
        assert heard and heard[0].code() in (KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT)
        await quiet.close()
        await c.subscribe(["nowhere"])
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        tick_task = asyncio.create_task(ticker())
        started = time.monotonic()
        assert await c.getmany(timeout_ms=1000) == {}
        elapsed = time.monotonic() - started
        assert 0.9 <= elapsed < 10, elapsed
        assert ticks >= 5  # the loop ran other tasks meanwhile
        with pytest.raises(KafkaException):
            await c.committed([TopicPartition("nowhere", 0)], timeout=1.0)
        assert time.monotonic() - started < 20
        tick_task.cancel()
        await c.close()

    run(main, loop, timeout=60)


@pytest.mark.parametrize("loop", LOOPS)
def test_asynchronous_commit_reports_to_on_commit(bootstrap: str, loop: str) -> None:
    topic = fill(bootstrap, 1, 10)
    heard: list[tuple[object, list[TopicPartition]]] = []
    config = group_config(bootstrap, **{"enable.auto.commit": False,
                                        "on_commit": lambda err, parts: heard.append((err, parts))})  # fmt: skip

    async def main() -> None:
        async with AIOConsumer(config) as c:
            await c.assign([TopicPartition(topic, 0, 0)])
            assert values(await c.consume(10, 10)) == list(range(10))
            assert await c.commit(asynchronous=True) is None
            deadline = time.monotonic() + 30
            while not heard and time.monotonic() < deadline:
                await c.consume(1, 0.2)  # serves on_commit, as the sync consumer's poll
            assert heard and heard[0][0] is None and [tp.offset for tp in heard[0][1]] == [10]
            assert [tp.offset for tp in await c.committed([TopicPartition(topic, 0)])] == [10]

    run(main, loop)
