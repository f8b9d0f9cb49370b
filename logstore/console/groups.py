"""Consumer groups: the list, a group's members and assignment, lag per partition (a chart), offset resets, delete.

Lag is the partition's latest offset minus the group's committed offset;
a partition of the group's topics with no commit is listed with none (as
``kafka-consumer-groups --describe`` shows "-"). A reset is two steps, as
``kafka-consumer-groups --reset-offsets`` (``--dry-run``, then ``--execute``):
the form asks for a preview, which shows each partition's offset now and
after; only the preview's own form applies it, with exactly the offsets shown.
Kafka applies a reset only to a group with no active members; the preview
says so when the group has some.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from aiohttp import web
from markupsafe import Markup

from logstore.client import TopicPartition
from logstore.client.admin import ConsumerGroupTopicPartitions, OffsetSpec
from logstore.console.charts import bar_chart
from logstore.console.kafka import Clients, ConsoleError, blocking, result
from logstore.console.messages import parse_time
from logstore.console.pages import clients_of, flash, int_value, redirect, render, settings_of, text_value

RESET_TO = ("earliest", "latest", "timestamp", "offset")
MAX_RESET_PARTITIONS = 10_000
MAX_TOPICS_COMPLETED = 20
"""For at most this many of a group's topics, the partitions it never committed are listed too."""


@dataclass
class Lag:
    topic: str
    partition: int
    committed: int | None
    end: int | None

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.end is None:
            return None
        return max(0, self.end - self.committed)


def _group(request: web.Request) -> str:
    group = request.match_info["group"]
    if not group or len(group) > 1000:
        raise ConsoleError("a group id is 1 to 1000 characters")
    return group


async def group_list(request: web.Request) -> web.StreamResponse:
    clients = clients_of(request)
    settings = settings_of(request)
    query = text_value(request.query, "q", required=False, limit=249)
    page = int_value(request.query, "page", default=1, low=1, high=1_000_000)
    listed = await blocking("listing consumer groups", lambda: result(clients.admin.list_consumer_groups()))
    groups = sorted((g for g in listed.valid or [] if query.lower() in g.group_id.lower()), key=lambda g: g.group_id)
    pages = max(1, -(-len(groups) // settings.page_size))
    page = min(page, pages)
    shown = groups[(page - 1) * settings.page_size: page * settings.page_size]
    errors = [str(e) for e in listed.errors or []]
    return render(request, "groups.html", {"groups": shown, "page": page, "pages": pages, "q": query,
                                           "total": len(groups), "errors": errors})  # fmt: skip


def lag_of(clients: Clients, group: str) -> list[Lag]:
    """The group's committed offsets and each partition's latest offset."""
    admin = clients.admin
    committed = result(admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group])
    offsets = {(tp.topic, tp.partition): tp.offset for tp in committed.topic_partitions or []}
    for topic in sorted({t for t, _ in offsets})[:MAX_TOPICS_COMPLETED]:  # partitions of its topics it never committed
        described = admin.list_topics(topic, timeout=10).topics.get(topic)
        if described is not None and described.error is None:
            for p in described.partitions:
                offsets.setdefault((topic, p), -1)
    tps = [TopicPartition(t, p) for t, p in sorted(offsets)]
    ends: dict[tuple[str, int], int | None] = {}
    if tps:
        futures = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps})
        for tp, future in futures.items():
            try:
                ends[(tp.topic, tp.partition)] = future.result(15).offset
            except Exception:
                ends[(tp.topic, tp.partition)] = None
    return [Lag(t, p, offset if offset >= 0 else None, ends.get((t, p))) for (t, p), offset in sorted(offsets.items())]


def lag_chart(group: str, lags: list[Lag]) -> str:
    total = sum(x.lag or 0 for x in lags)
    return bar_chart([(f"{x.topic}/{x.partition}", x.lag or 0) for x in lags],
                     title=f"lag of {group}: {total:,} records in all")  # fmt: skip


def describe(clients: Clients, group: str) -> Any:
    return result(clients.admin.describe_consumer_groups([group])[group])


async def group_page(request: web.Request) -> web.StreamResponse:
    clients = clients_of(request)
    group = _group(request)
    description = await blocking(f"describing group {group!r}", lambda: describe(clients, group))
    lags = await blocking(f"reading the offsets of group {group!r}", lambda: lag_of(clients, group))
    members = []
    for m in description.members:
        assigned = ", ".join(f"{tp.topic}/{tp.partition}" for tp in sorted(
            m.assignment.topic_partitions, key=lambda t: (t.topic, t.partition)))  # fmt: skip
        members.append({"id": m.member_id, "client_id": m.client_id, "host": m.host, "assigned": assigned})
    return render(request, "group.html", {
        "group": group, "description": description, "state": _state(description), "members": members,
        "lags": lags, "total_lag": sum(x.lag or 0 for x in lags), "chart": Markup(lag_chart(group, lags)),
        "topics": sorted({x.topic for x in lags}), "reset_to": RESET_TO,
    })  # fmt: skip


def _state(description: Any) -> str:
    state = description.state
    return "Unknown" if state is None else str(getattr(state, "name", state)).replace("_", " ").title()


async def group_lag_svg(request: web.Request) -> web.StreamResponse:
    clients = clients_of(request)
    group = _group(request)
    lags = await blocking(f"reading the offsets of group {group!r}", lambda: lag_of(clients, group))
    return web.Response(text=lag_chart(group, lags), content_type="image/svg+xml",
                        headers={"Cache-Control": "no-store"})  # fmt: skip


