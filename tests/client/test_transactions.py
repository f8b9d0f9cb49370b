"""logstore.client's transactional Producer (KIP-98) against a broker process and in-process (embedded).

What the transactions wrote is read back with logstore's Consumer and with confluent-kafka's
(an independent reader of the markers and aborted-transaction lists), read_committed and
read_uncommitted. Every wait is bounded.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

import logstore.client
from logstore.client import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from logstore.client.admin import AdminClient, NewTopic
from logstore.client.config import ConfigError
from logstore.client.transactions import TxnState
from logstore.client.types import ConsumerGroupMetadata
from tests.kit.brokerkit import BrokerProcess, create_topic, read_values

pytestmark = pytest.mark.integration

WAIT_S = 30


def txn_producer(bootstrap: str, txn_id: str, **extra: Any) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, **extra})
    producer.init_transactions(WAIT_S)
    return producer


def logstore_values(bootstrap: str, topic: str, partitions: int, isolation: str, expected: int) -> list[bytes]:
    """Every value of ``topic`` read by logstore's Consumer (see brokerkit.read_values)."""
    return read_values(bootstrap, topic, isolation, expected, client=logstore.client, partitions=partitions)


def committed_offsets(bootstrap: str, group: str, partitions: list[TopicPartition]) -> list[int]:
    """The group's committed offsets, asked (read_committed: require_stable) until no partition
    answers an error: a transaction's offsets are unstable until its markers are written."""
    with Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed"}
    ) as c:
        deadline = time.monotonic() + WAIT_S
        while True:
            result = c.committed(partitions, WAIT_S)
            if all(tp.error is None for tp in result) or time.monotonic() > deadline:
                assert all(tp.error is None for tp in result), result
                return [tp.offset for tp in result]
            time.sleep(0.05)


def test_commit_is_read_committed_by_both_clients(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "tc", 3)
    producer = txn_producer(broker.bootstrap, "lt-commit")
    reports: list[tuple[Any, Any]] = []
    try:
        for round_ in range(3):
            producer.begin_transaction()
            for i in range(100):
                producer.produce("tc", b"r%d-%d" % (round_, i), key=b"%d" % i,
                                 on_delivery=lambda err, msg: reports.append((err, msg)))  # fmt: skip
            producer.produce_batch("tc", [b"b%d-%d" % (round_, i) for i in range(50)], partition=round_)
            producer.commit_transaction(WAIT_S)
            assert producer._txn is not None and producer._txn.state is TxnState.READY
    finally:
        producer.close()
    assert len(reports) == 300 and all(err is None for err, _ in reports), [e for e, _ in reports if e][:3]
    want = sorted(b"r%d-%d" % (r, i) for r in range(3) for i in range(100)) + sorted(
        b"b%d-%d" % (r, i) for r in range(3) for i in range(50)
    )
    assert sorted(logstore_values(broker.bootstrap, "tc", 3, "read_committed", 450)) == sorted(want)
    assert sorted(read_values(broker.bootstrap, "tc", "read_committed", 450)) == sorted(want)


def test_abort_is_invisible_to_read_committed_only(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "ta", 2)
    producer = txn_producer(broker.bootstrap, "lt-abort")
    failed: list[KafkaError] = []
    try:
        producer.begin_transaction()
        for i in range(40):
            producer.produce("ta", b"aborted-%d" % i, partition=i % 2)
        producer.flush(WAIT_S)  # in the log before the abort
        producer.abort_transaction(WAIT_S)
        producer.begin_transaction()  # records still queued at the abort fail with _PURGE_QUEUE
        for i in range(20):
            producer.produce(
                "ta", b"unsent-%d" % i, partition=i % 2, on_delivery=lambda err, msg: failed.append(err)
            )
        producer.abort_transaction(WAIT_S)
        producer.begin_transaction()
        producer.produce("ta", b"kept", partition=0)
        producer.commit_transaction(WAIT_S)
    finally:
        producer.close()
    assert len(failed) == 20
    assert all(e is None or e.code() == KafkaError._PURGE_QUEUE for e in failed), failed  # type: ignore[attr-defined]
    assert any(e is not None for e in failed)
    sent = sum(
        1 for e in failed if e is None
    )  # a batch drained before the abort came is delivered (and aborted)
    assert logstore_values(broker.bootstrap, "ta", 2, "read_committed", 1) == [b"kept"]
    assert read_values(broker.bootstrap, "ta", "read_committed", 1) == [b"kept"]
    uncommitted = logstore_values(broker.bootstrap, "ta", 2, "read_uncommitted", 41 + sent)
    assert len(uncommitted) == 41 + sent and b"aborted-7" in uncommitted
    assert len(read_values(broker.bootstrap, "ta", "read_uncommitted", 41 + sent)) == 41 + sent


