"""The share-group APIs on the wire (KIP-932): ApiVersions, FindCoordinator, ShareGroupHeartbeat,
ShareFetch, ShareAcknowledge, ShareGroupDescribe, ListGroups and DeleteGroups, with Kafka's error
codes for bad acknowledgements, stale epochs and unknown sessions."""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tests.kit.brokerkit import BrokerProcess, create_topic, produce_numbered
from tests.kit.sharekit import LOCK_MS
from tests.kit.wire import WireClient, request_class

pytestmark = pytest.mark.integration

ACCEPT, RELEASE, REJECT = 1, 2, 3


def heartbeat(client: WireClient, member: str, epoch: int, topics: tuple[str, ...] | None = None) -> Any:
    return client.call(request_class(76, 1)(
        group_id="g", member_id=member, member_epoch=epoch, rack_id=None, subscribed_topic_names=topics,
    ))  # fmt: skip


def share_fetch(
    client: WireClient, member: str, epoch: int, topic_id: uuid.UUID, acks: tuple[tuple[int, int, int], ...] = (),
    wait_ms: int = 0, fetch: bool = True,
) -> Any:  # fmt: skip
    module = request_class(78, 1)
    import kio.schema.share_fetch.v1.request as m

    partitions = (m.FetchPartition(partition_index=0, acknowledgement_batches=tuple(
        m.AcknowledgementBatch(first_offset=a, last_offset=b, acknowledge_types=(k,)) for a, b, k in acks
    )),) if fetch or acks else ()  # fmt: skip
    return client.call(module(
        group_id="g", member_id=member, share_session_epoch=epoch, max_wait=datetime.timedelta(milliseconds=wait_ms),
        min_bytes=1, max_bytes=1 << 20, max_records=100, batch_size=100,
        topics=(m.FetchTopic(topic_id=topic_id, partitions=partitions),) if partitions else (),
        forgotten_topics_data=(),
    ))  # fmt: skip


def acknowledge(client: WireClient, member: str, epoch: int, topic_id: uuid.UUID, acks: tuple[tuple[int, int, int], ...]) -> Any:
    import kio.schema.share_acknowledge.v1.request as m

    return client.call(m.ShareAcknowledgeRequest(
        group_id="g", member_id=member, share_session_epoch=epoch,
        topics=(m.AcknowledgeTopic(topic_id=topic_id, partitions=(m.AcknowledgePartition(
            partition_index=0, acknowledgement_batches=tuple(
                m.AcknowledgementBatch(first_offset=a, last_offset=b, acknowledge_types=(k,)) for a, b, k in acks
            )),)),),
    ))  # fmt: skip


def partition_of(response: Any) -> Any:
    (topic,) = response.responses
    (partition,) = topic.partitions
    return partition


def acquired(response: Any) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count) for a in partition_of(response).acquired_records]


