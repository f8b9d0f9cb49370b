"""ACLs end to end: a broker with ``authorizer.class.name`` set, driven over the wire.

Every connection is ``User:ANONYMOUS`` (no SASL yet). The broker starts with one ACL in its
``acls.json``: ANONYMOUS may ALTER the cluster (so it can manage ACLs; ALTER implies DESCRIBE).
Each API the broker serves is called once denied -- the exact error code asserted -- and again
after the ACL it needs is added through confluent-kafka's AdminClient (create_acls/delete_acls),
where the answer is no longer an authorization error. Raw requests go through wire.py; the
produce/consume/transaction paths also through confluent-kafka clients. A second broker without
any ACL shows the ALTER-on-cluster APIs refused; one with ``super.users=User:ANONYMOUS`` shows the
super-user bypass; one without an authorizer answers SECURITY_DISABLED.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kio.index import load_payload_module
from kio.static.constants import EntityType

from tests.kit.brokerkit import BrokerProcess
from tests.kit.wire import WireClient

pytestmark = pytest.mark.integration

AUTHORIZER = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "1",
}
ANON = "User:ANONYMOUS"
CLUSTER = ResourceType.BROKER  # confluent-kafka's name for Kafka's CLUSTER resource type (4)
TOPIC_AUTH, GROUP_AUTH, CLUSTER_AUTH, TXN_AUTH = 29, 30, 31, 53
SECURITY_DISABLED, INVALID_REQUEST, NOT_CONTROLLER = 54, 42, 41
AUTH_ERRORS = {TOPIC_AUTH, GROUP_AUTH, CLUSTER_AUTH, TXN_AUTH}


def ms(n: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=n)


def req(api_key: int, version: int) -> Any:
    """The kio request module of (API, version): its classes build the request."""
    return load_payload_module(api_key, version, EntityType.request)


def acl_file(data_dir: str, acls: list[tuple[str, str, str]]) -> None:
    """Write acls.json before the broker starts: (resource type, name, operation) ALLOW for ANONYMOUS."""
    os.makedirs(data_dir, exist_ok=True)
    resources = [
        {
            "resourceType": rtype,
            "patternType": "LITERAL",
            "name": name,
            "acls": [{"principal": ANON, "permissionType": "Allow", "operation": op, "host": "*"}],
        }
        for rtype, name, op in acls
    ]
    with open(os.path.join(data_dir, "acls.json"), "w") as f:
        json.dump({"version": 1, "resources": resources}, f)


class Acls:
    """ACL changes through confluent-kafka's AdminClient (CreateAcls/DeleteAcls on the wire)."""

    def __init__(self, bootstrap: str) -> None:
        self.admin = AdminClient({"bootstrap.servers": bootstrap})

    @staticmethod
    def _binding(rtype: Any, name: str, op: Any, allow: bool, pattern: Any) -> AclBinding:
        permission = AclPermissionType.ALLOW if allow else AclPermissionType.DENY
        return AclBinding(rtype, name, pattern, ANON, "*", op, permission)

    def add(
        self, rtype: Any, name: str, op: Any, allow: bool = True, pattern: Any = ResourcePatternType.LITERAL
    ) -> None:
        for future in self.admin.create_acls([self._binding(rtype, name, op, allow, pattern)]).values():
            future.result(10)

    def remove(
        self, rtype: Any, name: str, op: Any, allow: bool = True, pattern: Any = ResourcePatternType.LITERAL
    ) -> None:
        b = self._binding(rtype, name, op, allow, pattern)
        f = AclBindingFilter(rtype, name, pattern, ANON, "*", op, b.permission_type)
        for future in self.admin.delete_acls([f]).values():
            assert len(future.result(10)) == 1

    def create_topic(self, name: str) -> None:
        """Create a topic with a passing CREATE on it (removed again)."""
        from confluent_kafka.admin import NewTopic

        self.add(ResourceType.TOPIC, name, AclOperation.CREATE)
        self.admin.create_topics([NewTopic(name, 1, 1)])[name].result(10)
        self.remove(ResourceType.TOPIC, name, AclOperation.CREATE)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: Any) -> Iterator[BrokerProcess]:
    data = str(tmp_path_factory.mktemp("acl") / "data")
    acl_file(data, [("Cluster", "kafka-cluster", "Alter")])
    broker = BrokerProcess(data, AUTHORIZER).start()
    yield broker
    assert broker.stop() == 0, broker.log_text()[-3000:]


@pytest.fixture(scope="module")
def acls(secured: BrokerProcess) -> Acls:
    return Acls(secured.bootstrap)


@pytest.fixture
def client(secured: BrokerProcess) -> Iterator[WireClient]:
    with WireClient(secured.bootstrap) as c:
        yield c


# -- topics -------------------------------------------------------------------------------------


