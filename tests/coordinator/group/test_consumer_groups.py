"""The consumer group protocol (KIP-848) against a broker process: librdkafka with
``group.protocol=consumer``, and the APIs on the wire.

The broker runs with a 4 s ``group.consumer.session.timeout.ms`` and a 500 ms heartbeat interval,
so a killed member's partitions move within seconds. Every wait is bounded.
"""

from __future__ import annotations

import datetime
import queue
import subprocess
import sys
import textwrap
import threading
import time
import typing
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode

from tests.kit.brokerkit import BrokerProcess, create_topic, wait_for
from tests.kit.brokerkit import produce_numbered as produce
from tests.kit.wire import WireClient, request_class

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SESSION_MS = 4000
KIP848 = {
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.session.timeout.ms": str(SESSION_MS),
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "100",
}
DEADLINE_S = 30
STALE_MEMBER_EPOCH = 113


@pytest.fixture
def kip848_broker(broker_factory: Any) -> BrokerProcess:
    return broker_factory(KIP848)  # type: ignore[no-any-return]






def commit(consumer: Any, topic: str, partition: int, offset: int) -> None:
    """Commit synchronously; a commit that crossed an epoch bump (STALE_MEMBER_EPOCH) is retried."""
    for _ in range(50):
        try:
            consumer.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)
            return
        except KafkaException as e:
            if e.args[0].code() != STALE_MEMBER_EPOCH:
                raise
            time.sleep(0.1)
    raise AssertionError("the commit stayed stale")


