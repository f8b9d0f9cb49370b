"""The schema registry in a ZooKeeper cluster: the leader of ``_schemas-0`` writes, the other brokers
forward writes to it over HTTP (answering once their replica holds the write) and serve reads from
their replica; killing the writer moves the
writes to the new leader, and ids go on from the highest (none reused)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.kit.brokerkit import BrokerProcess, free_port, wait_until
from tests.kit.clusterkit import broker_id, leaders, metadata
from tests.schemas.test_http import Rest

pytestmark = [pytest.mark.integration, pytest.mark.cluster, pytest.mark.slow]


def schema(name: str) -> dict[str, str]:
    """A record with a field named ``name`` (a default: each one is backward compatible with the others)."""
    fields = [{"name": "f", "type": "int"}, {"name": name, "type": "int", "default": 0}]
    return {"schema": json.dumps({"type": "record", "name": "R", "fields": fields})}


def register(rest: Rest, subject: str, name: str, timeout: float = 30) -> int:
    """The id of a registration through ``rest``, retried while the cluster settles (5xx)."""
    deadline = time.monotonic() + timeout
    for _ in range(1000):
        status, answer = rest.call("POST", f"/subjects/{subject}/versions", schema(name))
        if status == 200:
            return int(answer["id"])
        assert status >= 500 and time.monotonic() < deadline, (status, answer)
        time.sleep(0.2)
    raise AssertionError("unreachable")


def test_followers_forward_writes_and_a_killed_writer_hands_over(cluster: Callable[..., BrokerProcess]) -> None:
    ports = {i: free_port() for i in (1, 2, 3)}
    brokers = {i: cluster(i, **{"schema.registry.listeners": f"http://127.0.0.1:{ports[i]}"}) for i in ports}
    wait_until(lambda: all(len(metadata(b.bootstrap).brokers) == 3 for b in brokers.values()), "three brokers")
    rests = {i: Rest(port) for i, port in ports.items()}
    assert register(rests[1], "a", "A") == 1  # the first write makes _schemas (replicated 3 times)
    writer = leaders(brokers[1].bootstrap, "_schemas")[0]
    followers = [i for i in brokers if i != writer]
    assert register(rests[followers[0]], "a", "B") == 2  # forwarded to the writer
    # read-your-writes through the same broker: it answered once its replica held the write
    assert rests[followers[0]].call("GET", "/schemas/ids/2") == (200, {"schema": schema("B")["schema"]})
    assert rests[followers[0]].call("GET", "/subjects/a/versions") == (200, [1, 2])
    assert register(rests[followers[1]], "b", "A") == 1  # the same schema: the same id, from anywhere

    def everywhere(path: str, expected: Any, among: list[int]) -> None:
        wait_until(lambda: all(rests[i].call("GET", path) == (200, expected) for i in among),
                   f"{path} answering {expected} on brokers {among}")  # fmt: skip

    everywhere("/subjects/a/versions", [1, 2], list(brokers))
    everywhere("/schemas/ids/2", {"schema": schema("B")["schema"]}, list(brokers))
    brokers[writer].kill()
    wait_until(lambda: leaders(brokers[followers[0]].bootstrap, "_schemas")[0] in followers,
               "a new leader of _schemas-0", timeout=60)  # fmt: skip
    assert register(rests[followers[0]], "a", "C", timeout=60) == 3  # ids go on: none reused
    assert register(rests[followers[1]], "c", "D") == 4
    everywhere("/subjects/a/versions", [1, 2, 3], followers)
    everywhere("/subjects", ["a", "b", "c"], followers)
    assert broker_id(brokers[writer]) == writer
