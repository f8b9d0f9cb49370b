"""logstore's own Kafka client, shaped like confluent-kafka: switching is a change of import.

>>> from logstore.client import Producer, Consumer, KafkaError, TopicPartition
>>> from logstore.client.admin import AdminClient, NewTopic

It runs over TCP against any Kafka broker, or, with ``bootstrap.servers =
"embedded:///path/to/data"``, in-process against a logstore Store. See
docs/client.md. Inside: ``producer`` (RecordAccumulator in ``accumulator``,
Sender in ``sender``, ``partitioner``, records waiting for metadata in
``pending``, conversions in ``producer_records``, transactions in
``transactions`` and ``txn_requests``), ``consumer`` (``fetcher``,
``coordinator``, ``subscription``, ``assignors``, ``consumer_protocol``),
``admin`` (a package, one module per area), and the transport (``cluster``,
``connection``).
"""

from logstore.client.admin import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    IsolationLevel,
    Node,
    TopicCollection,
    TopicPartitionInfo,
)
from logstore.client.config import ConfigError
from logstore.client.consumer import Consumer
from logstore.client.errors import KafkaError, KafkaException
from logstore.client.partitioner import murmur2
from logstore.client.producer import Producer
from logstore.client.types import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    OFFSET_STORED,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    Message,
    TopicPartition,
)

__all__ = [
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "OFFSET_INVALID",
    "OFFSET_STORED",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "ConfigError",
    "Consumer",
    "ConsumerGroupState",
    "ConsumerGroupTopicPartitions",
    "ConsumerGroupType",
    "IsolationLevel",
    "KafkaError",
    "KafkaException",
    "Message",
    "Node",
    "Producer",
    "TopicCollection",
    "TopicPartition",
    "TopicPartitionInfo",
    "libversion",
    "murmur2",
    "version",
]


def version() -> tuple[str, int]:
    """(version string, version int) of this client, as confluent_kafka.version()."""
    return ("0.1.0", 0x000100)


def libversion() -> tuple[str, int]:
    """The wire layer's version: this package's, as there is no librdkafka underneath."""
    return version()
