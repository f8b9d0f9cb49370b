"""AIOAdminClient against a real broker process on 127.0.0.1 and in-process (embedded), under
asyncio's loop and uvloop: the calls as coroutines, errors, cancellation, timeouts kept."""

from __future__ import annotations

import asyncio
import pathlib
import time
import uuid
from collections.abc import Iterator

import pytest

from logstore.client import KafkaError, KafkaException, TopicPartition
from logstore.client.admin import NewTopic
from logstore.client.aio import AIOAdminClient, AIOConsumer, AIOShareConsumer
from tests.conftest import FAST_GROUPS
from tests.kit.aiokit import LOOPS, run
from tests.kit.brokerkit import BrokerProcess, free_port, stop_all

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tcp_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(str(tmp_path_factory.mktemp("aio-admin") / "data"), FAST_GROUPS).start()
    yield broker
    stop_all([broker])


@pytest.fixture(params=["tcp", "embedded"])
def bootstrap(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> str:
    if request.param == "tcp":
        return str(request.getfixturevalue("tcp_broker").bootstrap)
    return f"embedded://{tmp_path}/store"


@pytest.mark.parametrize("loop", LOOPS)
def test_admin_calls_as_coroutines(bootstrap: str, loop: str) -> None:
    a, b = f"aio-{uuid.uuid4().hex[:8]}", f"aio-{uuid.uuid4().hex[:8]}"

    async def main() -> None:
        async with AIOAdminClient({"bootstrap.servers": bootstrap}) as admin:
            assert await admin.create_topics([NewTopic(a, 3, 1), NewTopic(b, 1, 1)]) == {a: None, b: None}
            with pytest.raises(KafkaException) as exists:
                await admin.create_topics([NewTopic(a, 3, 1)])
            assert exists.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
            mixed = await admin.create_topics([NewTopic(a, 3, 1), NewTopic(f"{b}-new", 1, 1)], return_exceptions=True)
            assert isinstance(mixed[a], KafkaException) and mixed[f"{b}-new"] is None
            metadata = await admin.list_topics(timeout=30)
            assert len(metadata.topics[a].partitions) == 3
            cluster = await admin.describe_cluster()
            assert cluster.nodes
            async with AIOConsumer({"bootstrap.servers": bootstrap, "group.id": "aio-admin-g"}) as c:
                await c.assign([TopicPartition(a, 0, 0)])
                await c.commit(offsets=[TopicPartition(a, 0, 0)])
            listed = await admin.list_consumer_groups()
            assert "aio-admin-g" in {g.group_id for g in listed.valid}
            assert await admin.delete_topics([b]) == {b: None}

    run(main, loop)


@pytest.mark.parametrize("loop", LOOPS)
def test_a_cancelled_admin_call_still_happens(bootstrap: str, loop: str) -> None:
    name = f"aio-{uuid.uuid4().hex[:8]}"

    async def main() -> None:
        async with AIOAdminClient({"bootstrap.servers": bootstrap}) as admin:
            task = asyncio.create_task(admin.create_topics([NewTopic(name, 2, 1)]))
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                metadata = await admin.list_topics(timeout=10)
                if name in metadata.topics and not metadata.topics[name].error:
                    break
                await asyncio.sleep(0.1)
            assert len(metadata.topics[name].partitions) == 2

    run(main, loop)


@pytest.mark.parametrize("loop", LOOPS)
def test_no_broker_keeps_request_timeout(loop: str) -> None:
    async def main() -> None:
        async with AIOAdminClient({"bootstrap.servers": f"127.0.0.1:{free_port()}"}) as admin:
            started = time.monotonic()
            with pytest.raises(KafkaException):
                await admin.create_topics([NewTopic("t", 1, 1)], request_timeout=1.0)
            assert time.monotonic() - started < 15

    run(main, loop, timeout=60)


def test_share_consumer_has_its_place_and_says_it_is_not_built() -> None:
    with pytest.raises(NotImplementedError, match="ShareConsumer"):
        AIOShareConsumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "s"})
