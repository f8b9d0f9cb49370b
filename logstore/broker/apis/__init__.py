"""One module per Kafka API; each exports ``API``, an :class:`Api`.

The version range an API advertises is the range its handler serves, end to
end, and kio can encode. ``registry()`` maps API keys to them.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from logstore.broker.context import RequestContext

Handler = Callable[["RequestContext", Any], Awaitable[Any]]


@dataclass(frozen=True)
class Api:
    """One API: its key, name, served version range and handler.

    The handler returns the response entity, or None to send nothing
    (Produce with acks=0).
    """

    key: int
    name: str
    min_version: int
    max_version: int
    handle: Handler
    # A decoder used instead of kio's: (frame, body offset, version) -> (request, size).
    decode: Callable[[bytes | memoryview, int, int], tuple[Any, int]] | None = None


_MODULES = (
    "api_versions",
    "metadata",
    "produce",
    "fetch",
    "list_offsets",
    "init_producer_id",
    "create_topics",
    "delete_topics",
    "create_partitions",
    "delete_records",
    "describe_configs",
    "alter_configs",
    "incremental_alter_configs",
    "describe_cluster",
    "describe_topic_partitions",
    "describe_log_dirs",
    "find_coordinator",
    "join_group",
    "sync_group",
    "heartbeat",
    "leave_group",
    "offset_commit",
    "offset_fetch",
    "describe_groups",
    "list_groups",
    "delete_groups",
    "offset_delete",
    "consumer_group_heartbeat",
    "consumer_group_describe",
    "offset_for_leader_epoch",
    "alter_partition",
    "elect_leaders",
    "alter_partition_reassignments",
    "list_partition_reassignments",
    "add_partitions_to_txn",
    "add_offsets_to_txn",
    "end_txn",
    "write_txn_markers",
    "txn_offset_commit",
    "describe_transactions",
    "list_transactions",
    "describe_producers",
    "describe_acls",
    "create_acls",
    "delete_acls",
    "sasl_handshake",
    "sasl_authenticate",
    "describe_user_scram_credentials",
    "alter_user_scram_credentials",
    "describe_client_quotas",
    "alter_client_quotas",
)


@functools.cache
def registry() -> dict[int, Api]:
    """API key -> Api, every module loaded (on first use: the modules import the server)."""
    apis: dict[int, Api] = {}
    for name in _MODULES:
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            continue  # not written yet
        api: Api = module.API
        apis[api.key] = api
    return apis
