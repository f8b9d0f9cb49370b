"""The admin client's log directories: DescribeLogDirs (Java's ``describeLogDirs``; not in
confluent-kafka).

``describe_log_dirs`` asks each broker named (every broker metadata lists, when None) for
its log directories and the partitions in them, with each directory's error (KafkaError or
None) and, from DescribeLogDirs v4, its total and usable bytes (-1 before). One future,
failed if any broker cannot answer or answers with an error code.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from logstore.client.admin.checks import check_int, check_unique
from logstore.client.admin.client import AdminBase, kafka_error, new_future
from logstore.client.errors import KafkaException
from logstore.client.types import TopicPartition

DESCRIBE_LOG_DIRS = 35


class LogDirsAdmin(AdminBase):
    """The call on log directories (see the module docstring)."""

    def describe_log_dirs(
        self, brokers: list[int] | None = None, *, request_timeout: float | None = None
    ) -> Future[dict[int, dict[str, dict[str, Any]]]]:
        """The log directories of ``brokers`` (every broker when None) and the partitions in them.

        Not in confluent-kafka (Java's ``describeLogDirs``). The future's result is
        ``{broker_id: {path: {"error": KafkaError | None, "partitions": {TopicPartition: size_bytes},
        "total_bytes": int, "usable_bytes": int}}}`` (-1 where the broker does not say, before
        DescribeLogDirs v4). It fails if any broker cannot answer.
        """
        if brokers is not None:
            if not isinstance(brokers, list):
                raise TypeError(f"brokers must be a list of broker ids or None, not {type(brokers).__name__}")
            for b in brokers:
                check_int("broker id", b)
            check_unique("broker", brokers)
        deadline = self._deadline(request_timeout)
        future = new_future()

        def work() -> None:
            self._ensure_metadata(refresh=brokers is None)
            targets = sorted(self._cluster.brokers) if brokers is None else brokers
            sent = {b: self._cluster.send(b, DESCRIBE_LOG_DIRS, {"topics": None}) for b in targets}
            out: dict[int, dict[str, dict[str, Any]]] = {}
            for broker, request in sent.items():
                response = self._wait(request, deadline, f"DescribeLogDirs to broker {broker}")
                if getattr(response, "error_code", 0):
                    raise KafkaException(
                        kafka_error(response.error_code, f"DescribeLogDirs of broker {broker}")
                    )
                dirs: dict[str, dict[str, Any]] = {}
                for result in response.results:
                    partitions = {
                        TopicPartition(t.name, int(p.partition_index)): int(p.partition_size)
                        for t in result.topics for p in t.partitions
                    }  # fmt: skip
                    dirs[result.log_dir] = {
                        "error": kafka_error(result.error_code, None) if result.error_code else None,
                        "partitions": partitions,
                        "total_bytes": int(getattr(result, "total_bytes", -1)),
                        "usable_bytes": int(getattr(result, "usable_bytes", -1)),
                    }
                out[broker] = dirs
            future.set_result(out)

        self._submit([future], work, deadline)
        return future
