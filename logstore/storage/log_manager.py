"""The LogManager: the partition logs under one or more log directories (Kafka's ``LogManager``).

It owns the directories (``log.dirs``; an exclusive ``flock`` on each one's
``.lock``), the logs by topic-partition, their checkpoints and the background
work (flush, retention, the cleaner). It knows nothing of topics beyond the
config each log is given: the Store's topic registry (a single broker) or
ZooKeeper (a cluster broker) says which partitions exist and with what config.
What is not a partition (the Store's topic registry, the broker's files) lives
in the first directory, :attr:`LogManager.data_dir`.

Each log directory has Kafka's layout::

    <log_dir>/
      .lock                              exclusive flock while a LogManager has it open
      meta.properties                    version=1
      .kafka_cleanshutdown               present only after a clean close
      recovery-point-offset-checkpoint   topic partition offset
      log-start-offset-checkpoint
      replication-offset-checkpoint      high watermarks
      <topic>-<partition>/               one Log each

Several directories (Kafka's JBOD, KIP-112): each has its own lock, meta.properties,
checkpoints (of the partitions in it) and clean-shutdown marker. A partition lives in
exactly one; on open it is found wherever it is, and the same partition in two
directories refuses the open, naming both paths (Kafka refuses to start). A new
partition goes to the online directory with the fewest partitions, ties broken by
the most free bytes, then by the order of ``log.dirs``.

A failed directory (:attr:`LogManager.dir_failures`, storage/log_dir_failure.py):
an OSError from a log's I/O (the Log's ``on_io_error``), from a checkpoint, or from
opening the directory takes the directory offline: its logs are abandoned with no
further I/O (:meth:`Log.abandon`), its partitions are listed by
:meth:`LogManager.offline_dir_of` (the broker answers KAFKA_STORAGE_ERROR), no new
partition goes there, and the other directories go on. ENOSPC or EDQUOT from a
write does not fail a directory: nothing was written, the caller gets the error, and
the broker's free-space reserve (storage/disk_space.py) refuses produce before it
(Redpanda's policy; Kafka would take the directory offline). ENOSPC from an fsync
does fail it (:class:`~logstore.storage.log.SyncFailedError`: data may be lost).
A partition configured but found in no online directory while some directory is
offline is not created afresh elsewhere (it may be in the offline one): it is
offline too. A restart tries every directory again.

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
import errno
import fcntl
import functools
import logging
import os
import re
import shutil
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence

from logstore._progress import terminal_progress
from logstore.errors import LogstoreError
from logstore.storage.checkpoints import fsync_directory, read_offsets, write_atomically, write_offsets
from logstore.storage.cleaner import Cleaner, CleanResult
from logstore.storage.config import LogConfig
from logstore.storage.log import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_FILE,
    RECOVERY_POINT_FILE,
    Log,
    SyncFailedError,
)
from logstore.storage.log_dir_failure import LogDirFailureChannel
from logstore.storage.log_mover import LogMove, complete_or_discard

_log = logging.getLogger("logstore.store")

REPLICATION_FILE = "replication-offset-checkpoint"
_LOG_DIR = re.compile(r"^(?P<topic>[a-zA-Z0-9._-]{1,249})-(?P<partition>\d+)$")

TopicPartition = tuple[str, int]
_NOT_A_FAILURE = (errno.ENOSPC, errno.EDQUOT)  # a write refused for space: nothing written, nothing lost


def parse_log_dir(name: str) -> TopicPartition | None:
    """(topic, partition) of a log directory's name, or None for anything else."""
    match = _LOG_DIR.match(name)
    if match is None:
        return None
    return match.group("topic"), int(match.group("partition"))


# Every LogManager of this process, for the fork handler below.
_OPEN: weakref.WeakSet[LogManager] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for manager in list(_OPEN):
        manager._forget_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


