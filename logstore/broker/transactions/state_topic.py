"""The transaction coordinator on the broker: ``__transaction_state`` and what the transaction APIs share.

The coordinator's I/O (producer ids, ``__transaction_state`` writes, markers) is
:class:`~logstore.broker.transactions.transaction_io.BrokerTransactionIO` (transaction_io.py).
A broker alone loads every partition of the topic at start
(:func:`start_transactions`) and creates it on the first write
(``transaction.state.log.num.partitions`` partitions, compacted, 100 MiB
segments), as Kafka creates it on first use; in a cluster the coordinator serves the
partitions this broker comes to lead (:func:`on_transaction_state_leadership`)
and FindCoordinator creates the topic on first use
(``transaction.state.log.replication.factor`` replicas,
``transaction.state.log.min.isr``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

from kio.schema.errors import ErrorCode

from logstore.broker.context import Services
from logstore.broker.groups.offsets_topic import read_partition
from logstore.broker.transactions.transaction_io import BrokerTransactionIO, ensure_transaction_topic
from logstore.coordinator.internal_topics import TRANSACTION_STATE_TOPIC
from logstore.coordinator.record_codec import Record
from logstore.coordinator.txn.transaction_coordinator import TransactionCoordinator, TransactionsConfig
from logstore.errors import LogstoreError

_log = logging.getLogger("logstore.broker")


def read_state_partition(broker: Services, partition: int) -> Iterator[Record]:
    log = broker.replica_manager.find_log(TRANSACTION_STATE_TOPIC, partition)
    return iter(()) if log is None else read_partition(log)


def on_transaction_state_leadership(broker: Services, topic: str, index: int, leader: bool) -> None:
    """The ReplicaManager's hook: a ``__transaction_state`` partition's ids are coordinated here
    from the moment this broker leads it (loaded from its log) until it no longer does."""
    coordinator = broker.transactions
    if topic != TRANSACTION_STATE_TOPIC or coordinator is None:
        return
    if leader:
        coordinator.load(index, read_state_partition(broker, index))
        _log.info("coordinating the transactional ids of %s-%d", TRANSACTION_STATE_TOPIC, index)
    else:
        coordinator.unload(index)


def start_transactions(
    broker: Services, distributed: bool = False
) -> tuple[TransactionCoordinator, BrokerTransactionIO]:
    """A running transaction coordinator and its I/O (call on the loop; the broker keeps both;
    see the module doc)."""
    config = broker.config
    partitions = broker.metadata.partition_count(TRANSACTION_STATE_TOPIC) or int(
        config.transaction_state_log_num_partitions
    )
    settings = TransactionsConfig(
        num_partitions=partitions,
        max_timeout_ms=int(config.transaction_max_timeout_ms),
        id_expiration_ms=int(config.transactional_id_expiration_ms),
        abort_interval_ms=int(config.transaction_abort_timed_out_transaction_cleanup_interval_ms),
    )
    io = BrokerTransactionIO(broker)
    coordinator = TransactionCoordinator(settings, io)
    if distributed:
        coordinator.serve_partitions_taken_only()
    elif broker.metadata.has_topic(TRANSACTION_STATE_TOPIC):  # else created on first use
        for partition in range(partitions):
            coordinator.load(partition, read_state_partition(broker, partition))
    coordinator.start()
    return coordinator, io


# -- what the transaction APIs share ---------------------------------------------------


def coordinator_of(broker: Services) -> TransactionCoordinator:
    coordinator = broker.transactions
    if coordinator is None:  # start() builds it before listening
        raise RuntimeError("the transaction coordinator is not running")
    return coordinator


def for_version(error: ErrorCode, version: int, fenced_since: int) -> ErrorCode:
    """PRODUCER_FENCED exists from KIP-588's versions on; older clients get INVALID_PRODUCER_EPOCH."""
    if error == ErrorCode.producer_fenced and version < fenced_since:
        return ErrorCode.invalid_producer_epoch
    return error


async def ensure_transaction_topic_async(broker: Services) -> ErrorCode:
    """FindCoordinator in a cluster: create ``__transaction_state`` off the loop on first use."""
    if broker.metadata.has_topic(TRANSACTION_STATE_TOPIC):
        return ErrorCode.none
    try:
        await asyncio.get_running_loop().run_in_executor(None, ensure_transaction_topic, broker)
    except (LogstoreError, OSError) as e:
        _log.info("cannot create %s yet: %s", TRANSACTION_STATE_TOPIC, e)
        return ErrorCode.coordinator_not_available
    return ErrorCode.none
