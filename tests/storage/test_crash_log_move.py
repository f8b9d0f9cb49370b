"""A crash (SIGKILL at a named crash point, logstore/_crashpoints.py) at each step of moving a log
to another log directory: the next open leaves the partition in exactly one directory with every
record it held, completing the move once the source was renamed and discarding it before."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import textwrap

import pytest

from logstore.storage.config import LogConfig
from logstore.storage.log_manager import LogManager

pytestmark = pytest.mark.crash

RECORDS = 3000

CHILD = textwrap.dedent(
    """
    import sys, time
    from logstore.storage.config import LogConfig
    from logstore.storage.log_manager import LogManager
    a, b, RECORDS = sys.argv[1], sys.argv[2], int(sys.argv[3])
    manager = LogManager([a, b])
    manager.load({}, start_scheduler=False)
    manager.create_logs({("t", 0): LogConfig.from_dict({"segment.bytes": 65536})})
    assert manager.dir_of("t", 0) == a
    log = manager.find_log("t", 0)
    for i in range(RECORDS):
        log.append([b"r-%05d" % i])
    log.flush()
    manager.start_move("t", 0, b)
    for _ in range(3000):
        if manager.dir_of("t", 0) == b and not manager.future_logs():
            break
        time.sleep(0.01)
    print("moved", flush=True)
    """
)

# crash point -> where the partition is after the next open
POINTS = {
    "log_move.copied": "a",
    "log_move.future_synced": "a",
    "log_move.source_renamed": "b",
    "log_move.future_renamed": "b",
}


@pytest.mark.parametrize("point", sorted(POINTS))
def test_a_crash_while_moving_leaves_the_partition_whole_in_one_dir(point: str, tmp_path: pathlib.Path) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    env = {**os.environ, "LOGSTORE_CRASH_POINT": point}
    done = subprocess.run([sys.executable, "-c", CHILD, a, b, str(RECORDS)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stdout + done.stderr
    leftovers = [n for d in (a, b) for n in os.listdir(d) if n.endswith(("-future", "-delete"))]
    assert leftovers  # the crash left the move's directories behind
    manager = LogManager([a, b])
    manager.load({("t", 0): LogConfig.from_dict({"segment.bytes": 65536})}, start_scheduler=False)
    expected = {"a": a, "b": b}[POINTS[point]]
    assert manager.dir_of("t", 0) == expected
    assert [d for d in (a, b) if "t-0" in os.listdir(d)] == [expected]
    assert not [n for d in (a, b) for n in os.listdir(d) if n.endswith(("-future", "-delete"))]
    log = manager.find_log("t", 0)
    assert log is not None and log.log_end_offset == RECORDS
    values: list[bytes | None] = []
    for _ in range(RECORDS):  # one segment per read
        if len(values) >= RECORDS:
            break
        values += [r.value for r in log.read(len(values), 1 << 30).records]
    assert values == [b"r-%05d" % i for i in range(RECORDS)]
    manager.close()


def test_without_a_crash_the_child_moves_it(tmp_path: pathlib.Path) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    done = subprocess.run([sys.executable, "-c", CHILD, a, b, str(RECORDS)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "moved" in done.stdout, done.stderr
