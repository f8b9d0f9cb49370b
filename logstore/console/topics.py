"""Topics: the list (paged, with partition counts and sizes on disk), create, delete, configs, partitions.

Sizes come from DescribeLogDirs (every replica on every broker, summed per
topic; at most :data:`SIZES_TTL_S` seconds old); a cluster or principal that cannot answer it gets the list without
sizes and a note saying why. A topic's page shows each partition's leader,
replicas, ISR and its earliest and latest offsets, and the topic's configs,
the ones set on the topic first.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from aiohttp import web

from logstore.client import TopicPartition
from logstore.client.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from logstore.console.kafka import ConsoleError, blocking, result
from logstore.console.pages import (
    check_topic_name,
    clients_of,
    flash,
    int_value,
    redirect,
    render,
    settings_of,
    text_value,
    topic_name,
)
from logstore.console.traffic import METER

MAX_PARTITIONS = 10_000
SIZES_TTL_S = 5.0
"""Log directory sizes are read at most this often per principal (every replica of every topic: the
list's costliest answer), so paging through the list does not ask again."""
MAX_CONFIG_LINES = 100


def _page_of(names: list[str], page: int, size: int) -> tuple[list[str], int]:
    pages = max(1, -(-len(names) // size))
    page = min(max(page, 1), pages)
    return names[(page - 1) * size: page * size], pages


async def topic_list(request: web.Request) -> web.StreamResponse:
    clients = clients_of(request)
    settings = settings_of(request)
    query = text_value(request.query, "q", required=False, limit=249)
    page = int_value(request.query, "page", default=1, low=1, high=1_000_000)
    internal = request.query.get("internal") == "1"
    metadata = await blocking("listing topics", lambda: clients.admin.list_topics(timeout=15))
    names = sorted(n for n, t in metadata.topics.items() if t.error is None
                   and (internal or not n.startswith("__")) and query.lower() in n.lower())  # fmt: skip
    shown, pages = _page_of(names, page, settings.page_size)
    sizes: dict[str, int] | None = None
    sizes_note = ""
    try:
        dirs = await blocking("describing log directories", lambda: clients.cached(
            "log_dirs", SIZES_TTL_S, lambda: result(clients.admin.describe_log_dirs())))  # fmt: skip
        sizes = {}
        for by_path in dirs.values():
            for info in by_path.values():
                for tp, size in info["partitions"].items():
                    sizes[tp.topic] = sizes.get(tp.topic, 0) + size
    except ConsoleError as e:
        sizes_note = f"sizes unknown: {e}"
    meter = request.app[METER]
    rates = await meter.traffic() if meter.urls else None
    rows = []
    for name in shown:
        partitions = metadata.topics[name].partitions
        replicas = max((len(p.replicas) for p in partitions.values()), default=0)
        rows.append({"name": name, "partitions": len(partitions), "replication": replicas,
                     "size": None if sizes is None else sizes.get(name, 0),
                     "rate_in": None if rates is None or rates.seconds is None else rates.in_rate.get(name, 0.0),
                     "rate_out": None if rates is None or rates.seconds is None else rates.out_rate.get(name, 0.0),
                     "under_replicated": sum(1 for p in partitions.values() if len(p.isrs) < len(p.replicas))})  # fmt: skip
    return render(request, "topics.html", {
        "rows": rows, "page": min(page, pages), "pages": pages, "q": query, "total": len(names),
        "internal": internal, "sizes_note": sizes_note, "metered": rates is not None,
    })  # fmt: skip


def parse_configs(text: str) -> dict[str, str]:
    """``key=value`` lines (blank lines and ``#`` comments skipped) as a dict; a 400 for a bad line."""
    configs: dict[str, str] = {}
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    if len(lines) > MAX_CONFIG_LINES:
        raise ConsoleError(f"configs: at most {MAX_CONFIG_LINES} lines, not {len(lines)}")
    for number, line in enumerate(lines, 1):
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ConsoleError(f"configs line {number} is not key=value: {line[:80]!r}")
        configs[key.strip()] = value.strip()
    return configs


async def topic_create(request: web.Request) -> web.StreamResponse:
    clients = clients_of(request)
    form = await request.post()
    name = text_value(form, "name", limit=249).strip()
    check_topic_name(name)
    partitions = int_value(form, "partitions", default=1, low=1, high=MAX_PARTITIONS)
    replication = int_value(form, "replication_factor", default=-1, low=-1, high=100)
    if replication == 0:
        raise ConsoleError("replication_factor must be at least 1 (or -1 for the broker's default)")
    configs = parse_configs(text_value(form, "configs", required=False, limit=10_000))
    new = NewTopic(name, partitions, replication, config=configs or None)
    await blocking(f"creating topic {name!r}", lambda: result(clients.admin.create_topics([new])[name]))
    flash(request, f"topic {name} created with {partitions} partition(s)")
    return redirect(f"/topics/{quote(name)}")


async def topic_page(request: web.Request) -> web.StreamResponse:
    clients = clients_of(request)
    name = topic_name(request)
    metadata = await blocking(f"describing topic {name!r}", lambda: clients.admin.list_topics(name, timeout=15))
    topic = metadata.topics.get(name)
    if topic is None or topic.error is not None:
        reason = topic.error.name() if topic is not None and topic.error is not None else "not listed"
        status = 403 if "AUTHORIZATION" in reason else 404
        raise ConsoleError(f"topic {name!r} does not exist or you may not describe it ({reason}); "
                           "see the list of topics", status)  # fmt: skip
    indexes = sorted(topic.partitions)
    tps = [TopicPartition(name, i) for i in indexes]
    offsets = await blocking(f"listing offsets of {name!r}", lambda: _offsets(clients.admin, tps))
    resource = ConfigResource(ResourceType.TOPIC, name)
    configs_note = ""
    configs: list[ConfigEntry] = []
    try:
        described = await blocking(f"describing configs of {name!r}",
                                   lambda: result(clients.admin.describe_configs([resource])[resource]))  # fmt: skip
        configs = sorted(described.values(),
                         key=lambda e: (e.source != ConfigSource.DYNAMIC_TOPIC_CONFIG, e.name))  # fmt: skip
    except ConsoleError as e:
        configs_note = str(e)
    partitions = []
    for i in indexes:
        p = topic.partitions[i]
        low, high = offsets.get(i, (None, None))
        partitions.append({"id": i, "leader": p.leader, "replicas": list(p.replicas), "isr": list(p.isrs),
                           "low": low, "high": high,
                           "under_replicated": len(p.isrs) < len(p.replicas)})  # fmt: skip
    return render(request, "topic.html", {
        "name": name, "partitions": partitions, "configs": configs, "configs_note": configs_note,
        "topic_source": ConfigSource.DYNAMIC_TOPIC_CONFIG,
        "messages": sum((high or 0) - (low or 0) for low, high in offsets.values()),
    })  # fmt: skip


def _offsets(admin: Any, tps: list[TopicPartition]) -> dict[int, tuple[int | None, int | None]]:
    """{partition: (earliest, latest)}, None where the leader did not say."""
    low = admin.list_offsets({tp: OffsetSpec.earliest() for tp in tps})
    high = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps})
    out: dict[int, tuple[int | None, int | None]] = {}
    for tp in tps:
        values: list[int | None] = []
        for futures in (low, high):
            future = futures[tp]
            try:
                values.append(future.result(15).offset)
            except Exception:
                values.append(None)
        out[tp.partition] = (values[0], values[1])
    return out


async def topic_delete(request: web.Request) -> web.StreamResponse:
    clients = clients_of(request)
    name = topic_name(request)
    form = await request.post()
    if text_value(form, "confirm", required=False, limit=249) != name:
        raise ConsoleError(f"to delete topic {name!r}, type its name in the confirmation field")
    await blocking(f"deleting topic {name!r}", lambda: result(clients.admin.delete_topics([name])[name]))
    flash(request, f"topic {name} deleted")
    return redirect("/topics")


async def topic_configs(request: web.Request) -> web.StreamResponse:
    clients = clients_of(request)
    name = topic_name(request)
    form = await request.post()
    key = text_value(form, "name", limit=249).strip()
    operation = text_value(form, "op", required=False, default="set", limit=10)
    if operation not in ("set", "delete"):
        raise ConsoleError(f"op must be set or delete, not {operation!r}")
    if operation == "set":
        entry = ConfigEntry(key, text_value(form, "value", required=False, limit=10_000).strip(),
                            incremental_operation=AlterConfigOpType.SET)  # fmt: skip
    else:
        entry = ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE)
    resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[entry])
    await blocking(f"changing config {key} of topic {name!r}",
                   lambda: result(clients.admin.incremental_alter_configs([resource])[resource]))  # fmt: skip
    flash(request, f"{key} {'set to ' + str(entry.value) if operation == 'set' else 'back to its default'}")
    return redirect(f"/topics/{quote(name)}#configs")


async def topic_partitions(request: web.Request) -> web.StreamResponse:
    clients = clients_of(request)
    name = topic_name(request)
    form = await request.post()
    total = int_value(form, "total", low=1, high=MAX_PARTITIONS)
    new = NewPartitions(name, total)
    await blocking(f"adding partitions to {name!r}", lambda: result(clients.admin.create_partitions([new])[name]))
    flash(request, f"topic {name} now has {total} partitions")
    return redirect(f"/topics/{quote(name)}")


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_get("/topics", topic_list)
    router.add_post("/topics", topic_create)
    router.add_get("/topics/{topic}", topic_page)
    router.add_post("/topics/{topic}/delete", topic_delete)
    router.add_post("/topics/{topic}/configs", topic_configs)
    router.add_post("/topics/{topic}/partitions", topic_partitions)
