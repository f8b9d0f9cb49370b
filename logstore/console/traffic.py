"""Bytes in and out, live: read from the brokers' Prometheus endpoints (``/metrics``) when the console knows them.

Kafka's protocol does not say where a broker serves its metrics, so the console
is told (``logstore console --metrics-url http://host:port/metrics``, repeatable;
``console.listeners`` on a broker with ``metrics.listener`` passes its own).
Each scrape reads the per-topic byte counters (logstore's
``logstore_topic_bytes_in_total`` / ``_bytes_out_total``, and the JMX
exporter's ``kafka_server_brokertopicmetrics_bytesin_total`` /
``bytesout_total`` for Kafka's brokers), and a rate is the difference from the
console's previous scrape over the seconds between them. A broker whose
endpoint does not answer within :data:`SCRAPE_TIMEOUT_S` is named, not fatal.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

from logstore.console.pages import render, settings_of

SCRAPE_TIMEOUT_S = 2.0
MAX_METRICS_BYTES = 20_000_000
IN_NAMES = ("logstore_topic_bytes_in_total", "kafka_server_brokertopicmetrics_bytesin_total")
OUT_NAMES = ("logstore_topic_bytes_out_total", "kafka_server_brokertopicmetrics_bytesout_total")
_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})?\s+([-+0-9.eE]+|NaN|[+-]Inf)')
_TOPIC = re.compile(r'topic="((?:[^"\\]|\\.)*)"')


@dataclass
class Scrape:
    at: float
    bytes_in: dict[str, float] = field(default_factory=dict)
    bytes_out: dict[str, float] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)


@dataclass
class Traffic:
    """Rates (bytes/s) by topic since the previous scrape; None before there are two."""

    seconds: float | None
    in_rate: dict[str, float]
    out_rate: dict[str, float]
    failed: list[str]

    @property
    def total_in(self) -> float:
        return sum(self.in_rate.values())

    @property
    def total_out(self) -> float:
        return sum(self.out_rate.values())


def parse_counters(text: str, into_in: dict[str, float], into_out: dict[str, float]) -> None:
    """Add the per-topic byte counters of a Prometheus text page to the two dicts."""
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        found = _LINE.match(line)
        if found is None:
            continue
        name, labels, value = found.groups()
        target = into_in if name in IN_NAMES else into_out if name in OUT_NAMES else None
        if target is None:
            continue
        topic_match = _TOPIC.search(labels or "")
        topic = topic_match.group(1) if topic_match else ""
        try:
            target[topic] = target.get(topic, 0.0) + float(value)
        except ValueError:
            continue


class Meter:
    """The console's scrapes of the brokers' metrics, and the rates between the last two."""

    def __init__(self, urls: list[str]) -> None:
        self.urls = list(urls)
        self.previous: Scrape | None = None
        self.latest: Scrape | None = None
        self._lock = asyncio.Lock()

    async def _scrape(self) -> Scrape:
        scrape = Scrape(time.monotonic())
        timeout = aiohttp.ClientTimeout(total=SCRAPE_TIMEOUT_S)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            async def one(url: str) -> None:
                try:
                    async with session.get(url) as response:
                        if response.status != 200:
                            scrape.failed.append(f"{url}: HTTP {response.status}")
                            return
                        body = await response.content.read(MAX_METRICS_BYTES)
                        parse_counters(body.decode("utf-8", "replace"), scrape.bytes_in, scrape.bytes_out)
                except (TimeoutError, aiohttp.ClientError, OSError) as e:
                    scrape.failed.append(f"{url}: {type(e).__name__} {e}".strip())

            await asyncio.gather(*(one(url) for url in self.urls))
        return scrape

    async def traffic(self, min_interval: float = 0.5) -> Traffic | None:
        """Scrape now (at most every ``min_interval`` s; between, the last figures), and the rates."""
        if not self.urls:
            return None
        async with self._lock:
            if self.latest is None or time.monotonic() - self.latest.at >= min_interval:
                scrape = await self._scrape()
                self.previous, self.latest = self.latest, scrape
        latest, previous = self.latest, self.previous
        assert latest is not None
        if previous is None or latest.at <= previous.at:
            return Traffic(None, {}, {}, latest.failed)
        seconds = latest.at - previous.at

        def rates(now: dict[str, float], before: dict[str, float]) -> dict[str, float]:
            return {t: max(0.0, v - before.get(t, 0.0)) / seconds for t, v in now.items()}

        return Traffic(seconds, rates(latest.bytes_in, previous.bytes_in),
                       rates(latest.bytes_out, previous.bytes_out), latest.failed)  # fmt: skip


METER = web.AppKey("meter", Meter)


async def traffic_fragment(request: web.Request) -> web.StreamResponse:
    """The overview's traffic box alone (the page's script asks for it every 2 s)."""
    traffic = await request.app[METER].traffic()
    return render(request, "_traffic.html", {"traffic": traffic, "metrics_urls": settings_of(request).metrics_urls})


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_get("/traffic", traffic_fragment)
