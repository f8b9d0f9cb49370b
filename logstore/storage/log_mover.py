"""Moving a partition's log to another log directory while it stays online (AlterReplicaLogDirs,
Kafka's KIP-113): :class:`LogMove`.

Steps (crash points in brackets):

1. **Copy** every file of ``<src>/<topic>-<p>`` into ``<dst>/<topic>-<p>.<nonce>-future`` while
   appends go on (at most ``replica.alter.log.dirs.io.max.bytes.per.second``), remembering each
   file's inode and the bytes copied [``log_move.copied``].
2. **Catch up** under the log's append lock (appends wait; reads go on): the log is flushed and
   its segments closed, the bytes appended since step 1 are copied (a file whose inode changed or
   shrank, compaction's or a truncation's, is copied again whole; files gone are removed), every
   future file and the future directory are fsynced [``log_move.future_synced``].
3. **Swap**: the source is renamed ``<topic>-<p>.<nonce>-delete`` and its directory fsynced
   [``log_move.source_renamed``]; the future is renamed ``<topic>-<p>`` and the target directory
   fsynced [``log_move.future_renamed``]; the log reopens its segments there (the same
   :class:`~logstore.storage.log.Log` object: the broker's partition keeps it); the ``-delete``
   copy is removed.

Crash policy (:func:`complete_or_discard`, run by the LogManager on open, before ``-delete``
leftovers are removed): a ``-future`` whose partition still has a live ``<topic>-<p>`` in some
log directory is discarded (the move had not swapped: the source is whole); a ``-future``
whose source is gone (renamed ``-delete``: the future was fsynced whole before that) is
renamed into place, completing the move. Either way the partition is in exactly one directory
and holds every offset the source held when it was last flushed.

Progress (DescribeLogDirs' future replica): bytes copied, and the offset lag, the log end less
the log end when the last copy pass began (the log end less its start before the first).
Thread-safety: a move runs in its own thread; :meth:`LogMove.cancel` stops it between chunks
(the future is removed).
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable

from logstore import _crashpoints as crashpoints
from logstore.errors import LogstoreError
from logstore.storage.checkpoints import fsync_directory
from logstore.storage.log import Log

_log = logging.getLogger("logstore.store")

CHUNK = 1 << 20
FUTURE_SUFFIX = "-future"


def future_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_SUFFIX}"


def source_of_future(name: str) -> str | None:
    """``<topic>-<p>`` of a ``<topic>-<p>.<nonce>-future`` directory name, else None."""
    if not name.endswith(FUTURE_SUFFIX):
        return None
    stem = name[: -len(FUTURE_SUFFIX)]
    source, dot, nonce = stem.rpartition(".")
    return source if dot and len(nonce) == 32 else None


def complete_or_discard(log_dirs: list[str], is_partition: Callable[[str], bool]) -> None:
    """The crash policy on open (see the module doc): each ``-future`` left by a move is discarded
    while its source lives, else renamed into place. ``is_partition(name)``: a live log's name."""
    live = {name for d in log_dirs for name in os.listdir(d) if is_partition(name)}
    for log_dir in log_dirs:
        for name in sorted(os.listdir(log_dir)):
            source = source_of_future(name)
            if source is None:
                continue
            path = os.path.join(log_dir, name)
            if source in live:
                _log.info("discarding %s: the move of %s did not finish; the source is whole", path, source)
                shutil.rmtree(path, ignore_errors=True)
            else:
                _log.info("completing the move of %s to %s", source, log_dir)
                os.replace(path, os.path.join(log_dir, source))
                fsync_directory(log_dir)
                live.add(source)