def metadata(client: WireClient, names: list[str] | None, auto_create: bool = False) -> Any:
    m = req(3, 12)
    topics = (
        None
        if names is None
        else tuple(m.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=n) for n in names)
    )
    return client.call(
        m.MetadataRequest(
            topics=topics, allow_auto_topic_creation=auto_create, include_topic_authorized_operations=True
        )
    )


def test_metadata_hides_topics_and_reports_operations(client: WireClient, acls: Acls) -> None:
    acls.create_topic("md-secret")
    answer = metadata(client, ["md-secret", "md-missing"])
    assert [(t.name, t.error_code) for t in answer.topics] == [
        ("md-secret", TOPIC_AUTH),
        ("md-missing", TOPIC_AUTH),
    ]
    assert "md-secret" not in [t.name for t in metadata(client, None).topics]  # all topics: left out
    acls.add(ResourceType.TOPIC, "md-", AclOperation.READ, pattern=ResourcePatternType.PREFIXED)
    answer = metadata(client, ["md-secret", "md-missing"])
    assert [(t.name, t.error_code) for t in answer.topics] == [("md-secret", 0), ("md-missing", 3)]
    assert answer.topics[0].topic_authorized_operations == (1 << 3) | (1 << 8)  # READ, DESCRIBE (implied)
    assert "md-secret" in [t.name for t in metadata(client, None).topics]
    # Auto-creation needs CREATE on the cluster or the topic.
    assert metadata(client, ["md-auto"], auto_create=True).topics[0].error_code == TOPIC_AUTH
    acls.add(ResourceType.TOPIC, "md-auto", AclOperation.CREATE)
    assert metadata(client, ["md-auto"], auto_create=True).topics[0].error_code in (
        0,
        5,
    )  # LEADER_NOT_AVAILABLE


