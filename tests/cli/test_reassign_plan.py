"""``logstore reassign-partitions``' plan files (kafka-reassign-partitions' JSON): read, checked, written."""

from __future__ import annotations

import json
import pathlib

import pytest

from logstore.cli._clients import ConsoleError
from logstore.cli.reassign import load_plan, plan_json

pytestmark = pytest.mark.unit


def write(tmp_path: pathlib.Path, text: str) -> str:
    path = tmp_path / "plan.json"
    path.write_text(text)
    return str(path)


def test_a_plan_round_trips(tmp_path: pathlib.Path) -> None:
    plan = {("b", 1): [3, 1], ("a", 0): [1, 2, 3]}
    text = plan_json(plan)
    assert json.loads(text)["partitions"][0] == {"topic": "a", "partition": 0, "replicas": [1, 2, 3],
                                                 "log_dirs": ["any", "any", "any"]}  # fmt: skip
    assert load_plan(write(tmp_path, text)) == plan


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{", "is not JSON"),
        ('{"version": 1}', "expected"),
        ('{"partitions": [{"partition": 0, "replicas": [1]}]}', "has no topic"),
        ('{"partitions": [{"topic": "t", "replicas": [1]}]}', "no partition number"),
        ('{"partitions": [{"topic": "t", "partition": 0, "replicas": []}]}', "non-empty list"),
        ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}', "twice"),
        ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["/d"]}]}', "only log dir"),
        ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any"]}]}',
         "one entry per replica"),
        ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1]}, '
         '{"topic": "t", "partition": 0, "replicas": [2]}]}', "appears twice"),
    ],
)  # fmt: skip
def test_a_bad_plan_says_what_is_wrong(tmp_path: pathlib.Path, text: str, says: str) -> None:
    with pytest.raises(ConsoleError, match=says):
        load_plan(write(tmp_path, text))


def test_a_missing_plan_names_the_file(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ConsoleError, match=r"nope\.json"):
        load_plan(str(tmp_path / "nope.json"))
