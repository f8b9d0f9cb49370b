"""ReadOnlyStore: a process that only reads tails a store another process writes, with no lock
and no socket (issue 25, point 3)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from logstore.errors import LogstoreError
from logstore.storage.read_only import ReadOnlyStore
from logstore.storage.store import Store

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]


def test_tail_follows_another_process_writing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Store(str(data), scheduler=False) as store:
        store.create_topic("t", partitions=1)
    out = tmp_path / "p"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "tests.embedded.workers", "produce", str(data), str(out), "p", "3000", "1000"]
    with open(f"{out}.err", "wb") as errors:
        writer = subprocess.Popen(command, cwd=ROOT, env=env, stderr=errors)
    got: list[bytes] = []
    try:
        with ReadOnlyStore(str(data)) as reader:
            deadline = time.monotonic() + 120
            tail = reader.tail("t", 0, timeout=30)
            for message in tail:
                got.append(message.value())
                if len(got) == 1:  # the writer holds the directory; this process does not
                    assert (data / ".lock").read_text().strip() == str(writer.pid)
                if len(got) == 3000 or time.monotonic() > deadline:
                    break
            assert writer.wait(120) == 0, Path(f"{out}.err").read_text()
            assert reader.end_offset("t", 0) == 3000
    finally:
        if writer.poll() is None:
            writer.kill()
        writer.wait(30)
    assert got == [f"p-{i}".encode() for i in range(3000)]


def test_not_a_data_directory_says_so(tmp_path: Path) -> None:
    with pytest.raises(LogstoreError, match="not a logstore data directory"):
        ReadOnlyStore(str(tmp_path))