def test_produce_and_fetch(secured: BrokerProcess, client: WireClient, acls: Acls) -> None:
    acls.create_topic("pf")
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": secured.bootstrap, "message.timeout.ms": 5000})
    producer.produce("pf", b"v", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    assert errors[0] is not None and errors[0].code() == TOPIC_AUTH
    acls.add(ResourceType.TOPIC, "pf", AclOperation.WRITE)
    errors.clear()
    producer = Producer(
        {"bootstrap.servers": secured.bootstrap, "message.timeout.ms": 5000}
    )  # forgets the denial
    producer.produce("pf", b"v", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    assert errors == [None]

    m = req(1, 12)
    fetch = m.FetchRequest(
        replica_id=-1, max_wait=ms(0), min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, forgotten_topics_data=(),
        topics=(m.FetchTopic(topic="pf", partitions=(m.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20),)),),
    )  # fmt: skip
    assert client.call(fetch).responses[0].partitions[0].error_code == TOPIC_AUTH  # WRITE does not give READ
    acls.add(ResourceType.TOPIC, "pf", AclOperation.READ)
    part = client.call(fetch).responses[0].partitions[0]
    assert part.error_code == 0 and part.high_watermark == 1
    # A follower's fetch (replica_id >= 0) needs CLUSTER_ACTION on the cluster.
    follower = dataclasses.replace(fetch, replica_id=1)
    assert client.call(follower).responses[0].partitions[0].error_code == TOPIC_AUTH

    lo = req(2, 7)
    list_offsets = lo.ListOffsetsRequest(
        replica_id=-1, isolation_level=0,
        topics=(lo.ListOffsetsTopic(name="pf-lo", partitions=(lo.ListOffsetsPartition(partition_index=0, timestamp=-1),)),),
    )  # fmt: skip
    acls.create_topic("pf-lo")
    assert client.call(list_offsets).topics[0].partitions[0].error_code == TOPIC_AUTH
    acls.add(ResourceType.TOPIC, "pf-lo", AclOperation.DESCRIBE)
    assert client.call(list_offsets).topics[0].partitions[0].error_code == 0

    ol = req(23, 4)
    epochs = ol.OffsetForLeaderEpochRequest(
        replica_id=-1,
        topics=(
            ol.OffsetForLeaderTopic(
                topic="pf-ol", partitions=(ol.OffsetForLeaderPartition(partition=0, leader_epoch=0),)
            ),
        ),
    )
    acls.create_topic("pf-ol")
    assert client.call(epochs).topics[0].partitions[0].error_code == TOPIC_AUTH
    acls.add(ResourceType.TOPIC, "pf-ol", AclOperation.DESCRIBE)
    assert client.call(epochs).topics[0].partitions[0].error_code == 0

    dp = req(61, 0)
    producers = dp.DescribeProducersRequest(topics=(dp.TopicRequest(name="pf", partition_indexes=(0,)),))
    acls.remove(ResourceType.TOPIC, "pf", AclOperation.READ)
    assert client.call(producers).topics[0].partitions[0].error_code == TOPIC_AUTH
    acls.add(ResourceType.TOPIC, "pf", AclOperation.READ)
    assert client.call(producers).topics[0].partitions[0].error_code == 0


def test_topic_admin(client: WireClient, acls: Acls) -> None:
    ct = req(19, 7)
    create = ct.CreateTopicsRequest(
        topics=(ct.CreatableTopic(name="adm", num_partitions=1, replication_factor=1, assignments=(), configs=()),),
        timeout=ms(10000), validate_only=False,
    )  # fmt: skip
    result = client.call(create).topics[0]
    assert result.error_code == TOPIC_AUTH and result.topic_config_error_code == TOPIC_AUTH
    acls.add(ResourceType.TOPIC, "adm", AclOperation.CREATE)
    result = client.call(create).topics[0]
    assert result.error_code == 0 and result.topic_config_error_code == TOPIC_AUTH and result.configs == ()

    cp = req(37, 3)
    grow = cp.CreatePartitionsRequest(
        topics=(cp.CreatePartitionsTopic(name="adm", count=2, assignments=None),),
        timeout=ms(10000),
        validate_only=False,
    )
    assert client.call(grow).results[0].error_code == TOPIC_AUTH
    acls.add(ResourceType.TOPIC, "adm", AclOperation.ALTER)
    assert client.call(grow).results[0].error_code == 0

    dc = req(32, 4)
    describe = dc.DescribeConfigsRequest(
        resources=(
            dc.DescribeConfigsResource(resource_type=2, resource_name="adm", configuration_keys=None),
            dc.DescribeConfigsResource(resource_type=4, resource_name="0", configuration_keys=None),
        )
    )
    assert [r.error_code for r in client.call(describe).results] == [TOPIC_AUTH, CLUSTER_AUTH]
    acls.add(CLUSTER, "kafka-cluster", AclOperation.DESCRIBE_CONFIGS)
    acls.add(ResourceType.TOPIC, "adm", AclOperation.ALTER_CONFIGS)  # implies DESCRIBE_CONFIGS
    assert [r.error_code for r in client.call(describe).results] == [0, 0]
    acls.remove(ResourceType.TOPIC, "adm", AclOperation.ALTER_CONFIGS)

    ia = req(44, 1)
    alter = ia.IncrementalAlterConfigsRequest(
        resources=(
            ia.AlterConfigsResource(
                resource_type=2, resource_name="adm",
                configs=(ia.AlterableConfig(name="retention.ms", config_operation=0, value="60000"),),
            ),
        ),
        validate_only=False,
    )  # fmt: skip
    assert client.call(alter).responses[0].error_code == TOPIC_AUTH
    ac = req(33, 2)
    legacy_alter = ac.AlterConfigsRequest(
        resources=(
            ac.AlterConfigsResource(
                resource_type=2,
                resource_name="adm",
                configs=(ac.AlterableConfig(name="retention.ms", value="70000"),),
            ),
        ),
        validate_only=True,
    )
    assert client.call(legacy_alter).responses[0].error_code == TOPIC_AUTH
    acls.add(ResourceType.TOPIC, "adm", AclOperation.ALTER_CONFIGS)
    assert client.call(alter).responses[0].error_code == 0
    assert client.call(legacy_alter).responses[0].error_code == 0

    dr = req(21, 2)
    delete_records = dr.DeleteRecordsRequest(
        topics=(
            dr.DeleteRecordsTopic(
                name="adm", partitions=(dr.DeleteRecordsPartition(partition_index=0, offset=0),)
            ),
        ),
        timeout=ms(5000),
    )
    assert client.call(delete_records).topics[0].partitions[0].error_code == TOPIC_AUTH
    acls.add(ResourceType.TOPIC, "adm", AclOperation.DELETE)
    assert client.call(delete_records).topics[0].partitions[0].error_code == 0

    dt = req(20, 6)
    delete = dt.DeleteTopicsRequest(
        topics=(dt.DeleteTopicState(name="adm", topic_id=uuid.UUID(int=0)),), timeout=ms(10000)
    )
    acls.remove(ResourceType.TOPIC, "adm", AclOperation.DELETE)
    assert client.call(delete).responses[0].error_code == TOPIC_AUTH
    acls.add(ResourceType.TOPIC, "adm", AclOperation.DELETE)
    assert client.call(delete).responses[0].error_code == 0

    tp = req(75, 0)
    acls.create_topic("dtp-hidden")
    named = tp.DescribeTopicPartitionsRequest(
        topics=(tp.TopicRequest(name="dtp-hidden"),), response_partition_limit=100, cursor=None
    )
    assert client.call(named).topics[0].error_code == TOPIC_AUTH
    every = tp.DescribeTopicPartitionsRequest(topics=(), response_partition_limit=100, cursor=None)
    assert "dtp-hidden" not in [t.name for t in client.call(every).topics]
    acls.add(ResourceType.TOPIC, "dtp-hidden", AclOperation.DESCRIBE)
    topic = client.call(named).topics[0]
    assert topic.error_code == 0 and topic.topic_authorized_operations == 1 << 8


# -- groups -------------------------------------------------------------------------------------


def test_group_apis(client: WireClient, acls: Acls) -> None:
    acls.create_topic("g-topic")
    fc = req(10, 4)
    find = fc.FindCoordinatorRequest(key_type=0, coordinator_keys=("g1",))
    assert client.call(find).coordinators[0].error_code == GROUP_AUTH
    hb = req(12, 4)
    heartbeat = hb.HeartbeatRequest(group_id="g1", generation_id=1, member_id="m")
    assert client.call(heartbeat).error_code == GROUP_AUTH
    jg = req(11, 9)
    join = jg.JoinGroupRequest(
        group_id="g1", session_timeout=ms(10000), rebalance_timeout=ms(10000), member_id="", protocol_type="consumer",
        protocols=(jg.JoinGroupRequestProtocol(name="range", metadata=b""),),
    )  # fmt: skip
    assert client.call(join).error_code == GROUP_AUTH
    sg = req(14, 5)
    sync = sg.SyncGroupRequest(
        group_id="g1",
        generation_id=1,
        member_id="m",
        protocol_type="consumer",
        protocol_name="range",
        assignments=(),
    )
    assert client.call(sync).error_code == GROUP_AUTH
    lg = req(13, 5)
    leave = lg.LeaveGroupRequest(group_id="g1", members=(lg.MemberIdentity(member_id="m"),))
    assert client.call(leave).error_code == GROUP_AUTH
    oc = req(8, 8)
    commit = oc.OffsetCommitRequest(
        group_id="g1", generation_id_or_member_epoch=-1, member_id="",
        topics=(oc.OffsetCommitRequestTopic(name="g-topic", partitions=(oc.OffsetCommitRequestPartition(partition_index=0, committed_offset=0, committed_metadata=""),)),),
    )  # fmt: skip
    assert client.call(commit).topics[0].partitions[0].error_code == GROUP_AUTH
    of = req(9, 8)
    fetch = of.OffsetFetchRequest(
        groups=(
            of.OffsetFetchRequestGroup(
                group_id="g1", topics=(of.OffsetFetchRequestTopics(name="g-topic", partition_indexes=(0,)),)
            ),
        )
    )
    assert client.call(fetch).groups[0].error_code == GROUP_AUTH
    dg = req(15, 5)
    describe = dg.DescribeGroupsRequest(groups=("g1",), include_authorized_operations=True)
    assert client.call(describe).groups[0].error_code == GROUP_AUTH

    acls.add(ResourceType.GROUP, "g1", AclOperation.READ)
    assert client.call(find).coordinators[0].error_code == 0  # READ implies DESCRIBE
    assert client.call(heartbeat).error_code not in AUTH_ERRORS
    assert client.call(join).error_code in (0, 79)  # MEMBER_ID_REQUIRED: past the check
    assert client.call(sync).error_code not in AUTH_ERRORS
    assert client.call(leave).error_code not in AUTH_ERRORS
    assert client.call(commit).topics[0].partitions[0].error_code == TOPIC_AUTH  # the topic now
    fetched = client.call(fetch).groups[0]
    assert fetched.error_code == 0 and fetched.topics[0].partitions[0].error_code == TOPIC_AUTH
    acls.add(ResourceType.TOPIC, "g-topic", AclOperation.READ)
    assert client.call(commit).topics[0].partitions[0].error_code == 0
    fetched = client.call(fetch).groups[0]
    assert (
        fetched.topics[0].partitions[0].error_code == 0
        and fetched.topics[0].partitions[0].committed_offset == 0
    )
    group = client.call(describe).groups[0]
    assert group.error_code == 0 and group.authorized_operations == (1 << 3) | (1 << 8)

    od = req(47, 0)
    offset_delete = od.OffsetDeleteRequest(
        group_id="g1",
        topics=(
            od.OffsetDeleteRequestTopic(
                name="g-topic", partitions=(od.OffsetDeleteRequestPartition(partition_index=0),)
            ),
        ),
    )
    assert client.call(offset_delete).error_code == GROUP_AUTH
    acls.add(ResourceType.GROUP, "g1", AclOperation.DELETE)
    assert client.call(offset_delete).error_code == 0

    dl = req(42, 2)
    delete = dl.DeleteGroupsRequest(groups_names=("g1", "g2"))
    first, second = (r.error_code for r in client.call(delete).results)
    assert first in (0, 69) and second == GROUP_AUTH  # g1: deleted, or gone with its last offset

    # ListGroups: every group with DESCRIBE on the cluster (ALTER implies it); else only describable ones.
    commit2 = dataclasses.replace(commit, group_id="g3")
    acls.add(ResourceType.GROUP, "g3", AclOperation.READ)
    acls.add(ResourceType.GROUP, "g4", AclOperation.READ)
    client.call(commit2)
    client.call(dataclasses.replace(commit, group_id="g4"))
    ls = req(16, 4).ListGroupsRequest(states_filter=())
    assert {"g3", "g4"} <= {g.group_id for g in client.call(ls).groups}
    acls.add(CLUSTER, "kafka-cluster", AclOperation.DESCRIBE, allow=False)
    acls.remove(ResourceType.GROUP, "g4", AclOperation.READ)
    listed = {g.group_id for g in client.call(ls).groups}
    assert "g3" in listed and "g4" not in listed
    acls.remove(CLUSTER, "kafka-cluster", AclOperation.DESCRIBE, allow=False)


def test_consumer_group_protocol(client: WireClient, acls: Acls) -> None:
    acls.create_topic("cg-topic")
    h = req(68, 0)
    heartbeat = h.ConsumerGroupHeartbeatRequest(
        group_id="cg", member_id="", member_epoch=0, rebalance_timeout=ms(10000),
        subscribed_topic_names=("cg-topic",), topic_partitions=(),
    )  # fmt: skip
    assert client.call(heartbeat).error_code == GROUP_AUTH
    acls.add(ResourceType.GROUP, "cg", AclOperation.READ)
    answer = client.call(heartbeat)
    assert answer.error_code == TOPIC_AUTH and "cg-topic" in answer.error_message
    acls.add(ResourceType.TOPIC, "cg-topic", AclOperation.DESCRIBE)
    assert client.call(heartbeat).error_code == 0
    d = req(69, 0)
    describe = d.ConsumerGroupDescribeRequest(
        group_ids=("cg", "cg-other"), include_authorized_operations=True
    )
    groups = client.call(describe).groups
    assert groups[0].error_code == 0 and groups[0].authorized_operations == (1 << 3) | (1 << 8)
    assert groups[1].error_code == GROUP_AUTH


# -- transactions and producer ids -------------------------------------------------------------


def describe_txn_error(client: WireClient, request: Any) -> int:
    """The first state's error code of a DescribeTransactions v0 answer, read from the frame:
    kio cannot decode the -1 start time of a state with an error."""
    client.send(request)
    frame = client.read_frame()
    # correlation id (4), header tags (1), throttle (4), states count (1 varint byte), error code
    return int(struct.unpack_from(">h", frame, 10)[0])


def test_transactions(secured: BrokerProcess, client: WireClient, acls: Acls) -> None:
    acls.create_topic("tx-topic")
    ip = req(22, 4)
    idempotent = ip.InitProducerIdRequest(transactional_id=None, transaction_timeout=ms(60000))
    # WRITE on some topic (KIP-679) or IDEMPOTENT_WRITE on the cluster: the other tests may have
    # granted WRITE; deny WRITE on every topic to see the refusal.
    acls.add(ResourceType.TOPIC, "*", AclOperation.WRITE, allow=False)
    assert client.call(idempotent).error_code == CLUSTER_AUTH
    acls.add(CLUSTER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE)
    assert client.call(idempotent).error_code == 0
    acls.remove(CLUSTER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE)
    acls.remove(ResourceType.TOPIC, "*", AclOperation.WRITE, allow=False)
    acls.add(ResourceType.TOPIC, "tx-topic", AclOperation.WRITE)
    assert client.call(idempotent).error_code == 0

    transactional = ip.InitProducerIdRequest(transactional_id="tx1", transaction_timeout=ms(60000))
    fc = req(10, 4)
    find = fc.FindCoordinatorRequest(key_type=1, coordinator_keys=("tx1",))
    assert client.call(find).coordinators[0].error_code == TXN_AUTH
    assert client.call(transactional).error_code == TXN_AUTH
    ap = req(24, 3)
    add = ap.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx1", v3_and_below_producer_id=1, v3_and_below_producer_epoch=0,
        v3_and_below_topics=(ap.AddPartitionsToTxnTopic(name="tx-topic", partitions=(0,)),),
    )  # fmt: skip
    assert (
        client.call(add).results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
        == TXN_AUTH
    )
    ao = req(25, 3).AddOffsetsToTxnRequest(
        transactional_id="tx1", producer_id=1, producer_epoch=0, group_id="txg"
    )
    assert client.call(ao).error_code == TXN_AUTH
    end = req(26, 3).EndTxnRequest(transactional_id="tx1", producer_id=1, producer_epoch=0, committed=True)
    assert client.call(end).error_code == TXN_AUTH
    to = req(28, 3)
    txn_commit = to.TxnOffsetCommitRequest(
        transactional_id="tx1", group_id="txg", producer_id=1, producer_epoch=0,
        topics=(to.TxnOffsetCommitRequestTopic(name="tx-topic", partitions=(to.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=0, committed_metadata=""),)),),
    )  # fmt: skip
    assert client.call(txn_commit).topics[0].partitions[0].error_code == TXN_AUTH
    dt = req(65, 0).DescribeTransactionsRequest(transactional_ids=("tx1",))
    assert describe_txn_error(client, dt) == TXN_AUTH

    acls.add(ResourceType.TRANSACTIONAL_ID, "tx1", AclOperation.WRITE)
    assert client.call(find).coordinators[0].error_code == 0
    init = client.call(transactional)
    assert init.error_code == 0
    add = dataclasses.replace(add, v3_and_below_producer_id=init.producer_id)
    assert client.call(add).results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    assert client.call(ao).error_code == GROUP_AUTH  # READ on the group now
    acls.add(ResourceType.GROUP, "txg", AclOperation.READ)
    ao = dataclasses.replace(ao, producer_id=init.producer_id, producer_epoch=init.producer_epoch)
    assert client.call(ao).error_code == 0
    txn_commit = dataclasses.replace(
        txn_commit, producer_id=init.producer_id, producer_epoch=init.producer_epoch
    )
    assert client.call(txn_commit).topics[0].partitions[0].error_code == TOPIC_AUTH  # READ on the topic now
    acls.add(ResourceType.TOPIC, "tx-topic", AclOperation.READ)
    assert client.call(txn_commit).topics[0].partitions[0].error_code not in AUTH_ERRORS
    assert describe_txn_error(client, dt) == 0  # WRITE implies DESCRIBE
    listed = client.call(req(66, 0).ListTransactionsRequest(state_filters=(), producer_id_filters=()))
    assert "tx1" in [s.transactional_id for s in listed.transaction_states]
    acls.add(ResourceType.TRANSACTIONAL_ID, "tx1", AclOperation.DESCRIBE, allow=False)  # DENY DESCRIBE only
    listed = client.call(req(66, 0).ListTransactionsRequest(state_filters=(), producer_id_filters=()))
    assert "tx1" not in [s.transactional_id for s in listed.transaction_states]
    acls.remove(ResourceType.TRANSACTIONAL_ID, "tx1", AclOperation.DESCRIBE, allow=False)
    end = req(26, 3).EndTxnRequest(
        transactional_id="tx1",
        producer_id=init.producer_id,
        producer_epoch=init.producer_epoch,
        committed=False,
    )
    assert client.call(end).error_code == 0

    # A transactional confluent-kafka producer end to end.
    producer = Producer({"bootstrap.servers": secured.bootstrap, "transactional.id": "tx2"})
    with pytest.raises(KafkaException) as denied:
        producer.init_transactions(10)
    assert denied.value.args[0].code() == TXN_AUTH
    acls.add(ResourceType.TRANSACTIONAL_ID, "tx2", AclOperation.WRITE)
    producer = Producer({"bootstrap.servers": secured.bootstrap, "transactional.id": "tx2"})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce("tx-topic", b"in a transaction")
    producer.commit_transaction(10)

    # Broker-to-broker: WriteTxnMarkers needs CLUSTER_ACTION (or ALTER: held here).
    wm = req(27, 1)
    markers = wm.WriteTxnMarkersRequest(
        markers=(
            wm.WritableTxnMarker(
                producer_id=99,
                producer_epoch=0,
                transaction_result=False,
                coordinator_epoch=0,
                topics=(wm.WritableTxnMarkerTopic(name="tx-topic", partition_indexes=(0,)),),
            ),
        )
    )
    assert client.call(markers).markers[0].topics[0].partitions[0].error_code != CLUSTER_AUTH


