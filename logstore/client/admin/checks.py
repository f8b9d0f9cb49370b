"""The admin client's argument checks: each call checks its arguments in the caller's thread.

A bad type is TypeError, a bad value ValueError, raised before any request is sent, with
confluent-kafka's messages where it has them. Each check is O(its argument).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from logstore.client.types import TopicPartition


def check_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    return value


def check_seconds(name: str, value: Any, default: float) -> float:
    """A timeout argument in seconds (None: ``default``); TypeError/ValueError when it is not one."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    if value < 0 or value > 3600:
        raise ValueError(f"{name}={value!r} is out of range [0, 3600] seconds")
    return float(value)


def check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"Expected {name} to be bool type, not {type(value).__name__}")
    return value


def check_list(what: str, value: Any, kind: type | tuple[type, ...], kind_name: str) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"Expected {what} to be a list of {kind_name}, not {type(value).__name__}")
    if not value:
        raise ValueError(f"Expected non-empty list of {kind_name}")
    for item in value:
        if not isinstance(item, kind):
            raise TypeError(f"Expected list of {kind_name}, found {type(item).__name__} {item!r}")
    return value


def check_unique(what: str, keys: Iterable[Hashable]) -> None:
    seen: set[Hashable] = set()
    for key in keys:
        if key in seen:
            raise ValueError(f"duplicate {what} {key!r} in one request")
        seen.add(key)


def config_text(owner: str, name: Any, value: Any) -> str:
    if not isinstance(name, str):
        raise TypeError(f"{owner}: config names are strings, not {name!r}")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise TypeError(f"{owner}: config {name!r} must be a string, not {type(value).__name__}")


def check_assignment(owner: str, assignment: Any) -> list[list[int]]:
    if not isinstance(assignment, list) or not all(isinstance(replicas, list) for replicas in assignment):
        raise TypeError(f"{owner}: replica_assignment is a list (one per partition) of lists of broker ids")
    for replicas in assignment:
        if not replicas:
            raise ValueError(f"{owner}: replica_assignment has a partition with no replicas")
        for broker in replicas:
            check_int(f"{owner}: replica_assignment broker id", broker)
    return assignment


def check_partition(tp: Any) -> None:
    if tp is None:
        raise TypeError("partition cannot be None")
    if not isinstance(tp, TopicPartition):
        raise TypeError("partition must be a TopicPartition")
    if tp.topic is None:
        raise TypeError("partition topic name cannot be None")
    if not isinstance(tp.topic, str):
        raise TypeError("partition topic name must be string")
    if not tp.topic:
        raise ValueError("partition topic name cannot be empty")
    if tp.partition < 0:
        raise ValueError("partition index must be non-negative")
