"""The Store: a data directory's topics and their partition logs (the embedded engine's entry point).

A topic registry over a :class:`~logstore.storage.log_manager.LogManager`:
the LogManager owns the directory, the logs by topic-partition, their
checkpoints and background work; the Store adds what a single node keeps of
its topics, one file per topic (Kafka keeps this in ZooKeeper or its metadata
log; a lone broker and the embedded engine keep it here)::

    <data_dir>/
      topic-configs/<topic>.properties   partitions=N, topic.id and the topic's overrides
      ... and the LogManager's layout (logs, checkpoints, .lock, clean-shutdown marker)

With several log directories (``Store([a, b, c])``, Kafka's ``log.dirs``) the
registry is in the first; the partitions spread over all of them (the LogManager).

Crash policy: a topic exists once its file is written (after its logs are
made: a crash between leaves log directories no topic names, which are left
alone); a deleted topic's file goes first, then its logs (renamed to
``-delete`` and removed; leftovers are removed on open). See the LogManager
for the logs' own policy.

Threads: the Store's methods may be called from any thread. Topic listeners
(:meth:`Store.add_topic_listener`) run under the Store's lock.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from logstore.errors import InvalidArgumentError, TopicExistsError, UnknownTopicError
from logstore.storage.checkpoints import fsync_directory, write_atomically
from logstore.storage.cleaner import CleanResult
from logstore.storage.config import LogConfig
from logstore.storage.log import Log
from logstore.storage.log_manager import LogManager

_log = logging.getLogger("logstore.store")

TOPIC_CONFIGS = "topic-configs"
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


def validate_topic_name(name: str) -> None:
    """Kafka's rules: 1-249 of [a-zA-Z0-9._-], and not "." or ".."."""
    if name in (".", "..") or not _LEGAL_TOPIC.match(name):
        raise InvalidArgumentError(
            f"illegal topic name {name!r}: use 1 to 249 characters of a-z, A-Z, 0-9, '.', '_' and '-'"
        )


def _read_properties(path: str) -> dict[str, str]:
    result = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, _, value = line.partition("=")
                result[key.strip()] = value.strip()
    return result


def _write_properties(path: str, values: Mapping[str, object]) -> None:
    text = "".join(f"{key}={value}\n" for key, value in values.items())
    write_atomically(path, text.encode())


def topic_name(properties_file: str) -> str:
    return properties_file[: -len(".properties")]


