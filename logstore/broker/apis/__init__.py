"""One module per Kafka API; each exports ``API``, an :class:`~logstore.broker.api_definition.Api`
(api_versions.py an :class:`~logstore.broker.apis.api_versions.ApiVersions`, built here over the
registry it answers from).

The version range an API advertises is the range its handler serves, end to
end, and kio can encode. ``registry()`` maps API keys to them; every module
is imported here, by name.
"""

from __future__ import annotations

from typing import Any

from logstore.broker.api_definition import Api
from logstore.broker.apis import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_client_quotas,
    alter_configs,
    alter_partition,
    alter_partition_reassignments,
    alter_replica_log_dirs,
    alter_user_scram_credentials,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_topic_partitions,
    describe_transactions,
    describe_user_scram_credentials,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sasl_authenticate,
    sasl_handshake,
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
    sync_group,
    txn_offset_commit,
    write_txn_markers,
)
from logstore.broker.apis.api_versions import ApiVersions

_REGISTRY: dict[int, Api] = {}
_API_VERSIONS = ApiVersions(_REGISTRY)  # answers from the registry it is part of
for _api in (
    _API_VERSIONS.api,
    metadata.API,
    produce.API,
    fetch.API,
    list_offsets.API,
    init_producer_id.API,
    create_topics.API,
    delete_topics.API,
    create_partitions.API,
    delete_records.API,
    describe_configs.API,
    alter_configs.API,
    incremental_alter_configs.API,
    describe_cluster.API,
    describe_topic_partitions.API,
    describe_log_dirs.API,
    alter_replica_log_dirs.API,
    find_coordinator.API,
    join_group.API,
    sync_group.API,
    heartbeat.API,
    leave_group.API,
    offset_commit.API,
    offset_fetch.API,
    describe_groups.API,
    list_groups.API,
    delete_groups.API,
    offset_delete.API,
    consumer_group_heartbeat.API,
    consumer_group_describe.API,
    share_group_heartbeat.API,
    share_group_describe.API,
    share_fetch.API,
    share_acknowledge.API,
    offset_for_leader_epoch.API,
    alter_partition.API,
    elect_leaders.API,
    alter_partition_reassignments.API,
    list_partition_reassignments.API,
    add_partitions_to_txn.API,
    add_offsets_to_txn.API,
    end_txn.API,
    write_txn_markers.API,
    txn_offset_commit.API,
    describe_transactions.API,
    list_transactions.API,
    describe_producers.API,
    describe_acls.API,
    create_acls.API,
    delete_acls.API,
    sasl_handshake.API,
    sasl_authenticate.API,
    describe_user_scram_credentials.API,
    alter_user_scram_credentials.API,
    describe_client_quotas.API,
    alter_client_quotas.API,
):
    _REGISTRY[_api.key] = _api


def registry() -> dict[int, Api]:
    """API key -> Api, for every API this broker serves."""
    return _REGISTRY


def unsupported_version(correlation_id: int) -> list[Any]:
    """ApiVersions' v0 answer to a version of it this broker does not serve (its response chunks)."""
    return _API_VERSIONS.unsupported(correlation_id)
