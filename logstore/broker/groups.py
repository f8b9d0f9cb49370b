"""The group coordinator on the broker: ``__consumer_offsets`` and what the group APIs share.

At start (:func:`start_coordinator`) the broker creates ``__consumer_offsets``
if it is missing (``offsets.topic.num.partitions`` partitions,
``cleanup.policy=compact``, 100 MiB segments: Kafka's
``offsets.topic.segment.bytes``), builds a
:class:`~logstore.coordinator.GroupCoordinator` on the event loop's clock,
replays every partition of the topic into it (all batches in offset order)
and starts offset expiry. An existing topic's partition count wins over the
config, as in Kafka (a group's partition is ``hash(group) % count``).

The coordinator's writer appends one group's records as one batch to that
group's partition with :meth:`Log.append`, so the topic's ``flush.messages``
and ``flush.ms`` make it durable like any other log, and wakes fetches
waiting on the partition. Append errors become Kafka's: a batch over
``max.message.bytes`` is INVALID_COMMIT_OFFSET_SIZE, a storage error
NOT_COORDINATOR, anything else COORDINATOR_NOT_AVAILABLE.

>>> millis(__import__("datetime").timedelta(seconds=6))
6000
>>> client_host("127.0.0.1:52314"), client_host("::1:9")
('/127.0.0.1', '/::1')
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from logstore.coordinator import (
    CoordinatorConfig,
    GroupCoordinator,
    LoopClock,
    WriteError,
    Writer,
    partition_for,
)
from logstore.coordinator.coordinator import OFFSETS_TOPIC
from logstore.coordinator.schemas import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    OffsetsSchemaError,
    Record,
    UnknownKeyError,
    decode_key,
)
from logstore.errors import LogstoreError, RecordTooLargeError
from logstore.storage.log import Log

if TYPE_CHECKING:
    from logstore.broker.server import Broker

_log = logging.getLogger("logstore.broker")

OFFSETS_TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": 104_857_600}
"""The overrides Kafka gives ``__consumer_offsets``."""

_ONE_MS = datetime.timedelta(milliseconds=1)

# Kafka's Errors.message() for the codes the group APIs put in error_message fields.
ERROR_MESSAGES = {
    ErrorCode.none: "NONE",
    ErrorCode.coordinator_not_available: "The coordinator is not available.",
    ErrorCode.not_coordinator: "This is not the correct coordinator.",
    ErrorCode.invalid_request: (
        "This most likely occurs because of a request being malformed by the client library or "
        "the message was sent to an incompatible broker. See the broker logs for more details."
    ),
    ErrorCode.group_id_not_found: "The group id does not exist.",
}

GROUP_OPERATIONS = sum(1 << code for code in (3, 6, 8))
"""READ, DELETE and DESCRIBE: every operation on a group (AclOperation codes), as Kafka without an authorizer."""
AUTHORIZED_OPERATIONS_UNKNOWN = -(2**31)


def millis(value: datetime.timedelta) -> int:
    """A kio duration field as whole milliseconds (negative allowed: -1 = "not given")."""
    return value // _ONE_MS


def client_host(peer: str) -> str:
    """Kafka's ``clientAddress.toString()`` form ("/127.0.0.1") of a connection's "host:port"."""
    host, sep, _ = peer.rpartition(":")
    return "/" + (host if sep else peer)


def coordinator_of(broker: Broker) -> GroupCoordinator:
    coordinator = broker.coordinator
    if coordinator is None:  # start() builds it before listening
        raise RuntimeError("the group coordinator is not running")
    return coordinator


# -- __consumer_offsets ------------------------------------------------------------


def ensure_offsets_topic(broker: Broker) -> int:
    """Create ``__consumer_offsets`` if missing; returns its partition count."""
    store = broker.store
    wanted = broker.config.offsets_topic_num_partitions
    if not store.has_topic(OFFSETS_TOPIC):
        store.create_topic(OFFSETS_TOPIC, wanted, OFFSETS_TOPIC_CONFIG)
        _log.info("created %s with %d partitions", OFFSETS_TOPIC, wanted)
        return int(wanted)
    count = store.partitions(OFFSETS_TOPIC)
    if count != wanted:
        _log.warning(
            "%s has %d partitions, not offsets.topic.num.partitions=%d; groups are placed over %d",
            OFFSETS_TOPIC,
            count,
            wanted,
            count,
        )
    return count


def read_partition(log: Log, max_bytes: int = 4 * 1024 * 1024) -> Iterator[Record]:
    """Every keyed record of one ``__consumer_offsets`` partition, in offset order."""
    offset = log.log_start_offset
    end = log.log_end_offset
    while offset < end:
        progressed = False
        for batch in log.read(offset, max_bytes, upto="log_end").batches:
            if batch.next_offset <= offset:
                continue
            if not batch.is_control and not batch.is_transactional:
                for record in batch.records:
                    if record.offset >= offset and record.key is not None:
                        value = record.value
                        yield bytes(record.key), None if value is None else bytes(value)
            offset = batch.next_offset
            progressed = True
        if not progressed:
            break


def _decodable(record: Record) -> bool:
    key_bytes, value = record
    try:
        key = decode_key(key_bytes)
        if value is not None:
            if isinstance(key, OffsetCommitKey):
                OffsetCommitValue.decode(value)
            elif isinstance(key, GroupMetadataKey):
                GroupMetadataValue.decode(value)
    except UnknownKeyError:
        return True  # the coordinator skips those itself
    except OffsetsSchemaError as e:
        _log.error("skipping an unreadable %s record (key %s): %s", OFFSETS_TOPIC, key_bytes.hex(), e)
        return False
    return True


def load_offsets_topic(coordinator: GroupCoordinator, broker: Broker, partitions: int) -> None:
    """Replay every partition of ``__consumer_offsets`` into the coordinator."""
    for partition in range(partitions):
        log = broker.store.log(OFFSETS_TOPIC, partition)
        if log.log_end_offset <= log.log_start_offset:
            continue
        try:
            coordinator.load(read_partition(log))
        except OffsetsSchemaError:
            # A record that does not decode: load again without the unreadable ones.
            coordinator.load(record for record in read_partition(log) if _decodable(record))


def make_writer(broker: Broker, partitions: int) -> Writer:
    """The coordinator's writer: one group's records -> one batch on the group's partition."""
    store = broker.store

    def write(group_id: str, records: list[Record]) -> None:
        if not records:
            return
        partition = partition_for(group_id, partitions)
        try:
            store.log(OFFSETS_TOPIC, partition).append(records)
        except RecordTooLargeError as e:
            raise WriteError(ErrorCode.invalid_commit_offset_size, str(e)) from None
        except OSError as e:
            _log.error("appending to %s-%d failed: %s", OFFSETS_TOPIC, partition, e)
            raise WriteError(ErrorCode.not_coordinator, str(e)) from None
        except LogstoreError as e:
            _log.error("appending to %s-%d failed: %s", OFFSETS_TOPIC, partition, e)
            raise WriteError(ErrorCode.coordinator_not_available, str(e)) from None
        broker.purgatory.notify((OFFSETS_TOPIC, partition))

    return write


def start_coordinator(broker: Broker) -> GroupCoordinator:
    """Create and load ``__consumer_offsets``, and a running coordinator over it (call on the loop)."""
    partitions = ensure_offsets_topic(broker)
    values = dict(broker.config.values)
    values["offsets.topic.num.partitions"] = partitions
    config = CoordinatorConfig.from_properties(values)
    coordinator = GroupCoordinator(config, clock=LoopClock(), writer=make_writer(broker, partitions))
    load_offsets_topic(coordinator, broker, partitions)
    loaded = coordinator.list_groups()
    if loaded:
        _log.info("loaded %d groups from %s", len(loaded), OFFSETS_TOPIC)
    coordinator.start()
    return coordinator