# -- cluster ---------------------------------------------------------------------------------


def test_cluster_apis(client: WireClient, acls: Acls) -> None:
    dc = req(60, 1).DescribeClusterRequest(include_cluster_authorized_operations=True)
    ops = client.call(
        dc
    ).cluster_authorized_operations  # ALTER (+ DESCRIBE); DESCRIBE_CONFIGS if granted before
    assert ops & ~(1 << 10) == (1 << 7) | (1 << 8)
    dl = req(35, 4).DescribeLogDirsRequest(topics=None)
    assert client.call(dl).error_code == 0
    da = req(29, 3).DescribeAclsRequest(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
        host_filter=None, operation=1, permission_type=1,
    )  # fmt: skip
    assert client.call(da).error_code == 0
    lr = req(46, 0).ListPartitionReassignmentsRequest(timeout=ms(5000), topics=None)
    assert client.call(lr).error_code == NOT_CONTROLLER  # past the check; a broker alone has no controller
    acls.add(
        CLUSTER, "kafka-cluster", AclOperation.DESCRIBE, allow=False
    )  # DENY DESCRIBE; ALTER still allowed
    assert client.call(dc).cluster_authorized_operations == 0
    assert client.call(dl).error_code == CLUSTER_AUTH
    assert client.call(da).error_code == CLUSTER_AUTH
    assert client.call(lr).error_code == CLUSTER_AUTH
    acls.remove(CLUSTER, "kafka-cluster", AclOperation.DESCRIBE, allow=False)
    assert client.call(da).error_code == 0

    ap = req(56, 3)
    alter_partition = ap.AlterPartitionRequest(broker_id=0, broker_epoch=-1, topics=())
    assert client.call(alter_partition).error_code == CLUSTER_AUTH
    apt = req(24, 5)  # AddPartitionsToTxn's brokers' form (transaction verification, KIP-890)
    verify = apt.AddPartitionsToTxnRequest(transactions=(apt.AddPartitionsToTxnTransaction(
        transactional_id="nobody", producer_id=1, producer_epoch=0, verify_only=True,
        topics=(apt.AddPartitionsToTxnTopic(name="t", partitions=(0,)),),
    ),))  # fmt: skip
    assert client.call(verify).error_code == CLUSTER_AUTH
    acls.add(CLUSTER, "kafka-cluster", AclOperation.CLUSTER_ACTION)
    assert client.call(alter_partition).error_code == NOT_CONTROLLER
    answer = client.call(verify)
    assert answer.error_code == 0
    assert answer.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code == 49
    el = req(43, 2).ElectLeadersRequest(election_type=0, topic_partitions=None, timeout=ms(5000))
    assert client.call(el).error_code == NOT_CONTROLLER  # ALTER held: past the check