def try_lock_directory(log_dir: str) -> int | None:
    """Take ``log_dir``'s exclusive ``.lock`` (flock) without waiting: its descriptor, with this
    process's id written in, or None while another open of it (another process) holds it."""
    fd = os.open(os.path.join(log_dir, ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd


class LogManager:
    """Every partition log under the log directories (see the module doc)."""

    def __init__(
        self,
        data_dir: str | Sequence[str],
        *,
        scheduler_interval_ms: int = 1000,
        retention_check_interval_ms: int = 300_000,
        checkpoint_interval_ms: int = 60_000,
        cleaner_backoff_ms: int = 15_000,
        replicated: bool = False,
        lock_fds: Mapping[str, int] | None = None,
    ) -> None:
        """``data_dir``: one log directory, or several (``log.dirs``; the first holds what is not a
        partition). A directory other than the first that cannot be made or locked for an
        OSError starts offline; one in use by another process refuses the open. ``lock_fds``:
        directories whose ``.lock`` the caller already holds (:func:`try_lock_directory`), by
        path; their descriptors become this manager's, released when it closes (an flock
        belongs to its open file description: a second open of ``.lock`` could not take it)."""
        dirs = [os.path.abspath(d) for d in ([data_dir] if isinstance(data_dir, str) else data_dir)]
        if not dirs or len(set(dirs)) != len(dirs):
            raise LogstoreError(f"log.dirs must name one or more distinct directories, not {dirs}")
        self.log_dirs = dirs
        self.data_dir = dirs[0]
        self._lock = threading.RLock()
        # Checkpoints share one .tmp path per file: one writer at a time (scheduler, close, callers).
        self._checkpoint_lock = threading.Lock()
        self._closed = False
        self._loaded = False
        # Replicated (a cluster broker): each log's HW is its own, from replication-offset-checkpoint
        # (0 for a log not in it), never simply the log end as on a broker alone.
        self.replicated = replicated
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, str] = {}  # the directory of each log in _logs
        self._offline: dict[TopicPartition, str] = {}  # partitions of failed directories -> the directory
        self._failed: frozenset[str] = frozenset()  # the failed directories (set first: see _take_offline)
        self.dir_failures = LogDirFailureChannel(self._partitions_in)
        self.dir_failures.add_listener(self._take_offline)
        self._lock_fds: dict[str, int] = {}
        self._forked = False
        _OPEN.add(self)
        self._cleaner = Cleaner()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._intervals = (
            scheduler_interval_ms,
            retention_check_interval_ms,
            checkpoint_interval_ms,
            cleaner_backoff_ms,
        )
        self._moves: dict[TopicPartition, LogMove] = {}  # partitions being moved to another log dir
        # replica.alter.log.dirs.io.max.bytes.per.second: a move's copy rate (<= 0: unbounded)
        self.move_rate = 0
        try:
            for index, log_dir in enumerate(dirs):
                try:
                    os.makedirs(log_dir, exist_ok=True)
                    held = (lock_fds or {}).get(log_dir)
                    self._lock_fds[log_dir] = self._acquire_directory_lock(log_dir) if held is None else held
                    self._write_meta(log_dir)
                except OSError as e:
                    if index == 0:
                        raise
                    self.dir_failures.fail(log_dir, e)
            # A move cut short (log_mover.py's crash policy), then the -delete leftovers.
            complete_or_discard(self.online_dirs(), lambda name: parse_log_dir(name) is not None)
            for log_dir in self.online_dirs():
                self._remove_deleted_logs(log_dir)
        except BaseException:
            self._release_directory_locks()
            raise

    # -- opening -----------------------------------------------------------

    @staticmethod
    def _acquire_directory_lock(log_dir: str) -> int:
        fd = try_lock_directory(log_dir)
        if fd is None:
            raise LogstoreError(
                f"{log_dir} is in use by another process; stop it, or open a different data directory"
            )
        return fd

    def _release_directory_locks(self) -> None:
        for fd in self._lock_fds.values():
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
        self._lock_fds.clear()

    @staticmethod
    def _write_meta(log_dir: str) -> None:
        path = os.path.join(log_dir, "meta.properties")
        if not os.path.exists(path):
            write_atomically(path, b"version=1\n")

    @staticmethod
    def _remove_deleted_logs(log_dir: str) -> None:
        for name in os.listdir(log_dir):
            if name.endswith("-delete"):
                shutil.rmtree(os.path.join(log_dir, name), ignore_errors=True)

    def online_dirs(self) -> list[str]:
        """The log directories not failed, in ``log.dirs`` order."""
        offline = self.dir_failures.offline()
        return [d for d in self.log_dirs if d not in offline]

    def _scan(self) -> dict[TopicPartition, str]:
        """Where each partition found on disk lives (online directories); the same partition in
        two directories raises LogstoreError naming both. A directory that cannot be listed fails."""
        found: dict[TopicPartition, str] = {}
        for log_dir in self.online_dirs():
            try:
                names = os.listdir(log_dir)
            except OSError as e:
                self.dir_failures.fail(log_dir, e)
                continue
            for name in names:
                parsed = parse_log_dir(name)
                if parsed is None or not os.path.isdir(os.path.join(log_dir, name)):
                    continue
                if parsed in found:
                    raise LogstoreError(
                        f"{parsed[0]}-{parsed[1]} is in two log directories: {os.path.join(found[parsed], name)} "
                        f"and {os.path.join(log_dir, name)}; remove the stale copy, then start again"
                    )
                found[parsed] = log_dir
        return found

    def log_dirs_on_disk(self) -> list[TopicPartition]:
        """The (topic, partition) of every log directory in the online log directories, sorted. O(entries)."""
        return sorted(self._scan())

    def load(self, configs: Mapping[TopicPartition, LogConfig], *, start_scheduler: bool = True) -> None:
        """Open (recovering where needed) the logs of ``configs``; once, before anything else.

        A partition found on disk opens where it is; one found nowhere is made in the
        directory :meth:`_choose_dir` picks (unless a directory is offline: see the module
        doc). A directory whose logs cannot be opened for an OSError goes offline. Then each
        directory's clean-shutdown marker goes: from here a crash means recovery.
        """
        with self._lock:
            assert not self._loaded, "load() runs once"
            where = self._scan()
            by_dir: dict[str, dict[TopicPartition, LogConfig]] = {d: {} for d in self.online_dirs()}
            for key, config in sorted(configs.items()):
                if key in where:
                    by_dir[where[key]][key] = config
            for log_dir, wanted in by_dir.items():
                self._load_dir(log_dir, wanted)
            for key, config in sorted(configs.items()):
                if key in self._logs or key in self._offline:
                    continue
                offline = sorted(self.dir_failures.offline())
                if offline:  # it may be in the failed directory: not made afresh elsewhere
                    self._offline[key] = offline[0]
                    continue
                log_dir = self._choose_dir()
                try:
                    self._open(key, log_dir, config, 0, 0, True)
                except OSError as e:
                    self.dir_failures.fail(log_dir, e)
            self._loaded = True
        if start_scheduler:
            self._thread = threading.Thread(
                target=self._run_scheduler, name="logstore-scheduler", daemon=True
            )
            self._thread.start()

    def _load_dir(self, log_dir: str, configs: Mapping[TopicPartition, LogConfig]) -> None:
        try:
            marker = os.path.join(log_dir, CLEAN_SHUTDOWN_FILE)
            clean = os.path.exists(marker)
            recovery = read_offsets(os.path.join(log_dir, RECOVERY_POINT_FILE))
            starts = read_offsets(os.path.join(log_dir, LOG_START_FILE))
            hws = read_offsets(os.path.join(log_dir, REPLICATION_FILE)) if self.replicated else {}
            for key, config in configs.items():
                log = self._open(key, log_dir, config, recovery.get(key, 0), starts.get(key, 0), clean)
                if self.replicated:
                    log.high_watermark = max(log.log_start_offset, min(hws.get(key, 0), log.log_end_offset))
            if clean:
                os.unlink(marker)
                fsync_directory(log_dir)
        except OSError as e:
            self.dir_failures.fail(log_dir, e)

    def _open(
        self, key: TopicPartition, log_dir: str, config: LogConfig, recovery: int, start: int, clean: bool
    ) -> Log:
        log = Log(
            os.path.join(log_dir, f"{key[0]}-{key[1]}"),
            config,
            recovery_point=recovery,
            log_start_offset=start,
            clean_shutdown=clean,
        )
        log.on_io_error = functools.partial(self.report_io_error, log_dir)
        self._logs[key] = log
        self._dir_of[key] = log_dir
        return log

    def _choose_dir(self) -> str:
        """Where a new partition goes: the online directory with the fewest partitions, then the
        most free bytes, then the first in ``log.dirs``. LogstoreError when every one is offline."""
        counts = dict.fromkeys(self.online_dirs(), 0)
        if not counts:
            raise LogstoreError(f"every log directory is offline ({', '.join(self.log_dirs)}); restart the broker")
        if len(counts) == 1:
            return next(iter(counts))
        for log_dir in self._dir_of.values():
            if log_dir in counts:
                counts[log_dir] += 1

        def free(log_dir: str) -> int:
            try:
                stat = os.statvfs(log_dir)
            except OSError:
                return -1
            return stat.f_bavail * stat.f_frsize

        order = {d: i for i, d in enumerate(self.log_dirs)}
        return min(counts, key=lambda d: (counts[d], -free(d), order[d]))

    def check_open(self) -> None:
        if self._forked:
            raise LogstoreError(
                f"the store at {self.data_dir} was opened before this process was forked; its threads "
                "and lock stayed in the parent: open it again in the child (or start children with "
                "multiprocessing's 'spawn' method)"
            )
        if self._closed:
            raise LogstoreError(f"the store at {self.data_dir} is closed; open a new Store")

    def _forget_after_fork(self) -> None:
        """In a forked child: close the inherited ``.lock`` descriptors without unlocking (the
        flock is the parent's: a child that kept a copy would hold it after the parent died, and no
        other process could take the directory over); the copy of this manager refuses all use."""
        self._forked = True
        for fd in self._lock_fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._lock_fds.clear()

    # -- failed directories ------------------------------------------------

    def report_io_error(self, log_dir: str, error: OSError) -> None:
        """An OSError of an I/O in ``log_dir``: fail the directory, unless it is a write refused for
        space (ENOSPC, EDQUOT; an fsync's always fails it). See the module doc."""
        if error.errno in _NOT_A_FAILURE and not isinstance(error, SyncFailedError):
            return
        self.dir_failures.fail(log_dir, error)

    def report_file_error(self, fd: int, error: OSError) -> None:
        """An I/O error reading an open file outside the Log (a fetch's sendfile or pread): fail the
        log directory that holds it (:meth:`report_io_error`); a file in none is ignored."""
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return
        for log_dir in self.log_dirs:
            if path.startswith(log_dir + os.sep):
                self.report_io_error(log_dir, error)
                return

    # The failure listener must never wait for the manager's lock: the thread whose I/O failed may
    # hold a log's lock that a holder of the manager's lock waits for (delete_logs closing that
    # log). So it reads the maps lock-free (a copy of a dict is atomic), marks the directory failed
    # at once (find_log and offline_dir_of consult _failed), and moves the logs off the maps under
    # the lock when it can have it: at once, else in a thread of its own.

    def _partitions_in(self, log_dir: str) -> list[TopicPartition]:
        return sorted(key for key, d in list(self._dir_of.items()) if d == log_dir)

    def _take_offline(self, log_dir: str, partitions: list[TopicPartition]) -> None:
        """The channel's first listener: the directory's partitions offline at once, their logs
        abandoned (no I/O) and moved off the maps."""
        self._failed = self._failed | {log_dir}
        self._cancel_moves(lambda key, move: move.target == log_dir or self._dir_of.get(key) == log_dir)
        if self._lock.acquire(timeout=0.5):
            try:
                self._offline_locked(log_dir)
            finally:
                self._lock.release()
            return
        threading.Thread(target=self._offline_later, args=(log_dir,), name="logstore-log-dir-offline",
                         daemon=True).start()  # fmt: skip

    def _offline_later(self, log_dir: str) -> None:
        with self._lock:
            self._offline_locked(log_dir)

    def _offline_locked(self, log_dir: str) -> None:
        doomed = []
        for key in [k for k, d in self._dir_of.items() if d == log_dir]:
            del self._dir_of[key]
            doomed.append(self._logs.pop(key))
            self._offline[key] = log_dir
        for log in doomed:
            log.abandon()

    def offline_dir_of(self, topic: str, partition: int) -> str | None:
        """The failed directory that holds (or may hold) this partition, or None. O(1)."""
        found = self._offline.get((topic, partition))
        if found is None and self._failed:
            found = self._dir_of.get((topic, partition))
            return found if found in self._failed else None
        return found

    def dir_of(self, topic: str, partition: int) -> str | None:
        """The online directory of this partition's log, or None. O(1)."""
        found = self._dir_of.get((topic, partition))
        return None if found in self._failed else found

    # -- moving a log to another directory (AlterReplicaLogDirs; log_mover.py) ---

    def start_move(self, topic: str, partition: int, target: str) -> LogMove | None:
        """Start moving a partition's log to the log directory ``target`` (in the background; see
        log_mover.py); None when it is there already. LogstoreError: no such directory or it is
        offline (the message says), the partition is not here, or it is moving already."""
        target = os.path.abspath(target)
        key = (topic, partition)
        with self._lock:
            self.check_open()
            if target not in self.log_dirs:
                raise LogstoreError(f"{target} is not one of the log directories ({', '.join(self.log_dirs)})")
            if self.dir_failures.is_offline(target):
                raise LogstoreError(f"the log directory {target} is offline")
            log, current = self._logs.get(key), self._dir_of.get(key)
            if log is None or current is None:
                raise LogstoreError(f"no log of {topic}-{partition} here")
            if current == target:
                return None
            if key in self._moves:
                raise LogstoreError(f"{topic}-{partition} is moving to {self._moves[key].target} already")
            move = self._moves[key] = LogMove(log, topic, partition, target, self.move_rate, self._move_done)
        return move.start()

    def _move_done(self, move: LogMove) -> None:
        key = parse_log_dir(move.name)
        move.cleanup()
        with self._lock:
            if key is not None and self._moves.get(key) is move:
                del self._moves[key]
                if move.error is None and self._logs.get(key) is move.log:
                    self._dir_of[key] = move.target
                    move.log.on_io_error = functools.partial(self.report_io_error, move.target)

    def future_logs(self) -> dict[TopicPartition, tuple[str, int, int]]:
        """Partitions being moved (DescribeLogDirs' future replicas): (target dir, bytes copied,
        offsets behind the current log)."""
        with self._lock:
            moves = dict(self._moves)
        return {key: (move.target, move.copied_bytes, move.offset_lag) for key, move in moves.items()}

    def _cancel_moves(self, keys: Callable[[TopicPartition, LogMove], bool], join: bool = False) -> None:
        """Stop the moves ``keys`` picks; ``join``: wait for their threads (never under the lock:
        a move's end takes it). Lock-free (the failure listener calls it)."""
        doomed = [move for key, move in list(self._moves.items()) if keys(key, move)]
        for move in doomed:
            move.cancel(10.0 if join else 0.0)

    def offline_partitions(self) -> dict[TopicPartition, str]:
        """The partitions of failed directories, with their directory. O(partitions)."""
        return dict(self._offline)

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
                    if key in self._offline:
                        raise LogstoreError(f"the log of {key[0]}-{key[1]} is in the failed directory {self._offline[key]}")
                    log_dir = self._choose_dir()
                    try:
                        made[key] = self._open(key, log_dir, config, 0, 0, True)
                    except OSError as e:
                        self.report_io_error(log_dir, e)
                        raise
                    if self.replicated:
                        made[key].high_watermark = 0
            except BaseException:
                for key, log in made.items():
                    self._logs.pop(key, None)
                    self._dir_of.pop(key, None)
                    with contextlib.suppress(Exception):
                        log.close()
                    shutil.rmtree(log.path, ignore_errors=True)
                raise
            for log_dir in {self._dir_of[key] for key in made}:
                try:
                    fsync_directory(log_dir)
                except OSError as e:
                    self.report_io_error(log_dir, e)
                    raise

    def delete_logs(self, keys: list[TopicPartition]) -> None:
        """Close and delete these logs (unknown ones are skipped). O(logs)."""
        with self._lock:
            self.check_open()
            wanted = set(keys)
            self._cancel_moves(lambda key, move: key in wanted)
            touched = set()
            for key in keys:
                self._offline.pop(key, None)  # in a failed directory: forgotten, its files left there
                log = self._logs.pop(key, None)
                log_dir = self._dir_of.pop(key, None)
                if log is None or log_dir is None:
                    continue
                try:
                    log.close()
                    doomed = f"{log.path}.{uuid.uuid4().hex}-delete"
                    os.replace(log.path, doomed)
                    touched.add(log_dir)
                except OSError as e:
                    self.report_io_error(log_dir, e)
                    continue
                shutil.rmtree(doomed, ignore_errors=True)
            for log_dir in touched:
                try:
                    fsync_directory(log_dir)
                except OSError as e:
                    self.report_io_error(log_dir, e)

    def set_config(self, topic: str, config: LogConfig) -> None:
        """Give every log of ``topic`` a new config (it applies from the next append or roll). O(logs)."""
        with self._lock:
            for (name, _), log in self._logs.items():
                if name == topic:
                    log.config = config

    def find_log(self, topic: str, partition: int) -> Log | None:
        """The Log of one partition, or None (none here, or in a failed directory). O(1)."""
        self.check_open()
        if self._failed and self._dir_of.get((topic, partition)) in self._failed:
            return None
        return self._logs.get((topic, partition))

    def logs(self) -> dict[TopicPartition, Log]:
        """A copy of the logs by (topic, partition), none of a failed directory. O(logs)."""
        if not self._failed:
            return dict(self._logs)
        failed, where = self._failed, dict(self._dir_of)
        return {key: log for key, log in list(self._logs.items()) if where.get(key) not in failed}

    # -- background work ---------------------------------------------------

    def checkpoint(self) -> None:
        """Write each online directory's recovery point, log start and high watermark checkpoints
        (one caller at a time). A directory whose checkpoint fails for an I/O error goes offline
        (one full is only skipped: the next start recovers from the segments); the error of the
        last such directory is raised after the others are written."""
        failed: OSError | None = None
        with self._checkpoint_lock:
            logs = self.logs()
            for log_dir in self.online_dirs():
                live = {k: log for k, log in logs.items() if not log.closed and self._dir_of.get(k) == log_dir}
                try:
                    self._checkpoint_dir(log_dir, live)
                except OSError as e:
                    self.report_io_error(log_dir, e)
                    failed = e
        if failed is not None:
            raise failed

    @staticmethod
    def _checkpoint_dir(log_dir: str, live: Mapping[TopicPartition, Log]) -> None:
        write_offsets(
            os.path.join(log_dir, RECOVERY_POINT_FILE), {k: log.recovery_point for k, log in live.items()}
        )
        write_offsets(os.path.join(log_dir, LOG_START_FILE), {k: log.log_start_offset for k, log in live.items()})
        write_offsets(os.path.join(log_dir, REPLICATION_FILE), {k: log.high_watermark for k, log in live.items()})

    def run_retention(self) -> int:
        """Apply retention to every log now; returns segments deleted."""
        deleted = 0
        for log in self.logs().values():
            with contextlib.suppress(LogstoreError, OSError):  # a failed directory is reported by the log
                deleted += log.delete_old_segments() if not log.closed else 0
        return deleted

    def run_cleaner(self, now_ms: int | None = None) -> dict[TopicPartition, CleanResult]:
        """Compact every log that is due now (the scheduler's call); their results."""
        results = {}
        for key, log in sorted(self.logs().items()):
            if key in self._moves:  # its files are being copied elsewhere: compacted after the move
                continue
            try:
                if self._cleaner.needs_cleaning(log, now_ms):
                    results[key] = self._cleaner.clean(log, now_ms)
            except (LogstoreError, OSError) as exc:  # one damaged, closing or full log must not stop the rest
                if not log.closed:
                    _log.warning("compacting %s-%d failed: %s", key[0], key[1], exc)
                log_dir = self._dir_of.get(key)
                if isinstance(exc, OSError) and log_dir is not None:
                    self.report_io_error(log_dir, exc)  # an I/O error fails the directory (ENOSPC does not)
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
                        with contextlib.suppress(LogstoreError, OSError):  # reported by the log
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
                    "background flush, retention, cleaning or checkpoint failed in %s", ", ".join(self.log_dirs)
                )

    # -- closing -----------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def abandon(self) -> None:
        """Give the directories up after a failed open: close what was opened and release the locks,
        with no checkpoint and no clean-shutdown marker (the next open recovers)."""
        with self._lock:
            if self._closed:
                return
            for log in self._logs.values():
                with contextlib.suppress(Exception):
                    log.close()
            self._closed = True
            self._release_directory_locks()

    def close(self) -> None:
        """Stop the scheduler, flush and close every log, checkpoint, mark a clean shutdown in each
        online directory (a failed directory gets no marker: its next open recovers). A copy
        inherited through fork() does nothing: the directory is the parent's."""
        if self._forked:
            return
        self._cancel_moves(lambda key, move: True, join=True)
        if self._thread is not None:  # joined outside the lock: its failure listener may need it
            self._stop.set()
            self._thread.join()
        with self._lock:
            if self._closed:
                return
            for log in list(self._logs.values()):
                with contextlib.suppress(OSError):  # reported by the log: its directory goes offline
                    log.flush()
            for log_dir in self.online_dirs():
                self._close_dir(log_dir)
            self._closed = True
            self._release_directory_locks()

    def _close_dir(self, log_dir: str) -> None:
        live = {k: log for k, log in self._logs.items() if self._dir_of.get(k) == log_dir}
        try:
            with self._checkpoint_lock:
                self._checkpoint_dir(log_dir, live)
            clean = True
        except OSError as e:  # a full disk: the logs are flushed, only the bookkeeping is lost
            self.report_io_error(log_dir, e)
            _log.warning(
                "cannot write the checkpoints of %s (%s); skipped: the next start recovers "
                "the logs from their segments", log_dir, e,
            )
            clean = False
        for log in live.values():
            try:
                log.close()
            except OSError:
                clean = False
        if clean and not self.dir_failures.is_offline(log_dir):
            # no clean-shutdown marker over stale checkpoints: the next start recovers
            try:
                with open(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE), "wb") as f:
                    os.fsync(f.fileno())
                fsync_directory(log_dir)
            except OSError as e:
                _log.warning("cannot mark %s cleanly shut down (%s): the next start recovers it", log_dir, e)
