"""The overview page: brokers, the controller, racks, topic and partition counts, and the partitions at risk.

Under-replicated: a partition whose ISR is smaller than its replica set;
offline: one with no leader (or whose metadata carries an error).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from logstore.console.kafka import blocking, result
from logstore.console.pages import clients_of, render, settings_of
from logstore.console.traffic import METER

MAX_LISTED = 100
"""At most this many under-replicated or offline partitions are listed (all are counted)."""


@dataclass
class Health:
    topics: int = 0
    internal_topics: int = 0
    partitions: int = 0
    replicas: int = 0
    under_replicated: list[tuple[str, int, list[int], list[int]]] = field(default_factory=list)
    offline: list[tuple[str, int, str]] = field(default_factory=list)
    under_replicated_count: int = 0
    offline_count: int = 0
    leaders: dict[int, int] = field(default_factory=dict)


def health_of(metadata: Any) -> Health:
    """Counts and partitions at risk from a ClusterMetadata (``list_topics``)."""
    health = Health()
    for name in sorted(metadata.topics):
        topic = metadata.topics[name]
        if topic.error is not None:
            continue
        if name.startswith("__"):
            health.internal_topics += 1
        else:
            health.topics += 1
        for index in sorted(topic.partitions):
            p = topic.partitions[index]
            health.partitions += 1
            health.replicas += len(p.replicas)
            if p.leader is None or p.leader < 0 or p.error is not None:
                health.offline_count += 1
                if len(health.offline) < MAX_LISTED:
                    reason = p.error.name() if p.error is not None else "no leader"
                    health.offline.append((name, index, reason))
                continue
            health.leaders[p.leader] = health.leaders.get(p.leader, 0) + 1
            if len(p.isrs) < len(p.replicas):
                health.under_replicated_count += 1
                if len(health.under_replicated) < MAX_LISTED:
                    health.under_replicated.append((name, index, list(p.replicas), list(p.isrs)))
    return health


async def overview(request: web.Request) -> web.StreamResponse:
    clients = clients_of(request)
    cluster = await blocking("describing the cluster", lambda: result(clients.admin.describe_cluster()))
    metadata = await blocking("listing topics", lambda: clients.admin.list_topics(timeout=15))
    health = health_of(metadata)
    nodes = sorted(cluster.nodes, key=lambda n: n.id)
    racks = sorted({n.rack for n in nodes if n.rack})
    meter = request.app[METER]
    return render(request, "overview.html", {
        "traffic": await meter.traffic(), "metrics_urls": settings_of(request).metrics_urls,
        "cluster": cluster, "nodes": nodes, "racks": racks, "health": health,
        "controller": cluster.controller.id if cluster.controller is not None else None,
    })  # fmt: skip


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_get("/", overview)
