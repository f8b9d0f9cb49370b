"""Transactional producing by hand, one request at a time (KIP-98/890 tests): a
:class:`Txn` speaks to the transaction coordinator and to the partition's leader
over :class:`~wire.WireClient` connections."""

from __future__ import annotations

import datetime
import time
from typing import Any

from kio.index import load_payload_module
from kio.static.constants import EntityType

from logstore.records.builder import build_batch
from tests.kit.wire import WireClient

NONE, INVALID_TXN_STATE, TRANSACTION_ABORTABLE = 0, 48, 120
# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS
RETRIABLE_INIT = frozenset({14, 15, 16, 51})


def req(api_key: int, version: int) -> Any:
    return load_payload_module(api_key, version, EntityType.request)


def ms(n: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=n)


class Txn:
    """One transactional producer spoken to by hand: each step one request."""

    def __init__(self, client: WireClient, txn_id: str, topic: str, leader: WireClient | None = None) -> None:
        """``client`` reaches the coordinator of ``txn_id``; ``leader`` (default: the same) the
        leader of ``topic``'s partition 0."""
        self.client, self.txn_id, self.topic = client, txn_id, topic
        self.leader = leader if leader is not None else client
        ip = req(22, 4)
        deadline = time.monotonic() + 30
        while True:  # bounded by the deadline
            init = client.call(ip.InitProducerIdRequest(transactional_id=txn_id, transaction_timeout=ms(60_000)))
            # A coordinator that has just become one may still be loading its partition: retry,
            # as every client does, the errors that say "not yet".
            if init.error_code not in RETRIABLE_INIT or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert init.error_code == NONE, init
        self.producer_id, self.epoch = init.producer_id, init.producer_epoch
        self.sequence = 0

    def add_partition(self) -> int:
        ap = req(24, 3)
        answer = self.client.call(ap.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.txn_id, v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.epoch,
            v3_and_below_topics=(ap.AddPartitionsToTxnTopic(name=self.topic, partitions=(0,)),),
        ))  # fmt: skip
        return int(answer.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)

    def produce(self, value: bytes) -> Any:
        """One transactional batch (the next sequence); the partition's answer."""
        batch = build_batch([value], producer_id=self.producer_id, producer_epoch=self.epoch,
                            base_sequence=self.sequence, transactional=True)  # fmt: skip
        pr = req(0, 9)
        answer = self.leader.call(pr.ProduceRequest(
            transactional_id=self.txn_id, acks=-1, timeout=ms(10_000),
            topic_data=(pr.TopicProduceData(name=self.topic, partition_data=(pr.PartitionProduceData(index=0, records=batch),)),),
        ))  # fmt: skip
        part = answer.responses[0].partition_responses[0]
        if part.error_code == NONE:
            self.sequence += 1
        return part

    def end(self, commit: bool) -> None:
        end = req(26, 3).EndTxnRequest(
            transactional_id=self.txn_id, producer_id=self.producer_id, producer_epoch=self.epoch, committed=commit
        )
        assert self.client.call(end).error_code == NONE
        self.wait_settled()

    def wait_settled(self) -> None:
        """Until the coordinator has written every marker (Complete*), at most 10 s."""
        deadline = time.monotonic() + 10
        lt = req(66, 0)
        while time.monotonic() < deadline:
            listed = self.client.call(lt.ListTransactionsRequest(state_filters=(), producer_id_filters=()))
            states = {s.transactional_id: s.transaction_state for s in listed.transaction_states}
            if states.get(self.txn_id) in ("CompleteCommit", "CompleteAbort"):
                return
            time.sleep(0.02)
        raise AssertionError(f"{self.txn_id} did not settle: {states}")


def offsets(client: WireClient, topic: str) -> tuple[int, int]:
    """(high watermark, last stable offset) of partition 0: ListOffsets latest, both isolations."""
    lo = req(2, 7)
    found = []
    for isolation in (0, 1):
        answer = client.call(lo.ListOffsetsRequest(
            replica_id=-1, isolation_level=isolation,
            topics=(lo.ListOffsetsTopic(name=topic, partitions=(lo.ListOffsetsPartition(partition_index=0, timestamp=-1),)),),
        ))  # fmt: skip
        part = answer.topics[0].partitions[0]
        assert part.error_code == NONE
        found.append(int(part.offset))
    return found[0], found[1]


def verify_only(client: WireClient, version: int, txn: Txn, partitions: tuple[int, ...]) -> dict[int, int]:
    ap = req(24, version)
    answer = client.call(ap.AddPartitionsToTxnRequest(transactions=(ap.AddPartitionsToTxnTransaction(
        transactional_id=txn.txn_id, producer_id=txn.producer_id, producer_epoch=txn.epoch, verify_only=True,
        topics=(ap.AddPartitionsToTxnTopic(name=txn.topic, partitions=partitions),),
    ),)))  # fmt: skip
    assert answer.error_code == NONE
    results = answer.results_by_transaction[0].topic_results[0].results_by_partition
    return {int(r.partition_index): int(r.partition_error_code) for r in results}
