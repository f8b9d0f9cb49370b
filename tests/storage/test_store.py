"""Store: topics, persisted config, the directory lock, checkpoints, clean shutdown."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from logstore import LogstoreError, Store
from logstore.errors import InvalidArgumentError, InvalidConfigError
from logstore.storage.checkpoints import read_offsets
from logstore.storage.store import TopicExistsError, UnknownTopicError

pytestmark = pytest.mark.unit


def test_topics_partitions_and_config_survive_reopen(tmp_path: os.PathLike[str]) -> None:
    data = str(tmp_path)
    with Store(data, scheduler=False) as store:
        store.create_topic("orders", partitions=3, config={"segment.bytes": 4096, "retention.ms": "60000"})
        store.create_topic("audit")
        for i in range(60):
            store.log("orders", i % 3).append([f"order-{i}".encode()])
        with pytest.raises(TopicExistsError):
            store.create_topic("orders")
    with Store(data, scheduler=False) as store:
        assert store.topics() == ["audit", "orders"] and store.partitions("orders") == 3
        config = store.topic_config("orders")
        assert config.segment_bytes == 4096 and config.retention_ms == 60000
        assert store.log("orders", 2).log_end_offset == 20
        assert store.log("orders", 1).read(0).records[0].value == b"order-1"


def test_root_files_are_kafkas(tmp_path: os.PathLike[str]) -> None:
    data = str(tmp_path)
    with Store(data, scheduler=False) as store:
        store.create_topic("t", partitions=2)
        store.log("t", 1).append([b"a", b"b"])
    names = set(os.listdir(data))
    assert {
        "meta.properties",
        ".kafka_cleanshutdown",
        "recovery-point-offset-checkpoint",
        "log-start-offset-checkpoint",
        "replication-offset-checkpoint",
        "t-0",
        "t-1",
    } <= names
    assert read_offsets(os.path.join(data, "recovery-point-offset-checkpoint")) == {("t", 0): 0, ("t", 1): 2}
    Store(data, scheduler=False).close()


def test_clean_shutdown_marker_is_removed_while_open(tmp_path: os.PathLike[str]) -> None:
    data = str(tmp_path)
    Store(data, scheduler=False).close()
    store = Store(data, scheduler=False)
    assert not os.path.exists(os.path.join(data, ".kafka_cleanshutdown"))
    store.close()
    assert os.path.exists(os.path.join(data, ".kafka_cleanshutdown"))


def test_second_process_gets_a_clear_error(tmp_path: os.PathLike[str]) -> None:
    data = str(tmp_path)
    with Store(data, scheduler=False):
        code = f"from logstore import Store\nStore({data!r})"
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert result.returncode != 0
        assert "LogstoreError" in result.stderr and "in use by another process" in result.stderr
    with pytest.raises(LogstoreError, match="in use"), Store(data, scheduler=False):
        Store(data, scheduler=False)


def test_delete_topic_and_bad_names(tmp_path: os.PathLike[str]) -> None:
    data = str(tmp_path)
    with Store(data, scheduler=False) as store:
        store.create_topic("gone", partitions=2)
        store.log("gone", 0).append([b"x"])
        store.delete_topic("gone")
        assert store.topics() == [] and not any(n.startswith("gone") for n in os.listdir(data))
        with pytest.raises(UnknownTopicError):
            store.log("gone", 0)
        for bad in ["", ".", "..", "a/b", "x" * 250, "sp ace"]:
            with pytest.raises(InvalidArgumentError):
                store.create_topic(bad)
        with pytest.raises(InvalidConfigError):
            store.create_topic("ok", config={"retention.mss": 1})
        assert store.topics() == []


def test_alter_config_and_add_partitions_persist(tmp_path: os.PathLike[str]) -> None:
    data = str(tmp_path)
    with Store(data, scheduler=False) as store:
        store.create_topic("t")
        store.alter_topic_config("t", {"retention.bytes": 1000})
        store.add_partitions("t", 4)
        assert store.log("t", 0).config.retention_bytes == 1000
    with Store(data, scheduler=False) as store:
        assert store.partitions("t") == 4 and store.topic_config("t").retention_bytes == 1000


def test_concurrent_appends_are_dense_and_durable(tmp_path: os.PathLike[str]) -> None:
    data = str(tmp_path)
    with Store(data, scheduler=False) as store:
        store.create_topic("q", config={"flush.messages": 1, "segment.bytes": 20_000})
        log = store.log("q")
        errors: list[BaseException] = []

        def writer(n: int) -> None:
            try:
                for i in range(200):
                    log.append([f"{n}:{i}".encode()])
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not errors and log.log_end_offset == 800 and log.recovery_point == 800
        seen, offset = [], 0
        for _ in range(1000):
            if offset >= 800:
                break
            records = log.read(offset).records
            seen += records
            offset = records[-1].offset + 1
        assert [r.offset for r in seen] == list(range(800))
        for n in range(4):  # each writer's records in its own order
            mine = [int(r.value.split(b":")[1]) for r in seen if r.value.startswith(f"{n}:".encode())]
            assert mine == list(range(200))


def test_scheduler_applies_retention(tmp_path: os.PathLike[str]) -> None:
    data = str(tmp_path)
    store = Store(data, scheduler=True, scheduler_interval_ms=20, retention_check_interval_ms=20)
    try:
        store.create_topic("r", config={"segment.bytes": 2000, "retention.bytes": 4000})
        log = store.log("r")
        for i in range(100):
            log.append([bytes([i]) * 100])
        for _ in range(500):  # bounded wait for the scheduler (segments go, then the log start moves)
            if log.size <= 6000 and log.log_start_offset > 0:
                break
            threading.Event().wait(0.01)
        assert log.size <= 6000 and log.log_start_offset > 0
    finally:
        store.close()


def test_concurrent_durable_appends_share_fsyncs(
    tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    syncs = []
    real = os.fdatasync

    def counting(fd: int) -> None:
        syncs.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", counting)
    with Store(str(tmp_path), scheduler=False) as store:
        store.create_topic("g", config={"flush.messages": 1})
        log = store.log("g")
        barrier = threading.Barrier(8)

        def writer() -> None:
            barrier.wait(timeout=30)
            for _ in range(50):
                log.append([b"durable"])

        threads = [threading.Thread(target=writer) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert log.log_end_offset == 400 and log.recovery_point == 400
        # Every append was durable when it returned, yet fsyncs were shared.
        assert len(syncs) < 400


def test_recovery_shows_progress_on_a_terminal(
    tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from logstore import Log
    from logstore.storage import log as log_module

    path = os.path.join(tmp_path, "p-0")
    with Log.open(path) as log:
        for _ in range(20):
            log.append([b"x" * 100] * 10)
    os.unlink(os.path.join(path, ".kafka_cleanshutdown"))
    updates: list[tuple[int, int]] = []
    real = log_module.terminal_progress

    @contextlib.contextmanager
    def tracking(description: str) -> Iterator[object]:
        with real(description) as callback:
            assert callback is not None  # a terminal gets a bar

            def update(done: int, total: int) -> None:
                updates.append((done, total))
                callback(done, total)

            yield update

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setattr(log_module, "terminal_progress", tracking)
    with Log.open(path) as log:
        assert log.recovered_bytes > 0
    assert updates and updates[-1][0] == updates[-1][1] > 0


def test_concurrent_checkpoints_never_leave_a_torn_file(tmp_path: os.PathLike[str]) -> None:
    """Checkpoints from several threads at once (the scheduler and callers) stay whole."""
    store = Store(os.fspath(tmp_path))
    try:
        store.create_topic("t", 8)
        for partition in range(8):
            store.log("t", partition).append([b"x"] * (partition + 1))
        errors: list[BaseException] = []

        def hammer() -> None:
            try:
                for _ in range(200):
                    store.checkpoint()
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=hammer) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not any(thread.is_alive() for thread in threads) and errors == []
        points = read_offsets(os.path.join(os.fspath(tmp_path), "recovery-point-offset-checkpoint"))
        assert len(points) == 8
    finally:
        store.close()


def test_a_topic_whose_logs_cannot_all_open_is_not_created(
    tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing of a half-made topic is left: not in the Store, not on disk; a retry works."""
    from logstore.storage import log_manager  # where the logs are opened

    real_log = log_manager.Log
    opened: list[str] = []

    def failing_second(path: str, *args: object, **kwargs: object) -> object:
        opened.append(path)
        if path.endswith("-1"):
            raise OSError(28, "No space left on device")
        return real_log(path, *args, **kwargs)

    root = os.fspath(tmp_path)
    with Store(root) as store:
        monkeypatch.setattr(log_manager, "Log", failing_second)
        with pytest.raises(OSError):
            store.create_topic("half", 3)
        assert not store.has_topic("half") and store.partition_count("half") is None
        assert store.find_log("half", 0) is None
        assert not any(name.startswith("half") for name in os.listdir(root))
        assert "half.properties" not in os.listdir(os.path.join(root, "topic-configs"))
        monkeypatch.setattr(log_manager, "Log", real_log)
        store.create_topic("half", 3)
        assert store.partitions("half") == 3 and opened[:2] == [
            os.path.join(root, "half-0"),
            os.path.join(root, "half-1"),
        ]


