"""AIOProducer against a real broker process on 127.0.0.1 and in-process (embedded), under
asyncio's loop and uvloop: round trips, back-pressure, cancellation (nothing lost, nothing
twice), transactions, timeouts kept."""

from __future__ import annotations

import asyncio
import collections
import pathlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from logstore.client import KafkaError, KafkaException
from logstore.client.aio import AIOProducer
from logstore.client.config import ConfigError
from tests.conftest import FAST_GROUPS
from tests.kit.aiokit import LOOPS, make_topic, read_all, run
from tests.kit.brokerkit import BrokerProcess, free_port, stop_all

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tcp_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(str(tmp_path_factory.mktemp("aio-producer") / "data"), FAST_GROUPS).start()
    yield broker
    stop_all([broker])


@pytest.fixture(params=["tcp", "embedded"])
def bootstrap(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> str:
    if request.param == "tcp":
        return str(request.getfixturevalue("tcp_broker").bootstrap)
    return f"embedded://{tmp_path}/store"


def topic_name() -> str:
    return f"aio-{uuid.uuid4().hex[:10]}"


@pytest.mark.parametrize("loop", LOOPS)
def test_produce_resolves_to_the_delivered_message(bootstrap: str, loop: str) -> None:
    topic = topic_name()
    make_topic(bootstrap, topic, 2)

    async def main() -> list[Any]:
        async with AIOProducer({"bootstrap.servers": bootstrap, "linger.ms": 1}) as p:
            first = await p.produce(topic, b"v0", key=b"k", headers=[("h", b"1")], partition=1)
            assert first.error() is None
            assert (first.topic(), first.partition(), first.offset()) == (topic, 1, 0)
            assert first.value() == b"v0" and first.key() == b"k"
            futures = [await p.send(topic, b"v%d" % i, partition=i % 2) for i in range(1, 1001)]
            delivered = await asyncio.gather(*futures)
            counted = await p.produce_batch(topic, [b"b%d" % i for i in range(500)], partition=0)
            assert counted == 500
            assert await p.flush(30) == 0  # (the Sender releases a batch's room just after its report)
            assert len(p) == 0
            return delivered

    delivered = run(main, loop)
    offsets = collections.defaultdict(list)
    for m in delivered:
        offsets[m.partition()].append(m.offset())
    assert offsets[0] == list(range(500)) and offsets[1] == list(range(1, 501))
    records = read_all(bootstrap, topic, 2, 1501)
    assert len(records) == 1501
    assert sorted(r[3] for r in records) == sorted([b"v%d" % i for i in range(1001)] + [b"b%d" % i for i in range(500)])
    assert (1, 0, b"k", b"v0", [("h", b"1")]) in records


@pytest.mark.parametrize("loop", LOOPS)
def test_a_bad_record_raises_at_once(bootstrap: str, loop: str) -> None:
    topic = topic_name()
    make_topic(bootstrap, topic, 1)

    async def main() -> None:
        async with AIOProducer({"bootstrap.servers": bootstrap, "message.max.bytes": 10_000}) as p:
            with pytest.raises(KafkaException) as big:
                await p.produce(topic, b"x" * 20_000)
            assert big.value.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
            await p.produce(topic, b"ok")  # known partitions from now on
            with pytest.raises(KafkaException) as part:
                await p.produce(topic, b"x", partition=5)
            assert part.value.args[0].code() == KafkaError._UNKNOWN_PARTITION
            with pytest.raises(TypeError):
                await p.produce(topic, 12345)

    run(main, loop)
    assert [r[3] for r in read_all(bootstrap, topic, 1, 1)] == [b"ok"]


@pytest.mark.parametrize("loop", LOOPS)
def test_a_full_buffer_makes_records_wait_in_order(bootstrap: str, loop: str) -> None:
    """Far more records than queue.buffering.max.messages: none refused, the loop never blocked,
    all delivered once, in order."""
    topic = topic_name()
    make_topic(bootstrap, topic, 1)
    n = 3000

    async def main() -> None:
        config = {"bootstrap.servers": bootstrap, "queue.buffering.max.messages": 50, "batch.num.messages": 20}
        async with AIOProducer(config) as p:
            ticks = 0

            async def ticker() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0.001)

            tick_task = asyncio.create_task(ticker())
            futures = [p.send_nowait(topic, b"%d" % i) for i in range(n)]
            assert len(p) == n  # the loop was never blocked: all accepted at once
            half = [await p.send(topic, b"%d" % i) for i in range(n, n + 100)]  # waits for room
            delivered = await asyncio.gather(*futures, *half)
            tick_task.cancel()
            assert [m.offset() for m in delivered] == list(range(n + 100))
            assert ticks > 1

    run(main, loop)
    assert [r[3] for r in read_all(bootstrap, topic, 1, n + 100)] == [b"%d" % i for i in range(n + 100)]


