"""Moving a partition's log to another log directory while appends go on (storage/log_mover.py)."""

from __future__ import annotations

import os
import pathlib
import threading
import time

import pytest

from logstore.errors import LogstoreError
from logstore.storage.config import LogConfig
from logstore.storage.log_manager import LogManager
from logstore.storage.log_mover import LogMove, source_of_future

pytestmark = pytest.mark.unit

CONFIG = LogConfig.from_dict({"segment.bytes": 64 << 10})


def _wait_moved(manager: LogManager, key: tuple[str, int], target: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (key in manager.future_logs() or manager.dir_of(*key) != target):
        time.sleep(0.01)
    assert manager.dir_of(*key) == target and key not in manager.future_logs()


def test_names_of_future_dirs() -> None:
    assert source_of_future("t-0." + "a" * 32 + "-future") == "t-0"
    assert source_of_future("t-0-future") is None and source_of_future("t-0." + "a" * 32 + "-delete") is None


def test_a_log_moves_while_appends_go_on(tmp_path: pathlib.Path) -> None:
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    manager = LogManager(dirs)
    manager.load({}, start_scheduler=False)
    manager.create_logs({("t", 0): CONFIG})
    source = manager.dir_of("t", 0)
    target = next(d for d in dirs if d != source)
    log = manager.find_log("t", 0)
    assert log is not None
    for i in range(2000):
        log.append([b"before-%05d" % i + b"." * 200])
    manager.move_rate = 300 << 10  # slow enough to watch it copy
    appended: list[int] = []
    stop = threading.Event()

    def appender() -> None:
        for i in range(100_000):  # bounded; stops when the move is done
            if stop.is_set():
                return
            appended.append(log.append([b"during-%05d" % i]).last_offset)

    writer = threading.Thread(target=appender)
    move = manager.start_move("t", 0, target)
    assert move is not None
    writer.start()
    seen = {}
    for _ in range(1000):  # DescribeLogDirs' future replica while it copies
        seen = manager.future_logs()
        if seen and seen[("t", 0)][1] > 0:
            break
        time.sleep(0.005)
    assert seen[("t", 0)][0] == target and seen[("t", 0)][2] > 0  # its dir and offset lag
    _wait_moved(manager, ("t", 0), target)
    stop.set()
    writer.join(30)
    assert manager.find_log("t", 0) is log and log.path == os.path.join(target, "t-0")
    assert os.listdir(source) and "t-0" not in os.listdir(source)
    assert not [n for d in dirs for n in os.listdir(d) if n.endswith(("-future", "-delete"))]
    log.append([b"after"])
    end = log.log_end_offset
    assert end == 2000 + len(appended) + 1 and appended == list(range(2000, 2000 + len(appended)))
    manager.close()
    again = LogManager(dirs)
    again.load({("t", 0): CONFIG}, start_scheduler=False)
    assert again.dir_of("t", 0) == target
    moved = again.find_log("t", 0)
    assert moved is not None and moved.log_end_offset == end
    values: list[bytes | None] = []
    for _ in range(end):  # one segment per read
        if len(values) >= end:
            break
        values += [r.value for r in moved.read(len(values), 1 << 30).records]
    assert values[0] == b"before-00000" + b"." * 200 and values[-1] == b"after" and len(values) == end
    again.close()


def test_moves_that_cannot_be(tmp_path: pathlib.Path) -> None:
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    manager = LogManager(dirs)
    manager.load({}, start_scheduler=False)
    manager.create_logs({("t", 0): CONFIG})
    here = manager.dir_of("t", 0)
    assert here is not None
    other = next(d for d in dirs if d != here)
    assert manager.start_move("t", 0, here) is None  # there already
    with pytest.raises(LogstoreError, match="not one of the log directories"):
        manager.start_move("t", 0, str(tmp_path / "c"))
    with pytest.raises(LogstoreError, match="no log of t-1"):
        manager.start_move("t", 1, other)
    manager.dir_failures.fail(other, OSError(5, "Input/output error"))
    with pytest.raises(LogstoreError, match="offline"):
        manager.start_move("t", 0, other)
    manager.close()


def test_a_truncation_between_the_copy_and_the_swap_copies_again(tmp_path: pathlib.Path) -> None:
    """A follower's truncation rewrites the end of a segment under the same inode and size; the
    catch-up must not trust the prefix it copied before it (driven step by step)."""
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    manager = LogManager(dirs)
    manager.load({}, start_scheduler=False)
    manager.create_logs({("t", 0): CONFIG})
    source = manager.dir_of("t", 0)
    assert source is not None
    target = next(d for d in dirs if d != source)
    log = manager.find_log("t", 0)
    assert log is not None
    for i in range(100):
        log.append([b"old-%03d" % i])
    move = LogMove(log, "t", 0, target, 0, lambda m: None)
    os.makedirs(move.future)
    move._copy_all(log.path, throttled=True)  # step 1
    log.truncate_to(50)
    for i in range(50, 100):  # the same sizes, other bytes
        log.append([b"new-%03d" % i])
    log.relocate(os.path.join(target, "t-0"), lambda: move._swap(os.path.join(source, "t-0")))  # steps 2, 3
    move.cleanup()
    values = [r.value for r in log.read(0, 1 << 20).records]
    assert values == [b"old-%03d" % i for i in range(50)] + [b"new-%03d" % i for i in range(50, 100)]
    manager.close()
