"""The crash suite's child: append the deterministic batch sequence until killed.

Standalone (to rerun one trial by hand)::

    LOGSTORE_CRASH_POINT=log.roll.after_seal@2 python tests/kit/crash_child.py '<json spec>'

with the spec of ``crashkit.child_spec``. The child writes ``ready`` once the
log is open, then ``b first last`` after each append returns, each line with
one write(2) to stdout (a regular file), so a SIGKILL loses no
acknowledgement.

``--server``: a fork server (the suite's way to start children cheaply). It
imports logstore's third-party dependencies, not logstore, then forks one
child per ``spawn`` request read from stdin; the child sets its environment
(``LOGSTORE_CRASH_POINT``) and only then imports logstore, exactly as a fresh
process would. The server reports ``exit <pid> <returncode>`` as it reaps
each child (one thread: SIGCHLD wakes a select), kills only children it has
not reaped, and kills and reaps every child left when its stdin closes.

With ``sync_log`` in the spec, ``os.fsync`` and ``os.fdatasync`` are wrapped
before logstore is imported: after each real sync one JSON line goes to the
side log: for a file its path, inode and size; for a directory its names with
their inodes and the content of its small non-segment files (checkpoints,
markers), which the parent needs to bring back an old version of a renamed
file after an emulated power loss.
"""

from __future__ import annotations

import json
import os
import select
import signal
import stat
import sys
import threading
import traceback
from typing import Any

SMALL = 1 << 16
SEGMENT_SUFFIXES = (".log", ".index", ".timeindex")


def install_sync_recorder(sync_log: str) -> None:
    """Wrap os.fsync and os.fdatasync to record each completed sync in ``sync_log``.

    A kill -9 can cut a long record short (a write to a regular file stops at a
    fatal signal), so each child first ends any torn line a killed predecessor
    left; the parent drops torn lines (their sync never returned to logstore,
    which is the same as a power cut just before it). A lock keeps lines from
    two threads (the flusher and the appender) whole.
    """
    side = os.open(sync_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(side, b"\n")
    lock = threading.Lock()
    real_fsync, real_fdatasync = os.fsync, os.fdatasync

    def record(fd: Any) -> None:
        fd = fd if isinstance(fd, int) else fd.fileno()
        st = os.fstat(fd)
        path = os.readlink(f"/proc/self/fd/{fd}")
        event: dict[str, Any]
        if stat.S_ISDIR(st.st_mode):
            names, data = {}, {}
            for entry in os.scandir(path):
                names[entry.name] = entry.inode()
                if entry.is_file() and not entry.name.endswith(SEGMENT_SUFFIXES):
                    with open(entry.path, "rb") as f:
                        content = f.read(SMALL + 1)
                    if len(content) <= SMALL:
                        data[entry.name] = content.hex()
            event = {"dir": path, "ino": st.st_ino, "names": names, "data": data}
        else:
            event = {"file": path, "ino": st.st_ino, "size": st.st_size}
        line = memoryview((json.dumps(event) + "\n").encode())
        with lock:
            while line:
                line = line[os.write(side, line) :]

    def fsync(fd: Any) -> None:
        real_fsync(fd)
        record(fd)

    def fdatasync(fd: Any) -> None:
        real_fdatasync(fd)
        record(fd)

    os.fsync = fsync
    os.fdatasync = fdatasync


def run(spec: dict[str, Any]) -> None:
    """Open the log, append from ``start_batch``, acknowledge each append; never returns."""
    if spec["sync_log"]:
        install_sync_recorder(spec["sync_log"])  # before logstore holds any reference
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    import crashkit  # after the recorder: it imports logstore

    from logstore import Log, Store, _crashpoints

    seq = crashkit.Sequence(spec["seed"])
    start = spec["start_batch"]
    store = None
    if spec["store"]:
        store = Store(spec["path"], scheduler=True, scheduler_interval_ms=5, checkpoint_interval_ms=20)
        if crashkit.STORE_TOPIC not in store.topics():
            store.create_topic(crashkit.STORE_TOPIC, 1, spec["config"])
        log = store.log(crashkit.STORE_TOPIC, 0)
    else:
        log = Log.open(spec["path"], spec["config"])
    if log.log_end_offset != seq.first_offset(start):
        sys.stderr.write(
            f"log end {log.log_end_offset} != offset {seq.first_offset(start)} of batch {start}\n"
        )
        sys.stderr.flush()
        os._exit(3)
    os.write(1, b"ready\n")
    for number in range(start, start + spec["max_batches"]):
        if spec["arm_at_batch"] == number:
            # Fire the armed point (segment.mid_write) at exactly this batch,
            # whatever count the environment gave.
            _crashpoints._remaining = 1
        batch = seq.spec(number)
        info = log.append(batch.records, timestamp=batch.timestamp)
        os.write(1, f"{number} {info.first_offset} {info.last_offset}\n".encode())
    if spec["close_at_end"]:
        if store is not None:
            store.close()
        else:
            log.close()
    os._exit(0)


# -- the fork server -------------------------------------------------------------


def _preload() -> None:
    """Import what logstore imports, except logstore (its crash points read the environment)."""
    import importlib

    for name in ("numpy", "sortedcontainers", "cffi", "_cffi_backend", "cramjam", "mmap", "uuid", "fcntl"):
        try:
            importlib.import_module(name)
        except ImportError:
            continue


def _spawn(request: dict[str, Any], wakeup: tuple[int, int]) -> int:
    pid = os.fork()
    if pid:
        return pid
    try:  # the child: never returns
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in wakeup:
            os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        for fd in (null, out, err):
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.pop("LOGSTORE_CRASH_POINT", None)
        os.environ.update(request["env"])
        run(request["spec"])
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    os._exit(2)


def serve() -> None:
    _preload()
    wakeup = os.pipe()
    for fd in wakeup:
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wakeup[1])
    signal.signal(signal.SIGCHLD, lambda *_: None)
    live: set[int] = set()
    pending = b""

    def reply(line: str) -> None:
        os.write(1, (line + "\n").encode())

    def reap() -> None:
        for _ in range(len(live)):
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                return
            live.discard(pid)
            reply(f"exit {pid} {os.waitstatus_to_exitcode(status)}")

    try:
        while True:
            ready, _, _ = select.select([0, wakeup[0]], [], [], 0.5)
            if wakeup[0] in ready:
                while True:
                    try:
                        if not os.read(wakeup[0], 4096):
                            break
                    except BlockingIOError:
                        break
            if live:
                reap()
            if 0 not in ready:
                continue
            data = os.read(0, 1 << 20)
            if not data:
                return
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                request = json.loads(line)
                if request["op"] == "spawn":
                    pid = _spawn(request, wakeup)
                    live.add(pid)
                    reply(f"spawned {pid}")
                elif request["op"] == "kill":
                    pid = request["pid"]
                    if pid in live:  # not reaped, so the pid is still our child's
                        os.kill(pid, signal.SIGKILL)
    finally:
        for pid in live:
            os.kill(pid, signal.SIGKILL)
        for pid in live:
            os.waitpid(pid, 0)


if __name__ == "__main__":
    if sys.argv[1:] == ["--server"]:
        serve()
    else:
        run(json.loads(sys.argv[1]))
