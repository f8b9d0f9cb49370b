"""The admin client's log directories: DescribeLogDirs and AlterReplicaLogDirs (Java's
``describeLogDirs`` and ``alterReplicaLogDirs``; not in confluent-kafka).

``describe_log_dirs`` asks each broker named (every broker metadata lists, when None) for
its log directories and the partitions in them, with each directory's error (KafkaError or
None) and, from DescribeLogDirs v4, its total and usable bytes (-1 before). One future,
failed if any broker cannot answer or answers with an error code. A partition being moved
into a directory (a future replica) is under that directory's ``"future"``, with its size and
offset lag.

``alter_replica_log_dirs`` asks one broker to move partitions to other log directories of its
own; one future per partition, failed with the broker's error for it.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from logstore.client.admin.checks import check_int, check_unique
from logstore.client.admin.client import AdminBase, kafka_error, new_future
from logstore.client.errors import KafkaException
from logstore.client.types import TopicPartition

ALTER_REPLICA_LOG_DIRS = 34
DESCRIBE_LOG_DIRS = 35


class LogDirsAdmin(AdminBase):
    """The call on log directories (see the module docstring)."""

    def describe_log_dirs(
        self, brokers: list[int] | None = None, *, request_timeout: float | None = None
    ) -> Future[dict[int, dict[str, dict[str, Any]]]]:
        """The log directories of ``brokers`` (every broker when None) and the partitions in them.

        Not in confluent-kafka (Java's ``describeLogDirs``). The future's result is
        ``{broker_id: {path: {"error": KafkaError | None, "partitions": {TopicPartition: size_bytes},
        "future": {TopicPartition: (size_bytes, offset_lag)}, "total_bytes": int, "usable_bytes": int}}}`` (-1 where the broker does not say, before
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
                        for t in result.topics for p in t.partitions if not p.is_future_key
                    }  # fmt: skip
                    moving = {
                        TopicPartition(t.name, int(p.partition_index)): (int(p.partition_size), int(p.offset_lag))
                        for t in result.topics for p in t.partitions if p.is_future_key
                    }  # fmt: skip
                    dirs[result.log_dir] = {
                        "error": kafka_error(result.error_code, None) if result.error_code else None,
                        "partitions": partitions,
                        "future": moving,
                        "total_bytes": int(getattr(result, "total_bytes", -1)),
                        "usable_bytes": int(getattr(result, "usable_bytes", -1)),
                    }
                out[broker] = dirs
            future.set_result(out)

        self._submit([future], work, deadline)
        return future

    def alter_replica_log_dirs(
        self, broker: int, moves: dict[TopicPartition, str], *, request_timeout: float | None = None
    ) -> dict[TopicPartition, Future[None]]:
        """Move partitions of ``broker`` to other log directories of its own (``moves``: partition
        to absolute path). The broker starts each move and answers at once; DescribeLogDirs
        shows the copy (a future replica) until it is done."""
        check_int("broker id", broker)
        if not isinstance(moves, dict) or not moves:
            raise ValueError("moves must be a non-empty dict of TopicPartition to a log directory path")
        deadline = self._deadline(request_timeout)
        futures = {tp: new_future() for tp in moves}
        by_dir: dict[str, dict[str, list[int]]] = {}
        for tp, path in moves.items():
            by_dir.setdefault(path, {}).setdefault(tp.topic, []).append(tp.partition)

        def work() -> None:
            self._ensure_metadata()
            fields = {"dirs": [
                {"path": path, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
                for path, topics in by_dir.items()
            ]}  # fmt: skip
            response = self._wait(
                self._cluster.send(broker, ALTER_REPLICA_LOG_DIRS, fields), deadline,
                f"AlterReplicaLogDirs to broker {broker}",
            )  # fmt: skip
            for topic in response.results:
                for p in topic.partitions:
                    future = futures.get(TopicPartition(topic.topic_name, int(p.partition_index)))
                    if future is None or future.done():
                        continue
                    if p.error_code:
                        name = kafka_error(p.error_code, None).name()
                        where = f"{topic.topic_name}-{p.partition_index}"
                        future.set_exception(KafkaException(kafka_error(p.error_code, f"{name} for {where}")))
                    else:
                        future.set_result(None)
            for future in futures.values():
                if not future.done():
                    future.set_exception(KafkaException(kafka_error(-1, "the broker did not answer for it")))

        self._submit(list(futures.values()), work, deadline)
        return futures
