"""Checkpoint files (storage/checkpoints.py): Kafka's text format, damage detected, leftover .tmp files."""

from __future__ import annotations

import os

import pytest

from logstore.storage.checkpoints import (
    CorruptCheckpointError,
    read_checkpoint,
    read_offsets,
    write_checkpoint,
    write_offsets,
)

pytestmark = pytest.mark.unit


def test_checkpoint_format_is_kafkas(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(tmp_path, "recovery-point-offset-checkpoint")
    write_offsets(path, {("b", 1): 88, ("a", 0): 1234})
    with open(path) as f:
        assert f.read() == "0\n2\na 0 1234\nb 1 88\n"
    assert read_offsets(path) == {("a", 0): 1234, ("b", 1): 88}
    assert not os.path.exists(path + ".tmp")
    assert read_offsets(os.path.join(tmp_path, "absent")) == {}


@pytest.mark.parametrize(
    "text", ["", "0\n", "1\n0\n", "0\nx\n", "0\n2\na 0 1\n", "0\n1\na 0\n", "0\n1\na b c\n"]
)
def test_damaged_checkpoints_are_detected(tmp_path: os.PathLike[str], text: str) -> None:
    path = os.path.join(tmp_path, "cp")
    with open(path, "w") as f:
        f.write(text)
    with pytest.raises(CorruptCheckpointError):
        read_offsets(path)


def test_leftover_tmp_is_ignored_and_replaced(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(tmp_path, "leader-epoch-checkpoint")
    with open(path + ".tmp", "w") as f:
        f.write("garbage from a crash")
    write_checkpoint(path, [(0, 0), (3, 120)])
    assert read_checkpoint(path, 2) == [["0", "0"], ["3", "120"]]
