"""A log directory whose disk fails for real (tests/kit/faulty_disk.py: a loop-mounted ext4 over a
tmpfs that fills): its fsync fails, it goes offline alone, the Store keeps serving the other log
directory, closes cleanly, and a restart on the repaired disk finds every acknowledged record."""

from __future__ import annotations

import errno
import gc
import subprocess
from pathlib import Path

import pytest

from logstore.storage.log import SyncFailedError
from logstore.storage.log_dir_failure import LogDirFailureChannel
from logstore.storage.store import Store
from tests.kit.faulty_disk import faulty_disk

pytestmark = pytest.mark.integration


def test_the_channel_fails_each_dir_once_and_survives_a_bad_listener() -> None:
    channel = LogDirFailureChannel(lambda d: [("t", len(d))])
    told: list[tuple[str, list[tuple[str, int]]]] = []

    def broken(log_dir: str, partitions: list[tuple[str, int]]) -> None:
        raise RuntimeError("a listener's bug")

    channel.add_listener(broken)
    channel.add_listener(lambda d, parts: told.append((d, parts)))
    channel.fail("/x/a", OSError(errno.EIO, "Input/output error"))
    channel.fail("/x/a/", OSError(errno.EIO, "again"))
    channel.fail("/x/b", OSError(errno.EROFS, "Read-only file system"))
    assert told == [("/x/a", [("t", 4)]), ("/x/b", [("t", 4)])]
    assert channel.offline() == {"/x/a", "/x/b"} and channel.is_offline("/x/b/") and not channel.is_offline("/x")
    assert channel.error("/x/a") is not None and channel.error("/x/a").errno == errno.EIO  # type: ignore[union-attr]


def test_a_failing_disk_takes_its_log_dir_offline_and_a_restart_brings_it_back(tmp_path: Path) -> None:
    good = tmp_path / "good"
    with faulty_disk(tmp_path) as disk:
        dirs = [str(good), str(disk.mount)]
        store = Store(dirs, {"flush.messages": 1}, scheduler=False)
        store.create_topic("t", partitions=2)
        placed = {p: store.log_manager.dir_of("t", p) for p in (0, 1)}
        assert set(placed.values()) == set(dirs)
        on_disk = next(p for p, d in placed.items() if d == str(disk.mount))
        elsewhere = 1 - on_disk
        told: list[tuple[str, list[tuple[str, int]]]] = []
        store.log_manager.dir_failures.add_listener(lambda d, parts: told.append((d, parts)))
        acked = [store.log("t", on_disk).append([b"a%d" % i]).last_offset for i in range(5)]
        assert acked == [0, 1, 2, 3, 4]
        failing = store.log("t", on_disk)
        disk.break_disk()
        with pytest.raises(SyncFailedError) as caught:
            for _ in range(200):  # bounded: each append is fsynced, the first failing fsync raises
                failing.append([b"lost" * 4096])
        assert caught.value.errno in (errno.EIO, errno.ENOSPC)  # never acknowledged
        assert told == [(str(disk.mount), [("t", on_disk)])]
        assert store.log_manager.dir_failures.offline() == {str(disk.mount)}
        assert failing.closed and store.find_log("t", on_disk) is None
        assert store.log_manager.offline_dir_of("t", on_disk) == str(disk.mount)
        assert store.log("t", elsewhere).append([b"fine"]).last_offset == 0  # the other dir serves
        store.create_topic("u", partitions=2)  # new partitions only in the online dir
        assert {store.log_manager.dir_of("u", p) for p in (0, 1)} == {str(good)}
        store.close()
        # Repair the disk (free the tmpfs, fsck, mount again) and restart: the dir is back.
        del caught, failing
        gc.collect()  # the index maps of the abandoned log go with their last view
        (disk.backing / "filler").unlink()
        subprocess.run(["umount", str(disk.mount)], check=True, timeout=60)
        subprocess.run(["e2fsck", "-f", "-y", str(disk.backing / "disk.img")], capture_output=True, timeout=120)
        subprocess.run(["mount", "-o", "loop", str(disk.backing / "disk.img"), str(disk.mount)], check=True,
                       timeout=60)  # fmt: skip
        with Store(dirs, scheduler=False) as again:
            assert not again.log_manager.dir_failures.offline()
            got = [r.value for r in again.log("t", on_disk).read(0).records]
            assert got[:5] == [b"a%d" % i for i in range(5)]  # every acknowledged record
            assert [r.value for r in again.log("t", elsewhere).read(0).records] == [b"fine"]