def test_topics_from_before_topic_ids_keep_the_id_they_get(tmp_path: os.PathLike[str]) -> None:
    root = os.fspath(tmp_path)
    with Store(root) as store:
        store.create_topic("old", 1)
        first = store.topic_id("old")
        assert store.topic_by_id(first) == "old"
    path = os.path.join(root, "topic-configs", "old.properties")
    with open(path) as f:
        lines = [line for line in f if not line.startswith("topic.id=")]
    with open(path, "w") as f:
        f.writelines(lines)
    with Store(root) as store:
        given = store.topic_id("old")
        assert given != first and store.topic_by_id(given) == "old"
    with Store(root) as store:
        assert store.topic_id("old") == given


def test_a_cleaner_failing_on_one_log_does_not_stop_the_others(
    tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from logstore.storage.cleaner import Cleaner

    with Store(os.fspath(tmp_path)) as store:
        store.create_topic("c", 2, {"cleanup.policy": "compact", "segment.bytes": 1024})
        for partition in range(2):
            log = store.log("c", partition)
            for n in range(40):
                log.append([(b"k%d" % (n % 3), b"v" * 40)])
        real_clean = Cleaner.clean

        def disk_full_on_0(self: Cleaner, log: Any, *args: Any, **kwargs: Any) -> Any:
            if log.path.endswith("c-0"):
                raise OSError(28, "No space left on device")
            return real_clean(self, log, *args, **kwargs)

        monkeypatch.setattr(Cleaner, "clean", disk_full_on_0)
        results = store.run_cleaner(now_ms=2**62)
        assert list(results) == [("c", 1)]