def plan_reset(clients: Clients, group: str, to: str, topic: str | None, timestamp: int, offset: int) -> list[dict[str, Any]]:
    """Each partition's offset now and after the reset (nothing is changed)."""
    lags = lag_of(clients, group)
    targets = {(x.topic, x.partition): x for x in lags if topic is None or x.topic == topic}
    if topic is not None:
        metadata = clients.admin.list_topics(topic, timeout=10)
        described = metadata.topics.get(topic)
        if described is None or described.error is not None:
            raise ConsoleError(f"topic {topic!r} does not exist or you may not describe it", 404)
        for p in described.partitions:
            targets.setdefault((topic, p), Lag(topic, p, None, None))
    if not targets:
        raise ConsoleError(f"group {group!r} has no committed offsets; name a topic to reset it on")
    if len(targets) > MAX_RESET_PARTITIONS:
        raise ConsoleError(f"a reset covers at most {MAX_RESET_PARTITIONS} partitions; name a topic")
    tps = [TopicPartition(t, p) for t, p in sorted(targets)]
    admin = clients.admin
    low = admin.list_offsets({tp: OffsetSpec.earliest() for tp in tps})
    high = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps})
    by_time = admin.list_offsets({tp: OffsetSpec.for_timestamp(timestamp) for tp in tps}) if to == "timestamp" else {}
    plan = []
    for tp in tps:
        first, last = low[tp].result(15).offset, high[tp].result(15).offset
        if to == "earliest":
            new = first
        elif to == "latest":
            new = last
        elif to == "timestamp":
            found = by_time[tp].result(15).offset
            new = last if found < 0 else found
        else:
            new = min(max(offset, first), last)
        now = targets[(tp.topic, tp.partition)].committed
        plan.append({"topic": tp.topic, "partition": tp.partition, "now": now, "new": new, "low": first, "high": last})
    return plan


async def reset_preview(request: web.Request) -> web.StreamResponse:
    clients = clients_of(request)
    group = _group(request)
    form = await request.post()
    to = text_value(form, "to", limit=16)
    if to not in RESET_TO:
        raise ConsoleError(f"reset to one of {', '.join(RESET_TO)}, not {to!r}")
    topic = text_value(form, "topic", required=False, limit=249) or None
    timestamp = parse_time(text_value(form, "time", limit=40)) if to == "timestamp" else 0
    offset = int_value(form, "offset", low=0) if to == "offset" else 0
    description = await blocking(f"describing group {group!r}", lambda: describe(clients, group))
    plan = await blocking(f"planning the reset of {group!r}",
                          lambda: plan_reset(clients, group, to, topic, timestamp, offset))  # fmt: skip
    encoded = " ".join(f"{row['topic']}:{row['partition']}:{row['new']}" for row in plan)
    return render(request, "reset.html", {"group": group, "plan": plan, "to": to, "encoded": encoded,
                                          "members": len(description.members)})  # fmt: skip


def parse_plan(text: str) -> list[TopicPartition]:
    """The preview's ``topic:partition:offset`` words (topic names have no ':' nor space); a 400 otherwise."""
    tps = []
    lines = text.split()
    if not lines or len(lines) > MAX_RESET_PARTITIONS:
        raise ConsoleError("the reset has no partitions (or too many): make a preview first")
    for line in lines:
        fields = line.rsplit(":", 2)
        if len(fields) != 3 or not fields[1].isdigit() or not fields[2].isdigit():
            raise ConsoleError(f"the reset's line {line[:80]!r} is not topic, partition, offset: make a new preview")
        tps.append(TopicPartition(fields[0], int(fields[1]), int(fields[2])))
    return tps


async def reset_apply(request: web.Request) -> web.StreamResponse:
    clients = clients_of(request)
    group = _group(request)
    form = await request.post()
    tps = parse_plan(text_value(form, "plan", limit=10_000_000))
    request_ = [ConsumerGroupTopicPartitions(group, tps)]
    answer = await blocking(f"resetting the offsets of {group!r}",
                            lambda: result(clients.admin.alter_consumer_group_offsets(request_)[group]))  # fmt: skip
    failed = [f"{tp.topic}/{tp.partition}: {tp.error.name()}" for tp in answer.topic_partitions or [] if tp.error]
    if failed:
        raise ConsoleError(f"resetting the offsets of {group!r} failed for {', '.join(failed[:10])}", 409)
    flash(request, f"offsets of {group} reset on {len(tps)} partition(s)")
    return redirect(f"/groups/{quote(group, safe='')}")


async def group_delete(request: web.Request) -> web.StreamResponse:
    clients = clients_of(request)
    group = _group(request)
    form = await request.post()
    if text_value(form, "confirm", required=False, limit=1000) != group:
        raise ConsoleError(f"to delete group {group!r}, type its id in the confirmation field")
    await blocking(f"deleting group {group!r}", lambda: result(clients.admin.delete_consumer_groups([group])[group]))
    flash(request, f"group {group} deleted")
    return redirect("/groups")


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_get("/groups", group_list)
    router.add_get("/groups/{group}", group_page)
    router.add_get("/groups/{group}/lag.svg", group_lag_svg)
    router.add_post("/groups/{group}/reset", reset_preview)
    router.add_post("/groups/{group}/reset/apply", reset_apply)
    router.add_post("/groups/{group}/delete", group_delete)
