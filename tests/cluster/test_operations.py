"""Operations on a running cluster (broker processes, a real ZooKeeper): preferred leader
elections (ElectLeaders from confluent-kafka's AdminClient, and the automatic rebalance),
partition reassignment (logstore's AdminClient and ``logstore reassign-partitions``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable

import pytest

from tests.kit.brokerkit import wait_until
from tests.kit.clusterkit import (
    BrokerProcess,
    consume_all,
    create_topic,
    isrs,
    leaders,
    metadata,
    produce_acked,
    segment_bytes,
    three_brokers,
)

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.cluster]


def _preferred(bootstrap: str, topic: str) -> dict[int, int]:
    found = metadata(bootstrap, topic).topics[topic].partitions
    return {p: found[p].replicas[0] for p in found}


def test_a_preferred_election_gives_leaderships_back(cluster: Callable[..., BrokerProcess]) -> None:
    from confluent_kafka import ElectionType, KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient

    brokers = three_brokers(cluster, **{"auto.leader.rebalance.enable": "false"})
    bootstrap = brokers[1].bootstrap
    create_topic(bootstrap, "pref", 6, 3)
    wait_until(lambda: all(len(v) == 3 for v in isrs(bootstrap, "pref").values()), "full ISRs")
    preferred = _preferred(bootstrap, "pref")
    assert leaders(bootstrap, "pref") == preferred
    brokers[3].kill()  # its leaderships move; when it returns it leads nothing
    wait_until(lambda: 3 not in leaders(bootstrap, "pref").values(), "leaders off broker 3")
    brokers[3].start()
    wait_until(
        lambda: all(len(v) == 3 for v in isrs(bootstrap, "pref").values()), "broker 3 in sync", timeout=60
    )
    assert 3 not in leaders(bootstrap, "pref").values()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    on_three = [p for p, b in preferred.items() if b == 3]
    named = [TopicPartition("pref", p) for p in range(6)] + [TopicPartition("nope", 0)]
    result = admin.elect_leaders(ElectionType.PREFERRED, named).result(30)
    for tp, error in result.items():
        if tp.topic == "nope":
            assert error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        elif tp.partition in on_three:
            assert error is None, (tp, error)
        else:
            assert error is not None and error.code() == KafkaError.ELECTION_NOT_NEEDED
    wait_until(lambda: leaders(bootstrap, "pref") == preferred, "preferred leaders back")
    again = admin.elect_leaders(ElectionType.PREFERRED, None).result(30)
    assert again and all(e is not None and e.code() == KafkaError.ELECTION_NOT_NEEDED for e in again.values())


def test_the_controller_rebalances_leaders_by_itself(cluster: Callable[..., BrokerProcess]) -> None:
    brokers = three_brokers(cluster, **{"leader.imbalance.check.interval.seconds": "2"})
    bootstrap = brokers[1].bootstrap
    create_topic(bootstrap, "auto", 6, 3)
    wait_until(lambda: all(len(v) == 3 for v in isrs(bootstrap, "auto").values()), "full ISRs")
    preferred = _preferred(bootstrap, "auto")
    brokers[2].kill()
    wait_until(lambda: 2 not in leaders(bootstrap, "auto").values(), "leaders off broker 2")
    brokers[2].start()
    # No admin call: the controller's imbalance check (every 2 s) moves them back once in sync.
    wait_until(lambda: leaders(bootstrap, "auto") == preferred, "preferred leaders back", timeout=60)


def test_a_reassignment_moves_replicas_with_nothing_lost(cluster: Callable[..., BrokerProcess]) -> None:
    from logstore.client import KafkaException, TopicPartition
    from logstore.client.admin import AdminClient, PartitionReassignment

    brokers = three_brokers(cluster)
    bootstrap = brokers[1].bootstrap
    from confluent_kafka.admin import AdminClient as ConfluentAdmin
    from confluent_kafka.admin import NewTopic

    creator = ConfluentAdmin({"bootstrap.servers": bootstrap})  # kept: its futures die with it
    creator.create_topics([NewTopic("move", 2, replica_assignment=[[1, 2], [2, 1]])])["move"].result(30)
    values = [b"m%05d" % i for i in range(2000)]
    acked, errors = produce_acked(bootstrap, "move", values)
    assert errors == [] and sorted(acked) == values
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp0, tp1 = TopicPartition("move", 0), TopicPartition("move", 1)
    # Bad plans first: each refused with Kafka's code, nothing changed.
    bad = admin.alter_partition_reassignments({tp0: [3, 3], tp1: [9]})
    with pytest.raises(KafkaException, match="Duplicate"):
        bad[tp0].result(30)
    with pytest.raises(KafkaException, match="not alive"):
        bad[tp1].result(30)
    with pytest.raises(KafkaException, match="no reassignment is in progress"):
        admin.alter_partition_reassignments({tp1: None})[tp1].result(30)
    # Partition 0 from [1, 2] to [3, 2]: broker 3 copies it, then broker 1 lets it go.
    admin.alter_partition_reassignments({tp0: [3, 2]})[tp0].result(30)
    wait_until(
        lambda: admin.list_partition_reassignments().result(30) == {}, "the reassignment done", timeout=60
    )
    found = metadata(bootstrap, "move").topics["move"].partitions
    assert (found[0].replicas, sorted(found[0].isrs)) == ([3, 2], [2, 3])
    assert found[0].leader in (2, 3)
    wait_until(
        lambda: not os.path.exists(os.path.join(brokers[1].data_dir, "move-0")), "broker 1's copy deleted"
    )
    wait_until(
        lambda: segment_bytes(brokers[3], "move", 0) == segment_bytes(brokers[2], "move", 0), "same bytes"
    )
    seen = consume_all(bootstrap, "move", len(values))
    assert sorted(v for _, _, v in seen) == values
    # A reassignment that cannot finish (its new replica paused) is listed, then cancelled.
    os.kill(brokers[3].proc.pid, signal.SIGSTOP)
    try:
        admin.alter_partition_reassignments({tp1: [2, 3]})[tp1].result(30)
        listed = admin.list_partition_reassignments([tp1]).result(30)
        assert listed == {tp1: PartitionReassignment([2, 3, 1], [3], [1])}
        admin.alter_partition_reassignments({tp1: None})[tp1].result(30)
        assert admin.list_partition_reassignments().result(30) == {}
    finally:
        os.kill(brokers[3].proc.pid, signal.SIGCONT)
    # Metadata reaches the brokers after the cancellation (as in Kafka): wait for it, not one read.
    wait_until(lambda: metadata(bootstrap, "move").topics["move"].partitions[1].replicas == [2, 1],
               "partition 1 back on [2, 1]", timeout=30)  # fmt: skip
    admin.close()


def test_reassign_partitions_command(cluster: Callable[..., BrokerProcess], tmp_path: object) -> None:
    brokers = three_brokers(cluster)
    bootstrap = brokers[1].bootstrap
    create_topic(bootstrap, "cmd", 2, 2)
    produce_acked(bootstrap, "cmd", [b"c%d" % i for i in range(100)])
    plan = os.path.join(str(tmp_path), "plan.json")
    with open(plan, "w") as f:
        json.dump({"version": 1, "partitions": [
            {"topic": "cmd", "partition": 0, "replicas": [3, 1], "log_dirs": ["any", "any"]},
            {"topic": "cmd", "partition": 1, "replicas": [1, 2, 3]},
        ]}, f)  # fmt: skip

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "logstore", "reassign-partitions", "--bootstrap-server",
                               bootstrap, *args], capture_output=True, text=True, timeout=120)  # fmt: skip

    done = run("--reassignment-json-file", plan, "--execute")
    assert done.returncode == 0, done.stderr
    assert "Current partition replica assignment" in done.stdout and "Successfully started" in done.stdout
    wait_until(lambda: "is completed" in run("--reassignment-json-file", plan, "--verify").stdout
               and "still in progress" not in run("--reassignment-json-file", plan, "--verify").stdout,
               "verify says done", timeout=60)  # fmt: skip
    found = metadata(bootstrap, "cmd").topics["cmd"].partitions
    assert found[0].replicas == [3, 1] and found[1].replicas == [1, 2, 3]
    assert run("--list").stdout.strip() == "No partition reassignments found."
    topics = os.path.join(str(tmp_path), "topics.json")
    with open(topics, "w") as f:
        json.dump({"version": 1, "topics": [{"topic": "cmd"}]}, f)
    generated = run("--generate", "--topics-to-move-json-file", topics, "--broker-list", "2,3")
    assert generated.returncode == 0, generated.stderr
    proposed = json.loads(generated.stdout.split("Proposed partition reassignment configuration")[1])
    assert [(p["partition"], sorted(p["replicas"])) for p in proposed["partitions"]] == [
        (0, [2, 3]),
        (1, [2, 3]),
    ]
    missing = run("--reassignment-json-file", os.path.join(str(tmp_path), "nope.json"), "--execute")
    assert missing.returncode != 0 and "nope.json" in missing.stderr
    bad = os.path.join(str(tmp_path), "bad.json")
    with open(bad, "w") as f:
        f.write('{"partitions": [{"topic": "cmd"}]}')
    refused = run("--reassignment-json-file", bad, "--execute")
    assert refused.returncode != 0 and "partition" in refused.stderr
