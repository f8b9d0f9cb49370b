"""``AIOAdminClient``: the admin calls as coroutines.

>>> async def main() -> None:                                                   # doctest: +SKIP
...     admin = AIOAdminClient({"bootstrap.servers": "127.0.0.1:9092"})
...     await admin.create_topics([NewTopic("events", 3, 1)])   # {"events": None}, or raises
...     groups = await admin.list_consumer_groups()              # ListConsumerGroupsResult
...     await admin.close()

Each method is :class:`~logstore.client.admin.AdminClient`'s, with the same arguments: the
call checks its arguments and hands the work to the admin client's worker threads as always,
and the coroutine awaits the futures it returned, bridged into the loop
(:func:`~logstore.client.aio.bridge.bridge`: no thread per call, no polling). What a call
returns is what its futures settle with: one value for a call that returns one future; for a
call that returns a future per resource, a dict of the same keys and each resource's value,
raising KafkaException with the first resource's error if any failed
(``return_exceptions=True``: the exceptions in place of the values instead).

Cancelled, the call goes on in the admin client (a topic being created is created); the
coroutine stops waiting for it. ``request_timeout`` bounds every call as in AdminClient.
``list_topics`` (synchronous in confluent-kafka and in AdminClient) runs on the admin
client's own worker threads here.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from typing import Any, Self

from logstore.client.admin import AdminClient
from logstore.client.admin.metadata import ClusterMetadata
from logstore.client.aio.bridge import bridge


class AIOAdminClient:
    """The admin client for asyncio (see the module docstring). Make it inside a running loop."""

    def __init__(self, conf: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self._loop = asyncio.get_running_loop()
        self._admin = AdminClient(dict(conf or {}), **kwargs)

    @property
    def admin(self) -> AdminClient:
        """The synchronous admin client underneath."""
        return self._admin

    async def _settle(self, returned: Any, return_exceptions: bool) -> Any:
        if isinstance(returned, Future):
            return await bridge(returned, self._loop)
        if not isinstance(returned, dict):
            return returned
        keys = list(returned)
        values = await asyncio.gather(*(bridge(returned[k], self._loop) for k in keys), return_exceptions=True)
        if not return_exceptions:
            for value in values:
                if isinstance(value, BaseException):
                    raise value
        return dict(zip(keys, values, strict=True))

    async def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        """``AdminClient.list_topics`` (on the admin client's worker threads)."""
        return await bridge(self._admin._executor.submit(self._admin.list_topics, topic, timeout), self._loop)

    async def cluster_id(self, timeout: float = -1) -> str | None:
        metadata = await self.list_topics(timeout=timeout)
        return metadata.cluster_id

    async def create_topics(self, *args: Any, return_exceptions: bool = False, **kwargs: Any) -> Any:
        """``AdminClient.create_topics``, awaited (see the module docstring)."""
        return await self._settle(self._admin.create_topics(*args, **kwargs), return_exceptions)

    async def delete_topics(self, *args: Any, return_exceptions: bool = False, **kwargs: Any) -> Any:
        """``AdminClient.delete_topics``, awaited (see the module docstring)."""
        return await self._settle(self._admin.delete_topics(*args, **kwargs), return_exceptions)

    async def create_partitions(self, *args: Any, return_exceptions: bool = False, **kwargs: Any) -> Any:
        """``AdminClient.create_partitions``, awaited (see the module docstring)."""
        return await self._settle(self._admin.create_partitions(*args, **kwargs), return_exceptions)

    async def describe_topics(self, *args: Any, return_exceptions: bool = False, **kwargs: Any) -> Any:
        """``AdminClient.describe_topics``, awaited (see the module docstring)."""
        return await self._settle(self._admin.describe_topics(*args, **kwargs), return_exceptions)

    async def describe_configs(self, *args: Any, return_exceptions: bool = False, **kwargs: Any) -> Any:
        """``AdminClient.describe_configs``, awaited (see the module docstring)."""
        return await self._settle(self._admin.describe_configs(*args, **kwargs), return_exceptions)

    async def alter_configs(self, *args: Any, return_exceptions: bool = False, **kwargs: Any) -> Any:
        """``AdminClient.alter_configs``, awaited (see the module docstring)."""
        return await self._settle(self._admin.alter_configs(*args, **kwargs), return_exceptions)

    async def incremental_alter_configs(self, *args: Any, return_exceptions: bool = False, **kwargs: Any) -> Any:
        """``AdminClient.incremental_alter_configs``, awaited (see the module docstring)."""
        return await self._settle(self._admin.incremental_alter_configs(*args, **kwargs), return_exceptions)

    async def describe_cluster(self, *args: Any, return_exceptions: bool = False, **kwargs: Any) -> Any:
        """``AdminClient.describe_cluster``, awaited (see the module docstring)."""
        return await self._settle(self._admin.describe_cluster(*args, **kwargs), return_exceptions)

    async def list_consumer_groups(self, *args: Any, return_exceptions: bool = False, **kwargs: Any) -> Any:
        """``AdminClient.list_consumer_groups``, awaited (see the module docstring)."""
        return await self._settle(self._admin.list_consumer_groups(*args, **kwargs), return_exceptions)

    async def describe_consumer_groups(self, *args: Any, return_exceptions: bool = False, **kwargs: Any) -> Any:
        """``AdminClient.describe_consumer_groups``, awaited (see the module docstring)."""
        return await self._settle(self._admin.describe_consumer_groups(*args, **kwargs), return_exceptions)

    async def delete_consumer_groups(self, *args: Any, return_exceptions: bool = False, **kwargs: Any) -> Any:
        """``AdminClient.delete_consumer_groups``, awaited (see the module docstring)."""
        return await self._settle(self._admin.delete_consumer_groups(*args, **kwargs), return_exceptions)

    async def list_consumer_group_offsets(self, *args: Any, return_exceptions: bool = False, **kwargs: Any) -> Any:
        """``AdminClient.list_consumer_group_offsets``, awaited (see the module docstring)."""
        return await self._settle(self._admin.list_consumer_group_offsets(*args, **kwargs), return_exceptions)

    async def alter_consumer_group_offsets(self, *args: Any, return_exceptions: bool = False, **kwargs: Any) -> Any:
        """``AdminClient.alter_consumer_group_offsets``, awaited (see the module docstring)."""
        return await self._settle(self._admin.alter_consumer_group_offsets(*args, **kwargs), return_exceptions)

    async def delete_consumer_group_offsets(self, *args: Any, return_exceptions: bool = False, **kwargs: Any) -> Any:
        """``AdminClient.delete_consumer_group_offsets``, awaited (see the module docstring)."""
        return await self._settle(self._admin.delete_consumer_group_offsets(*args, **kwargs), return_exceptions)

    async def list_offsets(self, *args: Any, return_exceptions: bool = False, **kwargs: Any) -> Any:
        """``AdminClient.list_offsets``, awaited (see the module docstring)."""
        return await self._settle(self._admin.list_offsets(*args, **kwargs), return_exceptions)

    async def delete_records(self, *args: Any, return_exceptions: bool = False, **kwargs: Any) -> Any:
        """``AdminClient.delete_records``, awaited (see the module docstring)."""
        return await self._settle(self._admin.delete_records(*args, **kwargs), return_exceptions)

    async def elect_leaders(self, *args: Any, return_exceptions: bool = False, **kwargs: Any) -> Any:
        """``AdminClient.elect_leaders``, awaited (see the module docstring)."""
        return await self._settle(self._admin.elect_leaders(*args, **kwargs), return_exceptions)

    async def alter_partition_reassignments(self, *args: Any, return_exceptions: bool = False, **kwargs: Any) -> Any:
        """``AdminClient.alter_partition_reassignments``, awaited (see the module docstring)."""
        return await self._settle(self._admin.alter_partition_reassignments(*args, **kwargs), return_exceptions)

    async def list_partition_reassignments(self, *args: Any, return_exceptions: bool = False, **kwargs: Any) -> Any:
        """``AdminClient.list_partition_reassignments``, awaited (see the module docstring)."""
        return await self._settle(self._admin.list_partition_reassignments(*args, **kwargs), return_exceptions)

    async def describe_log_dirs(self, *args: Any, return_exceptions: bool = False, **kwargs: Any) -> Any:
        """``AdminClient.describe_log_dirs``, awaited (see the module docstring)."""
        return await self._settle(self._admin.describe_log_dirs(*args, **kwargs), return_exceptions)

    async def alter_replica_log_dirs(self, *args: Any, return_exceptions: bool = False, **kwargs: Any) -> Any:
        """``AdminClient.alter_replica_log_dirs``, awaited (see the module docstring)."""
        return await self._settle(self._admin.alter_replica_log_dirs(*args, **kwargs), return_exceptions)

    async def create_acls(self, *args: Any, return_exceptions: bool = False, **kwargs: Any) -> Any:
        """``AdminClient.create_acls``, awaited (see the module docstring)."""
        return await self._settle(self._admin.create_acls(*args, **kwargs), return_exceptions)

    async def describe_acls(self, *args: Any, return_exceptions: bool = False, **kwargs: Any) -> Any:
        """``AdminClient.describe_acls``, awaited (see the module docstring)."""
        return await self._settle(self._admin.describe_acls(*args, **kwargs), return_exceptions)

    async def delete_acls(self, *args: Any, return_exceptions: bool = False, **kwargs: Any) -> Any:
        """``AdminClient.delete_acls``, awaited (see the module docstring)."""
        return await self._settle(self._admin.delete_acls(*args, **kwargs), return_exceptions)

    async def describe_client_quotas(self, *args: Any, return_exceptions: bool = False, **kwargs: Any) -> Any:
        """``AdminClient.describe_client_quotas``, awaited (see the module docstring)."""
        return await self._settle(self._admin.describe_client_quotas(*args, **kwargs), return_exceptions)

    async def alter_client_quotas(self, *args: Any, return_exceptions: bool = False, **kwargs: Any) -> Any:
        """``AdminClient.alter_client_quotas``, awaited (see the module docstring)."""
        return await self._settle(self._admin.alter_client_quotas(*args, **kwargs), return_exceptions)

    async def close(self) -> None:
        """Close the admin client (calls not started fail with ``_DESTROY``)."""
        self._admin.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