class Member:
    """A librdkafka consumer of the consumer protocol: each record is committed before the next poll."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str) -> None:
        self.name = name
        self.topic = topic
        self.owned: set[int] = set()
        self.values: list[int] = []
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "client.id": name,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        self.consumer.subscribe(
            [topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked
        )

    def _assigned(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        self.owned |= {tp.partition for tp in partitions}

    def _revoked(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        self.owned -= {tp.partition for tp in partitions}

    def poll(self, timeout: float = 0.05) -> None:
        msg = self.consumer.poll(timeout)
        if msg is None:
            return
        if msg.error():
            assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
            return
        assert msg.partition() in self.owned, f"{self.name} got a record of {msg.partition()}"
        commit(self.consumer, self.topic, msg.partition(), msg.offset() + 1)
        self.values.append(int(msg.value()))

    def close(self) -> None:
        self.consumer.close()


_CHILD = textwrap.dedent(
    """
    import sys, time
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    bootstrap, topic, group = sys.argv[1:4]
    owned = set()

    def report():
        print("ASSIGNED " + ",".join(map(str, sorted(owned))), flush=True)

    def assigned(consumer, partitions):
        owned.update(p.partition for p in partitions)
        report()

    def revoked(consumer, partitions):
        owned.difference_update(p.partition for p in partitions)
        report()

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                         "client.id": "child", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic], on_assign=assigned, on_revoke=revoked, on_lost=revoked)
    for _ in range(10_000_000):  # killed long before
        msg = consumer.poll(0.1)
        if msg is None or msg.error():
            continue
        for _ in range(50):
            try:
                consumer.commit(offsets=[TopicPartition(topic, msg.partition(), msg.offset() + 1)],
                                asynchronous=False)
                break
            except KafkaException as e:
                if e.args[0].code() != 113:  # STALE_MEMBER_EPOCH: retry after the next heartbeat
                    raise
                time.sleep(0.1)
        print(f"REC {msg.partition()} {msg.offset()} {int(msg.value())}", flush=True)
    """
)


class ChildMember:
    """A librdkafka consumer in its own process (to kill -9), reporting its partitions and records."""

    def __init__(self, bootstrap: str, topic: str, group: str, log: typing.IO[str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, bootstrap, topic, group],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        self.owned: set[int] = set()
        self.values: list[int] = []
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)

    def update(self) -> None:
        for _ in range(self._lines.qsize()):
            line = self._lines.get_nowait()
            if line.startswith("ASSIGNED"):
                self.owned = {int(p) for p in (line.split()[1:] or [""])[0].split(",") if p}
            elif line.startswith("REC"):
                self.values.append(int(line.split()[3]))

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


def describe(bootstrap: str, group: str) -> Any:
    with WireClient(bootstrap) as client:
        response = client.call(request_class(69, 1)(group_ids=(group,), include_authorized_operations=False))
    return response.groups[0]


def test_librdkafka_members_join_leave_and_die_and_every_record_is_consumed_once(
    kip848_broker: BrokerProcess, tmp_path: Any
) -> None:
    bootstrap = kip848_broker.bootstrap
    create_topic(bootstrap, "kt", 6)
    produce(bootstrap, "kt", 6, 300)
    everything = set(range(6))
    log = open(tmp_path / "child.log", "w+")  # noqa: SIM115 - closed in finally
    child = ChildMember(bootstrap, "kt", "kg", log)
    a, b = Member(bootstrap, "kg", "kt", "a"), Member(bootstrap, "kg", "kt", "b")
    members = [a, b]

    def step() -> None:
        for member in members:
            member.poll()
        child.update()
        assert not a.owned & b.owned, f"a and b both own {a.owned & b.owned}"

    def consumed() -> int:
        return len(a.values) + len(b.values) + len(child.values)

    try:
        wait_for(
            lambda: (
                bool(a.owned and b.owned and child.owned)
                and a.owned | b.owned | child.owned == everything
                and consumed() == 300
            ),
            DEADLINE_S,
            step,
            "three members to share the six partitions and consume the first 300 records",
        )
        group = describe(bootstrap, "kg")
        assert (group.error_code, group.group_state, group.assignor_name) == (
            ErrorCode.none,
            "Stable",
            "uniform",
        )
        assert sorted(len(m.assignment.topic_partitions[0].partitions) for m in group.members) == [2, 2, 2]
        # librdkafka's AdminClient sees a consumer-protocol group (it asks with ConsumerGroupDescribe).
        admin = AdminClient({"bootstrap.servers": bootstrap})
        seen = admin.describe_consumer_groups(["kg"])["kg"].result(10)
        assert (seen.type, seen.state, seen.partition_assignor) == (
            ConsumerGroupType.CONSUMER,
            ConsumerGroupState.STABLE,
            "uniform",
        )
        assert len(seen.members) == 3
        # A member leaves (close: member epoch -1): the others take its partitions at once.
        a.close()
        members.remove(a)
        moved = wait_for(
            lambda: b.owned | child.owned == everything and len(b.owned) == len(child.owned) == 3,
            DEADLINE_S,
            step,
            "the leaving member's partitions to move",
        )
        assert moved < SESSION_MS / 1000, f"a leave took {moved:.1f} s to act on (that is a session expiry)"
        # A member dies (kill -9, everything it read committed): its partitions move after its session.
        child.kill()
        killed = time.monotonic()
        produce(bootstrap, "kt", 6, 300, start=300)
        wait_for(
            lambda: b.owned == everything, DEADLINE_S, step, "b to take over the dead member's partitions"
        )
        took = time.monotonic() - killed
        assert SESSION_MS / 1000 - 1 <= took <= 15, f"the dead member's partitions moved after {took:.1f} s"
        wait_for(lambda: consumed() == 600, DEADLINE_S, step, "the last 300 records")
        for _ in range(20):  # nothing more arrives
            step()
        values = a.values + b.values + child.values
        assert sorted(values) == list(range(600)), "records lost or consumed twice"
        # The commits hold: the committed offsets are the ends of the partitions.
        check = Consumer({"bootstrap.servers": bootstrap, "group.id": "kg"})
        committed = check.committed([TopicPartition("kt", p) for p in range(6)], timeout=10)
        check.close()
        assert [tp.offset for tp in committed] == [100] * 6
        assert [m.member_id for m in describe(bootstrap, "kg").members] != []
        b.close()
        members.clear()
        assert describe(bootstrap, "kg").group_state == "Empty"
    except AssertionError as e:
        log.flush()
        log.seek(0)
        raise AssertionError(f"{e}\nthe child's log:\n{log.read()[-3000:]}") from None
    finally:
        if child.proc.poll() is None:
            child.kill()
        for member in members:
            member.close()
        log.close()


# -- on the wire ------------------------------------------------------------------------------


def ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


def heartbeat(client: WireClient, member_id: str, epoch: int, **fields: Any) -> Any:
    cls = request_class(68, 1)
    module = sys.modules[cls.__module__]
    owned = fields.pop("owned", None if epoch != 0 else ())
    topic_partitions = (
        None
        if owned is None
        else tuple(module.TopicPartitions(topic_id=t, partitions=tuple(ps)) for t, ps in owned)
    )
    values: dict[str, Any] = {
        "group_id": "wg",
        "member_id": member_id,
        "member_epoch": epoch,
        "topic_partitions": topic_partitions,
    }
    if epoch == 0:
        values |= {"rebalance_timeout": ms(30_000), "subscribed_topic_names": ("wt",)}
    values |= fields
    return client.call(cls(**values))


def topic_id(client: WireClient, name: str) -> uuid.UUID:
    metadata = client.call(
        request_class(3, 12)(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
    )  # every topic
    return typing.cast(uuid.UUID, next(t.topic_id for t in metadata.topics if t.name == name))


def test_consumer_group_apis_on_the_wire(kip848_broker: BrokerProcess) -> None:
    bootstrap = kip848_broker.bootstrap
    create_topic(bootstrap, "wt", 4)
    with WireClient(bootstrap) as client:
        versions = {k.api_key: (k.min_version, k.max_version) for k in client.call(request_class(18, 3)(
            client_software_name="wire", client_software_version="1")).api_keys}  # fmt: skip
        assert versions[68] == (0, 1) and versions[69] == (0, 1)
        t = topic_id(client, "wt")
        # Bad input gets Kafka's codes and messages.
        bad = heartbeat(client, "m1", 0, rebalance_timeout=ms(-1))
        assert (bad.error_code, bad.error_message) == (
            ErrorCode.invalid_request,
            "RebalanceTimeoutMs must be provided in first request.",
        )
        assert (
            heartbeat(client, "m1", 0, server_assignor="sticky").error_code == ErrorCode.unsupported_assignor
        )
        assert heartbeat(client, "m1", 3).error_code == ErrorCode.group_id_not_found
        # m1 joins and owns everything; m2 joins and waits until m1 has revoked.
        first = heartbeat(client, "m1", 0, server_assignor="range")
        assert (first.error_code, first.member_epoch, first.heartbeat_interval) == (
            ErrorCode.none,
            1,
            ms(500),
        )
        assert [(p.topic_id, p.partitions) for p in first.assignment.topic_partitions] == [(t, (0, 1, 2, 3))]
        second = heartbeat(client, "m2", 0, server_assignor="range")
        assert (second.member_epoch, second.assignment.topic_partitions) == (2, ())
        revoke = heartbeat(client, "m1", 1, owned=[(t, [0, 1, 2, 3])])
        assert revoke.member_epoch == 1 and revoke.assignment.topic_partitions[0].partitions == (0, 1)
        assert heartbeat(client, "m1", 1, owned=[(t, [0, 1])]).member_epoch == 2
        got = heartbeat(client, "m2", 2, owned=[])
        assert got.assignment.topic_partitions[0].partitions == (2, 3)
        assert heartbeat(client, "m2", 7, owned=[]).error_code == ErrorCode.fenced_member_epoch
        assert heartbeat(client, "nobody", 2, owned=[]).error_code == ErrorCode.unknown_member_id
        # ConsumerGroupDescribe, ListGroups v5 (types), DescribeGroups v6 (not a classic group).
        described = describe(bootstrap, "wg")
        assert (described.group_state, described.group_epoch, described.assignment_epoch) == ("Stable", 2, 2)
        assert described.assignor_name == "range"
        assert {(m.member_id, m.member_type) for m in described.members} == {("m1", 1), ("m2", 1)}
        listed = client.call(request_class(16, 5)(states_filter=(), types_filter=("consumer",))).groups
        assert [(g.group_id, g.group_type, g.group_state, g.protocol_type) for g in listed] == [
            ("wg", "consumer", "Stable", "consumer")
        ]
        assert client.call(request_class(16, 5)(states_filter=(), types_filter=("classic",))).groups == ()
        classic_view = client.call(request_class(15, 6)(groups=("wg",), include_authorized_operations=False))
        assert (classic_view.groups[0].error_code, classic_view.groups[0].error_message) == (
            ErrorCode.group_id_not_found,
            "Group wg is not a classic group.",
        )
        # OffsetCommit v9: the member epoch; OffsetFetch v9: the member and its epoch.
        oc9 = request_class(8, 9)
        oc_module = sys.modules[oc9.__module__]

        def commit_at(epoch: int) -> ErrorCode:
            topics = (
                oc_module.OffsetCommitRequestTopic(
                    name="wt",
                    partitions=(
                        oc_module.OffsetCommitRequestPartition(
                            partition_index=0,
                            committed_offset=5,
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        ),
                    ),
                ),
            )
            response = client.call(
                oc9(group_id="wg", generation_id_or_member_epoch=epoch, member_id="m1", topics=topics)
            )
            return typing.cast(ErrorCode, response.topics[0].partitions[0].error_code)

        assert commit_at(2) == ErrorCode.none
        assert commit_at(1) == ErrorCode.stale_member_epoch
        of9 = request_class(9, 9)
        of_module = sys.modules[of9.__module__]

        def fetch_at(member_id: str | None, epoch: int) -> Any:
            group = of_module.OffsetFetchRequestGroup(
                group_id="wg",
                member_id=member_id,
                member_epoch=epoch,
                topics=(of_module.OffsetFetchRequestTopics(name="wt", partition_indexes=(0,)),),
            )
            return client.call(of9(groups=(group,), require_stable=False)).groups[0]

        fetched = fetch_at("m1", 2)
        assert (fetched.error_code, fetched.topics[0].partitions[0].committed_offset) == (ErrorCode.none, 5)
        assert fetch_at("m1", 1).error_code == ErrorCode.stale_member_epoch
        assert fetch_at(None, -1).topics[0].partitions[0].committed_offset == 5
        # Leaving: m2 leaves, m1's static-less leave empties the group.
        assert heartbeat(client, "m2", -1).member_epoch == -1
        assert heartbeat(client, "m1", -1).error_code == ErrorCode.none
        assert describe(bootstrap, "wg").group_state == "Empty"
        missing = client.call(
            request_class(69, 0)(group_ids=("none", ""), include_authorized_operations=True)
        )
        assert [g.error_code for g in missing.groups] == [
            ErrorCode.group_id_not_found,
            ErrorCode.invalid_group_id,
        ]


def test_consumer_group_survives_a_broker_kill(kip848_broker: BrokerProcess) -> None:
    bootstrap = kip848_broker.bootstrap
    create_topic(bootstrap, "wt", 2)
    with WireClient(bootstrap) as client:
        t = topic_id(client, "wt")
        joined = heartbeat(client, "m1", 0)
        assert joined.member_epoch == 1
    kip848_broker.kill()
    kip848_broker.restart()
    with WireClient(bootstrap) as client:
        # The restarted coordinator knows the member at its epoch: it carries on, unfenced.
        again = heartbeat(client, "m1", 1, owned=[(t, [0, 1])])
        assert (again.error_code, again.member_epoch) == (ErrorCode.none, 1)
        assert describe(bootstrap, "wg").members[0].member_id == "m1"
        # A member the coordinator never knew is told so, and rejoins with epoch 0.
        assert heartbeat(client, "m9", 4, owned=[]).error_code == ErrorCode.unknown_member_id
        assert heartbeat(client, "m9", 0).error_code == ErrorCode.none


def test_group_configs_on_the_wire(kip848_broker: BrokerProcess) -> None:
    bootstrap = kip848_broker.bootstrap
    describe_class = request_class(32, 4)
    describe_module = sys.modules[describe_class.__module__]
    alter_class = request_class(44, 1)
    alter_module = sys.modules[alter_class.__module__]

    def described(client: WireClient, group: str) -> dict[str, tuple[str, int]]:
        resource = describe_module.DescribeConfigsResource(
            resource_type=32, resource_name=group, configuration_keys=None
        )
        result = client.call(
            describe_class(resources=(resource,), include_synonyms=True, include_documentation=False)
        ).results[0]
        assert result.error_code == ErrorCode.none, result.error_message
        return {c.name: (c.value, c.config_source) for c in result.configs}

    def alter(client: WireClient, group: str, *changes: tuple[str, int, str | None]) -> tuple[ErrorCode, str]:
        configs = tuple(
            alter_module.AlterableConfig(name=name, config_operation=op, value=value)
            for name, op, value in changes
        )
        resource = alter_module.AlterConfigsResource(resource_type=32, resource_name=group, configs=configs)
        response = client.call(alter_class(resources=(resource,), validate_only=False)).responses[0]
        return response.error_code, response.error_message

    with WireClient(bootstrap) as client:
        assert described(client, "cg") == {
            "consumer.heartbeat.interval.ms": ("500", 5),
            "consumer.session.timeout.ms": (str(SESSION_MS), 5),
        }
        assert alter(client, "cg", ("consumer.session.timeout.ms", 0, "2000")) == (ErrorCode.none, None)
        assert described(client, "cg")["consumer.session.timeout.ms"] == ("2000", 8)
        assert alter(client, "cg", ("consumer.session.timeout.ms", 0, "999"))[0] == ErrorCode.invalid_config
        assert alter(client, "cg", ("consumer.heartbeat.interval.ms", 0, "2000")) == (
            ErrorCode.invalid_config,
            "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms",
        )
        assert alter(client, "cg", ("share.record.lock.duration.ms", 0, "1"))[0] == ErrorCode.invalid_config
        assert alter(client, "cg", ("consumer.session.timeout.ms", 2, "1"))[0] == ErrorCode.invalid_config
        joined = heartbeat(client, "m1", 0, group_id="cg")
        assert joined.heartbeat_interval == ms(500)
    kip848_broker.stop()
    kip848_broker.restart()
    with WireClient(bootstrap) as client:  # kept across a restart
        assert described(client, "cg")["consumer.session.timeout.ms"] == ("2000", 8)
        assert alter(client, "cg", ("consumer.session.timeout.ms", 1, None)) == (ErrorCode.none, None)
        assert described(client, "cg")["consumer.session.timeout.ms"] == (str(SESSION_MS), 5)


@pytest.fixture(autouse=True)
def _bounded(request: Any) -> Iterator[None]:
    start = time.monotonic()
    yield
    assert time.monotonic() - start < 90, f"{request.node.name} took {time.monotonic() - start:.0f} s"