def test_second_producer_of_an_id_fences_the_first(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "tf", 1)
    errors: list[KafkaError] = []
    zombie = txn_producer(broker.bootstrap, "lt-fence", error_cb=errors.append)
    zombie.begin_transaction()
    zombie.produce("tf", b"zombie")
    zombie.flush(WAIT_S)
    successor = txn_producer(broker.bootstrap, "lt-fence")  # aborts the zombie's open transaction
    try:
        successor.begin_transaction()
        successor.produce("tf", b"successor")
        successor.commit_transaction(WAIT_S)
        with pytest.raises(KafkaException) as raised:
            zombie.produce("tf", b"late")
            zombie.commit_transaction(WAIT_S)
        error = raised.value.args[0]
        assert error.fatal() and not error.txn_requires_abort(), error
        assert error.code() == KafkaError.PRODUCER_FENCED, error  # type: ignore[attr-defined]
        # Every later call of the zombie raises the same fatal error.
        for call in (zombie.begin_transaction, lambda: zombie.produce("tf", b"x"),
                     lambda: zombie.abort_transaction(1), lambda: zombie.commit_transaction(1)):  # fmt: skip
            with pytest.raises(KafkaException) as again:
                call()
            assert again.value.args[0].fatal() and again.value.args[0].code() == KafkaError.PRODUCER_FENCED  # type: ignore[attr-defined]
        assert zombie._txn is not None and zombie._txn.state is TxnState.FATAL_ERROR
    finally:
        zombie.close(5)
        successor.close()
    assert logstore_values(broker.bootstrap, "tf", 1, "read_committed", 1) == [b"successor"]


def test_fenced_before_its_next_transaction(broker: BrokerProcess) -> None:
    """The first producer is idle (READY) when the second starts: its next transaction's first
    request (AddPartitionsToTxn) is fenced."""
    create_topic(broker.bootstrap, "tf2", 1)
    first = txn_producer(broker.bootstrap, "lt-fence2")
    second = txn_producer(broker.bootstrap, "lt-fence2")
    try:
        first.begin_transaction()  # local: nothing tells it yet
        first.produce("tf2", b"never")
        with pytest.raises(KafkaException) as raised:
            first.commit_transaction(WAIT_S)
        assert raised.value.args[0].fatal() and raised.value.args[0].code() == KafkaError.PRODUCER_FENCED  # type: ignore[attr-defined]
        second.begin_transaction()
        second.produce("tf2", b"ok")
        second.commit_transaction(WAIT_S)
    finally:
        first.close(5)
        second.close()
    assert logstore_values(broker.bootstrap, "tf2", 1, "read_uncommitted", 1) == [b"ok"]


def test_consume_transform_produce_exactly_once(fast_broker: BrokerProcess) -> None:
    bootstrap = fast_broker.bootstrap
    create_topic(bootstrap, "eos-in", 2)
    create_topic(bootstrap, "eos-out", 2)
    with Producer({"bootstrap.servers": bootstrap}) as source:
        for i in range(300):
            source.produce("eos-in", b"%d" % i, partition=i % 2)
        source.flush(WAIT_S)

    def run(group: str, txn_id: str, limit: int, abort_every: int = 0) -> int:
        """Copy up to ``limit`` records doubled, a transaction per batch; every ``abort_every``-th
        transaction is aborted and its batch read again from the committed offsets."""
        consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "isolation.level": "read_committed",
        })  # fmt: skip
        producer = txn_producer(bootstrap, txn_id)
        consumer.subscribe(["eos-in"])
        done = transactions = 0
        deadline = time.monotonic() + WAIT_S
        try:
            while done < limit and time.monotonic() < deadline:
                messages = [m for m in consumer.consume(40, 0.5) if m.error() is None]
                if not messages:
                    continue
                starts: dict[int, int] = {}
                for m in messages:
                    starts.setdefault(m.partition(), m.offset())
                producer.begin_transaction()
                for m in messages:
                    producer.produce("eos-out", b"%d" % (2 * int(m.value())), partition=m.partition())
                producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                     consumer.consumer_group_metadata(), WAIT_S)  # fmt: skip
                transactions += 1
                if abort_every and transactions % abort_every == 0:
                    producer.abort_transaction(WAIT_S)
                    for partition, offset in starts.items():  # rewind: the aborted batch is read again
                        consumer.seek(TopicPartition("eos-in", partition, offset))
                    continue
                producer.commit_transaction(WAIT_S)
                done += len(messages)
        finally:
            producer.close()
            consumer.close()
        return done

    first = run("eos-g", "lt-eos", 120, abort_every=2)
    assert first >= 120
    rest = run("eos-g", "lt-eos", 300 - first)  # a second worker of the group picks up where it left
    assert first + rest == 300
    out = logstore_values(bootstrap, "eos-out", 2, "read_committed", 300)
    assert sorted(int(v) for v in out) == [2 * i for i in range(300)]  # each exactly once
    assert committed_offsets(
        bootstrap, "eos-g", [TopicPartition("eos-in", 0), TopicPartition("eos-in", 1)]
    ) == [150, 150]
    assert sorted(int(v) for v in read_values(bootstrap, "eos-out", "read_committed", 300)) == [
        2 * i for i in range(300)
    ]


