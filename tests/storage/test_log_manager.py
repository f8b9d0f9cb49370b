"""The LogManager on its own: logs by topic-partition, whoever says which exist (a cluster broker)."""

from __future__ import annotations

import errno
import os
import pathlib

import pytest

from logstore.errors import LogstoreError
from logstore.storage.config import LogConfig
from logstore.storage.log import CLEAN_SHUTDOWN_FILE, SyncFailedError
from logstore.storage.log_manager import LogManager, parse_log_dir

pytestmark = pytest.mark.unit

CONFIG = LogConfig.from_dict({})


def test_log_dir_names() -> None:
    assert parse_log_dir("orders-0") == ("orders", 0)
    assert parse_log_dir("my-topic-12") == ("my-topic", 12)
    assert parse_log_dir("orders-0.abc-delete") is None
    assert parse_log_dir("topic-configs") is None and parse_log_dir("-3") is None


def test_any_partitions_not_only_dense_ones(tmp_path: pathlib.Path) -> None:
    manager = LogManager(str(tmp_path))
    manager.load({})
    manager.create_logs({("t", 2): CONFIG, ("t", 5): CONFIG, ("u", 0): CONFIG})
    manager.find_log("t", 5).append([b"x"])  # type: ignore[union-attr]
    assert manager.find_log("t", 0) is None
    with pytest.raises(LogstoreError, match="exists already"):
        manager.create_logs({("t", 2): CONFIG})
    assert manager.log_dirs_on_disk() == [("t", 2), ("t", 5), ("u", 0)]
    manager.delete_logs([("u", 0), ("nope", 1)])
    assert sorted(manager.logs()) == [("t", 2), ("t", 5)] and manager.log_dirs_on_disk() == [
        ("t", 2),
        ("t", 5),
    ]
    manager.close()
    assert os.path.exists(tmp_path / CLEAN_SHUTDOWN_FILE)
    # Reopened with what a cluster would say exists: the data is there, the marker is gone.
    again = LogManager(str(tmp_path))
    again.load({key: CONFIG for key in again.log_dirs_on_disk()}, start_scheduler=False)
    assert again.find_log("t", 5).log_end_offset == 1  # type: ignore[union-attr]
    assert not os.path.exists(tmp_path / CLEAN_SHUTDOWN_FILE)
    again.close()


def test_one_manager_per_directory_and_abandon_frees_it(tmp_path: pathlib.Path) -> None:
    first = LogManager(str(tmp_path))
    with pytest.raises(LogstoreError, match="in use by another process"):
        LogManager(str(tmp_path))
    first.abandon()  # a failed open: no clean-shutdown marker, the lock released
    assert not os.path.exists(tmp_path / CLEAN_SHUTDOWN_FILE)
    second = LogManager(str(tmp_path))
    second.load({})
    second.close()
    with pytest.raises(LogstoreError, match="closed"):
        second.find_log("t", 0)


# -- several log directories (log.dirs, Kafka's JBOD) ------------------------------------------


def _dirs(tmp_path: pathlib.Path, n: int) -> list[str]:
    return [str(tmp_path / f"d{i}") for i in range(n)]


def test_partitions_spread_over_the_log_dirs_each_with_its_own_files(tmp_path: pathlib.Path) -> None:
    dirs = _dirs(tmp_path, 3)
    manager = LogManager(dirs)
    manager.load({})
    keys = [("t", p) for p in range(6)]
    manager.create_logs(dict.fromkeys(keys, CONFIG))
    placed = {key: manager.dir_of(*key) for key in keys}
    assert sorted(list(placed.values()).count(d) for d in dirs) == [2, 2, 2]  # the fewest partitions first
    for key, log_dir in placed.items():
        assert os.path.isdir(os.path.join(log_dir, f"{key[0]}-{key[1]}"))
        manager.find_log(*key).append([b"x"] * (key[1] + 1))  # type: ignore[union-attr]
    manager.close()
    for log_dir in dirs:
        names = set(os.listdir(log_dir))
        assert {".lock", "meta.properties", CLEAN_SHUTDOWN_FILE, "recovery-point-offset-checkpoint"} <= names
        with open(os.path.join(log_dir, "recovery-point-offset-checkpoint")) as f:
            listed = {line.split()[0] + "-" + line.split()[1] for line in f.read().splitlines()[2:]}
        assert listed == {f"{t}-{p}" for (t, p), d in placed.items() if d == log_dir}  # its own partitions only
    again = LogManager(dirs)
    again.load(dict.fromkeys(keys, CONFIG), start_scheduler=False)  # found wherever they are
    assert {key: again.dir_of(*key) for key in keys} == placed
    assert [again.find_log(*key).log_end_offset for key in keys] == [1, 2, 3, 4, 5, 6]  # type: ignore[union-attr]
    assert all(not os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE)) for d in dirs)
    again.close()


