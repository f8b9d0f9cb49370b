"""logstore.client.admin.AdminClient against a broker process, the embedded transport, and confluent's client.

One broker process serves the module (topic and group names are unique per
test); each test that can cross-checks answers with
``confluent_kafka.admin.AdminClient`` on the same broker. The embedded test
runs a subset in-process. A scripted fake cluster checks the retry rules
(NOT_CONTROLLER, NOT_COORDINATOR, a moved leader: once, for the resources
concerned), timeouts and close, which a healthy one-node broker never shows.
Every wait is bounded (``TIMEOUT``).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import confluent_kafka
import confluent_kafka.admin as ck
import pytest

from logstore.client.admin import (
    WORKERS,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
    TopicCollection,
)
from logstore.client.errors import KafkaError, KafkaException, local
from logstore.client.types import OFFSET_INVALID, TopicPartition
from logstore.records import Record, build_batch
from tests.kit.brokerkit import BrokerProcess, wait_until

pytestmark = pytest.mark.integration

TIMEOUT = 15
BASE_TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("admin-broker") / "data"
    broker = BrokerProcess(str(data), {"group.initial.rebalance.delay.ms": "0"}).start()
    yield broker
    assert broker.stop() == 0, broker.log_text()[-3000:]


@pytest.fixture
def admin(shared_broker: BrokerProcess) -> Iterator[AdminClient]:
    client = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    yield client
    client.close()


@pytest.fixture(scope="module")
def cadmin(shared_broker: BrokerProcess) -> ck.AdminClient:
    return ck.AdminClient({"bootstrap.servers": shared_broker.bootstrap})


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def code_of(future: Future[Any]) -> int:
    """The error code a future fails with (0 when it succeeds)."""
    try:
        future.result(TIMEOUT)
    except KafkaException as e:
        return e.error.code()
    except confluent_kafka.KafkaException as e:
        return int(e.args[0].code())
    return 0


def results(futures: dict[Any, Future[Any]]) -> dict[Any, Any]:
    return {key: future.result(TIMEOUT) for key, future in futures.items()}


def configs_view(configs: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    """Comparable fields of described configs (ours or confluent's ConfigEntry)."""
    return {
        name: (e.value, int(e.source), e.is_default, e.is_read_only, e.is_sensitive,
               sorted((s.name, s.value, int(s.source)) for s in e.synonyms.values()))
        for name, e in configs.items()
    }  # fmt: skip


def produce_timestamped(bootstrap: str, topic: str, count: int) -> None:
    """``count`` records to partition 0 with timestamps BASE_TS + 1000 * i."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
    for i in range(count):
        producer.produce(topic, b"v%d" % i, partition=0, timestamp=BASE_TS + 1000 * i)
    assert producer.flush(TIMEOUT) == 0


# -- argument checks -----------------------------------------------------------------------------


def test_bad_arguments_raise_at_call_time_before_any_request() -> None:
    client = AdminClient(
        {"bootstrap.servers": "127.0.0.1:1"}
    )  # nothing listens: no call may get as far as sending
    tp = TopicPartition("t", 0)
    cases: list[tuple[type[Exception], Callable[[], object]]] = [
        (TypeError, lambda: client.create_topics("t")),  # type: ignore[arg-type]
        (ValueError, lambda: client.create_topics([])),
        (TypeError, lambda: client.create_topics(["t"])),  # type: ignore[list-item]
        (ValueError, lambda: client.create_topics([NewTopic("t", 1), NewTopic("t", 2)])),
        (ValueError, lambda: client.create_topics([NewTopic("t", 0)])),
        (ValueError, lambda: client.create_topics([NewTopic("t", 2, 1, replica_assignment=[[0], [0]])])),
        (TypeError, lambda: client.create_topics([NewTopic("t", 1)], validate_only="yes")),  # type: ignore[arg-type]
        (ValueError, lambda: client.create_topics([NewTopic("t", 1)], request_timeout=-1)),
        (TypeError, lambda: client.create_topics([NewTopic("t", 1)], foo=1)),  # type: ignore[call-arg]
        (TypeError, lambda: NewTopic(None, 1)),  # type: ignore[arg-type]
        (TypeError, lambda: NewTopic("t", "3")),  # type: ignore[arg-type]
        (TypeError, lambda: client.delete_topics("t")),  # type: ignore[arg-type]
        (ValueError, lambda: client.delete_topics([])),
        (ValueError, lambda: client.create_partitions([NewPartitions("t", 0)])),
        (ValueError, lambda: client.describe_configs([])),
        (ValueError, lambda: client.describe_configs(["t"])),  # type: ignore[list-item]
        (ValueError, lambda: ConfigResource("nope", "t")),
        (ValueError, lambda: client.describe_configs([ConfigResource(ResourceType.BROKER, "first")])),
        (ValueError, lambda: client.incremental_alter_configs([ConfigResource("topic", "t")])),
        (TypeError, lambda: client.incremental_alter_configs(
            [ConfigResource("topic", "t", incremental_configs=[ConfigEntry("a", "b")])])),
        (ValueError, lambda: client.incremental_alter_configs([ConfigResource("topic", "t", incremental_configs=[
            ConfigEntry("a", None, incremental_operation=AlterConfigOpType.SET)])])),
        (TypeError, lambda: client.list_consumer_groups(states=[ConsumerGroupState.STABLE])),  # type: ignore[arg-type]
        (TypeError, lambda: client.describe_consumer_groups("g")),  # type: ignore[arg-type]
        (ValueError, lambda: client.describe_consumer_groups([])),
        (TypeError, lambda: client.delete_consumer_groups([1])),  # type: ignore[list-item]
        (ValueError, lambda: client.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions("g"), ConsumerGroupTopicPartitions("h")])),
        (ValueError, lambda: client.list_consumer_group_offsets([ConsumerGroupTopicPartitions("")])),
        (ValueError, lambda: client.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions("g", [TopicPartition("t", 0, 5)])])),
        (ValueError, lambda: client.alter_consumer_group_offsets([ConsumerGroupTopicPartitions("g", [tp])])),
        (ValueError, lambda: client.delete_consumer_group_offsets([ConsumerGroupTopicPartitions("g")])),
        (TypeError, lambda: client.list_offsets([tp])),  # type: ignore[arg-type]
        (TypeError, lambda: client.list_offsets({tp: 5})),  # type: ignore[dict-item]
        (ValueError, lambda: client.list_offsets({TopicPartition("t", -1): OffsetSpec.latest()})),
        (TypeError, lambda: client.list_offsets({tp: OffsetSpec.latest()}, isolation_level=1)),  # type: ignore[arg-type]
        (ValueError, lambda: client.delete_records([TopicPartition("t", -1, 5)])),
        (ValueError, lambda: client.delete_records([TopicPartition("t", 0)])),  # no offset
        (ValueError, lambda: client.delete_records([TopicPartition("t", 0, 1), TopicPartition("t", 0, 2)])),
        (TypeError, lambda: client.describe_log_dirs(brokers=0)),  # type: ignore[arg-type]
        (TypeError, lambda: client.describe_cluster(request_timeout="1")),  # type: ignore[arg-type]
    ]  # fmt: skip
    try:
        for i, (kind, call) in enumerate(cases):
            with pytest.raises(kind):
                call()
                pytest.fail(f"case {i} did not raise {kind.__name__}")
        assert client._cluster._connections == {}, "a request was attempted"
    finally:
        client.close()
    with pytest.raises(RuntimeError, match="closed"):
        client.describe_cluster()


# -- against a broker process --------------------------------------------------------------------


def test_topics_and_configs_match_confluent(admin: AdminClient, cadmin: ck.AdminClient) -> None:
    topic, other, never = unique("adm-t"), unique("adm-u"), unique("adm-v")
    created = admin.create_topics(
        [NewTopic(topic, 3, config={"retention.ms": "3600000"}), NewTopic(other, 1)]
    )
    assert set(created) == {topic, other}
    assert results(created) == {topic: None, other: None}
    assert code_of(admin.create_topics([NewTopic(topic, 1)])[topic]) == KafkaError.TOPIC_ALREADY_EXISTS
    assert code_of(admin.create_topics([NewTopic(never, 2)], validate_only=True)[never]) == 0
    bad = admin.create_topics([NewTopic(never, 1, config={"retention.ms": "soon"})])[never]
    assert code_of(bad) == KafkaError.INVALID_CONFIG
    assert never not in admin.list_topics(timeout=TIMEOUT).topics, (
        "validate_only or a failed create made a topic"
    )

    resource = ConfigResource(ResourceType.TOPIC, topic)
    ours = admin.describe_configs([resource])[resource].result(TIMEOUT)
    theirs = cadmin.describe_configs([ck.ConfigResource("topic", topic)])
    assert configs_view(ours) == configs_view(next(iter(theirs.values())).result(TIMEOUT))
    assert ours["retention.ms"].value == "3600000"
    assert (
        ours["retention.ms"].source is ConfigSource.DYNAMIC_TOPIC_CONFIG
        and not ours["retention.ms"].is_default
    )
    assert ours["segment.bytes"].source is ConfigSource.DEFAULT_CONFIG and ours["segment.bytes"].is_default
    missing = ConfigResource("topic", never)
    assert code_of(admin.describe_configs([missing])[missing]) == KafkaError.UNKNOWN_TOPIC_OR_PARTITION
    broker = ConfigResource(ResourceType.BROKER, "0")
    broker_configs = admin.describe_configs([broker])[broker].result(TIMEOUT)
    assert broker_configs["broker.id"].is_read_only and not broker_configs["log.retention.ms"].is_read_only

    change = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET),
    ])  # fmt: skip
    assert results(admin.incremental_alter_configs([change])) == {change: None}
    after = admin.describe_configs([resource])[resource].result(TIMEOUT)
    assert after["cleanup.policy"].value == "compact"
    assert after["cleanup.policy"].source is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert after["retention.ms"].is_default and after["retention.ms"].value == "604800000"

    with pytest.warns(DeprecationWarning, match="incremental_alter_configs"):
        replaced = admin.alter_configs([ConfigResource("topic", topic, set_config={"segment.ms": "600000"})])
    assert results(replaced) == {resource: None}
    after = admin.describe_configs([resource])[resource].result(TIMEOUT)
    assert after["segment.ms"].value == "600000"
    assert after["cleanup.policy"].is_default, "alter_configs must revert keys it does not set"

    assert code_of(admin.create_partitions([NewPartitions(other, 4)], validate_only=True)[other]) == 0
    assert len(admin.list_topics(other, TIMEOUT).topics[other].partitions) == 1
    assert results(admin.create_partitions([NewPartitions(other, 4)])) == {other: None}
    assert len(admin.list_topics(other, TIMEOUT).topics[other].partitions) == 4
    assert len(cadmin.list_topics(other, TIMEOUT).topics[other].partitions) == 4
    assert code_of(admin.create_partitions([NewPartitions(other, 2)])[other]) == KafkaError.INVALID_PARTITIONS

    deleted = admin.delete_topics([topic, other, never])
    assert code_of(deleted[topic]) == 0 and code_of(deleted[other]) == 0
    assert code_of(deleted[never]) == KafkaError.UNKNOWN_TOPIC_OR_PARTITION
    listed = admin.list_topics(timeout=TIMEOUT).topics
    assert topic not in listed and other not in listed


def test_describe_cluster_and_list_topics_match_confluent(admin: AdminClient, cadmin: ck.AdminClient) -> None:
    topic, never = unique("adm-meta"), unique("adm-absent")
    admin.create_topics([NewTopic(topic, 2)])[topic].result(TIMEOUT)
    ours = admin.describe_cluster().result(TIMEOUT)
    theirs = cadmin.describe_cluster().result(TIMEOUT)
    assert ours.cluster_id == theirs.cluster_id and ours.cluster_id
    assert ours.controller is not None and ours.controller.id == theirs.controller.id
    assert [(n.id, n.host, n.port) for n in ours.nodes] == [(n.id, n.host, n.port) for n in theirs.nodes]
    assert ours.authorized_operations is None
    assert admin.cluster_id() == theirs.cluster_id

    md, cmd = admin.list_topics(timeout=TIMEOUT), cadmin.list_topics(timeout=TIMEOUT)
    assert (md.cluster_id, md.controller_id, md.orig_broker_id) == (
        cmd.cluster_id,
        cmd.controller_id,
        cmd.orig_broker_id,
    )
    assert {b: (m.host, m.port) for b, m in md.brokers.items()} == {
        b: (m.host, m.port) for b, m in cmd.brokers.items()
    }
    assert md.orig_broker_name == cmd.orig_broker_name
    for name in (topic, "__consumer_offsets"):
        ours_p, theirs_p = md.topics[name].partitions, cmd.topics[name].partitions
        assert {p: (m.leader, m.replicas, m.isrs) for p, m in ours_p.items()} == {
            p: (m.leader, m.replicas, m.isrs) for p, m in theirs_p.items()
        }
    described = admin.describe_topics(TopicCollection([topic, never]))
    desc = described[topic].result(TIMEOUT)
    their_desc = cadmin.describe_topics(confluent_kafka.TopicCollection([topic]))[topic].result(TIMEOUT)
    assert (desc.name, desc.is_internal, desc.topic_id is not None) == (topic, False, True)
    assert [
        (p.id, p.leader.id if p.leader else None, [r.id for r in p.replicas]) for p in desc.partitions
    ] == [(p.id, p.leader.id, [r.id for r in p.replicas]) for p in their_desc.partitions]
    high, low = (
        their_desc.topic_id.get_most_significant_bits(),
        their_desc.topic_id.get_least_significant_bits(),
    )
    assert desc.topic_id is not None  # a uuid.UUID here, a Uuid there
    assert desc.topic_id.int == ((high % 2**64) << 64) | (low % 2**64)
    assert code_of(described[never]) == KafkaError.UNKNOWN_TOPIC_OR_PARTITION
    absent = admin.list_topics(never, TIMEOUT).topics[never]
    assert absent.error is not None and absent.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PARTITION
    assert never not in admin.list_topics(timeout=TIMEOUT).topics, "list_topics must not create a topic"


def test_list_offsets_delete_records_and_log_dirs(
    admin: AdminClient, cadmin: ck.AdminClient, shared_broker: BrokerProcess
) -> None:
    topic = unique("adm-off")
    admin.create_topics([NewTopic(topic, 2)])[topic].result(TIMEOUT)
    produce_timestamped(shared_broker.bootstrap, topic, 10)
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    specs = {
        "earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest(), "max": OffsetSpec.max_timestamp(),
        "at": OffsetSpec.for_timestamp(BASE_TS + 3500), "after": OffsetSpec.for_timestamp(BASE_TS + 10**6),
    }  # fmt: skip
    answers = {}
    for label, spec in specs.items():
        futures = admin.list_offsets({p0: spec})
        assert list(futures) == [p0] and next(iter(futures)).offset == spec._value
        info = futures[p0].result(TIMEOUT)
        theirs = cadmin.list_offsets({confluent_kafka.TopicPartition(topic, 0): ck.OffsetSpec(spec._value)})
        their_info = next(iter(theirs.values())).result(TIMEOUT)
        assert (info.offset, info.timestamp, info.leader_epoch) == (
            their_info.offset, their_info.timestamp, their_info.leader_epoch,
        ), label  # fmt: skip
        answers[label] = (info.offset, info.timestamp)
    assert answers["earliest"][0] == 0 and answers["latest"][0] == 10
    assert answers["max"] == (9, BASE_TS + 9000)
    assert answers["at"] == (4, BASE_TS + 4000)
    assert answers["after"][0] == -1
    empty = admin.list_offsets({p1: OffsetSpec.latest(), TopicPartition(topic, 7): OffsetSpec.latest()})
    assert empty[p1].result(TIMEOUT).offset == 0
    assert code_of(empty[TopicPartition(topic, 7)]) == KafkaError.UNKNOWN_TOPIC_OR_PARTITION
    absent = TopicPartition(unique("adm-absent"), 0)
    assert (
        code_of(admin.list_offsets({absent: OffsetSpec.latest()})[absent])
        == KafkaError.UNKNOWN_TOPIC_OR_PARTITION
    )

    request = TopicPartition(topic, 0, 4)
    deleted = admin.delete_records([request])
    assert list(deleted) == [request] and deleted[request].result(TIMEOUT).low_watermark == 4
    assert admin.list_offsets({p0: OffsetSpec.earliest()})[p0].result(TIMEOUT).offset == 4
    theirs = cadmin.list_offsets({confluent_kafka.TopicPartition(topic, 0): ck.OffsetSpec.earliest()})
    assert next(iter(theirs.values())).result(TIMEOUT).offset == 4
    too_far = TopicPartition(topic, 1, 5)
    assert code_of(admin.delete_records([too_far])[too_far]) == KafkaError.OFFSET_OUT_OF_RANGE

    dirs = admin.describe_log_dirs().result(TIMEOUT)
    assert list(dirs) == [0] and len(dirs[0]) == 1
    (info,) = dirs[0].values()
    assert info["error"] is None and info["total_bytes"] > 0
    assert info["partitions"][p0] > 0, info["partitions"]
    assert info["partitions"][p1] == 0
    assert admin.describe_log_dirs([0]).result(TIMEOUT)[0].keys() == dirs[0].keys()


def test_consumer_group_lifecycle_matches_confluent(
    admin: AdminClient, cadmin: ck.AdminClient, shared_broker: BrokerProcess
) -> None:
    topic, group, simple = unique("adm-grp"), unique("adm-g"), unique("adm-simple")
    admin.create_topics([NewTopic(topic, 3)])[topic].result(TIMEOUT)
    produce_timestamped(shared_broker.bootstrap, topic, 6)

    # A group with no members: offsets committed by the admin client.
    tps = [TopicPartition(topic, 0, 2), TopicPartition(topic, 1, 0)]
    altered = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(simple, tps)])
    result = altered[simple].result(TIMEOUT)
    assert result.group_id == simple
    assert [(tp.topic, tp.partition, tp.offset, tp.error) for tp in result.topic_partitions or []] == [
        (topic, 0, 2, None), (topic, 1, 0, None),
    ]  # fmt: skip
    asked = [TopicPartition(topic, 0), TopicPartition(topic, 2)]
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(simple, asked)])[simple].result(
        TIMEOUT
    )
    assert [(tp.partition, tp.offset) for tp in listed.topic_partitions or []] == [
        (0, 2),
        (2, OFFSET_INVALID),
    ]
    everything = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(simple)])[simple].result(
        TIMEOUT
    )
    theirs = cadmin.list_consumer_group_offsets([confluent_kafka.ConsumerGroupTopicPartitions(simple)])
    their_list = theirs[simple].result(TIMEOUT).topic_partitions
    assert [(tp.topic, tp.partition, tp.offset) for tp in everything.topic_partitions or []] == [
        (tp.topic, tp.partition, tp.offset) for tp in their_list
    ]
    dropped = admin.delete_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(simple, [TopicPartition(topic, 1)])]
    )
    assert [(tp.partition, tp.error) for tp in dropped[simple].result(TIMEOUT).topic_partitions or []] == [
        (1, None)
    ]
    everything = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(simple)])[simple].result(
        TIMEOUT
    )
    assert [(tp.partition, tp.offset) for tp in everything.topic_partitions or []] == [(0, 2)]

    # A group with a member: a confluent consumer.
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": shared_broker.bootstrap, "group.id": group, "client.id": "adm-member",
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "enable.auto.commit": False,
    })  # fmt: skip
    try:
        consumer.subscribe([topic])
        wait_until(
            lambda: len(consumer.assignment()) == 3,
            "the consumer's assignment",
            step=lambda: consumer.poll(0.1),
        )
        listing = admin.list_consumer_groups().result(TIMEOUT)
        assert listing.errors == []
        by_id = {g.group_id: g for g in listing.valid or []}
        assert by_id[group].state is ConsumerGroupState.STABLE and not by_id[group].is_simple_consumer_group
        assert by_id[simple].state is ConsumerGroupState.EMPTY and by_id[simple].is_simple_consumer_group
        assert by_id[group].type is ConsumerGroupType.CLASSIC
        their_listing = {g.group_id: g for g in cadmin.list_consumer_groups().result(TIMEOUT).valid}
        for g in (group, simple):
            assert (by_id[g].state.value, by_id[g].is_simple_consumer_group, by_id[g].type.value) == (  # type: ignore[union-attr]
                their_listing[g].state.value, their_listing[g].is_simple_consumer_group, their_listing[g].type.value,
            )  # fmt: skip
        stable = admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(TIMEOUT).valid or []
        assert group in {g.group_id for g in stable} and simple not in {g.group_id for g in stable}

        described = admin.describe_consumer_groups([group, simple])
        desc = described[group].result(TIMEOUT)
        assert (desc.group_id, desc.state, desc.is_simple_consumer_group) == (
            group,
            ConsumerGroupState.STABLE,
            False,
        )
        assert desc.coordinator is not None and desc.coordinator.id == 0
        (member,) = desc.members
        assert member.client_id == "adm-member"
        assigned = {(tp.topic, tp.partition) for tp in member.assignment.topic_partitions}
        assert assigned == {(tp.topic, tp.partition) for tp in consumer.assignment()}
        their_desc = cadmin.describe_consumer_groups([group])[group].result(TIMEOUT)
        assert (desc.partition_assignor, desc.state.value, member.member_id, member.host) == (  # type: ignore[union-attr]
            their_desc.partition_assignor, their_desc.state.value, their_desc.members[0].member_id,
            their_desc.members[0].host,
        )  # fmt: skip
        assert described[simple].result(TIMEOUT).state is ConsumerGroupState.EMPTY

        assert code_of(admin.delete_consumer_groups([group])[group]) == KafkaError.NON_EMPTY_GROUP
        busy = admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 1)])]
        )
        (rejected,) = busy[group].result(TIMEOUT).topic_partitions or []
        assert rejected.error is not None and rejected.error.code() == KafkaError.UNKNOWN_MEMBER_ID
    finally:
        consumer.close()

    wait_until(
        lambda: (
            admin.describe_consumer_groups([group])[group].result(TIMEOUT).state is ConsumerGroupState.EMPTY
        ),
        "the group to empty",
    )
    done = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 2, 3)])]
    )
    assert done[group].result(TIMEOUT).topic_partitions[0].error is None  # type: ignore[index]
    deleted = admin.delete_consumer_groups([group, simple, unique("adm-never")])
    assert [code_of(f) for f in deleted.values()] == [0, 0, KafkaError.GROUP_ID_NOT_FOUND]
    remaining = {g.group_id for g in admin.list_consumer_groups().result(TIMEOUT).valid or []}
    assert group not in remaining and simple not in remaining
    gone = admin.describe_consumer_groups([group])[group].result(TIMEOUT)
    assert gone.state is ConsumerGroupState.DEAD and gone.members == []
    assert (
        admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
        .result(TIMEOUT)
        .topic_partitions
        == []
    )


# -- the embedded transport ----------------------------------------------------------------------


def test_embedded_transport(tmp_path: Any) -> None:
    with AdminClient({"bootstrap.servers": f"embedded://{tmp_path}"}) as client:
        topic = "emb"
        assert results(client.create_topics([NewTopic(topic, 2, config={"cleanup.policy": "delete"})])) == {
            topic: None
        }
        assert code_of(client.create_topics([NewTopic(topic, 2)])[topic]) == KafkaError.TOPIC_ALREADY_EXISTS
        resource = ConfigResource("topic", topic)
        change = ConfigResource("topic", topic, incremental_configs=[
            ConfigEntry("retention.bytes", "1000000", incremental_operation=AlterConfigOpType.SET)])  # fmt: skip
        client.incremental_alter_configs([change])[change].result(TIMEOUT)
        configs = client.describe_configs([resource])[resource].result(TIMEOUT)
        assert configs["retention.bytes"].value == "1000000"
        assert configs["retention.bytes"].source is ConfigSource.DYNAMIC_TOPIC_CONFIG
        cluster = client.describe_cluster().result(TIMEOUT)
        md = client.list_topics(timeout=TIMEOUT)
        assert cluster.cluster_id == md.cluster_id and len(md.topics[topic].partitions) == 2

        # Records through the same connection (the client's producer is not under test here).
        records = [Record(None, b"r%d" % i, (), BASE_TS + i) for i in range(5)]
        fields = {"transactional_id": None, "acks": -1, "timeout": 5000,
                  "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": build_batch(records)}]}]}  # fmt: skip
        produced = client._cluster.send(None, 0, fields).result(TIMEOUT)
        assert produced.responses[0].partition_responses[0].error_code == 0

        p0 = TopicPartition(topic, 0)
        assert client.list_offsets({p0: OffsetSpec.latest()})[p0].result(TIMEOUT).offset == 5
        assert (
            client.list_offsets({p0: OffsetSpec.for_timestamp(BASE_TS + 2)})[p0].result(TIMEOUT).offset == 2
        )
        assert client.delete_records([TopicPartition(topic, 0, 3)])[p0].result(TIMEOUT).low_watermark == 3
        assert client.list_offsets({p0: OffsetSpec.earliest()})[p0].result(TIMEOUT).offset == 3
        (info,) = client.describe_log_dirs().result(TIMEOUT)[0].values()
        assert info["partitions"][p0] > 0

        group = "emb-group"
        client.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 4)])]
        )[group].result(TIMEOUT)
        listed = client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(
            TIMEOUT
        )
        assert [(tp.partition, tp.offset) for tp in listed.topic_partitions or []] == [(0, 4)]
        groups = client.list_consumer_groups().result(TIMEOUT).valid or []
        assert [(g.group_id, g.state) for g in groups] == [(group, ConsumerGroupState.EMPTY)]
        assert (
            client.describe_consumer_groups([group])[group].result(TIMEOUT).state is ConsumerGroupState.EMPTY
        )
        client.delete_consumer_groups([group])[group].result(TIMEOUT)
        assert client.list_consumer_groups().result(TIMEOUT).valid == []
        assert results(client.delete_topics([topic])) == {topic: None}


# -- retries, timeouts and close, with a scripted cluster ----------------------------------------


class ScriptedCluster:
    """Stands in for Cluster: answers each (api_key) request from a script, and records what was sent."""

    def __init__(self, answers: dict[int, list[Callable[[dict[str, Any]], Any]]]) -> None:
        self.answers = answers
        self.sent: list[tuple[int | None, int, dict[str, Any]]] = []
        self.brokers = {1: SimpleNamespace(node_id=1, host="h1", port=1, rack=None),
                        2: SimpleNamespace(node_id=2, host="h2", port=2, rack=None)}  # fmt: skip
        self.controller_id = 1
        self.updated = time.monotonic()
        self.refreshes = 0
        self.topic_lookups = 0
        self.forgotten: list[str] = []
        self.coordinator_of = 1
        self.topics: dict[str, Any] = {}
        self.closed = False
        self.pending: list[Future[Any]] = []

    def stale(self) -> bool:
        return False

    @contextlib.contextmanager
    def deadline(self, when: float | None) -> Iterator[None]:
        yield  # the script answers at once: nothing to cut

    def refresh(self, topics: Any = None, *, auto_create: bool | None = None) -> None:
        self.refreshes += 1
        self.controller_id = 2  # the controller moved
        if topics:  # the leader of t moves after the first lookup of it
            self.topic_lookups += 1
            leader = 1 if self.topic_lookups == 1 else 2
            self.topics = {"t": SimpleNamespace(error=0, partitions={0: SimpleNamespace(leader=leader)})}

    def coordinator(self, group: str, key_type: int = 0, *, refresh: bool = False) -> int:
        return self.coordinator_of

    def forget_coordinator(self, group: str, key_type: int = 0) -> None:
        self.forgotten.append(group)
        self.coordinator_of = 2

    def send(self, node: int | None, api_key: int, fields: dict[str, Any]) -> Future[Any]:
        future: Future[Any] = Future()
        if self.closed:  # as Cluster: no connection once closed
            future.set_exception(KafkaException(local("_DESTROY", "closed")))
            return future
        self.sent.append((node, api_key, fields))
        script = self.answers.get(api_key)
        if script:
            future.set_result(script.pop(0)(fields))
        else:
            self.pending.append(
                future
            )  # never answered; failed at close, as a connection's in-flight requests
        return future

    def close(self) -> None:
        self.closed = True
        for future in self.pending:
            future.set_exception(KafkaException(local("_DESTROY", "connection closed by the client")))


def scripted(
    answers: dict[int, list[Callable[[dict[str, Any]], Any]]],
) -> tuple[AdminClient, ScriptedCluster]:
    client = AdminClient({"bootstrap.servers": "127.0.0.1:1"})
    fake = ScriptedCluster(answers)
    client._cluster = fake  # type: ignore[assignment]
    return client, fake


def topic_results(fields: dict[str, Any], codes: dict[str, int]) -> Any:
    return SimpleNamespace(topics=[SimpleNamespace(name=t["name"], error_code=codes.get(t["name"], 0),
                                                   error_message=None) for t in fields["topics"]])  # fmt: skip


def test_not_controller_not_coordinator_and_moved_leader_are_retried_once_for_what_they_concern() -> None:
    client, fake = scripted({
        19: [lambda f: topic_results(f, {"a": KafkaError.NOT_CONTROLLER}), lambda f: topic_results(f, {})],
        15: [lambda f: SimpleNamespace(groups=[SimpleNamespace(group_id="g", error_code=KafkaError.NOT_COORDINATOR)]),
             lambda f: SimpleNamespace(groups=[SimpleNamespace(
                 group_id="g", error_code=0, protocol_type="consumer", protocol_data="range", group_state="Stable",
                 members=[])])],
        2: [lambda f: SimpleNamespace(topics=[SimpleNamespace(name="t", partitions=[SimpleNamespace(
                partition_index=0, error_code=KafkaError.NOT_LEADER_OR_FOLLOWER, offset=-1, timestamp=-1)])]),
            lambda f: SimpleNamespace(topics=[SimpleNamespace(name="t", partitions=[SimpleNamespace(
                partition_index=0, error_code=0, offset=42, timestamp=-1, leader_epoch=3)])])],
        42: [lambda f: SimpleNamespace(results=[SimpleNamespace(group_id="g", error_code=KafkaError.NOT_COORDINATOR)]),
             lambda f: SimpleNamespace(results=[SimpleNamespace(group_id="g", error_code=KafkaError.NOT_COORDINATOR)])],
    })  # fmt: skip
    try:
        assert results(client.create_topics([NewTopic("a", 1), NewTopic("b", 1)])) == {"a": None, "b": None}
        creates = [
            (node, [t["name"] for t in fields["topics"]]) for node, key, fields in fake.sent if key == 19
        ]
        assert creates == [(1, ["a", "b"]), (2, ["a"])], "only the topic answered NOT_CONTROLLER goes again"

        desc = client.describe_consumer_groups(["g"])["g"].result(TIMEOUT)
        assert (
            desc.state is ConsumerGroupState.STABLE
            and desc.coordinator is not None
            and desc.coordinator.id == 2
        )
        assert [node for node, key, _ in fake.sent if key == 15] == [1, 2] and fake.forgotten == ["g"]

        tp = TopicPartition("t", 0)
        info = client.list_offsets({tp: OffsetSpec.latest()})[tp].result(TIMEOUT)
        assert (info.offset, info.leader_epoch) == (42, 3)
        assert [node for node, key, _ in fake.sent if key == 2] == [1, 2], "the retry goes to the new leader"

        # Retried once only: a second NOT_COORDINATOR fails the future.
        assert code_of(client.delete_consumer_groups(["g"])["g"]) == KafkaError.NOT_COORDINATOR
        assert len([key for _, key, _ in fake.sent if key == 42]) == 2
    finally:
        client.close()


def test_unanswered_requests_time_out_and_close_fails_running_and_queued_calls() -> None:
    client, fake = scripted({})  # nothing is ever answered
    started = time.monotonic()
    assert code_of(client.describe_cluster(request_timeout=0.3)) == KafkaError._TIMED_OUT
    assert time.monotonic() - started < 5
    calls = [client.describe_cluster(request_timeout=60) for _ in range(3 * WORKERS)]  # running and queued
    wait_until(lambda: len(fake.sent) == 1 + WORKERS, "the workers to send")
    started = time.monotonic()
    client.close()
    assert fake.closed
    assert [code_of(f) for f in calls] == [KafkaError._DESTROY] * len(calls)
    assert time.monotonic() - started < 5