@pytest.mark.parametrize("loop", LOOPS)
def test_cancelled_produce_is_delivered_once(bootstrap: str, loop: str) -> None:
    """Tasks cancelled while awaiting delivery (some before their record is sent, some while it
    waits for room): every record is delivered exactly once."""
    topic = topic_name()
    make_topic(bootstrap, topic, 3)
    n = 600

    async def main() -> None:
        config = {"bootstrap.servers": bootstrap, "linger.ms": 50, "queue.buffering.max.messages": 100}
        async with AIOProducer(config) as p:
            tasks = [asyncio.create_task(p.produce(topic, b"%d" % i, key=b"%d" % (i % 7))) for i in range(n)]
            await asyncio.sleep(0)  # every task has run to its first await: its record is queued
            for i, task in enumerate(tasks):
                if i % 2 == 0:
                    task.cancel()
            results = await asyncio.gather(*tasks, return_exceptions=True)
            cancelled = sum(isinstance(r, asyncio.CancelledError) for r in results)
            assert cancelled > 0
            assert all(not isinstance(r, BaseException) or isinstance(r, asyncio.CancelledError) for r in results)
            assert await p.flush(60) == 0

    run(main, loop)
    records = read_all(bootstrap, topic, 3, n)
    values = sorted(int(r[3]) for r in records)
    assert values == list(range(n)), f"{len(values)} records for {n}"


@pytest.mark.parametrize("loop", LOOPS)
def test_transactions_commit_and_abort(bootstrap: str, loop: str) -> None:
    topic = topic_name()
    make_topic(bootstrap, topic, 1)

    async def main() -> None:
        config = {"bootstrap.servers": bootstrap, "transactional.id": f"tx-{uuid.uuid4()}"}
        async with AIOProducer(config) as p:
            await p.init_transactions(60)
            await p.begin_transaction()
            futures = [await p.send(topic, b"kept-%d" % i) for i in range(10)]
            await p.commit_transaction(60)
            assert all(f.done() and f.exception() is None for f in futures)
            await p.begin_transaction()
            dropped = [p.send_nowait(topic, b"dropped-%d" % i) for i in range(10)]
            await p.abort_transaction(60)
            outcomes = await asyncio.gather(*dropped, return_exceptions=True)
            assert all(isinstance(o, KafkaException) or o.offset() >= 0 for o in outcomes)
            await p.begin_transaction()
            await p.produce(topic, b"last")
            await p.commit_transaction(60)

    run(main, loop)
    from logstore.client import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(seen) < 11 and time.monotonic() < deadline:
        seen += [m.value() for m in consumer.consume(100, 0.5) if m.error() is None]
    seen += [m.value() for m in consumer.consume(100, 1.0) if m.error() is None]
    consumer.close()
    assert seen == [b"kept-%d" % i for i in range(10)] + [b"last"]


@pytest.mark.parametrize("loop", LOOPS)
def test_no_broker_fails_records_and_flush_keeps_its_timeout(loop: str) -> None:
    """A refused port: the record's future fails with _MSG_TIMED_OUT within max.block.ms, and
    flush(t) returns by about t."""
    bootstrap = f"127.0.0.1:{free_port()}"

    async def main() -> None:
        p = AIOProducer({"bootstrap.servers": bootstrap, "max.block.ms": 1500, "socket.connection.setup.timeout.ms": 500})
        future = p.send_nowait("nowhere", b"x")
        started = time.monotonic()
        assert await p.flush(0.3) == 1
        assert time.monotonic() - started < 5
        with pytest.raises(KafkaException) as failed:
            await future
        assert failed.value.args[0].code() == KafkaError._MSG_TIMED_OUT
        assert time.monotonic() - started < 20
        assert await p.close(1) == 0

    run(main, loop, timeout=60)


def test_delivery_report_only_error_is_refused() -> None:
    async def main() -> None:
        with pytest.raises(ConfigError):
            AIOProducer({"bootstrap.servers": "127.0.0.1:1", "delivery.report.only.error": True})

    run(main, "asyncio")


@pytest.mark.parametrize("loop", LOOPS)
def test_produce_batch_waits_for_room_as_a_whole_in_order(bootstrap: str, loop: str) -> None:
    """Lists that do not fit the buffer together (and one larger than the whole buffer) wait
    their turn: all delivered once, in order, the loop never blocked."""
    topic = topic_name()
    make_topic(bootstrap, topic, 1)

    async def main() -> None:
        config = {"bootstrap.servers": bootstrap, "queue.buffering.max.messages": 250, "batch.num.messages": 50}
        async with AIOProducer(config) as p:
            await p.produce(topic, b"first")
            chunks = [[b"%d-%d" % (c, i) for i in range(200)] for c in range(10)]
            chunks.append([b"big-%d" % i for i in range(600)])  # larger than the buffer
            tasks = [asyncio.create_task(p.produce_batch(topic, chunk, partition=0)) for chunk in chunks]
            await asyncio.sleep(0)
            assert len(p) > 250  # accepted at once, waiting in order
            tasks[3].cancel()  # cancelled: its records are still delivered
            last = p.send_nowait(topic, b"last")
            results = await asyncio.gather(*tasks, return_exceptions=True)
            assert isinstance(results[3], asyncio.CancelledError)
            assert [r for i, r in enumerate(results) if i != 3] == [200] * 9 + [600]
            assert (await last).offset() == 1 + 2000 + 600

    run(main, loop)
    expected = [b"first"] + [b"%d-%d" % (c, i) for c in range(10) for i in range(200)]
    expected += [b"big-%d" % i for i in range(600)] + [b"last"]
    assert [r[3] for r in read_all(bootstrap, topic, 1, len(expected))] == expected
