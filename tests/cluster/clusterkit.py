"""Helpers for tests of broker processes in one ZooKeeper cluster (the ``cluster`` fixture is in
conftest.py): metadata as confluent-kafka's AdminClient sees it, and replicas' bytes."""

from __future__ import annotations

import os
import sys
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from brokerkit import BrokerProcess


def metadata(bootstrap: str, topic: str | None = None) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    found = metadata(bootstrap, topic).topics[topic].partitions
    return {p: found[p].leader for p in found}


def isrs(bootstrap: str, topic: str) -> dict[int, list[int]]:
    found = metadata(bootstrap, topic).topics[topic].partitions
    return {p: sorted(found[p].isrs) for p in found}


def broker_id(broker: BrokerProcess) -> int:
    return int(broker.overrides["broker.id"])


def segment_bytes(broker: BrokerProcess, topic: str, partition: int) -> bytes:
    """Every ``.log`` file of a replica, concatenated in offset order."""
    directory = os.path.join(broker.data_dir, f"{topic}-{partition}")
    names = sorted(n for n in os.listdir(directory) if n.endswith(".log"))
    chunks = []
    for name in names:
        with open(os.path.join(directory, name), "rb") as f:
            chunks.append(f.read())
    return b"".join(chunks)
