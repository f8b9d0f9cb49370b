"""Transaction verification (KIP-890 part 1): no transactional batch without its transaction.

Before a partition leader appends a transaction's *first* batch on a partition
(the producer has no open transaction there at that epoch), it asks the
producer's transaction coordinator whether the partition was added to the
transaction. Without the question, a batch that arrives late (a retry that
overtook an abort, a zombie's request) would open a transaction on the
partition that no marker will ever close: its last stable offset, and every
read_committed consumer, would stay behind it for good (a *hanging
transaction*). Kafka's ``AddPartitionsToTxnManager`` and the part of
``ReplicaManager.appendRecords`` that uses it.

- The coordinator here (a broker alone, or this broker leads the id's
  ``__transaction_state`` partition): asked directly
  (:meth:`~logstore.coordinator.txn.transaction_coordinator.TransactionCoordinator.verify_partitions`).
- Elsewhere: AddPartitionsToTxn v5 with ``verify_only`` to the leader of that
  partition, on the inter-broker channel the markers use.
- ``transaction.partition.verification.enable`` (default true, dynamic) turns
  it off, as in Kafka.

The answer becomes the Produce error Kafka gives a client of Produce v10 or
older: TRANSACTION_ABORTABLE and INVALID_TXN_STATE are INVALID_TXN_STATE
("Partition was not added to the transaction"); PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH; a coordinator that cannot answer yet
(CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR) is NOT_ENOUGH_REPLICAS, which
producers retry.

Between the question and the append the answer may go stale (the transaction
is aborted meanwhile): a *verification guard* (an object in the partition's
producer state, shared by the verifications in flight for the producer,
dropped by any marker for it and by the append that opens its transaction)
makes the append check that nothing ended in between; if something did,
INVALID_TXN_STATE.

Cost: nothing for non-transactional batches, and for the batches of a
transaction already open on the partition (one dict lookup); one local call,
or one inter-broker round trip per request, for a transaction's first batches.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Protocol

from kio.schema.errors import ErrorCode

from logstore.broker.cluster_member import ClusterMember
from logstore.broker.metadata_cache import NO_LEADER
from logstore.broker.network.inter_broker import BrokerChannel, ChannelError
from logstore.coordinator.internal_topics import TRANSACTION_STATE_TOPIC
from logstore.coordinator.txn.transaction_coordinator import TransactionCoordinator
from logstore.coordinator.txn.transaction_log import TopicPartition
from logstore.protocol.codec import group_by_topic

_log = logging.getLogger("logstore.broker")

ADD_PARTITIONS_TO_TXN = 24
VERIFY_VERSION = 5
VERIFY_TIMEOUT_S = 30.0

_NOT_VERIFIED = frozenset({
    ErrorCode.concurrent_transactions, ErrorCode.coordinator_load_in_progress,
    ErrorCode.coordinator_not_available, ErrorCode.not_coordinator,
})  # fmt: skip
NOT_ADDED = "Partition was not added to the transaction"


def produce_error(error: ErrorCode) -> tuple[ErrorCode, str | None]:
    """A verification answer as the Produce error (and message) Kafka sends clients of v10 or older."""
    if error in (ErrorCode.transaction_abortable, ErrorCode.invalid_txn_state):
        return ErrorCode.invalid_txn_state, NOT_ADDED
    if error == ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch, None
    if error in _NOT_VERIFIED:
        return ErrorCode.not_enough_replicas, (
            f"Unable to verify the partition has been added to the transaction. Underlying error: {error.name.upper()}"
        )
    return error, None


class Channels(Protocol):
    """Inter-broker channels by broker id (the transaction coordinator's I/O keeps them)."""

    def channel_to(self, broker_id: int) -> BrokerChannel | None: ...


class VerifierHost(ClusterMember, Protocol):
    """What the verifier reads of the broker, each time (the coordinator and its channels come
    and go while the broker runs)."""

    @property
    def transactions(self) -> TransactionCoordinator | None: ...

    @property
    def transaction_io(self) -> Channels | None: ...


class TransactionVerifier:
    """Asks transaction coordinators whether partitions are in a producer's transaction."""

    def __init__(self, broker: VerifierHost) -> None:
        self.broker = broker

    @property
    def enabled(self) -> bool:
        return bool(self.broker.config.transaction_partition_verification_enable)

    async def verify(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """The coordinator's answer per partition (NONE: in the transaction)."""
        wanted = list(partitions)
        coordinator = self.broker.transactions
        if coordinator is None:
            return dict.fromkeys(wanted, ErrorCode.coordinator_not_available)
        index = coordinator.partition_of(transactional_id)
        state = self.broker.metadata.partition_state(TRANSACTION_STATE_TOPIC, index)
        leader = self.broker.node_id if self.broker.cluster_link is None else (
            state.leader if state is not None else NO_LEADER
        )  # fmt: skip
        if leader == self.broker.node_id:
            return coordinator.verify_partitions(transactional_id, producer_id, epoch, wanted)
        if leader == NO_LEADER:
            return dict.fromkeys(wanted, ErrorCode.coordinator_not_available)
        return await self._ask(leader, transactional_id, producer_id, epoch, wanted)

    async def _ask(
        self, leader: int, transactional_id: str, producer_id: int, epoch: int, wanted: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        io = self.broker.transaction_io
        channel = io.channel_to(leader) if io is not None else None
        if channel is None:
            return dict.fromkeys(wanted, ErrorCode.coordinator_not_available)
        by_topic = group_by_topic(wanted)
        request = {
            "transactions": [{
                "transactional_id": transactional_id, "producer_id": producer_id, "producer_epoch": epoch,
                "verify_only": True,
                "topics": [{"name": topic, "partitions": indexes} for topic, indexes in by_topic.items()],
            }]
        }  # fmt: skip
        try:
            response = await channel.request(ADD_PARTITIONS_TO_TXN, VERIFY_VERSION, request, timeout=VERIFY_TIMEOUT_S)
        except ChannelError as e:
            _log.info("verifying %r's partitions with broker %d failed: %s", transactional_id, leader, e)
            return dict.fromkeys(wanted, ErrorCode.network_exception)
        if response.error_code != ErrorCode.none:
            # Kafka: a refused broker (CLUSTER_AUTHORIZATION_FAILED) must not reach the client as such.
            error = ErrorCode(response.error_code)
            return dict.fromkeys(wanted, ErrorCode.invalid_txn_state if error == ErrorCode.cluster_authorization_failed else error)
        answers = dict.fromkeys(wanted, ErrorCode.none)
        for result in response.results_by_transaction:
            for topic in result.topic_results:
                for partition in topic.results_by_partition:
                    answers[(topic.name, partition.partition_index)] = ErrorCode(partition.partition_error_code)
        return answers
