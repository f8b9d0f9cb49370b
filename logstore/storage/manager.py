"""The Store: every partition log under one data directory (Kafka's LogManager).

Data directory layout (Kafka's, plus one folder for topic configs)::

    <data_dir>/
      .lock                              exclusive flock while a Store has it open
      meta.properties                    version=1
      .kafka_cleanshutdown               present only after a clean close
      recovery-point-offset-checkpoint   topic partition offset
      log-start-offset-checkpoint
      replication-offset-checkpoint      high watermarks
      topic-configs/<topic>.properties   partitions=N and the topic's overrides
      <topic>-<partition>/               one Log each

Crash policy: the clean-shutdown marker is removed (and the removal fsynced)
before the Store serves anything; after a crash its absence makes every log
recover from its checkpointed recovery point. Checkpoints are written
atomically (tmp + fsync + rename + directory fsync). A topic is deleted by
renaming its directories to ``<topic>-<partition>.<nonce>-delete`` before
removing them; such leftovers are removed on open.

Threads: the Store's methods may be called from any thread; a background
scheduler thread flushes per ``flush.ms``, applies retention, compacts the
logs whose ``cleanup.policy`` includes compact when they are due (see
:meth:`~logstore.storage.cleaner.Cleaner.needs_cleaning`; ``compact_now``
runs it on demand) and writes the checkpoints.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from logstore._progress import terminal_progress
from logstore.errors import InvalidArgumentError, LogstoreError, TopicExistsError, UnknownTopicError
from logstore.storage.checkpoints import fsync_directory, read_offsets, write_atomically, write_offsets
from logstore.storage.cleaner import Cleaner, CleanResult
from logstore.storage.config import LogConfig
from logstore.storage.log import CLEAN_SHUTDOWN_FILE, LOG_START_FILE, RECOVERY_POINT_FILE, Log

_log = logging.getLogger("logstore.store")

REPLICATION_FILE = "replication-offset-checkpoint"
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
    """All topics and partitions under one data directory.

    >>> import tempfile
    >>> with Store(tempfile.mkdtemp(), scheduler=False) as store:
    ...     store.create_topic("events", partitions=2)
    ...     store.log("events", 1).append([b"hello"]).last_offset
    0
    """

    def __init__(
        self,
        data_dir: str,
        config: Mapping[str, Any] | None = None,
        *,
        scheduler: bool = True,
        scheduler_interval_ms: int = 1000,
        retention_check_interval_ms: int = 300_000,
        checkpoint_interval_ms: int = 60_000,
        cleaner_backoff_ms: int = 15_000,
    ) -> None:
        self.data_dir = os.path.abspath(data_dir)
        os.makedirs(os.path.join(self.data_dir, TOPIC_CONFIGS), exist_ok=True)
        self.defaults = dict(config or {})
        LogConfig.from_dict(self.defaults)  # fail now on a bad default
        self._lock = threading.RLock()
        # Checkpoints share one .tmp path per file: one writer at a time (scheduler, close, callers).
        self._checkpoint_lock = threading.Lock()
        self._closed = False
        self._lock_fd = self._acquire_directory_lock()
        self._logs: dict[tuple[str, int], Log] = {}
        self._partition_counts: dict[str, int] = {}  # partitions are dense: 0 .. count - 1
        self._topics_by_id: dict[uuid.UUID, str] = {}
        self._topic_configs: dict[str, LogConfig] = {}
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._cleaner = Cleaner()
        self._topic_listeners: list[Callable[[str], None]] = []
        try:
            self._write_meta()
            self._remove_deleted_topics()
            self._open_logs()
        except BaseException:
            self._release_directory_lock()
            raise
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._intervals = (
            scheduler_interval_ms,
            retention_check_interval_ms,
            checkpoint_interval_ms,
            cleaner_backoff_ms,
        )
        if scheduler:
            self._thread = threading.Thread(
                target=self._run_scheduler, name="logstore-scheduler", daemon=True
            )
            self._thread.start()

    # -- opening -----------------------------------------------------------

    def _acquire_directory_lock(self) -> int:
        path = os.path.join(self.data_dir, ".lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogstoreError(
                f"{self.data_dir} is in use by another process; stop it, or open a different data directory"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        return fd

    def _release_directory_lock(self) -> None:
        with contextlib.suppress(OSError):
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)

    def _write_meta(self) -> None:
        path = os.path.join(self.data_dir, "meta.properties")
        if not os.path.exists(path):
            _write_properties(path, {"version": 1})

    def _remove_deleted_topics(self) -> None:
        for name in os.listdir(self.data_dir):
            if name.endswith("-delete"):
                shutil.rmtree(os.path.join(self.data_dir, name), ignore_errors=True)

    def _open_logs(self) -> None:
        marker = os.path.join(self.data_dir, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        recovery = read_offsets(os.path.join(self.data_dir, RECOVERY_POINT_FILE))
        starts = read_offsets(os.path.join(self.data_dir, LOG_START_FILE))
        for name in sorted(os.listdir(os.path.join(self.data_dir, TOPIC_CONFIGS))):
            if name.endswith(".properties"):
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
                for partition in range(partitions):
                    key = (topic, partition)
                    self._logs[key] = Log(
                        self._log_path(topic, partition),
                        self._topic_configs[topic],
                        recovery_point=recovery.get(key, 0),
                        log_start_offset=starts.get(key, 0),
                        clean_shutdown=clean,
                    )
        if clean:
            os.unlink(marker)
            fsync_directory(self.data_dir)

    def _log_path(self, topic: str, partition: int) -> str:
        return os.path.join(self.data_dir, f"{topic}-{partition}")

    def _check_open(self) -> None:
        if self._closed:
            raise LogstoreError(f"the store at {self.data_dir} is closed; open a new Store")

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
            logs: dict[tuple[str, int], Log] = {}
            try:  # the topic is known only once every log is open and its file written
                for partition in range(partitions):
                    logs[(name, partition)] = Log(
                        self._log_path(name, partition), topic_config, recovery_point=0, clean_shutdown=True
                    )
                self._write_topic_file(name, partitions, topic_id, topic_config)
            except BaseException:
                for log in logs.values():
                    log.close()
                    shutil.rmtree(log.path, ignore_errors=True)
                raise
            self._topic_configs[name] = topic_config
            self._topic_ids[name] = topic_id
            self._topics_by_id[topic_id] = name
            self._partition_counts[name] = partitions
            self._logs.update(logs)
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
            for partition in range(current, total):
                self._logs[(name, partition)] = Log(
                    self._log_path(name, partition),
                    self._topic_configs[name],
                    recovery_point=0,
                    clean_shutdown=True,
                )
                self._partition_counts[name] = partition + 1
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

    def _install_config(self, name: str, new: LogConfig) -> LogConfig:
        self._topic_configs[name] = new
        for (topic, _), log in self._logs.items():
            if topic == name:
                log.config = new
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
            del self._partition_counts[name]
            for key in [k for k in self._logs if k[0] == name]:
                log = self._logs.pop(key)
                log.close()
                doomed = f"{log.path}.{uuid.uuid4().hex}-delete"
                os.replace(log.path, doomed)
                shutil.rmtree(doomed, ignore_errors=True)
            fsync_directory(self.data_dir)
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

    def find_log(self, topic: str, partition: int) -> Log | None:
        """The Log of one partition, or None if the topic or partition does not exist. O(1)."""
        self._check_open()
        return self._logs.get((topic, partition))

    def log(self, topic: str, partition: int = 0) -> Log:
        """The Log of one partition."""
        self._check_open()
        try:
            return self._logs[(topic, partition)]
        except KeyError:
            raise UnknownTopicError(
                f"no partition {partition} of topic {topic!r}; create the topic (or add partitions) first"
            ) from None

    def logs(self) -> dict[tuple[str, int], Log]:
        return dict(self._logs)

    # -- background work ---------------------------------------------------

    def checkpoint(self) -> None:
        """Write the recovery point, log start and high watermark checkpoints (one caller at a time)."""
        with self._checkpoint_lock:
            self._write_checkpoints()

    def _write_checkpoints(self) -> None:
        logs = self.logs()
        live = {key: log for key, log in logs.items() if not log.closed}
        write_offsets(
            os.path.join(self.data_dir, RECOVERY_POINT_FILE),
            {k: log.recovery_point for k, log in live.items()},
        )
        write_offsets(
            os.path.join(self.data_dir, LOG_START_FILE), {k: log.log_start_offset for k, log in live.items()}
        )
        write_offsets(
            os.path.join(self.data_dir, REPLICATION_FILE), {k: log.high_watermark for k, log in live.items()}
        )

    def run_retention(self) -> int:
        """Apply retention to every log now; returns segments deleted."""
        return sum(log.delete_old_segments() for log in self.logs().values() if not log.closed)

    def run_cleaner(self, now_ms: int | None = None) -> dict[tuple[str, int], CleanResult]:
        """Compact every log that is due now (the scheduler's call); their results."""
        results = {}
        for key, log in sorted(self.logs().items()):
            try:
                if self._cleaner.needs_cleaning(log, now_ms):
                    results[key] = self._cleaner.clean(log, now_ms)
            except (LogstoreError, OSError) as exc:  # one damaged, closing or full log must not stop the rest
                if not log.closed:
                    _log.warning("compacting %s-%d failed: %s", key[0], key[1], exc)
        return results

    def compact_now(self, topic: str | None = None) -> dict[tuple[str, int], CleanResult]:
        """Compact now, whatever the dirty ratio, every partition (of ``topic``) whose policy includes compact.

        Runs in the caller's thread, with a progress bar on a terminal;
        returns each partition's result.
        """
        if topic is not None:
            self.topic_config(topic)  # unknown topic: UnknownTopicError
        results = {}
        for (name, partition), log in sorted(self.logs().items()):
            if (topic is None or name == topic) and "compact" in log.config.cleanup_policy:
                self._check_open()
                with terminal_progress(f"compacting {name}-{partition}") as progress:
                    results[(name, partition)] = self._cleaner.clean(log, progress=progress)
        return results

    def _run_scheduler(self) -> None:
        tick, retention_every, checkpoint_every, cleaner_every = self._intervals
        last_retention = last_checkpoint = last_clean = time.monotonic()
        while not self._stop.wait(tick / 1000):
            try:
                for log in self.logs().values():
                    if not log.closed:
                        log.flush_if_due()
                now = time.monotonic()
                # Each step's clock moves before it runs: a step that fails waits for its next turn.
                if (now - last_retention) * 1000 >= retention_every:
                    last_retention = now
                    self.run_retention()
                if (now - last_clean) * 1000 >= cleaner_every:
                    last_clean = now
                    self.run_cleaner()
                if (now - last_checkpoint) * 1000 >= checkpoint_every:
                    last_checkpoint = now
                    self.checkpoint()
            except LogstoreError:
                continue  # a log closed under us (topic deleted): the next tick sees the new set
            except OSError:
                # Disk full, I/O error: say so and keep the scheduler alive; the
                # next tick retries, and appends report the error to their callers.
                _log.exception(
                    "background flush, retention, cleaning or checkpoint failed in %s", self.data_dir
                )

    # -- closing -----------------------------------------------------------

    def close(self) -> None:
        """Stop the scheduler, flush and close every log, checkpoint, mark a clean shutdown."""
        with self._lock:
            if self._closed:
                return
            if self._thread is not None:
                self._stop.set()
                self._thread.join()
            for log in self._logs.values():
                log.flush()
            self.checkpoint()
            for log in self._logs.values():
                log.close()
            with open(os.path.join(self.data_dir, CLEAN_SHUTDOWN_FILE), "wb") as f:
                os.fsync(f.fileno())
            fsync_directory(self.data_dir)
            self._closed = True
            self._release_directory_lock()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