def test_offsets_of_an_aborted_transaction_are_not_committed(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "tof", 1)
    producer = txn_producer(broker.bootstrap, "lt-offsets")
    group = ConsumerGroupMetadata("lt-offsets-g")
    try:
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition("tof", 0, 7)], group, WAIT_S)
        producer.commit_transaction(WAIT_S)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition("tof", 0, 9)], "lt-offsets-g", WAIT_S)
        producer.abort_transaction(WAIT_S)
        producer.begin_transaction()  # invalid offsets are skipped: nothing is sent, nothing to end
        producer.send_offsets_to_transaction([TopicPartition("tof", 0, -1001)], group, WAIT_S)
        producer.commit_transaction(WAIT_S)
    finally:
        producer.close()
    assert committed_offsets(broker.bootstrap, "lt-offsets-g", [TopicPartition("tof", 0)]) == [7]


def test_transaction_timeout_above_the_brokers_maximum(broker_factory: Any) -> None:
    broker = broker_factory({"transaction.max.timeout.ms": "5000"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "lt-timeout",
                         "transaction.timeout.ms": 60000})  # fmt: skip
    try:
        with pytest.raises(KafkaException) as raised:
            producer.init_transactions(WAIT_S)
        error = raised.value.args[0]
        assert error.code() == KafkaError.INVALID_TRANSACTION_TIMEOUT and error.fatal(), error  # type: ignore[attr-defined]
        with pytest.raises(KafkaException):
            producer.begin_transaction()
    finally:
        producer.close(5)
    ok = txn_producer(broker.bootstrap, "lt-timeout-ok", **{"transaction.timeout.ms": 5000})
    ok.close()


def test_calls_out_of_order_raise_clear_errors(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "to", 1)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(KafkaException) as raised:
        plain.begin_transaction()
    assert raised.value.args[0].code() == KafkaError._NOT_CONFIGURED  # type: ignore[attr-defined]
    plain.close()

    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "lt-order"})
    try:
        for call in (producer.begin_transaction, lambda: producer.commit_transaction(1),
                     lambda: producer.abort_transaction(1), lambda: producer.produce("to", b"x"),
                     lambda: producer.send_offsets_to_transaction([TopicPartition("to", 0, 1)], "g", 1)):  # fmt: skip
            with pytest.raises(KafkaException) as raised:
                call()
            error = raised.value.args[0]
            assert error.code() == KafkaError._STATE and not error.fatal(), error  # type: ignore[attr-defined]
            assert "init_transactions()" in error.str()
        producer.init_transactions(WAIT_S)
        with pytest.raises(KafkaException) as raised:
            producer.init_transactions(WAIT_S)
        assert raised.value.args[0].code() == KafkaError._STATE  # type: ignore[attr-defined]
        with pytest.raises(KafkaException) as raised:
            producer.produce("to", b"outside")
        assert "begin_transaction()" in raised.value.args[0].str()
        producer.begin_transaction()
        with pytest.raises(KafkaException) as raised:
            producer.begin_transaction()
        assert raised.value.args[0].code() == KafkaError._STATE  # type: ignore[attr-defined]
        producer.produce("to", b"inside")
        producer.commit_transaction(WAIT_S)
        producer.begin_transaction()
        producer.commit_transaction(WAIT_S)  # empty: nothing was added, no EndTxn
    finally:
        producer.close()
    assert logstore_values(broker.bootstrap, "to", 1, "read_committed", 1) == [b"inside"]


def test_a_timed_out_commit_is_resumed(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "tr", 1)
    producer = txn_producer(broker.bootstrap, "lt-resume")
    try:
        producer.begin_transaction()
        producer.produce_batch("tr", [b"%d" % i for i in range(2000)])
        with pytest.raises(KafkaException) as raised:
            producer.commit_transaction(0)  # not even the AddPartitionsToTxn can be answered in 0 s
        error = raised.value.args[0]
        assert error.code() == KafkaError._TIMED_OUT and error.retriable() and not error.fatal(), error  # type: ignore[attr-defined]
        with pytest.raises(KafkaException) as raised:
            producer.abort_transaction(1)  # the commit is under way: call it again, not another
        assert raised.value.args[0].code() == KafkaError._CONFLICT  # type: ignore[attr-defined]
        producer.commit_transaction(WAIT_S)
        producer.begin_transaction()
        producer.produce("tr", b"after")
        producer.commit_transaction(WAIT_S)
    finally:
        producer.close()
    assert len(logstore_values(broker.bootstrap, "tr", 1, "read_committed", 2001)) == 2001


