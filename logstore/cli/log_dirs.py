"""``logstore log-dirs``: the brokers' log directories, like ``kafka-log-dirs --describe``;
``logstore log-dirs move``: a partition to another log directory of its broker (AlterReplicaLogDirs,
what ``kafka-reassign-partitions`` does with a ``log_dirs`` entry).

One DescribeLogDirs per broker (the AdminClient's ``describe_log_dirs``): each directory's
total and free bytes (DescribeLogDirs v4+, KIP-827), its error, and the partitions in it with
their sizes, and the partitions being moved into it (future replicas: bytes copied, offset lag).
A failed directory shows its error (KAFKA_STORAGE_ERROR). A directory below its broker's
free-space reserve (``log.dir.min.free.bytes``, read with DescribeConfigs; unset: the broker's
default, the smaller of 5% of the filesystem and 1 GiB) is marked: its broker refuses produce to
user topics until space is freed (docs/operations.md).
"""

from __future__ import annotations

import json
import time
from typing import Any

import click

from logstore.cli._clients import ConsoleError, client_call, logstore_admin
from logstore.cli._options import BOOTSTRAP_OPTION, TIMEOUT_OPTION, with_options
from logstore.client.admin import ConfigResource, ResourceType
from logstore.client.types import TopicPartition
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
            ] + [
                {"partition": f"{tp.topic}-{tp.partition}", "size": size, "offsetLag": lag, "isFuture": True}
                for tp, (size, lag) in sorted(
                    info.get("future", {}).items(), key=lambda item: (item[0].topic, item[0].partition)
                )
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


@click.group("log-dirs", invoke_without_command=True)
@with_options(BOOTSTRAP_OPTION, TIMEOUT_OPTION)
@click.option("--broker-list", default="", metavar="ID,...", help="Only these brokers (default: every broker).")
@click.option("--topic-list", default="", metavar="T,...", help="Only the partitions of these topics.")
@click.option("--json", "as_json", is_flag=True, help="Print kafka-log-dirs' JSON (with totalBytes, usableBytes).")
@click.pass_context
def log_dirs(
    ctx: click.Context, bootstrap_server: str, timeout: float, broker_list: str, topic_list: str, as_json: bool
) -> None:
    """The brokers' log directories, like kafka-log-dirs --describe; `move` moves a partition.

    \b
    logstore log-dirs                              every broker's directories
    logstore log-dirs --broker-list 1 --topic-list events --json
    logstore log-dirs move events 0 /data/b        (see logstore log-dirs move --help)

    Each directory: its total and free bytes, its error (KAFKA_STORAGE_ERROR: the directory
    failed, an I/O error; its partitions are offline until the broker restarts), the bytes of
    the partitions in it, and the partitions being moved into it ("future": bytes copied and
    offsets behind). A broker whose free bytes fall below its reserve (log.dir.min.free.bytes)
    refuses produce to user topics until space is freed.
    """
    if ctx.invoked_subcommand is not None:
        return
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
            for p in entry["partitions"]:
                if p["isFuture"]:
                    click.echo(
                        f"  {p['partition']}: moving here (future replica): {_size(p['size'])} copied, "
                        f"{p['offsetLag']} offsets behind"
                    )
                elif topics:
                    click.echo(f"  {p['partition']}: {_size(p['size'])}")


def _moved(admin: Any, broker: int, tp: TopicPartition, path: str, timeout: float) -> bool:
    """Whether the partition serves from ``path`` now, with no future replica left."""
    found = admin.describe_log_dirs([broker], request_timeout=timeout).result()
    dirs = found.get(broker, {})
    info = dirs.get(path)
    return info is not None and tp in info["partitions"] and not any(tp in d["future"] for d in dirs.values())


@log_dirs.command("move")
@with_options(BOOTSTRAP_OPTION, TIMEOUT_OPTION)
@click.argument("topic")
@click.argument("partition", type=click.IntRange(min=0))
@click.argument("log_dir", metavar="DIR")
@click.option("--broker", "broker_id", type=int, default=None,
              help="The broker whose replica moves (default: the only broker; required with several).")
@click.option("--wait/--no-wait", default=True, show_default=True,
              help="Wait until the partition serves from DIR (bounded by --wait-timeout).")
@click.option("--wait-timeout", type=click.FloatRange(min=0), default=300, show_default=True,
              help="Seconds to wait for the copy with --wait.")  # fmt: skip
def move(
    bootstrap_server: str, timeout: float, topic: str, partition: int, log_dir: str, broker_id: int | None,
    wait: bool, wait_timeout: float,
) -> None:  # fmt: skip
    """Move partition PARTITION of TOPIC to DIR, another log directory of its broker
    (AlterReplicaLogDirs, KIP-113).

    \b
    logstore log-dirs move events 0 /data/b
    logstore log-dirs move events 0 /data/b --broker 2 --no-wait

    DIR is the absolute path as `logstore log-dirs` shows it. The partition stays online: it is
    copied into DIR while producers go on (at most
    replica.alter.log.dirs.io.max.bytes.per.second), then appends wait a moment while the
    last bytes are copied and the copy takes its place; `logstore log-dirs` shows the copy as a
    future replica meanwhile. Errors: LOG_DIR_NOT_FOUND (DIR is not one of the broker's
    log.dirs), KAFKA_STORAGE_ERROR (DIR or the partition's directory is offline),
    REPLICA_NOT_AVAILABLE (the broker holds no replica of it), REASSIGNMENT_IN_PROGRESS (it is
    moving to another directory already).
    """
    tp = TopicPartition(topic, partition)
    with logstore_admin(bootstrap_server) as admin:
        if broker_id is None:
            found = client_call("DescribeLogDirs", lambda: admin.describe_log_dirs(request_timeout=timeout).result())
            if len(found) != 1:
                raise ConsoleError(f"{len(found)} brokers: name the one whose replica moves with --broker")
            broker_id = next(iter(found))
        futures = client_call(
            "AlterReplicaLogDirs", lambda: admin.alter_replica_log_dirs(broker_id, {tp: log_dir}, request_timeout=timeout)
        )
        client_call(f"moving {topic}-{partition} to {log_dir}", lambda: futures[tp].result())
        click.echo(f"broker {broker_id}: moving {topic}-{partition} to {log_dir}")
        if not wait:
            return
        deadline = time.monotonic() + wait_timeout
        for _ in range(1_000_000):  # bounded by the deadline too
            if client_call("DescribeLogDirs", lambda: _moved(admin, broker_id, tp, log_dir, timeout)):
                click.echo(f"broker {broker_id}: {topic}-{partition} is in {log_dir}")
                return
            if time.monotonic() > deadline:
                raise ConsoleError(f"{topic}-{partition} is not in {log_dir} after {wait_timeout:g} s; "
                                   "see logstore log-dirs")  # fmt: skip
            time.sleep(0.2)
