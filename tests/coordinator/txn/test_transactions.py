"""Transactions (KIP-98) with confluent-kafka against a broker process: commit, abort,
read_committed, zombie fencing, a producer killed mid-transaction, exactly-once
consume-transform-produce, and the transaction state surviving a restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest

from tests.kit.brokerkit import BrokerProcess, create_topic, read_values

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402

pytestmark = pytest.mark.integration


def txn_producer(bootstrap: str, txn_id: str, **extra: Any) -> Any:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, **extra})
    producer.init_transactions(30)
    return producer


def test_commit_and_abort_with_read_committed(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "txn", 2)
    producer = txn_producer(broker.bootstrap, "t-commit-abort")
    producer.begin_transaction()
    for i in range(100):
        producer.produce("txn", value=b"committed-%d" % i, partition=i % 2)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(50):
        producer.produce("txn", value=b"aborted-%d" % i, partition=i % 2)
    producer.flush(30)  # the aborted records are in the log before the abort
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce("txn", value=b"last", partition=0)
    producer.commit_transaction(30)

    committed = read_values(broker.bootstrap, "txn", "read_committed", 101)
    assert sorted(committed) == sorted([b"committed-%d" % i for i in range(100)] + [b"last"])
    uncommitted = read_values(broker.bootstrap, "txn", "read_uncommitted", 151)
    assert len(uncommitted) == 151  # aborted records are there for read_uncommitted


def test_open_transaction_holds_read_committed_back(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "lso", 1)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    producer = txn_producer(broker.bootstrap, "t-lso")
    producer.begin_transaction()
    producer.produce("lso", value=b"in-txn")
    producer.flush(30)
    plain.produce("lso", value=b"after")
    plain.flush(30)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lso-g", "isolation.level": "read_committed"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition("lso", 0), timeout=10)
        assert (low, high) == (0, 0)  # read_committed's end is the LSO: the open transaction's start
    finally:
        consumer.close()
    assert read_values(broker.bootstrap, "lso", "read_committed", 1, timeout=3) == []
    producer.commit_transaction(30)
    assert read_values(broker.bootstrap, "lso", "read_committed", 2) == [b"in-txn", b"after"]


def test_zombie_is_fenced(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "fence", 1)
    zombie = txn_producer(broker.bootstrap, "t-fence")
    zombie.begin_transaction()
    zombie.produce("fence", value=b"zombie")
    zombie.flush(30)
    successor = txn_producer(broker.bootstrap, "t-fence")  # aborts the zombie's transaction
    successor.begin_transaction()
    successor.produce("fence", value=b"successor")
    successor.commit_transaction(30)
    with pytest.raises(KafkaException) as raised:
        zombie.produce("fence", value=b"late")
        zombie.commit_transaction(10)
    error = raised.value.args[0]
    assert error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH), error
    assert read_values(broker.bootstrap, "fence", "read_committed", 1) == [b"successor"]


def test_invalid_transaction_timeout(broker_factory: Any) -> None:
    broker = broker_factory({"transaction.max.timeout.ms": "5000"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "t-timeout",
                         "transaction.timeout.ms": 60000})  # fmt: skip
    with pytest.raises(KafkaException) as raised:
        producer.init_transactions(20)
    assert raised.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT


def test_transaction_timeout_aborts_and_fences(broker_factory: Any) -> None:
    broker = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"})
    create_topic(broker.bootstrap, "slow", 1)
    producer = txn_producer(broker.bootstrap, "t-slow", **{"transaction.timeout.ms": 1000})
    producer.begin_transaction()
    producer.produce("slow", value=b"too-late")
    producer.flush(30)
    time.sleep(2.5)  # past the timeout and a few scans
    # The coordinator aborted it: read_committed readers are not held back, and see nothing.
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce("slow", value=b"plain")
    plain.flush(30)
    assert read_values(broker.bootstrap, "slow", "read_committed", 1) == [b"plain"]
    with pytest.raises(KafkaException):
        producer.commit_transaction(10)


_KILLED = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "t-killed"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(20):
        p.produce("killed", value=b"doomed-%d" % i)
    p.flush(30)
    print("ready", flush=True)
    time.sleep(60)
""")