def test_without_alter_on_the_cluster(broker_factory: Any) -> None:
    """No ACL at all: the ALTER-on-cluster APIs refuse (ACL management included)."""
    locked = broker_factory(AUTHORIZER)
    with WireClient(locked.bootstrap) as client:
        ca = req(30, 3)
        create = ca.CreateAclsRequest(
            creations=(
                ca.AclCreation(
                    resource_type=2,
                    resource_name="t",
                    resource_pattern_type=3,
                    principal=ANON,
                    host="*",
                    operation=3,
                    permission_type=3,
                ),
            )
        )
        assert client.call(create).results[0].error_code == CLUSTER_AUTH
        el = req(43, 2).ElectLeadersRequest(election_type=0, topic_partitions=None, timeout=ms(5000))
        assert client.call(el).error_code == CLUSTER_AUTH
        ar = req(45, 0).AlterPartitionReassignmentsRequest(timeout=ms(5000), topics=())
        assert client.call(ar).error_code == CLUSTER_AUTH
        wm = req(27, 1)
        markers = wm.WriteTxnMarkersRequest(
            markers=(
                wm.WritableTxnMarker(
                    producer_id=99, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
                    topics=(wm.WritableTxnMarkerTopic(name="t", partition_indexes=(0,)),),
                ),
            )
        )  # fmt: skip
        assert client.call(markers).markers[0].topics[0].partitions[0].error_code == CLUSTER_AUTH
        ia = req(44, 1)
        broker_config = ia.IncrementalAlterConfigsRequest(
            resources=(
                ia.AlterConfigsResource(
                    resource_type=4, resource_name="",
                    configs=(ia.AlterableConfig(name="log.retention.ms", config_operation=0, value="60000"),),
                ),
            ),
            validate_only=True,
        )  # fmt: skip
        assert client.call(broker_config).responses[0].error_code == CLUSTER_AUTH
        dla = req(31, 3)
        delete = dla.DeleteAclsRequest(
            filters=(
                dla.DeleteAclsFilter(
                    resource_type_filter=1,
                    resource_name_filter=None,
                    pattern_type_filter=1,
                    principal_filter=None,
                    host_filter=None,
                    operation=1,
                    permission_type=1,
                ),
            )
        )
        assert client.call(delete).filter_results[0].error_code == CLUSTER_AUTH
        dc = req(60, 1).DescribeClusterRequest(include_cluster_authorized_operations=True)
        assert client.call(dc).cluster_authorized_operations == 0


