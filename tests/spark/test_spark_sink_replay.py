"""The streaming sink's exactly-once commit, driven directly: crashes mid-append and replays.

Spark replays a micro-batch after a driver crash; these tests make the
crash happen at chosen points (an append that fails part-way, a commit
that never records "done") and check that the replay adds each row once.
"""

from __future__ import annotations

import collections
import random
from typing import Any

import pyarrow as pa
import pytest

from logstore.spark.backend import Where
from logstore.spark.sink import MARKER, Appender, SinkCommitter, Unit, encode_rows
from tests.kit.sparkkit import consume_all, create

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def units_of(
    rows: list[tuple[int, int, bytes, bytes]], sink: str, batch: int, batch_bytes: int = 300
) -> list[Unit]:
    """Rows (task, partition, key, value) as the units tasks would hand the driver."""
    grouped: dict[tuple[int, int], list[tuple[bytes, bytes]]] = collections.defaultdict(list)
    for task, partition, key, value in rows:
        grouped[(task, partition)].append((key, value))
    units = []
    for (task, partition), pairs in sorted(grouped.items()):
        keys = pa.array([k for k, _ in pairs], pa.binary())
        values = pa.array([v for _, v in pairs], pa.binary())
        encoded = encode_rows(keys, values, None, batch_bytes, f"{sink}:{batch}:{task}")
        units.append(Unit("out", partition, task, encoded, len(pairs)))
    return units


def rows_for(batch: int, count: int) -> list[tuple[int, int, bytes, bytes]]:
    return [(i % 3, i % 2, f"k{batch}-{i}".encode(), f"v{batch}-{i}".encode()) for i in range(count)]


def out_rows(broker: Any, expected: int) -> collections.Counter[tuple[bytes, bytes]]:
    return collections.Counter(
        (m.key(), m.value()) for m in consume_all(broker.bootstrap, "out", expected, 20)
    )


def test_replays_after_crashes_add_each_row_once(broker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    create(broker.bootstrap, "out", 2)
    where = Where(client={"bootstrap.servers": broker.bootstrap})
    batch0, batch1 = rows_for(0, 400), rows_for(1, 600)
    with SinkCommitter(where, "s1") as committer:
        assert committer.commit(units_of(batch0, "s1", 0), 0) == 400
    # Batch 1: the driver dies after two appends (each a record batch), before marking done.
    real = Appender.append_all

    def dying(self: Appender, items: list[tuple[str, int, list[bytes]]]) -> None:
        # Partition 0 gets its first two record batches, partition 1 nothing; then the driver dies.
        real(self, [(t, p, batches[:2]) for t, p, batches in items if p == 0])
        raise RuntimeError("driver killed")

    monkeypatch.setattr(Appender, "append_all", dying)
    with pytest.raises(RuntimeError, match="driver killed"), SinkCommitter(where, "s1") as committer:
        committer.commit(units_of(batch1, "s1", 1), 1)
    monkeypatch.setattr(Appender, "append_all", real)
    partial = out_rows(broker, 400)
    assert 400 < sum(partial.values()) < 1000  # some of batch 1 landed
    # The replay: same rows, each task's rows in another order (as a shuffle may give them).
    shuffled = list(batch1)
    random.Random(7).shuffle(shuffled)
    with SinkCommitter(where, "s1") as committer:
        added = committer.commit(units_of(shuffled, "s1", 1), 1)
    want = collections.Counter((k, v) for _, _, k, v in batch0 + batch1)
    assert out_rows(broker, 1000) == want
    assert added == 1000 - sum(partial.values())
    # Spark may replay a batch whose sink commit finished (its own commit log was not written yet),
    # or an older one: nothing is added.
    with SinkCommitter(where, "s1") as committer:
        assert committer.commit(units_of(batch1, "s1", 1), 1) == 0
        assert committer.commit(units_of(batch0, "s1", 0), 0) == 0
    assert out_rows(broker, 1000) == want
    # Another sink (another query) writing batch 1 to the same topic is not confused with this one.
    with SinkCommitter(where, "s2") as committer:
        assert committer.commit(units_of(rows_for(9, 10), "s2", 1), 1) == 10


def test_the_marker_header_is_only_on_each_batch_first_record(broker: Any) -> None:
    create(broker.bootstrap, "out", 1)
    rows = [(0, 0, f"k{i}".encode(), b"x" * 50) for i in range(100)]
    units = units_of(rows, "s", 3, batch_bytes=1000)
    assert len(units[0].batches) > 3
    with SinkCommitter(Where(client={"bootstrap.servers": broker.bootstrap}), "s") as committer:
        committer.commit(units, 3)
    got = consume_all(broker.bootstrap, "out", 100)
    marked = [m for m in got if any(k == MARKER for k, _ in (m.headers() or []))]
    assert len(marked) == len(units[0].batches)
    assert {dict(m.headers())[MARKER] for m in marked} == {b"s:3:0"}
