"""A log directory whose disk fails for real: an ext4 image, loop-mounted, whose backing file lives
on a small tmpfs. Filling the tmpfs (:meth:`FaultyDisk.break_disk`) makes the loop device's writes
fail, so the ext4's writeback and fsync get real errors (ENOSPC first, then EIO, and the journal
aborts: the filesystem goes read-only), as a dying disk gives them. Needs root and loop devices
(CI has both); :func:`faulty_disk` skips with the reason where the machine cannot mount.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


class FaultyDisk:
    """``mount``: the ext4's mount point (use it as a log directory); ``backing``: the tmpfs."""

    def __init__(self, mount: Path, backing: Path) -> None:
        self.mount = mount
        self.backing = backing

    def break_disk(self) -> None:
        """Fill the tmpfs under the image: from now on the ext4's writes back fail."""
        with open(self.backing / "filler", "wb") as f, contextlib.suppress(OSError):
            for _ in range(1 << 12):  # bounded: the tmpfs is a few tens of MB
                f.write(b"\xff" * (1 << 20))


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=60)


@contextlib.contextmanager
def faulty_disk(where: Path, backing_mb: int = 24, image_mb: int = 64) -> Iterator[FaultyDisk]:
    """A :class:`FaultyDisk` under ``where`` (unmounted after); skips the test where it cannot mount."""
    if os.geteuid() != 0:
        pytest.skip("a loop-mounted ext4 needs root (CI runs as root)")
    backing, mount = where / "backing", where / "disk"
    backing.mkdir()
    mount.mkdir()
    done = _run("mount", "-t", "tmpfs", "-o", f"size={backing_mb}m", "tmpfs", str(backing))
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        image = backing / "disk.img"
        with open(image, "wb") as f:
            f.truncate(image_mb << 20)
        done = _run("mkfs.ext4", "-q", "-F", str(image))
        if done.returncode != 0:
            pytest.skip(f"cannot make an ext4 image here: {done.stderr.strip()}")
        done = _run("mount", "-o", "loop", str(image), str(mount))
        if done.returncode != 0:
            pytest.skip(f"cannot loop-mount an ext4 image here: {done.stderr.strip()}")
        try:
            yield FaultyDisk(mount, backing)
        finally:
            if _run("umount", str(mount)).returncode != 0:
                _run("umount", "-l", str(mount))
    finally:
        if _run("umount", str(backing)).returncode != 0:
            _run("umount", "-l", str(backing))
