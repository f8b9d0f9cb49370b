"""libfiu around a broker process: real I/O errors at chosen system calls.

``fiu-run -x`` (Debian's ``fiu-utils``) starts a program with libfiu's POSIX
wrappers preloaded and its remote control open; ``fiu-ctrl`` then turns
failure points on and off in the running process. A failure point such as
``posix/io/rw/pwrite`` makes the wrapped call fail without calling the
kernel, with ``errno`` = the point's ``failinfo`` (EIO, ENOSPC, ...). The
points are process-wide: every ``pwrite`` of the broker fails, whatever file.

Not ``posix/io/rw/write``: CPython's ``os.write`` (checkpoints) never reaches
libfiu's wrapper here (checked: the point never fires), so checkpoints meet
their faults through fsync. Not ``posix/mm/mmap``: CPython's allocator takes its arenas with mmap, so
failing it is memory exhaustion (MemoryError anywhere), not a storage fault;
the indexes are written with pwrite and mapped read-only, so no storage write
goes through a mapping.

Use: ``BrokerProcess(..., wrapper=WRAPPER)``, then ``Fiu(broker.proc.pid)``.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass

FIFO_PREFIX = os.path.join(tempfile.gettempdir(), "fiu-ctrl")  # where fiu-run -x opens its control pipes
WRAPPER = ("fiu-run", "-x", "-f", FIFO_PREFIX)

# The points a storage engine meets, each with the errors it can give there.
POINTS: dict[str, tuple[int, ...]] = {
    "posix/io/rw/pwrite": (errno.EIO, errno.ENOSPC),  # segment and index appends
    "posix/io/sync/fsync": (errno.EIO,),  # checkpoints, directories, the cleaner
    "posix/io/sync/fdatasync": (errno.EIO,),  # segment and index flushes
    "posix/io/rw/pread": (errno.EIO,),  # a fetch's segment read where sendfile cannot serve (TLS)
    "posix/io/rw/ftruncate": (errno.EIO,),  # an index trimmed at a roll
}


def unavailable() -> str | None:
    """Why libfiu cannot be used here (a skip reason), or None."""
    missing = [tool for tool in ("fiu-run", "fiu-ctrl") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not found: install Debian's fiu-utils (`make test` does)"
    return None


@dataclass
class Fiu:
    """The failure points of one process started under ``fiu-run -x``."""

    pid: int

    def _control(self, command: str) -> None:
        """Run one remote-control command; fiu-ctrl exits 0 even when it skips an unknown pid or
        the command fails, so its output is checked too."""
        fifo = f"{FIFO_PREFIX}-{self.pid}.out"
        deadline = time.monotonic() + 10
        while not os.path.exists(fifo) and time.monotonic() < deadline:  # made as the process starts
            time.sleep(0.02)
        done = subprocess.run(["fiu-ctrl", "-f", FIFO_PREFIX, "-c", command, str(self.pid)],
                              capture_output=True, text=True, timeout=10, check=False)  # fmt: skip
        said = (done.stdout + done.stderr).strip()
        if done.returncode != 0 or "rror" in said:
            raise RuntimeError(f"fiu-ctrl -c {command!r} {self.pid} failed: {said or done.returncode}")

    def enable(self, point: str, error: int, probability: float = 1.0) -> None:
        """``point`` fails with ``error`` (an errno) on every call, or on a random share of them."""
        assert point in POINTS and 0.0 < probability <= 1.0, (point, probability)
        if probability >= 1.0:
            self._control(f"enable name={point},failinfo={error}")
        else:
            self._control(f"enable_random name={point},probability={probability},failinfo={error}")

    def disable(self, point: str) -> None:
        self._control(f"disable name={point}")
