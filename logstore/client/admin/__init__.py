"""The admin client, shaped like ``confluent_kafka.admin``: topics, configs, groups, offsets, records.

:class:`AdminClient` has confluent-kafka's method names, arguments and result
shapes, and this module has the helper classes with confluent's names and
constructor signatures (:class:`NewTopic`, :class:`ConfigResource`,
:class:`OffsetSpec`, :class:`ConsumerGroupDescription`, ...), so that code
written against ``confluent_kafka.admin`` runs against this one with a change
of import. Where confluent's shape is odd (``alter_configs`` deprecated with a
warning, offsets listed for one group per call, ``list_topics`` synchronous
while everything else returns futures) it is kept.

Every asynchronous method checks its arguments in the caller's thread (a bad
type is TypeError, a bad value ValueError, before any request is sent) and
returns at once: a dict of :class:`concurrent.futures.Future`, one per
resource (topic, :class:`ConfigResource`, group id, :class:`TopicPartition`),
or one future. The requests run on the client's worker threads. A resource
the broker answers with an error code fails only that resource's future,
with ``KafkaException(KafkaError(code, broker's message))``; a request that
cannot be sent or answered fails the futures of every resource it carried.
Every future settles: a resource the broker left out of its answer fails
with ``_BAD_MSG``, and one still waiting when ``request_timeout`` (seconds,
default ``socket.timeout.ms``) runs out fails with ``_TIMED_OUT``.

Routing follows Kafka's ``KafkaAdminClient``: topic and config operations go
to the controller named by metadata (any broker when it names none), a
BROKER config resource to that broker, group operations to the group's
coordinator (FindCoordinator), ListOffsets and DeleteRecords to each
partition's leader, ListGroups to every broker (answers merged). An answer of
NOT_CONTROLLER, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a leader change,
or a dropped connection is retried once, for the resources it concerns,
after the metadata or coordinator is looked up again.

Beyond confluent: :meth:`AdminClient.delete_consumer_group_offsets`
(OffsetDelete, Java's ``deleteConsumerGroupOffsets``),
:meth:`AdminClient.describe_log_dirs` (DescribeLogDirs), the reassignment calls
and the client quota calls (Java's). The admin client never creates a topic by
asking for its metadata.

The package is split by area, as franz-go's ``kadm``: ``client`` (the core:
connections, worker threads, futures, routing and retries), and one module per
area with its calls (a mixin of :class:`AdminClient`) and its classes:
``topics``, ``configs``, ``metadata`` (brokers, ``list_topics``,
``describe_cluster``), ``groups`` (and their offsets), ``partitions`` (offsets,
records, leaders, reassignments), ``logdirs``, ``acls``, ``quotas``; plus
``resources`` (the enums the areas share) and ``checks`` (argument checks).
Every public name is importable from this package.
"""

from __future__ import annotations

from logstore.client.admin.acls import (
    AclBinding,
    AclBindingFilter,
    AclPermissionType,
    AclsAdmin,
    ResourcePatternType,
)
from logstore.client.admin.client import WORKERS
from logstore.client.admin.configs import (
    CONFIG_SOURCE_DEFAULT_CONFIG,
    CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG,
    CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
    CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG,
    CONFIG_SOURCE_GROUP_CONFIG,
    CONFIG_SOURCE_STATIC_BROKER_CONFIG,
    CONFIG_SOURCE_UNKNOWN_CONFIG,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigsAdmin,
    ConfigSource,
)
from logstore.client.admin.groups import (
    ConsumerGroupDescription,
    ConsumerGroupListing,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    GroupsAdmin,
    ListConsumerGroupsResult,
    MemberAssignment,
    MemberDescription,
)
from logstore.client.admin.logdirs import LogDirsAdmin
from logstore.client.admin.metadata import (
    BrokerMetadata,
    ClusterMetadata,
    DescribeClusterResult,
    MetadataAdmin,
    Node,
    PartitionMetadata,
    TopicMetadata,
    cluster_metadata,
)
from logstore.client.admin.partitions import (
    DeletedRecords,
    EarliestSpec,
    ElectionType,
    IsolationLevel,
    LatestSpec,
    ListOffsetsResultInfo,
    MaxTimestampSpec,
    OffsetSpec,
    PartitionReassignment,
    PartitionsAdmin,
    TimestampSpec,
)
from logstore.client.admin.quotas import QuotasAdmin
from logstore.client.admin.resources import (
    RESOURCE_ANY,
    RESOURCE_BROKER,
    RESOURCE_GROUP,
    RESOURCE_TOPIC,
    RESOURCE_TRANSACTIONAL_ID,
    RESOURCE_UNKNOWN,
    AclOperation,
    ResourceType,
)
from logstore.client.admin.scram import (
    ScramAdmin,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)
from logstore.client.admin.topics import (
    NewPartitions,
    NewTopic,
    TopicCollection,
    TopicDescription,
    TopicPartitionInfo,
    TopicsAdmin,
)


class AdminClient(
    TopicsAdmin,
    ConfigsAdmin,
    MetadataAdmin,
    GroupsAdmin,
    PartitionsAdmin,
    LogDirsAdmin,
    AclsAdmin,
    QuotasAdmin,
    ScramAdmin,
):
    """Kafka's admin operations over :class:`~logstore.client.cluster.Cluster` (see the module docstring).

    Invariants: every future a method returns settles (a result, a KafkaError from the
    broker, ``_TIMED_OUT`` at its ``request_timeout``, ``_DESTROY`` at :meth:`close`);
    arguments are checked before any request; a call's requests run on one worker thread
    (at most :data:`WORKERS` calls run at once, later ones queue). The calls are those of
    the area mixins; the connections, threads and routing are
    :class:`~logstore.client.admin.client.AdminBase`'s.
    """


__all__ = [
    "CONFIG_SOURCE_DEFAULT_CONFIG",
    "CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG",
    "CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG",
    "CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG",
    "CONFIG_SOURCE_GROUP_CONFIG",
    "CONFIG_SOURCE_STATIC_BROKER_CONFIG",
    "CONFIG_SOURCE_UNKNOWN_CONFIG",
    "RESOURCE_ANY",
    "RESOURCE_BROKER",
    "RESOURCE_GROUP",
    "RESOURCE_TOPIC",
    "RESOURCE_TRANSACTIONAL_ID",
    "RESOURCE_UNKNOWN",
    "WORKERS",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "AdminClient",
    "AlterConfigOpType",
    "BrokerMetadata",
    "ClusterMetadata",
    "ConfigEntry",
    "ConfigResource",
    "ConfigSource",
    "ConsumerGroupDescription",
    "ConsumerGroupListing",
    "ConsumerGroupState",
    "ConsumerGroupTopicPartitions",
    "ConsumerGroupType",
    "DeletedRecords",
    "DescribeClusterResult",
    "EarliestSpec",
    "ElectionType",
    "IsolationLevel",
    "LatestSpec",
    "ListConsumerGroupsResult",
    "ListOffsetsResultInfo",
    "MaxTimestampSpec",
    "MemberAssignment",
    "MemberDescription",
    "NewPartitions",
    "NewTopic",
    "Node",
    "OffsetSpec",
    "PartitionMetadata",
    "PartitionReassignment",
    "ResourcePatternType",
    "ResourceType",
    "ScramCredentialInfo",
    "ScramMechanism",
    "TimestampSpec",
    "TopicCollection",
    "TopicDescription",
    "TopicMetadata",
    "TopicPartitionInfo",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "UserScramCredentialsDescription",
    "cluster_metadata",
]
