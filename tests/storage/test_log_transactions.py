"""The log's transactions: open transactions, the LSO, aborted transactions and Kafka's .txnindex."""

from __future__ import annotations

import os
import struct

import pytest

from logstore.records import build_batch
from logstore.records.builder import build_control_batch
from logstore.storage.log import Log
from logstore.storage.transactions import ENTRY, AbortedTxn, read_index

pytestmark = pytest.mark.unit


def txn_batch(pid: int, seq: int, n: int = 2, epoch: int = 0) -> bytearray:
    records = [(b"k%d" % i, b"v%d" % i) for i in range(n)]
    return bytearray(
        build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True)
    )


def marker(pid: int, commit: bool, epoch: int = 0) -> bytearray:
    return bytearray(build_control_batch(commit, pid, epoch, coordinator_epoch=3))


@pytest.fixture
def log(tmp_path: object) -> Log:
    return Log.open(os.path.join(str(tmp_path), "t-0"))


def test_open_transaction_holds_the_lso_until_its_marker(log: Log) -> None:
    log.append([b"plain"])  # offset 0
    assert log.last_stable_offset == 1
    log.append_batch(txn_batch(7, 0))  # 1-2
    log.append([b"after"])  # 3
    assert log.high_watermark == 4
    assert log.last_stable_offset == 1
    info = log.append_batch(marker(7, commit=True))  # 4
    assert [(c.producer_id, c.first_offset, c.last_offset, c.aborted) for c in info.completed] == [(7, 1, 4, False)]
    assert log.last_stable_offset == 5
    assert log.aborted_transactions(0, 5) == []


def test_aborted_transactions_are_listed_and_indexed(log: Log) -> None:
    log.append_batch(txn_batch(1, 0))  # 0-1
    log.append_batch(txn_batch(2, 0))  # 2-3
    log.append_batch(marker(1, commit=False))  # 4
    assert log.last_stable_offset == 2  # producer 2 is still open
    log.append_batch(marker(2, commit=False))  # 5
    assert log.last_stable_offset == 6
    assert log.aborted_transactions(0, 6) == [AbortedTxn(4, 1, 0, 2), AbortedTxn(5, 2, 2, 6)]
    assert log.aborted_transactions(5, 6) == [AbortedTxn(5, 2, 2, 6)]
    assert log.aborted_transactions(6, 10) == []
    assert log.aborted_transactions(0, 1) == [AbortedTxn(4, 1, 0, 2)]  # the LSO 2 ends the search
    path = os.path.join(log.path, f"{0:020d}.txnindex")
    with open(path, "rb") as f:
        data = f.read()
    assert len(data) == 2 * 34 == 2 * ENTRY.size
    assert struct.unpack(">hqqqq", data[:34]) == (0, 1, 0, 4, 2)  # Kafka's AbortedTxn layout


def test_state_and_index_rebuilt_from_the_log(log: Log) -> None:
    log.append_batch(txn_batch(1, 0))
    log.append_batch(marker(1, commit=False))
    log.append_batch(txn_batch(2, 0))  # open at 3
    assert log.last_stable_offset == 3
    path, directory = os.path.join(log.path, f"{0:020d}.txnindex"), log.path
    log.close()
    os.unlink(path)  # lost with the page cache
    reopened = Log.open(directory)
    assert reopened.last_stable_offset == 3
    assert reopened.aborted_transactions(0, 5) == [AbortedTxn(2, 1, 0, 3)]
    assert read_index(path) == [AbortedTxn(2, 1, 0, 3)]  # repaired
    reopened.close()


def test_truncation_forgets_markers_past_it(log: Log) -> None:
    log.append_batch(txn_batch(1, 0))  # 0-1
    log.append_batch(marker(1, commit=False))  # 2
    assert log.aborted_transactions(0, 3)
    log.truncate_to(2)
    assert log.last_stable_offset == 0  # the transaction is open again
    assert log.aborted_transactions(0, 3) == []
    assert read_index(os.path.join(log.path, f"{0:020d}.txnindex")) == []


def test_read_committed_stops_at_the_lso(log: Log) -> None:
    log.append([b"a"])
    log.append_batch(txn_batch(9, 0))
    read = log.read(0, upto="last_stable")
    assert [r.value for r in read.records] == [b"a"]
    assert log.read(1, upto="last_stable").size == 0


def test_empty_transaction_marker(log: Log) -> None:
    assert log.transactions.open == {}  # built: appends now report what markers complete
    info = log.append_batch(marker(4, commit=False))
    assert info.completed[0].first_offset == info.completed[0].last_offset == 0
    assert log.aborted_transactions(0, 1) == [AbortedTxn(0, 4, 0, 1)]


def test_segment_deletion_takes_its_txnindex(log: Log) -> None:
    log.append_batch(txn_batch(1, 0))
    log.append_batch(marker(1, commit=False))
    log.roll()
    log.append([b"x"])
    path = os.path.join(log.path, f"{0:020d}.txnindex")
    assert log.aborted_transactions(0, 3) and os.path.exists(path)
    log.delete_records(3)
    assert not os.path.exists(path)
    assert log.aborted_transactions(0, 4) == []


def test_markers_from_an_older_coordinator_are_fenced(log: Log) -> None:
    """Kafka's checkCoordinatorEpoch: once a marker of coordinator epoch 3 is written, a marker
    from epoch 2 (a zombie coordinator) is TRANSACTION_COORDINATOR_FENCED, also after the
    producer state is rebuilt from the log (the epoch is read back from the marker's value)."""
    from kio.schema.errors import ErrorCode

    from logstore.storage.producer_state import ProducerStateManager as PartitionProducers

    state = PartitionProducers()
    assert state.check_marker(7, 0, 2) == ErrorCode.none  # unknown producer: anything goes
    log.append_batch(txn_batch(7, 0))
    log.append_batch(marker(7, commit=True))  # coordinator epoch 3
    state.record_marker(7, 0, 3)
    assert state.check_marker(7, 0, 2) == ErrorCode.transaction_coordinator_fenced
    assert state.check_marker(7, 0, 3) == ErrorCode.none
    assert state.check_marker(7, 1, 4) == ErrorCode.none
    state.record_marker(7, 1, 4)  # a new producer epoch keeps the coordinator epoch
    assert state.check_marker(7, 1, 3) == ErrorCode.transaction_coordinator_fenced
    assert state.check_marker(7, 0, 4) == ErrorCode.invalid_producer_epoch
    rebuilt = PartitionProducers.rebuild(log)
    assert rebuilt.entries[7].coordinator_epoch == 3
    assert rebuilt.check_marker(7, 0, 2) == ErrorCode.transaction_coordinator_fenced
    assert rebuilt.check_epoch(7, 0) == ErrorCode.none