class Store:
    """All topics and partitions under one data directory (see the module doc).

    >>> import tempfile
    >>> with Store(tempfile.mkdtemp(), scheduler=False) as store:
    ...     store.create_topic("events", partitions=2)
    ...     store.log("events", 1).append([b"hello"]).last_offset
    0
    """

    def __init__(
        self,
        data_dir: str | Sequence[str],
        config: Mapping[str, Any] | None = None,
        *,
        scheduler: bool = True,
        scheduler_interval_ms: int = 1000,
        retention_check_interval_ms: int = 300_000,
        checkpoint_interval_ms: int = 60_000,
        cleaner_backoff_ms: int = 15_000,
        lock_fd: int | None = None,
    ) -> None:
        """``lock_fd``: the first directory's ``.lock``, already taken by the caller
        (:func:`~logstore.storage.log_manager.try_lock_directory`); the Store releases it."""
        # Several log directories (log.dirs): the topic registry lives in the first one.
        self.log_dirs = [os.path.abspath(d) for d in ([data_dir] if isinstance(data_dir, str) else data_dir)]
        self.data_dir = self.log_dirs[0]
        self.defaults = dict(config or {})
        LogConfig.from_dict(self.defaults)  # fail now on a bad default
        self._lock = threading.RLock()
        self._partition_counts: dict[str, int] = {}  # partitions are dense: 0 .. count - 1
        self._topics_by_id: dict[uuid.UUID, str] = {}
        self._topic_configs: dict[str, LogConfig] = {}
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._topic_listeners: list[Callable[[str], None]] = []
        self.log_manager = LogManager(
            self.log_dirs,
            scheduler_interval_ms=scheduler_interval_ms,
            retention_check_interval_ms=retention_check_interval_ms,
            checkpoint_interval_ms=checkpoint_interval_ms,
            cleaner_backoff_ms=cleaner_backoff_ms,
            lock_fds=None if lock_fd is None else {self.data_dir: lock_fd},
        )
        try:
            os.makedirs(os.path.join(self.data_dir, TOPIC_CONFIGS), exist_ok=True)
            self._read_topics()
            configs = {
                (topic, partition): self._topic_configs[topic]
                for topic, count in self._partition_counts.items()
                for partition in range(count)
            }
            self.log_manager.load(configs, start_scheduler=scheduler)
        except BaseException:
            self.log_manager.abandon()
            raise

    def _read_topics(self) -> None:
        for name in sorted(os.listdir(os.path.join(self.data_dir, TOPIC_CONFIGS))):
            if not name.endswith(".properties"):
                continue
            props = _read_properties(os.path.join(self.data_dir, TOPIC_CONFIGS, name))
            topic = topic_name(name)
            partitions = int(props.pop("partitions", "1"))
            topic_id = props.pop("topic.id", None)
            self._topic_ids[topic] = uuid.UUID(topic_id) if topic_id else uuid.uuid4()
            self._topics_by_id[self._topic_ids[topic]] = topic
            self._topic_configs[topic] = LogConfig.from_dict(props, defaults=self.defaults)
            self._partition_counts[topic] = partitions
            if topic_id is None:  # written before topic IDs: keep the one given now
                self._persist_topic(topic, partitions)

    def _check_open(self) -> None:
        self.log_manager.check_open()

    # -- topics ------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1, config: Mapping[str, Any] | None = None) -> None:
        """Create a topic with ``partitions`` logs; config uses Kafka's topic keys."""
        validate_topic_name(name)
        if partitions < 1:
            raise InvalidArgumentError(f"a topic needs at least one partition, not {partitions}")
        topic_config = LogConfig.from_dict(config or {}, defaults=self.defaults)
        with self._lock:
            self._check_open()
            if name in self._topic_configs:
                raise TopicExistsError(f"topic {name!r} already exists")
            topic_id = uuid.uuid4()
            keys = {(name, partition): topic_config for partition in range(partitions)}
            self.log_manager.create_logs(keys)
            try:  # the topic is known only once every log is open and its file written
                self._write_topic_file(name, partitions, topic_id, topic_config)
            except BaseException:
                self.log_manager.delete_logs(list(keys))
                raise
            self._topic_configs[name] = topic_config
            self._topic_ids[name] = topic_id
            self._topics_by_id[topic_id] = name
            self._partition_counts[name] = partitions
            fsync_directory(self.data_dir)
            self._topic_changed(name)

    def _persist_topic(self, name: str, partitions: int) -> None:
        self._write_topic_file(name, partitions, self._topic_ids[name], self._topic_configs[name])

    def _write_topic_file(self, name: str, partitions: int, topic_id: uuid.UUID, config: LogConfig) -> None:
        values = {"partitions": partitions, "topic.id": str(topic_id), **config.to_properties()}
        _write_properties(os.path.join(self.data_dir, TOPIC_CONFIGS, f"{name}.properties"), values)

    def add_partitions(self, name: str, total: int) -> None:
        """Grow a topic to ``total`` partitions (never shrinks, as in Kafka)."""
        with self._lock:
            self._check_open()
            current = self.partitions(name)
            if total <= current:
                raise InvalidArgumentError(f"topic {name!r} has {current} partitions; ask for more than that")
            config = self._topic_configs[name]
            self.log_manager.create_logs({(name, partition): config for partition in range(current, total)})
            self._partition_counts[name] = total
            self._persist_topic(name, total)
            self._topic_changed(name)

    def alter_topic_config(self, name: str, config: Mapping[str, Any]) -> LogConfig:
        """Set topic config keys (persisted); the logs use them from now on."""
        with self._lock:
            self._check_open()
            return self._install_config(name, self.topic_config(name).with_overrides(config))

    def set_topic_overrides(self, name: str, config: Mapping[str, Any]) -> LogConfig:
        """Make ``config`` the topic's whole set of overrides (persisted); returns the new config.

        Keys not in ``config`` go back to the broker defaults, so this both sets
        and drops overrides. A bad key or value raises InvalidConfigError and
        changes nothing.
        """
        with self._lock:
            self._check_open()
            return self._install_config(name, self.topic_config(name).with_overrides_replaced(config))

    def set_defaults(self, defaults: Mapping[str, Any]) -> None:
        """New log defaults (dynamic broker configs): new topics start from them, and each topic's
        config is rebuilt over them (its overrides kept), installed in its logs and its file
        rewritten where it changed. A bad default raises InvalidConfigError and changes nothing.
        O(topics)."""
        LogConfig.from_dict({}, defaults=defaults)  # fail before changing anything
        with self._lock:
            self._check_open()
            self.defaults = dict(defaults)
            for name in self.topics():
                current = self.topic_config(name)
                rebuilt = LogConfig.from_dict(dict(current.overrides), defaults=self.defaults)
                if rebuilt.values != current.values or rebuilt.defaults != current.defaults:
                    self._install_config(name, rebuilt)

    def _install_config(self, name: str, new: LogConfig) -> LogConfig:
        self._topic_configs[name] = new
        self.log_manager.set_config(name, new)
        self._persist_topic(name, self.partitions(name))
        self._topic_changed(name)
        return new

    def topic_config(self, name: str) -> LogConfig:
        try:
            return self._topic_configs[name]
        except KeyError:
            raise UnknownTopicError(f"unknown topic {name!r}") from None

    def delete_topic(self, name: str) -> None:
        """Close and delete every partition of a topic."""
        with self._lock:
            self._check_open()
            if name not in self._topic_configs:
                raise UnknownTopicError(f"unknown topic {name!r}")
            os.unlink(os.path.join(self.data_dir, TOPIC_CONFIGS, f"{name}.properties"))
            del self._topic_configs[name]
            del self._topics_by_id[self._topic_ids.pop(name)]
            count = self._partition_counts.pop(name)
            self.log_manager.delete_logs([(name, partition) for partition in range(count)])
            self._topic_changed(name)

    def add_topic_listener(self, listener: Callable[[str], None]) -> list[str]:
        """Call ``listener(name)`` after each change to a topic (created, deleted, partitions
        added, config changed), under the Store's lock; returns the topics there are now."""
        with self._lock:
            self._topic_listeners.append(listener)
            return self.topics()

    def _topic_changed(self, name: str) -> None:
        for listener in self._topic_listeners:
            try:
                listener(name)
            except Exception:  # the change is made and persisted: a listener's bug must not undo it
                _log.exception("a topic listener failed on %s", name)

    def has_topic(self, name: str) -> bool:
        return name in self._topic_configs

    def partition_count(self, name: str) -> int | None:
        """The topic's partition count, or None if there is no such topic. O(1)."""
        return self._partition_counts.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with this ID, or None. O(1)."""
        return self._topics_by_id.get(topic_id)

    def topic_id(self, name: str) -> uuid.UUID:
        """The topic's UUID (Kafka's topic ID), fixed at creation and persisted."""
        try:
            return self._topic_ids[name]
        except KeyError:
            raise UnknownTopicError(f"unknown topic {name!r}") from None

    def topics(self) -> list[str]:
        """The topic names, sorted."""
        return sorted(self._topic_configs)

    def partitions(self, topic: str) -> int:
        if topic not in self._topic_configs:
            raise UnknownTopicError(f"unknown topic {topic!r}")
        return self._partition_counts[topic]

    # -- logs (the LogManager's) ---------------------------------------------

    def find_log(self, topic: str, partition: int) -> Log | None:
        """The Log of one partition, or None if the topic or partition does not exist. O(1)."""
        return self.log_manager.find_log(topic, partition)

    def log(self, topic: str, partition: int = 0) -> Log:
        """The Log of one partition."""
        found = self.log_manager.find_log(topic, partition)
        if found is None:
            raise UnknownTopicError(
                f"no partition {partition} of topic {topic!r}; create the topic (or add partitions) first"
            )
        return found

    def logs(self) -> dict[tuple[str, int], Log]:
        return self.log_manager.logs()

    def checkpoint(self) -> None:
        """Write the recovery point, log start and high watermark checkpoints (one caller at a time)."""
        self.log_manager.checkpoint()

    def run_retention(self) -> int:
        """Apply retention to every log now; returns segments deleted."""
        return self.log_manager.run_retention()

    def run_cleaner(self, now_ms: int | None = None) -> dict[tuple[str, int], CleanResult]:
        """Compact every log that is due now (the scheduler's call); their results."""
        return self.log_manager.run_cleaner(now_ms)

    def compact_now(self, topic: str | None = None) -> dict[tuple[str, int], CleanResult]:
        """Compact now, whatever the dirty ratio, every partition (of ``topic``) whose policy includes compact.

        Runs in the caller's thread, with a progress bar on a terminal;
        returns each partition's result.
        """
        if topic is not None:
            self.topic_config(topic)  # unknown topic: UnknownTopicError
        return self.log_manager.compact_now(
            lambda key, log: (topic is None or key[0] == topic) and "compact" in log.config.cleanup_policy
        )

    # -- closing -----------------------------------------------------------

    def close(self) -> None:
        """Stop the scheduler, flush and close every log, checkpoint, mark a clean shutdown."""
        with self._lock:
            self.log_manager.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
