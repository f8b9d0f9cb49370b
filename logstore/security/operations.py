"""What each API needs: the one table of (operation, resource type) per API key.

Transcribed from Kafka's ``KafkaApis``, ``AuthHelper``, ``AclApis``,
``ConfigHelper`` and ``DescribeTopicPartitionsRequestHandler`` (3.9/4.0). Every
handler asks through :func:`allowed` (or :func:`filter_allowed`,
:func:`authorized_operations`), naming the resource type and, where one API
checks the same type in two ways, a ``role``; the operation and the error code
come from :data:`RULES`, nowhere else. docs/acls.md prints this table.

Without an authorizer (``authorizer.class.name`` empty) every check is one
attribute test (``request.authorizer is None``) and allows; the
``authorized_operations`` fields carry every operation the resource type
supports, as Kafka does then.

Inter-broker requests (replica Fetch, AlterPartition, WriteTxnMarkers,
OffsetForLeaderEpoch from followers) need CLUSTER_ACTION on the cluster, as in
Kafka. Brokers reach each other on the PLAINTEXT listener as ``User:ANONYMOUS``,
so a cluster with an authorizer needs ``super.users=User:ANONYMOUS`` (or ACLs
granting it CLUSTER_ACTION) until inter-broker authentication exists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from kio.schema.errors import ErrorCode

from logstore.security import KafkaPrincipal
from logstore.security.acls import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
    bits,
)
from logstore.security.authorizer import CACHE_MAX, Authorizer


class Request(Protocol):
    """What a check reads of the request it is made for (the broker's RequestContext)."""

    @property
    def authorizer(self) -> Authorizer | None:
        """The broker's ACLs; None without ``authorizer.class.name`` (every check allows)."""
        ...

    @property
    def api_key(self) -> int: ...

    @property
    def principal(self) -> KafkaPrincipal: ...

    @property
    def client_host(self) -> str:
        """The connection's peer address (ACLs' host)."""
        ...

_T = TypeVar("_T")

ALTER, ALTER_CONFIGS, CLUSTER_ACTION = (
    AclOperation.ALTER,
    AclOperation.ALTER_CONFIGS,
    AclOperation.CLUSTER_ACTION,
)
CREATE, DELETE, DESCRIBE = AclOperation.CREATE, AclOperation.DELETE, AclOperation.DESCRIBE
DESCRIBE_CONFIGS, IDEMPOTENT_WRITE = AclOperation.DESCRIBE_CONFIGS, AclOperation.IDEMPOTENT_WRITE
READ, WRITE = AclOperation.READ, AclOperation.WRITE
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
TXN = ResourceType.TRANSACTIONAL_ID

# The error Kafka answers when the check fails, by resource type.
ERRORS = {
    TOPIC: ErrorCode.topic_authorization_failed,
    GROUP: ErrorCode.group_authorization_failed,
    CLUSTER: ErrorCode.cluster_authorization_failed,
    TXN: ErrorCode.transactional_id_authorization_failed,
    ResourceType.DELEGATION_TOKEN: ErrorCode.delegation_token_authorization_failed,
}


@dataclass(frozen=True, slots=True)
class Rule:
    """One check of an API: ``operation`` on ``resource_type``; ``role`` tells two checks of
    one type apart; ``note`` says when it applies and what a denial answers."""

    operation: AclOperation
    resource_type: ResourceType
    note: str
    role: str = ""


R = Rule
# API key -> (API name, its checks). An API absent here, or with no rules, needs nothing.
RULES: dict[int, tuple[str, tuple[Rule, ...]]] = {
    0: ("Produce", (
        R(WRITE, TXN, "transactional producers (transactional_id set); whole request TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
        R(WRITE, TOPIC, "each topic; TOPIC_AUTHORIZATION_FAILED per partition (idempotence needs no more: KIP-679)"),
    )),
    1: ("Fetch", (
        R(READ, TOPIC, "consumers (replica_id < 0), each topic; TOPIC_AUTHORIZATION_FAILED per partition"),
        R(CLUSTER_ACTION, CLUSTER, "followers (replica_id >= 0); else TOPIC_AUTHORIZATION_FAILED on every partition", "replica"),
    )),
    2: ("ListOffsets", (R(DESCRIBE, TOPIC, "each topic; TOPIC_AUTHORIZATION_FAILED per partition"),)),
    3: ("Metadata", (
        R(DESCRIBE, TOPIC, "each topic; named: TOPIC_AUTHORIZATION_FAILED (existing or not), all topics: left out"),
        R(CREATE, CLUSTER, "auto-creating a missing topic (or CREATE on that topic)", "create"),
        R(CREATE, TOPIC, "auto-creating a missing topic without CREATE on the cluster; TOPIC_AUTHORIZATION_FAILED", "create"),
        R(DESCRIBE, CLUSTER, "cluster_authorized_operations is 0 without it", "operations"),
    )),
    8: ("OffsetCommit", (
        R(READ, GROUP, "the group; every partition GROUP_AUTHORIZATION_FAILED"),
        R(READ, TOPIC, "each topic; TOPIC_AUTHORIZATION_FAILED per partition"),
    )),
    9: ("OffsetFetch", (
        R(DESCRIBE, GROUP, "each group; GROUP_AUTHORIZATION_FAILED"),
        R(DESCRIBE, TOPIC, "each topic; named: TOPIC_AUTHORIZATION_FAILED per partition, all: left out"),
    )),
    10: ("FindCoordinator", (
        R(DESCRIBE, GROUP, "key type 0; GROUP_AUTHORIZATION_FAILED"),
        R(DESCRIBE, TXN, "key type 1; TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
    )),
    11: ("JoinGroup", (R(READ, GROUP, "GROUP_AUTHORIZATION_FAILED"),)),
    12: ("Heartbeat", (R(READ, GROUP, "GROUP_AUTHORIZATION_FAILED"),)),
    13: ("LeaveGroup", (R(READ, GROUP, "GROUP_AUTHORIZATION_FAILED"),)),
    14: ("SyncGroup", (R(READ, GROUP, "GROUP_AUTHORIZATION_FAILED"),)),
    15: ("DescribeGroups", (R(DESCRIBE, GROUP, "each group; GROUP_AUTHORIZATION_FAILED"),)),
    16: ("ListGroups", (
        R(DESCRIBE, CLUSTER, "every group listed"),
        R(DESCRIBE, GROUP, "without DESCRIBE on the cluster: only the groups allowed"),
    )),
    17: ("SaslHandshake", ()),  # before authentication: needs nothing (as ApiVersions)
    19: ("CreateTopics", (
        R(CREATE, CLUSTER, "every topic"),
        R(CREATE, TOPIC, "each topic without CREATE on the cluster; TOPIC_AUTHORIZATION_FAILED"),
        R(DESCRIBE_CONFIGS, TOPIC, "the configs in the answer (v5+); topic_config_error_code TOPIC_AUTHORIZATION_FAILED", "configs"),
    )),
    20: ("DeleteTopics", (
        R(DELETE, TOPIC, "each topic; TOPIC_AUTHORIZATION_FAILED"),
        R(DESCRIBE, TOPIC, "a topic named by ID; TOPIC_AUTHORIZATION_FAILED", "by_id"),
    )),
    21: ("DeleteRecords", (R(DELETE, TOPIC, "each topic; TOPIC_AUTHORIZATION_FAILED per partition"),)),
    22: ("InitProducerId", (
        R(WRITE, TXN, "with a transactional id; TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
        R(IDEMPOTENT_WRITE, CLUSTER, "idempotent producers: this, or WRITE on any topic; else CLUSTER_AUTHORIZATION_FAILED"),
        R(WRITE, TOPIC, "idempotent producers: WRITE on some topic (authorizeByResourceType, KIP-679)", "any"),
    )),
    23: ("OffsetForLeaderEpoch", (
        R(CLUSTER_ACTION, CLUSTER, "every topic (followers); else DESCRIBE per topic", "replica"),
        R(DESCRIBE, TOPIC, "each topic without CLUSTER_ACTION; TOPIC_AUTHORIZATION_FAILED per partition"),
    )),
    24: ("AddPartitionsToTxn", (
        R(WRITE, TXN, "v0-3 (clients); TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition"),
        R(WRITE, TOPIC, "each topic; TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED"),
        R(CLUSTER_ACTION, CLUSTER, "v4+ (brokers); CLUSTER_AUTHORIZATION_FAILED", "broker"),
    )),
    25: ("AddOffsetsToTxn", (
        R(WRITE, TXN, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
        R(READ, GROUP, "GROUP_AUTHORIZATION_FAILED"),
    )),
    26: ("EndTxn", (R(WRITE, TXN, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),)),
    27: ("WriteTxnMarkers", (
        R(ALTER, CLUSTER, "this, or CLUSTER_ACTION", "alter"),
        R(CLUSTER_ACTION, CLUSTER, "without ALTER; CLUSTER_AUTHORIZATION_FAILED on every partition"),
    )),
    28: ("TxnOffsetCommit", (
        R(WRITE, TXN, "every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
        R(READ, GROUP, "every partition GROUP_AUTHORIZATION_FAILED"),
        R(READ, TOPIC, "each topic; TOPIC_AUTHORIZATION_FAILED per partition"),
    )),
    29: ("DescribeAcls", (R(DESCRIBE, CLUSTER, "CLUSTER_AUTHORIZATION_FAILED"),)),
    30: ("CreateAcls", (R(ALTER, CLUSTER, "CLUSTER_AUTHORIZATION_FAILED on every creation"),)),
    31: ("DeleteAcls", (R(ALTER, CLUSTER, "CLUSTER_AUTHORIZATION_FAILED on every filter"),)),
    32: ("DescribeConfigs", (
        R(DESCRIBE_CONFIGS, TOPIC, "TOPIC resources; TOPIC_AUTHORIZATION_FAILED"),
        R(DESCRIBE_CONFIGS, CLUSTER, "BROKER and BROKER_LOGGER resources; CLUSTER_AUTHORIZATION_FAILED"),
        R(DESCRIBE_CONFIGS, GROUP, "GROUP resources; GROUP_AUTHORIZATION_FAILED"),
    )),
    33: ("AlterConfigs", (
        R(ALTER_CONFIGS, TOPIC, "TOPIC resources; TOPIC_AUTHORIZATION_FAILED"),
        R(ALTER_CONFIGS, CLUSTER, "BROKER and BROKER_LOGGER resources; CLUSTER_AUTHORIZATION_FAILED"),
        R(ALTER_CONFIGS, GROUP, "GROUP resources; GROUP_AUTHORIZATION_FAILED"),
    )),
    34: ("AlterReplicaLogDirs", (R(ALTER, CLUSTER, "CLUSTER_AUTHORIZATION_FAILED on every partition"),)),
    35: ("DescribeLogDirs", (R(DESCRIBE, CLUSTER, "no results, CLUSTER_AUTHORIZATION_FAILED"),)),
    36: ("SaslAuthenticate", ()),
    37: ("CreatePartitions", (R(ALTER, TOPIC, "each topic; TOPIC_AUTHORIZATION_FAILED"),)),
    42: ("DeleteGroups", (R(DELETE, GROUP, "each group; GROUP_AUTHORIZATION_FAILED"),)),
    43: ("ElectLeaders", (R(ALTER, CLUSTER, "CLUSTER_AUTHORIZATION_FAILED, and on every partition"),)),
    44: ("IncrementalAlterConfigs", (
        R(ALTER_CONFIGS, TOPIC, "TOPIC resources; TOPIC_AUTHORIZATION_FAILED"),
        R(ALTER_CONFIGS, CLUSTER, "BROKER and BROKER_LOGGER resources; CLUSTER_AUTHORIZATION_FAILED"),
        R(ALTER_CONFIGS, GROUP, "GROUP resources; GROUP_AUTHORIZATION_FAILED"),
    )),
    45: ("AlterPartitionReassignments", (R(ALTER, CLUSTER, "CLUSTER_AUTHORIZATION_FAILED"),)),
    46: ("ListPartitionReassignments", (R(DESCRIBE, CLUSTER, "CLUSTER_AUTHORIZATION_FAILED"),)),
    47: ("OffsetDelete", (
        R(DELETE, GROUP, "GROUP_AUTHORIZATION_FAILED"),
        R(READ, TOPIC, "each topic; TOPIC_AUTHORIZATION_FAILED per partition"),
    )),
    48: ("DescribeClientQuotas", (R(DESCRIBE_CONFIGS, CLUSTER, "CLUSTER_AUTHORIZATION_FAILED"),)),
    49: ("AlterClientQuotas", (R(ALTER_CONFIGS, CLUSTER, "CLUSTER_AUTHORIZATION_FAILED"),)),
    50: ("DescribeUserScramCredentials", (R(DESCRIBE, CLUSTER, "CLUSTER_AUTHORIZATION_FAILED"),)),
    51: ("AlterUserScramCredentials", (R(ALTER, CLUSTER, "CLUSTER_AUTHORIZATION_FAILED"),)),
    56: ("AlterPartition", (R(CLUSTER_ACTION, CLUSTER, "CLUSTER_AUTHORIZATION_FAILED"),)),
    60: ("DescribeCluster", (R(DESCRIBE, CLUSTER, "cluster_authorized_operations is 0 without it", "operations"),)),
    61: ("DescribeProducers", (R(READ, TOPIC, "each topic; TOPIC_AUTHORIZATION_FAILED per partition"),)),
    65: ("DescribeTransactions", (
        R(DESCRIBE, TXN, "each id; TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
        R(DESCRIBE, TOPIC, "the transaction's topics: those not allowed left out"),
    )),
    66: ("ListTransactions", (R(DESCRIBE, TXN, "only the ids allowed"),)),
    68: ("ConsumerGroupHeartbeat", (
        R(READ, GROUP, "GROUP_AUTHORIZATION_FAILED"),
        R(DESCRIBE, TOPIC, "the subscribed topic names; TOPIC_AUTHORIZATION_FAILED if one is not allowed"),
    )),
    69: ("ConsumerGroupDescribe", (R(DESCRIBE, GROUP, "each group; GROUP_AUTHORIZATION_FAILED"),)),
    76: ("ShareGroupHeartbeat", (
        R(READ, GROUP, "GROUP_AUTHORIZATION_FAILED"),
        R(DESCRIBE, TOPIC, "the subscribed topic names; TOPIC_AUTHORIZATION_FAILED if one is not allowed"),
    )),
    77: ("ShareGroupDescribe", (R(DESCRIBE, GROUP, "each group; GROUP_AUTHORIZATION_FAILED"),)),
    78: ("ShareFetch", (
        R(READ, GROUP, "GROUP_AUTHORIZATION_FAILED for the whole request"),
        R(READ, TOPIC, "each topic; TOPIC_AUTHORIZATION_FAILED per partition"),
    )),
    79: ("ShareAcknowledge", (
        R(READ, GROUP, "GROUP_AUTHORIZATION_FAILED for the whole request"),
        R(READ, TOPIC, "each topic; TOPIC_AUTHORIZATION_FAILED per partition"),
    )),
    75: ("DescribeTopicPartitions", (
        R(DESCRIBE, TOPIC, "each topic; named: TOPIC_AUTHORIZATION_FAILED, all topics: left out"),
    )),
}  # fmt: skip
# ApiVersions (18), SaslHandshake (17), SaslAuthenticate (36): none.

# (api key, resource type, role) -> operation.
_OPERATION: dict[tuple[int, int, str], AclOperation] = {}
for _key, (_name, _rules) in RULES.items():
    for _rule in _rules:
        _OPERATION.setdefault((_key, int(_rule.resource_type), _rule.role), _rule.operation)


def operation(api_key: int, resource_type: ResourceType, role: str = "") -> AclOperation:
    """The operation ``api_key`` needs on ``resource_type`` (KeyError if the table has none:
    a handler asking for a check the table does not list is a bug)."""
    return _OPERATION[(api_key, int(resource_type), role)]


def allowed(ctx: Request, resource_type: ResourceType, name: str, role: str = "") -> bool:
    """May the request's principal do what its API needs (the table) on this resource?

    Cost: one attribute test without an authorizer; else one dict lookup when this question
    was asked since the ACLs last changed (the authorizer's ``checks`` cache), else the
    authorizer's rules (see its module doc).
    """
    auth = ctx.authorizer
    if auth is None:
        return True
    principal = ctx.principal
    api_key = ctx.api_key
    key = (
        api_key,
        resource_type,
        role,
        principal.principal_type,
        principal.name,
        ctx.client_host,
        name,
    )
    checks = auth.checks
    found = checks.get(key)
    if found is None:
        op = _OPERATION[(api_key, resource_type, role)]
        found = auth.authorize(
            principal.principal_type, principal.name, ctx.client_host, op, resource_type, name
        )
        if len(checks) >= CACHE_MAX:
            checks.clear()
        checks[key] = found
    return found


def allowed_cluster(ctx: Request, role: str = "") -> bool:
    """:func:`allowed` on the cluster resource (``kafka-cluster``)."""
    return allowed(ctx, CLUSTER, CLUSTER_NAME, role)


def allowed_on_some(ctx: Request, resource_type: ResourceType, role: str = "") -> bool:
    """Kafka's ``authorizeByResourceType``: the operation on some resource of the type."""
    auth = ctx.authorizer
    if auth is None:
        return True
    op = _OPERATION[(ctx.api_key, resource_type, role)]
    principal = ctx.principal
    return auth.authorize_by_resource_type(
        principal.principal_type, principal.name, ctx.client_host, op, resource_type
    )


def filter_allowed(
    ctx: Request,
    resource_type: ResourceType,
    items: Iterable[_T],
    name: Callable[[_T], str],
    role: str = "",
) -> set[str]:
    """The names among ``items`` the principal may use (Kafka's ``filterByAuthorized``)."""
    names = {name(item) for item in items}
    if ctx.authorizer is None:
        return names
    return {n for n in names if allowed(ctx, resource_type, n, role)}


def error(resource_type: ResourceType) -> ErrorCode:
    """The error code of a denied check on ``resource_type``."""
    return ERRORS[resource_type]


ALL_SUPPORTED = {rt: bits(ops) for rt, ops in SUPPORTED_OPERATIONS.items()}


def authorized_operations(ctx: Request, resource_type: ResourceType, name: str) -> int:
    """The ``authorized_operations`` bit field for the principal (every supported operation
    without an authorizer)."""
    auth = ctx.authorizer
    if auth is None:
        return ALL_SUPPORTED[resource_type]
    principal = ctx.principal
    return auth.authorized_operations(
        principal.principal_type, principal.name, ctx.client_host, resource_type, name
    )


def table_markdown() -> str:
    """The table as markdown (docs/acls.md)."""
    lines = ["| API (key) | Operation | Resource | When / answer when denied |", "|---|---|---|---|"]
    for key, (name, rules) in sorted(RULES.items()):
        if not rules:
            lines.append(f"| {name} ({key}) | none | | served to anyone (before authentication too) |")
        for rule in rules:
            lines.append(
                f"| {name} ({key}) | {rule.operation.name} | {rule.resource_type.title} | {rule.note} |"
            )
    return "\n".join(lines)


# Config resource types (DescribeConfigs, AlterConfigs): TOPIC 2, BROKER 4, BROKER_LOGGER 8, GROUP 32.
_CONFIG_RESOURCES = {
    2: (TOPIC, None),
    4: (CLUSTER, CLUSTER_NAME),
    8: (CLUSTER, CLUSTER_NAME),
    32: (GROUP, None),
}


def config_resource_denied(ctx: Request, config_type: int, name: str) -> tuple[ErrorCode, str] | None:
    """For a config resource (Kafka's ConfigHelper/KafkaApis): None if the principal may
    describe (DescribeConfigs) or alter (AlterConfigs, IncrementalAlterConfigs) it, else the
    error (TOPIC_, CLUSTER_ or GROUP_AUTHORIZATION_FAILED) and a message."""
    if ctx.authorizer is None or config_type not in _CONFIG_RESOURCES:
        return None
    resource_type, fixed = _CONFIG_RESOURCES[config_type]
    if allowed(ctx, resource_type, fixed or name):
        return None
    op = _OPERATION[(ctx.api_key, resource_type, "")]
    return ERRORS[resource_type], f"{op.name} on {resource_type.title} {fixed or name!r} is not allowed"
