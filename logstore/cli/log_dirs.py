"""``logstore log-dirs``: the brokers' log directories, like ``kafka-log-dirs --describe``.

One DescribeLogDirs per broker (the AdminClient's ``describe_log_dirs``): each directory's
total and free bytes (DescribeLogDirs v4+, KIP-827), its error, and the partitions in it with
their sizes. A directory below its broker's free-space reserve (``log.dir.min.free.bytes``, read
with DescribeConfigs; unset: the broker's default, the smaller of 5% of the filesystem and 1 GiB)
is marked: its broker refuses produce to user topics until space is freed (docs/operations.md).
"""

from __future__ import annotations

import json
from typing import Any

import click

from logstore.cli._clients import logstore_admin
from logstore.cli._options import BOOTSTRAP_OPTION, TIMEOUT_OPTION, with_options
from logstore.client.admin import ConfigResource, ResourceType
from logstore.storage.disk_space import default_reserve


def _ids(text: str) -> list[int] | None:
    """``--broker-list``: broker ids, comma-separated (none: every broker)."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not all(item.lstrip("-").isdigit() for item in items):
        raise click.BadParameter(f"{text!r} is not a comma-separated list of broker ids (e.g. 1,2)")
    return [int(item) for item in items] or None


def _size(value: int) -> str:
    """Bytes for a person: ``-1`` (the broker does not say) as ``?``."""
    if value < 0:
        return "?"
    if value < 1024:
        return f"{value} B"
    scaled, unit = value / 1024, "KiB"
    for bigger in ("MiB", "GiB"):
        if scaled < 1024:
            break
        scaled, unit = scaled / 1024, bigger
    return f"{scaled:.1f} {unit}"


def _reserves(admin: Any, brokers: list[int], timeout: float) -> dict[int, int]:
    """Each broker's ``log.dir.min.free.bytes`` (-1: unset, or not said)."""
    resources = [ConfigResource(ResourceType.BROKER, str(b)) for b in brokers]
    found: dict[int, int] = {}
    for resource, future in admin.describe_configs(resources, request_timeout=timeout).items():
        try:
            entry = future.result(timeout).get("log.dir.min.free.bytes")
        except Exception:  # an older broker, or one that refuses: its default applies
            entry = None
        found[int(resource.name)] = int(entry.value) if entry is not None and entry.value is not None else -1
    return found


def _below_reserve(entry: dict[str, Any], configured: int) -> tuple[int, bool]:
    """(the directory's reserve, whether its free bytes are below it)."""
    total, free = entry["totalBytes"], entry["usableBytes"]
    reserve = configured if configured >= 0 else default_reserve(total) if total > 0 else 0
    return reserve, entry["error"] is None and 0 <= free < reserve


def kafka_json(
    found: dict[int, dict[str, dict[str, Any]]], topics: set[str], reserves: dict[int, int] | None = None
) -> dict[str, Any]:
    """``kafka-log-dirs --describe``'s JSON, with each directory's total and free bytes added, and
    with ``reserves`` (broker -> log.dir.min.free.bytes) its reserve and whether produce is refused."""
    brokers = []
    for broker, dirs in sorted(found.items()):
        entries = []
        for path, info in sorted(dirs.items()):
            partitions = [
                {"partition": f"{tp.topic}-{tp.partition}", "size": size, "offsetLag": 0, "isFuture": False}
                for tp, size in sorted(info["partitions"].items(), key=lambda item: (item[0].topic, item[0].partition))
                if not topics or tp.topic in topics
            ]
            error = info["error"]
            entries.append({
                "logDir": path, "error": None if error is None else error.name(), "partitions": partitions,
                "totalBytes": info["total_bytes"], "usableBytes": info["usable_bytes"],
            })  # fmt: skip
            if reserves is not None:
                reserve, refusing = _below_reserve(entries[-1], reserves.get(broker, -1))
                entries[-1].update({"reserveBytes": reserve, "produceRefused": refusing})
        brokers.append({"broker": broker, "logDirs": entries})
    return {"version": 1, "brokers": brokers}


@click.command("log-dirs")
@with_options(BOOTSTRAP_OPTION, TIMEOUT_OPTION)
@click.option("--broker-list", default="", metavar="ID,...", help="Only these brokers (default: every broker).")
@click.option("--topic-list", default="", metavar="T,...", help="Only the partitions of these topics.")
@click.option("--json", "as_json", is_flag=True, help="Print kafka-log-dirs' JSON (with totalBytes, usableBytes).")
def log_dirs(bootstrap_server: str, timeout: float, broker_list: str, topic_list: str, as_json: bool) -> None:
    """The brokers' log directories, like kafka-log-dirs --describe.

    \b
    logstore log-dirs                              every broker's directories
    logstore log-dirs --broker-list 1 --topic-list events --json

    Each directory: its total and free bytes, its error (KAFKA_STORAGE_ERROR: offline), and
    the bytes of the partitions in it. A broker whose free bytes fall below its reserve
    (log.dir.min.free.bytes) refuses produce to user topics until space is freed.
    """
    brokers = _ids(broker_list)
    topics = {t.strip() for t in topic_list.split(",") if t.strip()}
    with logstore_admin(bootstrap_server) as admin:
        found = admin.describe_log_dirs(brokers, request_timeout=timeout).result()
        reserves = _reserves(admin, sorted(found), timeout)
    described = kafka_json(found, topics, reserves)
    if as_json:
        click.echo(json.dumps(described))
        return
    for broker in described["brokers"]:
        for entry in broker["logDirs"]:
            total, free = entry["totalBytes"], entry["usableBytes"]
            share = f" ({100 * free / total:.0f}% free)" if total > 0 and free >= 0 else ""
            state = f", error {entry['error']}" if entry["error"] else ""
            if entry["produceRefused"]:
                state += (f", BELOW ITS RESERVE of {_size(entry['reserveBytes'])}: produce to user topics is refused "
                          "until space is freed (delete records or topics, lower retention, or add space)")  # fmt: skip
            held = sum(p["size"] for p in entry["partitions"])
            click.echo(
                f"broker {broker['broker']}: {entry['logDir']}: {_size(total)} total, {_size(free)} free{share}{state}; "
                f"{len(entry['partitions'])} partitions, {_size(held)}"
            )
            if topics:
                for p in entry["partitions"]:
                    click.echo(f"  {p['partition']}: {_size(p['size'])}")
