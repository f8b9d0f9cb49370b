"""The LogManager on its own: logs by topic-partition, whoever says which exist (a cluster broker)."""

from __future__ import annotations

import os
import pathlib

import pytest

from logstore.errors import LogstoreError
from logstore.storage.config import LogConfig
from logstore.storage.log import CLEAN_SHUTDOWN_FILE
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