class LogMove:
    """One partition's move to ``target`` (a log directory), in its own thread (see the module doc)."""

    def __init__(
        self, log: Log, topic: str, partition: int, target: str, rate: int, done: Callable[[LogMove], None]
    ) -> None:
        """``rate``: bytes per second to copy at most (<= 0: unbounded); ``done(move)``: called at
        the end, moved or not (:attr:`error` says)."""
        self.log = log
        self.target = target
        self.name = f"{topic}-{partition}"
        self.future = os.path.join(target, future_name(topic, partition))
        self.copied_bytes = 0
        self.error: BaseException | None = None
        self._copied_end = log.log_start_offset
        self._rate = rate
        self._done = done
        self._cancel = threading.Event()
        self._copied: dict[str, tuple[int, int]] = {}  # name -> (inode, bytes copied)
        self._truncations = log.truncations  # a truncation since: every file is copied again
        self._started = time.monotonic()
        self.thread = threading.Thread(target=self._run, name=f"logstore-move-{self.name}", daemon=True)

    @property
    def offset_lag(self) -> int:
        return max(0, self.log.log_end_offset - self._copied_end)

    def start(self) -> LogMove:
        self.thread.start()
        return self

    def cancel(self, timeout: float = 0.0) -> None:
        """Stop the copy at its next chunk; wait up to ``timeout`` seconds for the thread."""
        self._cancel.set()
        if timeout > 0 and self.thread.is_alive() and threading.current_thread() is not self.thread:
            self.thread.join(timeout)

    def _run(self) -> None:
        try:
            os.makedirs(self.future)
            end = self.log.log_end_offset
            self._copy_all(self.log.path, throttled=True)
            self._copied_end = end
            crashpoints.crash_point("log_move.copied")
            source = self.log.path
            self.log.relocate(os.path.join(self.target, self.name), lambda: self._swap(source))
            self._copied_end = self.log.log_end_offset
            _log.info("moved %s to %s (%d bytes)", self.name, self.target, self.copied_bytes)
        except BaseException as e:  # a failed move leaves the source as it was
            self.error = e
            shutil.rmtree(self.future, ignore_errors=True)
            if not isinstance(e, _Cancelled):
                _log.warning("moving %s to %s failed: %s", self.name, self.target, e)
        finally:
            self._done(self)

    def _swap(self, source: str) -> None:
        """Under the log's lock, its segments closed: catch up, fsync, rename (see the module doc)."""
        if self.log.truncations != self._truncations:  # a prefix copied may have changed since
            self._copied.clear()
        self._copy_all(source, throttled=False)
        names = set(os.listdir(source))
        for name in set(os.listdir(self.future)) - names:
            os.unlink(os.path.join(self.future, name))
        for name in names:
            with open(os.path.join(self.future, name), "rb") as f:
                os.fsync(f.fileno())
        fsync_directory(self.future)
        crashpoints.crash_point("log_move.future_synced")
        doomed = f"{source}.{uuid.uuid4().hex}-delete"
        os.replace(source, doomed)
        fsync_directory(os.path.dirname(source))
        crashpoints.crash_point("log_move.source_renamed")
        try:
            os.replace(self.future, os.path.join(self.target, self.name))
        except OSError:
            os.replace(doomed, source)  # back where it was: the log reopens there
            raise
        try:
            fsync_directory(self.target)
        except OSError as e:  # the log is there now; the target's next I/O error takes it offline
            _log.warning("fsync of %s after moving %s into it failed: %s", self.target, self.name, e)
        crashpoints.crash_point("log_move.future_renamed")
        self._doomed = doomed

    def cleanup(self) -> None:
        """Remove the source's ``-delete`` copy once the log serves from the target."""
        doomed = getattr(self, "_doomed", None)
        if doomed is not None:
            shutil.rmtree(doomed, ignore_errors=True)

    def _copy_all(self, source: str, throttled: bool) -> None:
        for name in sorted(os.listdir(source)):
            path = os.path.join(source, name)
            try:
                stat = os.stat(path)
            except FileNotFoundError:  # retention or compaction removed it meanwhile
                continue
            if not os.path.isfile(path):
                continue
            inode, done = self._copied.get(name, (-1, 0))
            if inode != stat.st_ino or stat.st_size < done:
                done = 0  # a new file under this name (compaction's swap) or a truncated one
            try:
                copied = self._copy_file(path, os.path.join(self.future, name), done, throttled)
            except FileNotFoundError:  # removed meanwhile (retention); the catch-up drops it
                self._copied.pop(name, None)
                continue
            self._copied[name] = (stat.st_ino, copied)

    def _copy_file(self, src: str, dst: str, start: int, throttled: bool) -> int:
        """Copy ``src`` from ``start`` to its current end into ``dst`` (truncated to ``start`` first);
        the bytes now copied."""
        with open(src, "rb") as fin, open(dst, "r+b" if start and os.path.exists(dst) else "wb") as fout:
            fout.truncate(start)
            fin.seek(start)
            fout.seek(start)
            position = start
            for _ in range(1 << 24):  # bounded: 16 TiB in 1 MiB chunks
                if self._cancel.is_set():
                    raise _Cancelled(f"the move of {self.name} was cancelled")
                chunk = fin.read(CHUNK)
                if not chunk:
                    break
                fout.write(chunk)
                position += len(chunk)
                self.copied_bytes += len(chunk)
                if throttled and self._rate > 0:
                    ahead = self.copied_bytes / self._rate - (time.monotonic() - self._started)
                    if ahead > 0:
                        self._cancel.wait(min(ahead, 1.0))
            return position


class _Cancelled(LogstoreError):
    pass