def test_producer_killed_mid_transaction_then_recovered_after_broker_restart(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "killed", 1)
    child = subprocess.Popen([sys.executable, "-c", _KILLED, broker.bootstrap], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    broker.kill()  # kill -9: the open transaction must come back from the log and __transaction_state
    broker.restart()
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce("killed", value=b"after")
    plain.flush(30)
    assert read_values(broker.bootstrap, "killed", "read_committed", 1, timeout=3) == []  # still open
    successor = txn_producer(broker.bootstrap, "t-killed")  # aborts the dead producer's transaction
    successor.begin_transaction()
    successor.produce("killed", value=b"successor")
    successor.commit_transaction(30)
    assert read_values(broker.bootstrap, "killed", "read_committed", 2) == [b"after", b"successor"]


def test_consume_transform_produce_exactly_once(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "in", 2)
    create_topic(broker.bootstrap, "out", 2)
    source = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for i in range(200):
        source.produce("in", value=b"%d" % i, partition=i % 2)
    source.flush(30)

    def run(limit: int, abort_last: bool) -> int:
        consumer = Consumer({
            "bootstrap.servers": broker.bootstrap, "group.id": "eos", "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "isolation.level": "read_committed",
        })  # fmt: skip
        producer = txn_producer(broker.bootstrap, "t-eos")
        consumer.subscribe(["in"])
        done = 0
        deadline = time.monotonic() + 30
        try:
            while done < limit and time.monotonic() < deadline:
                messages = [m for m in consumer.consume(50, 1.0) if m.error() is None]
                if not messages:
                    continue
                producer.begin_transaction()
                for m in messages:
                    producer.produce("out", value=b"x" + m.value(), partition=m.partition())
                positions = consumer.position(consumer.assignment())
                producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
                done += len(messages)
                if abort_last and done >= limit:
                    producer.abort_transaction(30)  # this batch is read again by the next run
                    done -= len(messages)
                    break
                producer.commit_transaction(30)
        finally:
            consumer.close()
        return done

    first = run(100, abort_last=True)
    second = run(200 - first, abort_last=False)
    assert first + second == 200
    out = read_values(broker.bootstrap, "out", "read_committed", 200)
    assert sorted(out) == sorted(b"x%d" % i for i in range(200))  # each once: nothing lost or doubled
    committed = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "eos"})
    try:
        offsets = committed.committed([TopicPartition("in", 0), TopicPartition("in", 1)], timeout=10)
        assert sum(tp.offset for tp in offsets) == 200
    finally:
        committed.close()


def test_transaction_state_survives_restart(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "restart", 1)
    producer = txn_producer(broker.bootstrap, "t-restart")
    producer.begin_transaction()
    producer.produce("restart", value=b"one")
    producer.commit_transaction(30)
    assert broker.stop() == 0
    broker.restart()
    again = txn_producer(broker.bootstrap, "t-restart")  # the same id: epoch bumped from the stored state
    again.begin_transaction()
    again.produce("restart", value=b"two")
    again.commit_transaction(30)
    assert read_values(broker.bootstrap, "restart", "read_committed", 2) == [b"one", b"two"]
    txn_files = [n for n in os.listdir(os.path.join(broker.data_dir, "restart-0")) if n.endswith(".txnindex")]
    assert txn_files == []  # nothing was aborted here


def test_describe_and_list_transactions_and_producers(broker: BrokerProcess) -> None:
    kafka_admin = pytest.importorskip("kafka.admin")
    from kafka import TopicPartition as KafkaTopicPartition

    create_topic(broker.bootstrap, "described", 2)
    producer = txn_producer(broker.bootstrap, "t-described")
    producer.begin_transaction()
    producer.produce("described", value=b"x", partition=1)
    producer.flush(30)
    admin = kafka_admin.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        (listed,) = admin.list_transactions().values()  # one broker
        assert [(t.transactional_id, str(t.state.value)) for t in listed] == [("t-described", "Ongoing")]
        (complete,) = admin.list_transactions(state_filters=["CompleteCommit"]).values()
        assert complete == []
        described = admin.describe_transactions(["t-described"])["t-described"]
        assert str(described.state.value) == "Ongoing"
        assert {(tp.topic, tp.partition) for tp in described.topic_partitions} == {("described", 1)}
        assert described.transaction_timeout_ms == 60_000  # librdkafka's default
        states = admin.describe_producers([KafkaTopicPartition("described", 1)])
        (state,) = states[KafkaTopicPartition("described", 1)].active_producers
        assert state.current_transaction_start_offset == 0
        assert state.producer_id == described.producer_id
    finally:
        admin.close()
    producer.commit_transaction(30)



def test_pending_transactional_offsets_are_unstable(broker: BrokerProcess) -> None:
    """KIP-447: OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT while a transaction
    holds an offset commit; the commit makes the offset the group's, an abort drops it."""
    from kio.index import load_payload_module
    from kio.schema.errors import ErrorCode
    from kio.static.constants import EntityType

    from tests.kit.wire import WireClient

    create_topic(broker.bootstrap, "src", 1)
    producer = txn_producer(broker.bootstrap, "t-unstable")

    def fetch(stable: bool) -> tuple[Any, int]:
        module = load_payload_module(9, 7, EntityType.request)
        request = module.OffsetFetchRequest(
            group_id="unstable-g",
            topics=(module.OffsetFetchRequestTopic(name="src", partition_indexes=(0,)),),
            require_stable=stable,
        )
        with WireClient(broker.bootstrap) as client:
            response = client.call(request)
        (topic,) = response.topics
        (partition,) = topic.partitions
        return partition.error_code, partition.committed_offset

    group = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unstable-g"})
    try:
        producer.begin_transaction()
        producer.produce("src", value=b"x")
        producer.send_offsets_to_transaction([TopicPartition("src", 0, 5)], group.consumer_group_metadata(), 30)
        assert fetch(stable=True) == (ErrorCode.unstable_offset_commit, -1)
        assert fetch(stable=False)[1] == -1  # not the group's yet
        producer.commit_transaction(30)
        assert fetch(stable=True) == (ErrorCode.none, 5)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition("src", 0, 9)], group.consumer_group_metadata(), 30)
        producer.abort_transaction(30)
        assert fetch(stable=True) == (ErrorCode.none, 5)  # the aborted commit is gone
    finally:
        group.close()
