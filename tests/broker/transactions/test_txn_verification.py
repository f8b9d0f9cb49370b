"""Transaction verification (KIP-890 part 1) against a broker process, over the wire.

A transactional batch that would open its producer's transaction on a partition
is appended only if the transaction coordinator confirms the partition was
added: a late batch (after its transaction was aborted) or one whose partition
was never added gets INVALID_TXN_STATE, and the partition's last stable offset
does not hang behind it. With ``transaction.partition.verification.enable=false``
the same late batch is taken and read_committed consumers stop at it: the
hazard the check removes. AddPartitionsToTxn v4-v5 (the brokers' form) answers
``verify_only`` questions."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kit.brokerkit import BrokerProcess, create_topic, set_broker_config
from tests.kit.txnkit import INVALID_TXN_STATE, NONE, TRANSACTION_ABORTABLE, Txn, offsets, verify_only
from tests.kit.wire import WireClient

pytestmark = pytest.mark.integration


def test_batches_outside_their_transaction_are_refused(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "tv", 2)
    with WireClient(broker.bootstrap) as client:
        txn = Txn(client, "tv-1", "tv")
        # Never added to a transaction: refused, nothing written.
        part = txn.produce(b"not added")
        assert (part.error_code, part.error_message) == (
            INVALID_TXN_STATE,
            "Partition was not added to the transaction",
        )
        assert offsets(client, "tv") == (0, 0)

        assert txn.add_partition() == NONE
        assert txn.produce(b"in").error_code == NONE
        assert txn.produce(b"in too").error_code == NONE  # the transaction is open here: no question asked
        # The brokers' form: partition 0 is in the transaction, 1 is not (v4 predates TRANSACTION_ABORTABLE).
        assert verify_only(client, 5, txn, (0, 1)) == {0: NONE, 1: TRANSACTION_ABORTABLE}
        assert verify_only(client, 4, txn, (0, 1)) == {0: NONE, 1: INVALID_TXN_STATE}
        txn.end(commit=False)
        hw, lso = offsets(client, "tv")
        assert hw == lso == 3  # two records and the abort marker

        # A late batch of the aborted transaction (the same epoch, the next sequence): refused, and
        # the last stable offset stays with the high watermark.
        part = txn.produce(b"late")
        assert part.error_code == INVALID_TXN_STATE
        assert offsets(client, "tv") == (3, 3)
        assert verify_only(client, 5, txn, (0,)) == {0: TRANSACTION_ABORTABLE}

        # The next transaction goes as usual.
        assert txn.add_partition() == NONE
        assert txn.produce(b"next").error_code == NONE
        txn.end(commit=True)
        assert offsets(client, "tv") == (5, 5)


def test_without_verification_a_late_batch_hangs_read_committed(broker_factory: Any) -> None:
    broker = broker_factory({"transaction.partition.verification.enable": "false"})
    create_topic(broker.bootstrap, "tv", 1)
    with WireClient(broker.bootstrap) as client:
        txn = Txn(client, "tv-2", "tv")
        assert txn.add_partition() == NONE
        assert txn.produce(b"in").error_code == NONE
        txn.end(commit=False)
        assert offsets(client, "tv") == (2, 2)
        assert txn.produce(b"late").error_code == NONE  # taken: it opens a transaction nothing will end
        assert offsets(client, "tv") == (3, 2)  # read_committed stops before it for good


def test_brokers_form_for_another_producer(broker: BrokerProcess) -> None:
    """A producer id that is not the transactional id's: INVALID_PRODUCER_ID_MAPPING per partition."""
    create_topic(broker.bootstrap, "tv", 1)
    with WireClient(broker.bootstrap) as client:
        txn = Txn(client, "tv-3", "tv")
        txn.producer_id += 1000  # not this id's producer
        assert verify_only(client, 5, txn, (0,)) == {0: 49}  # INVALID_PRODUCER_ID_MAPPING


def test_verification_is_switched_at_runtime(broker: BrokerProcess) -> None:
    """``transaction.partition.verification.enable`` is a dynamic broker config, read per request."""

    def switch(value: str) -> None:
        set_broker_config(broker.bootstrap, "transaction.partition.verification.enable", value)

    create_topic(broker.bootstrap, "tv", 1)
    with WireClient(broker.bootstrap) as client:
        txn = Txn(client, "tv-4", "tv")
        switch("false")
        assert txn.produce(b"not added, not asked").error_code == NONE
        assert offsets(client, "tv") == (1, 0)  # a transaction no marker will end: read_committed stuck
        switch("true")
        other = Txn(client, "tv-5", "tv")
        assert other.produce(b"not added").error_code == INVALID_TXN_STATE