def test_each_log_dir_is_locked(tmp_path: pathlib.Path) -> None:
    dirs = _dirs(tmp_path, 2)
    first = LogManager(dirs)
    with pytest.raises(LogstoreError, match=f"{dirs[1]} is in use"):
        LogManager([str(tmp_path / "other"), dirs[1]])
    first.abandon()
    with pytest.raises(LogstoreError, match="distinct"):
        LogManager([dirs[0], dirs[0]])


def test_the_same_partition_in_two_log_dirs_refuses_the_open_naming_both(tmp_path: pathlib.Path) -> None:
    dirs = _dirs(tmp_path, 2)
    for log_dir in dirs:
        os.makedirs(os.path.join(log_dir, "t-0"))
    manager = LogManager(dirs)
    with pytest.raises(LogstoreError, match=r"t-0 is in two log directories: .*d0/t-0 and .*d1/t-0"):
        manager.load({("t", 0): CONFIG}, start_scheduler=False)
    manager.abandon()


def test_a_failed_dir_goes_offline_alone(tmp_path: pathlib.Path) -> None:
    dirs = _dirs(tmp_path, 2)
    manager = LogManager(dirs)
    manager.load({}, start_scheduler=False)
    manager.create_logs({("t", 0): CONFIG, ("t", 1): CONFIG})
    doomed = manager.dir_of("t", 1)
    survivor = manager.dir_of("t", 0)
    assert doomed is not None and survivor is not None and doomed != survivor
    log = manager.find_log("t", 1)
    assert log is not None
    told: list[tuple[str, list[tuple[str, int]]]] = []
    manager.dir_failures.add_listener(lambda d, parts: told.append((d, parts)))
    # A write refused for space is not a failure (the reserve's path); an fsync's ENOSPC is.
    manager.report_io_error(doomed, OSError(errno.ENOSPC, "No space left on device"))
    assert not manager.dir_failures.offline() and not told
    manager.report_io_error(doomed, SyncFailedError(errno.ENOSPC, "fsync: No space left on device"))
    manager.report_io_error(doomed, OSError(errno.EIO, "again"))  # once only
    assert told == [(doomed, [("t", 1)])] and manager.dir_failures.offline() == {doomed}
    assert log.closed and manager.find_log("t", 1) is None
    assert manager.offline_dir_of("t", 1) == doomed and manager.offline_dir_of("t", 0) is None
    assert manager.online_dirs() == [survivor]
    manager.create_logs({("u", 0): CONFIG, ("u", 1): CONFIG})  # never placed in the failed dir
    assert manager.dir_of("u", 0) == manager.dir_of("u", 1) == survivor
    with pytest.raises(LogstoreError, match="failed directory"):
        manager.create_logs({("t", 1): CONFIG})
    manager.find_log("t", 0).append([b"still"])  # type: ignore[union-attr]
    manager.checkpoint()
    manager.close()  # no marker in the failed dir: its next open recovers
    assert os.path.exists(os.path.join(survivor, CLEAN_SHUTDOWN_FILE))
    assert not os.path.exists(os.path.join(doomed, CLEAN_SHUTDOWN_FILE))
    again = LogManager(dirs)  # a restart tries it again
    again.load({("t", 0): CONFIG, ("t", 1): CONFIG}, start_scheduler=False)
    assert not again.dir_failures.offline() and again.dir_of("t", 1) == doomed
    again.close()


