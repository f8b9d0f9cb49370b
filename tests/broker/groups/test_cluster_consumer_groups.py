"""A consumer-protocol group (KIP-848) in a cluster: its records are replicated with
``__consumer_offsets``, so when its coordinator dies the next one loads the group and its members
carry on at their epochs."""

from __future__ import annotations

import datetime
import sys
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tests.kit.brokerkit import wait_until
from tests.kit.clusterkit import BrokerProcess, create_topic, isrs, metadata, three_brokers
from tests.kit.wire import WireClient, request_class

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.cluster]

SETTINGS = {"offsets.topic.num.partitions": "3", "group.initial.rebalance.delay.ms": "0"}


def find_coordinator(bootstrap: str, group: str) -> int | None:
    try:
        with WireClient(bootstrap) as client:
            found = client.call(request_class(10, 1)(key=group, key_type=0))
    except OSError:
        return None
    return int(found.node_id) if found.error_code == ErrorCode.none else None


def heartbeat(bootstrap: str, member_id: str, epoch: int, owned: list[tuple[uuid.UUID, list[int]]]) -> Any:
    cls = request_class(68, 1)
    module = sys.modules[cls.__module__]
    fields: dict[str, Any] = {}
    if epoch == 0:
        fields = {"rebalance_timeout": datetime.timedelta(seconds=30), "subscribed_topic_names": ("t",)}
    partitions = tuple(module.TopicPartitions(topic_id=t, partitions=tuple(ps)) for t, ps in owned)
    with WireClient(bootstrap) as client:
        return client.call(
            cls(group_id="cg", member_id=member_id, member_epoch=epoch, topic_partitions=partitions, **fields)
        )


def test_a_consumer_group_moves_with_its_coordinator(cluster: Callable[..., BrokerProcess]) -> None:
    brokers = three_brokers(cluster, **SETTINGS)
    create_topic(brokers[1].bootstrap, "t", 2, 3)
    wait_until(lambda: all("t" in metadata(b.bootstrap).topics for b in brokers.values()), "the topic")
    with WireClient(brokers[1].bootstrap) as client:
        answer = client.call(request_class(3, 12)(topics=None, allow_auto_topic_creation=False,
                                                  include_topic_authorized_operations=False))  # fmt: skip
    topic_id = next(t.topic_id for t in answer.topics if t.name == "t")
    found: list[int | None] = []
    wait_until(lambda: found.append(find_coordinator(brokers[1].bootstrap, "cg")) or found[-1] is not None,
               "a coordinator")  # fmt: skip
    coordinator = found[-1]
    assert coordinator is not None
    joined = heartbeat(brokers[coordinator].bootstrap, "m1", 0, [])
    assert (joined.error_code, joined.member_epoch) == (ErrorCode.none, 1)
    assert [(p.topic_id, p.partitions) for p in joined.assignment.topic_partitions] == [(topic_id, (0, 1))]
    wait_until(lambda: all(len(v) == 3 for v in isrs(brokers[1].bootstrap, "__consumer_offsets").values()),
               "offsets replicated")  # fmt: skip
    brokers[coordinator].kill()
    alive = [b for i, b in brokers.items() if i != coordinator]
    moved: list[int | None] = []
    wait_until(
        lambda: (
            moved.append(find_coordinator(alive[0].bootstrap, "cg")) or moved[-1] not in (None, coordinator)
        ),
        "a new coordinator",
        timeout=60,
    )
    successor = brokers[moved[-1]]  # type: ignore[index]
    answers: list[Any] = []
    wait_until(
        lambda: (
            answers.append(heartbeat(successor.bootstrap, "m1", 1, [(topic_id, [0, 1])]))
            or answers[-1].error_code
            not in (ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress)
        ),
        "the new coordinator to answer",
    )
    # The member carries on at its epoch: the group came over with its records.
    assert (answers[-1].error_code, answers[-1].member_epoch) == (ErrorCode.none, 1)
    with WireClient(successor.bootstrap) as client:
        group = client.call(
            request_class(69, 1)(group_ids=("cg",), include_authorized_operations=False)
        ).groups[0]
    assert (group.error_code, group.group_state, group.group_epoch) == (ErrorCode.none, "Stable", 1)
    assert [m.member_id for m in group.members] == ["m1"]
