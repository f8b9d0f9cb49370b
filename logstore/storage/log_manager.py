"""The LogManager: the partition logs under one data directory (Kafka's ``LogManager``).

It owns the directory (an exclusive ``flock`` on ``.lock``), the logs by
topic-partition, their checkpoints and the background work (flush, retention,
the cleaner). It knows nothing of topics beyond the config each log is given:
the Store's topic registry (a single broker) or ZooKeeper (a cluster broker)
says which partitions exist and with what config.

Data directory layout (Kafka's)::

    <data_dir>/
      .lock                              exclusive flock while a LogManager has it open
      meta.properties                    version=1
      .kafka_cleanshutdown               present only after a clean close
      recovery-point-offset-checkpoint   topic partition offset
      log-start-offset-checkpoint
      replication-offset-checkpoint      high watermarks
      <topic>-<partition>/               one Log each

Crash policy: the clean-shutdown marker is removed (and the removal fsynced)
once the logs are loaded, before anything is served; after a crash its
absence makes every log recover from its checkpointed recovery point.
Checkpoints are written atomically (tmp + fsync + rename + directory fsync).
A log is deleted by renaming its directory to ``<topic>-<partition>.<nonce>-delete``
before removing it; such leftovers are removed on open.

Threads: every method may be called from any thread; a scheduler thread
flushes per ``flush.ms``, applies retention, compacts the logs whose
``cleanup.policy`` includes compact when they are due, and writes the
checkpoints. Lookups are O(1); a pass of background work is O(logs).
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

from logstore._progress import terminal_progress
from logstore.errors import LogstoreError
from logstore.storage.checkpoints import fsync_directory, read_offsets, write_atomically, write_offsets
from logstore.storage.cleaner import Cleaner, CleanResult
from logstore.storage.config import LogConfig
from logstore.storage.log import CLEAN_SHUTDOWN_FILE, LOG_START_FILE, RECOVERY_POINT_FILE, Log

_log = logging.getLogger("logstore.store")

REPLICATION_FILE = "replication-offset-checkpoint"
_LOG_DIR = re.compile(r"^(?P<topic>[a-zA-Z0-9._-]{1,249})-(?P<partition>\d+)$")

TopicPartition = tuple[str, int]


def parse_log_dir(name: str) -> TopicPartition | None:
    """(topic, partition) of a log directory's name, or None for anything else."""
    match = _LOG_DIR.match(name)
    if match is None:
        return None
    return match.group("topic"), int(match.group("partition"))