def test_a_dir_that_cannot_open_starts_offline_and_its_partitions_are_not_made_elsewhere(
    tmp_path: pathlib.Path,
) -> None:
    good, bad = _dirs(tmp_path, 2)
    pathlib.Path(bad).write_bytes(b"not a directory")  # makedirs fails: an OSError
    manager = LogManager([good, bad])
    assert manager.dir_failures.offline() == {bad}
    manager.load({("t", 0): CONFIG}, start_scheduler=False)
    assert manager.find_log("t", 0) is None and manager.offline_dir_of("t", 0) == bad
    assert not os.path.exists(os.path.join(good, "t-0"))
    manager.close()
    with pytest.raises(OSError):  # the first log dir holds the registry: it must open
        LogManager([bad, good])
    only_bad = LogManager([good, bad])
    only_bad.load({}, start_scheduler=False)
    only_bad.dir_failures.fail(good, OSError(errno.EIO, "gone"))
    with pytest.raises(LogstoreError, match="every log directory is offline"):
        only_bad.create_logs({("x", 0): CONFIG})
    only_bad.close()


def test_a_read_error_on_a_file_of_a_log_dir_fails_that_dir(tmp_path: pathlib.Path) -> None:
    """A fetch's sendfile or pread that fails with EIO names the file by its descriptor only."""
    dirs = _dirs(tmp_path, 2)
    manager = LogManager(dirs)
    manager.load({}, start_scheduler=False)
    manager.create_logs({("t", 0): CONFIG, ("t", 1): CONFIG})
    log_dir = manager.dir_of("t", 1)
    assert log_dir is not None
    outside = os.open(str(tmp_path / "elsewhere"), os.O_RDWR | os.O_CREAT)
    inside = os.open(os.path.join(log_dir, "t-1", "00000000000000000000.log"), os.O_RDONLY)
    try:
        manager.report_file_error(outside, OSError(errno.EIO, "Input/output error"))
        assert not manager.dir_failures.offline()
        manager.report_file_error(inside, OSError(errno.EIO, "Input/output error"))
        assert manager.dir_failures.offline() == {log_dir} and manager.offline_dir_of("t", 1) == log_dir
    finally:
        os.close(outside)
        os.close(inside)
    manager.close()


def test_a_failure_never_waits_for_the_managers_lock(tmp_path: pathlib.Path) -> None:
    """The thread whose I/O failed may hold a log's lock that a holder of the manager's lock waits
    for (delete_logs closing that log): the failure takes the partitions offline at once and
    finishes its bookkeeping once the lock is free."""
    import threading
    import time

    dirs = _dirs(tmp_path, 2)
    manager = LogManager(dirs)
    manager.load({}, start_scheduler=False)
    manager.create_logs({("t", 0): CONFIG, ("t", 1): CONFIG})
    doomed = manager.dir_of("t", 1)
    log = manager.find_log("t", 1)
    assert doomed is not None and log is not None
    with manager._lock:  # another thread's structural change in progress
        failing = threading.Thread(target=manager.dir_failures.fail, args=(doomed, OSError(errno.EIO, "EIO")))
        failing.start()
        failing.join(5)
        assert not failing.is_alive()  # it did not wait for the lock
        assert manager.find_log("t", 1) is None and manager.offline_dir_of("t", 1) == doomed
        assert manager.dir_of("t", 1) is None and ("t", 1) not in manager.logs()
    for _ in range(500):  # the bookkeeping finishes once the lock is free (bounded: 5 s)
        if log.closed:
            break
        time.sleep(0.01)
    assert log.closed and manager.offline_partitions() == {("t", 1): doomed}
    manager.close()


def test_an_io_error_of_the_cleaner_fails_its_dir(tmp_path: pathlib.Path) -> None:
    dirs = _dirs(tmp_path, 2)
    manager = LogManager(dirs)
    manager.load({}, start_scheduler=False)
    compact = LogConfig.from_dict({"cleanup.policy": "compact", "segment.ms": 2**62})
    manager.create_logs({("kv", 0): compact, ("other", 0): CONFIG})
    log = manager.find_log("kv", 0)
    assert log is not None
    for round_ in range(3):
        log.append([(b"k%d" % (i % 5), b"v%d-%d" % (round_, i)) for i in range(50)])
        log.roll()
    # Where the cleaner writes its output, a directory: its unlink and open fail (EISDIR), a real OSError.
    os.mkdir(os.path.join(log.path, "00000000000000000000.log.cleaned"))
    assert manager.run_cleaner() == {}
    doomed = manager.offline_dir_of("kv", 0)
    assert doomed is not None and manager.dir_failures.offline() == {doomed}
    assert manager.find_log("other", 0) is not None or manager.dir_of("other", 0) == doomed
    manager.close()
