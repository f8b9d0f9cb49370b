"""storage/producer_state.py: one partition's producers (Kafka's ProducerStateManager), driven by
the validator's scan of each batch."""

from __future__ import annotations

import os
import pathlib

import pytest
from kio.schema.errors import ErrorCode

from logstore.records import build_batch
from logstore.records.builder import build_control_batch
from logstore.storage.config import LogConfig
from logstore.storage.log import Log
from logstore.storage.producer_state import (
    INVALID_PRODUCER_EPOCH,
    INVALID_TXN_STATE,
    NONE,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    SEQUENCE_MAX,
    TRANSACTION_COORDINATOR_FENCED,
    ProducerStateManager,
    last_sequence,
)
from logstore.storage.validator import BatchInfo, validate_from_client

pytestmark = pytest.mark.unit


def scanned(*, pid: int = 7, epoch: int = 0, sequence: int = 0, count: int = 2, transactional: bool = False) -> BatchInfo:
    batch = build_batch(
        [b"v"] * count, producer_id=pid, producer_epoch=epoch, base_sequence=sequence, transactional=transactional
    )
    return validate_from_client(batch, LogConfig.from_dict(), "t-0").first


def test_sequences_duplicates_and_epochs_from_the_scan() -> None:
    state = ProducerStateManager()
    first = scanned(sequence=0)
    assert state.validate(first, None, ()) == (NONE, None)
    state.appended(first, 100, 101, None)
    code, duplicate = state.validate(scanned(sequence=0), None, ())  # a retry
    assert code == NONE and duplicate is not None and (duplicate.first_offset, duplicate.last_offset) == (100, 101)
    assert state.validate(scanned(sequence=5), None, ())[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert state.validate(scanned(sequence=2), None, ()) == (NONE, None)
    assert state.validate(scanned(epoch=1, sequence=3), None, ())[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    bumped = scanned(epoch=1, sequence=0)
    assert state.validate(bumped, None, ()) == (NONE, None)  # a new epoch starts at 0
    state.appended(bumped, 102, 103, None)
    assert state.validate(scanned(epoch=0, sequence=2), None, ())[0] == INVALID_PRODUCER_EPOCH


def test_verification_guards_and_markers() -> None:
    """KIP-890: a guarded first batch of a transaction passes while its guard stands or its
    transaction is open; a marker voids the guard (INVALID_TXN_STATE), and fences older
    coordinators."""
    state = ProducerStateManager()
    guard = state.guards.setdefault(7, object())
    batch = scanned(transactional=True)
    assert state.validate(batch, guard, ()) == (NONE, None)
    state.record_marker(7, 0, coordinator_epoch=3)  # the transaction ended meanwhile
    assert state.validate(batch, guard, ()) == (INVALID_TXN_STATE, None)
    assert state.validate(batch, guard, {7}) == (NONE, None)  # open here (at this epoch): fine
    guard = state.guards.setdefault(7, object())
    state.appended(batch, 0, 1, guard)
    assert 7 not in state.guards  # spent: the transaction is open here now
    assert state.check_marker(7, 0, 2) == TRANSACTION_COORDINATOR_FENCED
    assert state.check_marker(7, 0, 3) == NONE


def test_rebuilt_from_the_log(tmp_path: pathlib.Path) -> None:
    with Log.open(str(tmp_path / "t-0")) as log:
        for i in range(3):
            log.append_batch(build_batch([b"a", b"b"], producer_id=4, producer_epoch=1, base_sequence=2 * i))
        log.append_batch(build_control_batch(True, 4, 1, 5))
        state = ProducerStateManager.rebuild(log)
    entry = state.entries[4]
    assert entry.epoch == 1 and entry.coordinator_epoch == 5 and len(entry.batches) == 3
    assert state.validate(scanned(pid=4, epoch=1, sequence=2), None, ())[1].first_offset == 2  # type: ignore[union-attr]
    assert state.validate(scanned(pid=4, epoch=1, sequence=6), None, ()) == (NONE, None)


# -- sequences, epochs and duplicates recorded by hand (the checks' table) ---------


def test_sequences_wrap() -> None:
    assert last_sequence(SEQUENCE_MAX, 0) == SEQUENCE_MAX
    assert last_sequence(SEQUENCE_MAX, 1) == 0
    state = ProducerStateManager()
    state.record(1, 0, SEQUENCE_MAX - 4, SEQUENCE_MAX, 0, 4)
    assert state.check(1, 0, 0, 9) == (ErrorCode.none, None)
    assert state.check(1, 0, 1, 9)[0] == ErrorCode.out_of_order_sequence_number


def test_epochs_and_duplicates() -> None:
    state = ProducerStateManager()
    # An unknown producer may start anywhere (its earlier batches may have been deleted), as in Kafka.
    assert state.check(5, 0, 3, 3) == (ErrorCode.none, None)
    for i in range(7):
        state.record(5, 0, i * 10, i * 10 + 9, i * 100, i * 100 + 9)
    assert state.check(5, 0, 60, 69)[1] is not None  # the last five are remembered
    assert state.check(5, 0, 20, 29)[1] is not None
    assert state.check(5, 0, 10, 19) == (
        ErrorCode.out_of_order_sequence_number,
        None,
    )  # sixth back: forgotten
    assert state.check(5, 0, 70, 79) == (ErrorCode.none, None)
    assert state.check(5, 1, 0, 0) == (ErrorCode.none, None)  # a new epoch starts at 0
    assert state.check(5, 1, 5, 5)[0] == ErrorCode.out_of_order_sequence_number
    state.record(5, 1, 0, 0, 700, 700)
    assert state.check(5, 0, 70, 79)[0] == ErrorCode.invalid_producer_epoch


def test_state_rebuilt_from_the_log(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "t-0")
    with Log.open(path, {"segment.bytes": 2048}) as log:
        for i in range(40):
            # Alternate an idempotent producer (id 9) with plain batches.
            pid = 9 if i % 2 == 0 else -1
            seq = (i // 2) * 3 if pid >= 0 else -1
            batch = build_batch(
                [b"a" * 50, b"b", b"c"],
                producer_id=pid,
                producer_epoch=0 if pid >= 0 else -1,
                base_sequence=seq,
            )
            log.append_batch(batch)
        assert len(log.segments) >= 2
        expected_offsets = [(i * 3, i * 3 + 2) for i in range(0, 40, 2)]
    with Log.open(path) as log:
        state = ProducerStateManager.rebuild(log)
    entry = state.entries[9]
    assert entry.epoch == 0
    assert [(b.first_offset, b.last_offset) for b in entry.batches] == expected_offsets[-5:]
    assert [(b.first_sequence, b.last_sequence) for b in entry.batches] == [
        (s * 3, s * 3 + 2) for s in range(15, 20)
    ]
    assert state.check(9, 0, 60, 62) == (ErrorCode.none, None)
    assert state.check(9, 0, 57, 59)[1].first_offset == 114  # type: ignore[union-attr]
    assert set(state.entries) == {9}