class LogManager:
    """Every partition log under one data directory (see the module doc)."""

    def __init__(
        self,
        data_dir: str,
        *,
        scheduler_interval_ms: int = 1000,
        retention_check_interval_ms: int = 300_000,
        checkpoint_interval_ms: int = 60_000,
        cleaner_backoff_ms: int = 15_000,
        replicated: bool = False,
    ) -> None:
        self.data_dir = os.path.abspath(data_dir)
        os.makedirs(self.data_dir, exist_ok=True)
        self._lock = threading.RLock()
        # Checkpoints share one .tmp path per file: one writer at a time (scheduler, close, callers).
        self._checkpoint_lock = threading.Lock()
        self._closed = False
        self._loaded = False
        # Replicated (a cluster broker): each log's HW is its own, from replication-offset-checkpoint
        # (0 for a log not in it), never simply the log end as on a broker alone.
        self.replicated = replicated
        self._lock_fd = self._acquire_directory_lock()
        self._logs: dict[TopicPartition, Log] = {}
        self._cleaner = Cleaner()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._intervals = (
            scheduler_interval_ms,
            retention_check_interval_ms,
            checkpoint_interval_ms,
            cleaner_backoff_ms,
        )
        try:
            self._write_meta()
            self._remove_deleted_logs()
        except BaseException:
            self._release_directory_lock()
            raise

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
            write_atomically(path, b"version=1\n")

    def _remove_deleted_logs(self) -> None:
        for name in os.listdir(self.data_dir):
            if name.endswith("-delete"):
                shutil.rmtree(os.path.join(self.data_dir, name), ignore_errors=True)

    def log_dirs_on_disk(self) -> list[TopicPartition]:
        """The (topic, partition) of every log directory in the data directory, sorted. O(entries)."""
        found = []
        for name in os.listdir(self.data_dir):
            parsed = parse_log_dir(name)
            if parsed is not None and os.path.isdir(os.path.join(self.data_dir, name)):
                found.append(parsed)
        return sorted(found)

    def load(self, configs: Mapping[TopicPartition, LogConfig], *, start_scheduler: bool = True) -> None:
        """Open (recovering where needed) the logs of ``configs``; once, before anything else.

        Then the clean-shutdown marker goes: from here a crash means recovery.
        """
        with self._lock:
            assert not self._loaded, "load() runs once"
            marker = os.path.join(self.data_dir, CLEAN_SHUTDOWN_FILE)
            clean = os.path.exists(marker)
            recovery = read_offsets(os.path.join(self.data_dir, RECOVERY_POINT_FILE))
            starts = read_offsets(os.path.join(self.data_dir, LOG_START_FILE))
            hws = read_offsets(os.path.join(self.data_dir, REPLICATION_FILE)) if self.replicated else {}
            for key, config in sorted(configs.items()):
                log = self._logs[key] = Log(
                    self._log_path(*key),
                    config,
                    recovery_point=recovery.get(key, 0),
                    log_start_offset=starts.get(key, 0),
                    clean_shutdown=clean,
                )
                if self.replicated:
                    log.high_watermark = max(log.log_start_offset, min(hws.get(key, 0), log.log_end_offset))
            if clean:
                os.unlink(marker)
                fsync_directory(self.data_dir)
            self._loaded = True
        if start_scheduler:
            self._thread = threading.Thread(
                target=self._run_scheduler, name="logstore-scheduler", daemon=True
            )
            self._thread.start()

    def _log_path(self, topic: str, partition: int) -> str:
        return os.path.join(self.data_dir, f"{topic}-{partition}")

    def check_open(self) -> None:
        if self._closed:
            raise LogstoreError(f"the store at {self.data_dir} is closed; open a new Store")

    # -- logs --------------------------------------------------------------

    def create_logs(self, configs: Mapping[TopicPartition, LogConfig]) -> None:
        """Create empty logs (all or none: a failure removes the ones made). O(logs)."""
        with self._lock:
            self.check_open()
            made: dict[TopicPartition, Log] = {}
            try:
                for key, config in sorted(configs.items()):
                    if key in self._logs:
                        raise LogstoreError(f"the log of {key[0]}-{key[1]} exists already")
                    made[key] = Log(self._log_path(*key), config, recovery_point=0, clean_shutdown=True)
                    if self.replicated:
                        made[key].high_watermark = 0
            except BaseException:
                for log in made.values():
                    log.close()
                    shutil.rmtree(log.path, ignore_errors=True)
                raise
            self._logs.update(made)
            fsync_directory(self.data_dir)

    def delete_logs(self, keys: list[TopicPartition]) -> None:
        """Close and delete these logs (unknown ones are skipped). O(logs)."""
        with self._lock:
            self.check_open()
            for key in keys:
                log = self._logs.pop(key, None)
                if log is None:
                    continue
                log.close()
                doomed = f"{log.path}.{uuid.uuid4().hex}-delete"
                os.replace(log.path, doomed)
                shutil.rmtree(doomed, ignore_errors=True)
            fsync_directory(self.data_dir)

    def set_config(self, topic: str, config: LogConfig) -> None:
        """Give every log of ``topic`` a new config (it applies from the next append or roll). O(logs)."""
        with self._lock:
            for (name, _), log in self._logs.items():
                if name == topic:
                    log.config = config

    def find_log(self, topic: str, partition: int) -> Log | None:
        """The Log of one partition, or None. O(1)."""
        self.check_open()
        return self._logs.get((topic, partition))

    def logs(self) -> dict[TopicPartition, Log]:
        """A copy of the logs by (topic, partition). O(logs)."""
        return dict(self._logs)

    # -- background work ---------------------------------------------------

    def checkpoint(self) -> None:
        """Write the recovery point, log start and high watermark checkpoints (one caller at a time)."""
        with self._checkpoint_lock:
            live = {key: log for key, log in self.logs().items() if not log.closed}
            write_offsets(
                os.path.join(self.data_dir, RECOVERY_POINT_FILE),
                {k: log.recovery_point for k, log in live.items()},
            )
            write_offsets(
                os.path.join(self.data_dir, LOG_START_FILE),
                {k: log.log_start_offset for k, log in live.items()},
            )
            write_offsets(
                os.path.join(self.data_dir, REPLICATION_FILE),
                {k: log.high_watermark for k, log in live.items()},
            )

    def run_retention(self) -> int:
        """Apply retention to every log now; returns segments deleted."""
        return sum(log.delete_old_segments() for log in self.logs().values() if not log.closed)

    def run_cleaner(self, now_ms: int | None = None) -> dict[TopicPartition, CleanResult]:
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

    def compact_now(self, wanted: Callable[[TopicPartition, Log], bool]) -> dict[TopicPartition, CleanResult]:
        """Compact now, whatever the dirty ratio, every log ``wanted`` picks; in the caller's thread,
        with a progress bar on a terminal."""
        results = {}
        for (name, partition), log in sorted(self.logs().items()):
            if wanted((name, partition), log):
                self.check_open()
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
                continue  # a log closed under us (deleted): the next tick sees the new set
            except OSError:
                # Disk full, I/O error: say so and keep the scheduler alive; the
                # next tick retries, and appends report the error to their callers.
                _log.exception(
                    "background flush, retention, cleaning or checkpoint failed in %s", self.data_dir
                )

    # -- closing -----------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def abandon(self) -> None:
        """Give the directory up after a failed open: close what was opened and release the lock,
        with no checkpoint and no clean-shutdown marker (the next open recovers)."""
        with self._lock:
            if self._closed:
                return
            for log in self._logs.values():
                with contextlib.suppress(Exception):
                    log.close()
            self._closed = True
            self._release_directory_lock()

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
            try:
                self.checkpoint()
                clean = True
            except OSError as e:  # a full disk: the logs are flushed, only the bookkeeping is lost
                _log.warning(
                    "cannot write the checkpoints of %s (%s); skipped: the next start recovers "
                    "the logs from their segments", self.data_dir, e,
                )
                clean = False
            for log in self._logs.values():
                log.close()
            if clean:  # no clean-shutdown marker over stale checkpoints: the next start recovers
                with open(os.path.join(self.data_dir, CLEAN_SHUTDOWN_FILE), "wb") as f:
                    os.fsync(f.fileno())
                fsync_directory(self.data_dir)
            self._closed = True
            self._release_directory_lock()