def test_share_group_apis_and_their_errors(broker_factory: Any) -> None:
    broker: BrokerProcess = broker_factory({"group.share.record.lock.duration.ms": str(LOCK_MS)})
    create_topic(broker.bootstrap, "jobs", 1)
    with WireClient(broker.bootstrap) as client:
        versions = client.call(request_class(18, 3)(client_software_name="t", client_software_version="1"))
        served = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert {key: served.get(key) for key in (76, 77, 78, 79)} == {76: (1, 1), 77: (1, 1), 78: (1, 1), 79: (1, 1)}
        found = client.call(request_class(10, 6)(key_type=2, coordinator_keys=(f"g:{uuid.uuid4()}:0",)))
        assert found.coordinators[0].error_code == ErrorCode.none and found.coordinators[0].port == broker.port

        joined = heartbeat(client, "m1", 0, ("jobs",))
        assert joined.error_code == ErrorCode.none and joined.member_epoch == 1
        (assigned,) = joined.assignment.topic_partitions
        topic_id = assigned.topic_id
        assert tuple(assigned.partitions) == (0,)
        assert heartbeat(client, "m1", 7).error_code == ErrorCode.fenced_member_epoch
        assert heartbeat(client, "nobody", 1).error_code == ErrorCode.unknown_member_id

        assert share_fetch(client, "m1", 3, topic_id).error_code == ErrorCode.share_session_not_found
        assert share_fetch(client, "stranger", 0, topic_id).error_code == ErrorCode.unknown_member_id
        produce_numbered(broker.bootstrap, "jobs", 1, 5)  # after the assignment: latest starts before them
        first = share_fetch(client, "m1", 0, topic_id, wait_ms=5_000)
        assert first.error_code == ErrorCode.none and acquired(first) == [(0, 4, 1)]
        assert first.acquisition_lock_timeout == datetime.timedelta(milliseconds=LOCK_MS)
        assert partition_of(first).records, "the acquired records' batches"
        assert share_fetch(client, "m1", 5, topic_id).error_code == ErrorCode.invalid_share_session_epoch

        # acks piggybacked on the fetch (epoch 1): accept 0-1, release 2; 7 was never acquired
        second = share_fetch(client, "m1", 1, topic_id, acks=((0, 1, ACCEPT), (2, 2, RELEASE)))
        assert partition_of(second).acknowledge_error_code == ErrorCode.none
        assert acquired(second) == [(2, 2, 2)]  # the released record, at once, delivered a second time
        bad = acknowledge(client, "m1", 2, topic_id, ((7, 7, ACCEPT),))
        assert bad.error_code == ErrorCode.none and partition_of(bad).error_code == ErrorCode.invalid_record_state
        twice = acknowledge(client, "m1", 3, topic_id, ((0, 0, ACCEPT),))
        assert partition_of(twice).error_code == ErrorCode.invalid_record_state
        assert acknowledge(client, "m1", 3, topic_id, ((3, 3, ACCEPT),)).error_code == ErrorCode.invalid_share_session_epoch
        assert acknowledge(client, "m1", 0, topic_id, ((3, 3, ACCEPT),)).error_code == ErrorCode.invalid_share_session_epoch
        time.sleep(LOCK_MS / 1000 + 0.5)  # the locks of 2-4 end
        late = acknowledge(client, "m1", 4, topic_id, ((3, 4, REJECT),))
        assert partition_of(late).error_code == ErrorCode.invalid_record_state
        again = share_fetch(client, "m1", 5, topic_id)
        assert acquired(again) == [(2, 2, 3), (3, 4, 2)]
        ok = share_fetch(client, "m1", 6, topic_id, acks=((2, 4, REJECT),), wait_ms=200)
        assert partition_of(ok).acknowledge_error_code == ErrorCode.none and acquired(ok) == []

        described = client.call(request_class(77, 1)(group_ids=("g", "nope"), include_authorized_operations=False))
        group, missing = described.groups
        assert (group.error_code, group.group_state, group.assignor_name) == (ErrorCode.none, "Stable", "simple")
        assert [m.member_id for m in group.members] == ["m1"]
        assert missing.error_code == ErrorCode.group_id_not_found

        listed = client.call(request_class(16, 5)(states_filter=(), types_filter=("share",)))
        assert [(g.group_id, g.group_type, g.group_state) for g in listed.groups] == [("g", "share", "Stable")]
        consumers_only = client.call(request_class(16, 5)(states_filter=(), types_filter=("consumer",)))
        assert all(g.group_id != "g" for g in consumers_only.groups)
        deleted = client.call(request_class(42, 2)(groups_names=("g",)))
        assert deleted.results[0].error_code == ErrorCode.non_empty_group

        final = share_fetch(client, "m1", -1, topic_id, fetch=False)
        assert final.error_code == ErrorCode.none
        assert share_fetch(client, "m1", 7, topic_id).error_code == ErrorCode.share_session_not_found
        left = heartbeat(client, "m1", 1)
        assert left.error_code == ErrorCode.none  # epoch 1 is current: nothing moved since
        assert heartbeat(client, "m1", -1).member_epoch == -1
        assert client.call(request_class(42, 2)(groups_names=("g",))).results[0].error_code == ErrorCode.none
        listed = client.call(request_class(16, 5)(states_filter=(), types_filter=("share",)))
        assert listed.groups == ()