def test_a_failed_record_makes_the_transaction_abortable(broker_factory: Any) -> None:
    broker = broker_factory({"auto.create.topics.enable": "false"})
    create_topic(broker.bootstrap, "tg", 1)
    producer = txn_producer(broker.bootstrap, "lt-abortable")
    reports: list[Any] = []
    try:
        producer.begin_transaction()
        producer.produce("tg", b"fine")
        producer.produce("no-such-topic", b"lost", on_delivery=lambda err, msg: reports.append(err))
        with pytest.raises(KafkaException) as raised:
            producer.commit_transaction(WAIT_S)
        error = raised.value.args[0]
        assert error.txn_requires_abort() and not error.fatal() and not error.retriable(), error
        assert error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART, error  # type: ignore[attr-defined]
        assert [e.code() for e in reports] == [KafkaError.UNKNOWN_TOPIC_OR_PART]  # type: ignore[attr-defined]
        with pytest.raises(KafkaException) as raised:
            producer.produce("tg", b"more")
        assert raised.value.args[0].txn_requires_abort()
        producer.abort_transaction(WAIT_S)
        producer.begin_transaction()
        producer.produce("tg", b"next")
        producer.commit_transaction(WAIT_S)
    finally:
        producer.close()
    assert logstore_values(broker.bootstrap, "tg", 1, "read_committed", 1) == [b"next"]


def test_close_aborts_an_open_transaction(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "tcl", 1)
    producer = txn_producer(broker.bootstrap, "lt-close")
    producer.begin_transaction()
    producer.produce("tcl", b"open")
    producer.flush(WAIT_S)
    producer.close(WAIT_S)
    with Producer({"bootstrap.servers": broker.bootstrap}) as plain:
        plain.produce("tcl", b"after")
        plain.flush(WAIT_S)
    # Not held back by the open transaction (the LSO moved on): it was aborted at close.
    assert logstore_values(broker.bootstrap, "tcl", 1, "read_committed", 1) == [b"after"]


def test_config_conflicts() -> None:
    base = {"bootstrap.servers": "127.0.0.1:1", "transactional.id": "x"}
    with pytest.raises(ConfigError, match="idempotence"):
        Producer({**base, "enable.idempotence": False})
    with pytest.raises(ConfigError, match="acks=1"):
        Producer({**base, "acks": 1})
    with pytest.raises(ConfigError, match=r"max\.in\.flight"):
        Producer({**base, "max.in.flight.requests.per.connection": 6})
    with pytest.raises(ConfigError, match="empty"):
        Producer({**base, "transactional.id": ""})
    with pytest.raises(ConfigError, match=r"transaction\.timeout\.ms"):
        Producer({**base, "transaction.timeout.ms": 10})


@pytest.mark.parametrize("transport", ["embedded", "tcp"])
def test_both_transports(transport: str, tmp_path: Any, broker_factory: Any) -> None:
    bootstrap = f"embedded://{tmp_path}/emb" if transport == "embedded" else broker_factory().bootstrap
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        for future in admin.create_topics([NewTopic("both", 2, 1)]).values():
            future.result(WAIT_S)
    producer = txn_producer(bootstrap, f"lt-{transport}")
    group = f"both-{transport}"
    try:
        producer.begin_transaction()
        for i in range(10):
            producer.produce("both", b"c%d" % i, partition=i % 2)
        producer.send_offsets_to_transaction([TopicPartition("both", 0, 5)], group, WAIT_S)
        producer.commit_transaction(WAIT_S)
        producer.begin_transaction()
        for i in range(6):
            producer.produce("both", b"a%d" % i, partition=i % 2)
        producer.flush(WAIT_S)
        producer.abort_transaction(WAIT_S)
        committed = logstore_values(bootstrap, "both", 2, "read_committed", 10)
        uncommitted = logstore_values(bootstrap, "both", 2, "read_uncommitted", 16)
        offsets = committed_offsets(bootstrap, group, [TopicPartition("both", 0)])
    finally:
        producer.close()
    assert sorted(committed) == sorted(b"c%d" % i for i in range(10))
    assert sorted(uncommitted) == sorted([b"c%d" % i for i in range(10)] + [b"a%d" % i for i in range(6)])
    assert offsets == [5]