def test_acl_validation_and_filters(client: WireClient, acls: Acls) -> None:
    ca = req(30, 3)

    def creation(rtype: int, name: str, pattern: int = 3, principal: str = ANON, op: int = 3) -> Any:
        return ca.AclCreation(
            resource_type=rtype,
            resource_name=name,
            resource_pattern_type=pattern,
            principal=principal,
            host="*",
            operation=op,
            permission_type=3,
        )

    results = client.call(
        ca.CreateAclsRequest(
            creations=(
                creation(4, "other-cluster"), creation(2, ""), creation(2, "x", principal="nocolon"),
                creation(99, "x"), creation(2, "x", pattern=2), creation(2, "x", op=1), creation(2, "val-ok"),
            )
        )
    ).results  # fmt: skip
    assert [r.error_code for r in results] == [INVALID_REQUEST] * 6 + [0]
    assert "kafka-cluster" in results[0].error_message
    da = req(29, 3)
    bad = da.DescribeAclsRequest(
        resource_type_filter=99,
        resource_name_filter=None,
        pattern_type_filter=1,
        principal_filter=None,
        host_filter=None,
        operation=1,
        permission_type=1,
    )
    assert client.call(bad).error_code == INVALID_REQUEST
    # MATCH: the patterns that apply to a name (literal, wildcard, prefixes).
    acls.add(ResourceType.TOPIC, "val-", AclOperation.READ, pattern=ResourcePatternType.PREFIXED)
    match = da.DescribeAclsRequest(
        resource_type_filter=2,
        resource_name_filter="val-ok",
        pattern_type_filter=2,
        principal_filter=None,
        host_filter=None,
        operation=1,
        permission_type=1,
    )
    found = {(r.resource_name, r.pattern_type) for r in client.call(match).resources}
    assert {("val-ok", 3), ("val-", 4)} <= found
    listed = acls.admin.describe_acls(
        AclBindingFilter(
            ResourceType.TOPIC,
            "val-ok",
            ResourcePatternType.LITERAL,
            None,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
    ).result(10)
    assert [(b.name, b.operation) for b in listed] == [("val-ok", AclOperation.READ)]


def test_super_user_and_no_authorizer(broker_factory: Any) -> None:
    root = broker_factory({**AUTHORIZER, "super.users": "User:admin;User:ANONYMOUS"})
    admin = AdminClient({"bootstrap.servers": root.bootstrap})
    from confluent_kafka.admin import NewTopic

    admin.create_topics([NewTopic("su", 1, 1)])["su"].result(10)  # no ACL needed
    producer = Producer({"bootstrap.servers": root.bootstrap})
    errors: list[Any] = []
    producer.produce("su", b"v", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    assert errors == [None]
    with WireClient(root.bootstrap) as client:
        dc = req(60, 1).DescribeClusterRequest(include_cluster_authorized_operations=True)
        assert client.call(dc).cluster_authorized_operations == sum(1 << c for c in (5, 7, 8, 9, 10, 11, 12))

    plain = broker_factory({})
    with WireClient(plain.bootstrap) as client:
        da = req(29, 3).DescribeAclsRequest(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
            host_filter=None, operation=1, permission_type=1,
        )  # fmt: skip
        assert client.call(da).error_code == SECURITY_DISABLED
    plain_admin = AdminClient({"bootstrap.servers": plain.bootstrap})
    binding = AclBinding(
        ResourceType.TOPIC,
        "t",
        ResourcePatternType.LITERAL,
        ANON,
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    futures = plain_admin.create_acls([binding])  # the dict must live: confluent-kafka resolves through it
    with pytest.raises(KafkaException) as e:
        futures[binding].result(10)
    assert e.value.args[0].code() == SECURITY_DISABLED


def test_bad_authorizer_name_is_refused(tmp_path: Any) -> None:
    broker = BrokerProcess(str(tmp_path / "data"), {"authorizer.class.name": "com.example.Nope"})
    with pytest.raises(RuntimeError, match=r"authorizer\.class\.name"):
        broker.start()


def _scram_upsert(name: str) -> Any:
    import hashlib

    salt = os.urandom(16)
    upsert = req(51, 0)
    return upsert.AlterUserScramCredentialsRequest(
        deletions=(),
        upsertions=(
            upsert.ScramCredentialUpsertion(
                name=name, mechanism=2, iterations=4096, salt=salt,
                salted_password=hashlib.pbkdf2_hmac("sha512", b"pw", salt, 4096),
            ),
        ),
    )  # fmt: skip


def test_scram_credential_apis(client: WireClient, acls: Acls, broker_factory: Any) -> None:
    """AlterUserScramCredentials needs ALTER on the cluster (else every user is
    CLUSTER_AUTHORIZATION_FAILED), DescribeUserScramCredentials DESCRIBE (else the whole request)."""
    alter = _scram_upsert("carol")
    describe = req(50, 0).DescribeUserScramCredentialsRequest(users=None)
    with WireClient(broker_factory(AUTHORIZER).bootstrap) as locked:  # no ACL at all
        assert [r.error_code for r in locked.call(alter).results] == [CLUSTER_AUTH]
        denied = locked.call(describe)
        assert (denied.error_code, denied.results) == (CLUSTER_AUTH, ())
    assert [r.error_code for r in client.call(alter).results] == [0]
    assert [r.user for r in client.call(describe).results] == ["carol"]
    acls.add(CLUSTER, "kafka-cluster", AclOperation.DESCRIBE, allow=False)
    denied = client.call(describe)
    assert (denied.error_code, denied.results) == (CLUSTER_AUTH, ())
    acls.remove(CLUSTER, "kafka-cluster", AclOperation.DESCRIBE, allow=False)
    assert client.call(describe).error_code == 0
