"""Named crash points for the crash tests: kill -9 at an exact moment.

Armed by the environment of a child process, never in normal use:
``LOGSTORE_CRASH_POINT=name@n`` kills the process (SIGKILL, no cleanup) the
n-th time execution reaches ``crash_point("name")`` (n defaults to 1).
Unarmed, a crash point costs one global lookup.

Points: ``segment.mid_write`` (half a batch written), ``segment.after_log_write``
(log written, index not), ``log.roll.after_seal`` and ``log.roll.after_create``
(mid-roll), ``checkpoint.after_tmp`` and ``checkpoint.after_rename``
(mid-checkpoint), ``log.after_append`` (appended, not yet acknowledged),
``log_move.copied``, ``log_move.future_synced``, ``log_move.source_renamed`` and
``log_move.future_renamed`` (moving a log to another log directory: storage/log_mover.py).
"""

from __future__ import annotations

import os
import signal

_spec = os.environ.get("LOGSTORE_CRASH_POINT", "")
_name, _, _count = _spec.partition("@")
ARMED = bool(_name)
_remaining = int(_count or 1)


def reached(name: str) -> bool:
    """Count a pass through ``name``; True when the armed count is reached."""
    global _remaining
    if ARMED and name == _name:
        _remaining -= 1
        return _remaining == 0
    return False


def die() -> None:
    """SIGKILL this process: no cleanup, no flush, as a crash."""
    os.kill(os.getpid(), signal.SIGKILL)


def crash_point(name: str) -> None:
    """Die here if this point is armed and its count is reached."""
    if ARMED and reached(name):
        die()
