"""Which log directories have failed: :class:`LogDirFailureChannel` (Kafka's ``LogDirFailureChannel``).

A log directory fails when an I/O operation on one of its logs raises an
``OSError`` (EIO from a write, an fsync or a read; see
:meth:`~logstore.storage.log_manager.LogManager.report_io_error` for which
errors count). From then on the directory is *offline* until the process
restarts: its logs are closed with no further I/O, its partitions answer
KAFKA_STORAGE_ERROR, no new partition is placed in it, and the broker goes on
serving its other directories. Why not retry: after a failed fsync the page
cache may have dropped the dirty pages (PostgreSQL's "fsyncgate"), so nothing
written since the last good fsync can be trusted to be on disk; the next
start recovers the directory's logs from their segments, as after a crash.

State: the failed directories (absolute paths) and the error of each, in
memory only (a restart tries every directory again, as Kafka does).
Invariants: a directory fails at most once; each listener is called exactly
once per failed directory, with the partitions that were in it.
Thread-safety: every method may be called from any thread; listeners run in
the thread whose I/O failed, outside the channel's lock (so a listener may
call back into the channel); the listeners of two directories failing at once
may run concurrently, each directory's in the order they were added.

>>> channel = LogDirFailureChannel()
>>> seen = []
>>> channel.add_listener(lambda d, parts: seen.append((d, parts)))
>>> channel.fail("/data/b", OSError(5, "Input/output error"))
>>> channel.fail("/data/b", OSError(5, "Input/output error"))   # idempotent
>>> channel.offline(), channel.is_offline("/data/b"), channel.is_offline("/data/a"), seen
({'/data/b'}, True, False, [('/data/b', [])])
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable
from typing import Concatenate, ParamSpec, Protocol, TypeVar

_log = logging.getLogger("logstore.store")

Listener = Callable[[str, list[tuple[str, int]]], None]


class LogDirFailureChannel:
    """The log directories that failed, and who is told (see the module doc)."""

    def __init__(self, partitions_of: Callable[[str], list[tuple[str, int]]] | None = None) -> None:
        """``partitions_of(log_dir)``: the partitions in a directory, given to the listeners (the
        LogManager's; none: an empty list)."""
        self._partitions_of = partitions_of or (lambda log_dir: [])
        self._lock = threading.Lock()
        self._errors: dict[str, OSError] = {}
        self._listeners: list[Listener] = []

    def add_listener(self, fn: Listener) -> None:
        """Call ``fn(log_dir, partitions)`` once for each directory that fails from now on, in the
        thread whose I/O failed; ``partitions``: the (topic, partition) that were in it."""
        with self._lock:
            self._listeners.append(fn)

    def fail(self, log_dir: str, error: OSError) -> None:
        """Mark ``log_dir`` offline because of ``error``; the first call logs it and tells the
        listeners, later ones do nothing."""
        log_dir = os.path.abspath(log_dir)
        with self._lock:
            if log_dir in self._errors:
                return
            self._errors[log_dir] = error
            listeners = list(self._listeners)
        _log.error(
            "log directory %s failed (%s): it is offline until the broker restarts; its partitions "
            "answer KAFKA_STORAGE_ERROR and the other log directories keep serving", log_dir, error,
        )  # fmt: skip
        partitions = self._partitions_of(log_dir)
        for listener in listeners:
            try:
                listener(log_dir, list(partitions))
            except Exception:  # one listener's bug must not keep the others from knowing
                _log.exception("a log directory failure listener failed on %s", log_dir)

    def offline(self) -> set[str]:
        """The failed directories (absolute paths)."""
        with self._lock:
            return set(self._errors)

    def is_offline(self, log_dir: str) -> bool:
        return os.path.abspath(log_dir) in self._errors

    def error(self, log_dir: str) -> OSError | None:
        """Why ``log_dir`` failed, or None if it has not."""
        return self._errors.get(os.path.abspath(log_dir))


class SyncFailedError(OSError):
    """An fsync (or fdatasync) of a log's files failed: what was written since the last good one
    may be lost, whatever the errno (ENOSPC and EDQUOT included): its directory fails."""


class ReportsIOErrors(Protocol):
    on_io_error: Callable[[OSError], None] | None


_S = TypeVar("_S", bound=ReportsIOErrors)
_P = ParamSpec("_P")
_R = TypeVar("_R")


def reports_io_errors(method: Callable[Concatenate[_S, _P], _R]) -> Callable[Concatenate[_S, _P], _R]:
    """A method's OSError goes to its object's ``on_io_error`` (when set), then is raised."""

    @functools.wraps(method)
    def wrapper(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(self, *args, **kwargs)
        except OSError as e:
            hook = self.on_io_error
            if hook is not None:
                hook(e)
            raise

    return wrapper
