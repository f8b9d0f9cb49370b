"""Prometheus metrics of one broker (docs/metrics.md lists every family).

:class:`BrokerMetrics` (``Broker.metrics``) owns a per-broker
:class:`~prometheus_client.CollectorRegistry` (never the global one: several
brokers can share a process) and two kinds of metrics:

- **Counted on the hot paths** as plain Python ints and floats, exported at
  scrape time: requests per API and version, errors per API and error code,
  request time (a histogram kept as one list of bucket counts per API), bytes
  and records in and out per topic (:class:`TopicTraffic`), connections
  created and closed, ISR shrinks and expands, throttle time. A request costs
  one ``time.perf_counter()`` pair, one dict lookup, one ``bisect`` and a few
  integer adds; an append or a fetch one dict lookup and two adds per
  partition (a fetch's record count comes from the check its read makes anyway).
- **Read at scrape time** from the broker's live objects, never kept up to
  date between scrapes (live_metrics.py, a collector the broker adds): each log's size, start offset, end offset (LEO) and
  high watermark; leader and under-replicated partition counts; consumer
  groups by state, their members, and each group's committed offsets and lag
  (HW - committed); active connections. The families are read on the event
  loop (the HTTP server is :mod:`logstore.broker.metrics.metrics_http`), so they see
  the state the handlers change without locks, between two requests; that costs
  O(logs + partitions + groups + committed offsets) (1.8 ms for 150
  partitions), and the text is then formatted off the loop
  (:meth:`BrokerMetrics.exposition_async`).

Other parts of the broker add their own metrics through the same registry:
:meth:`BrokerMetrics.counter`, :meth:`~BrokerMetrics.gauge` and
:meth:`~BrokerMetrics.histogram` return prometheus_client objects registered
once per name (a second call with the same name returns the first object);
:meth:`~BrokerMetrics.add_collector` adds a scrape-time source; and
:meth:`~BrokerMetrics.throttled` adds to ``logstore_throttle_time_ms_total``.

>>> metrics = BrokerMetrics()
>>> metrics.traffic.produced("t", 100, 3)
>>> metrics.throttled("produce", 12.5)
>>> metrics.counter("logstore_example_events", "Events.", ["kind"]).labels("a").inc()
>>> text = metrics.exposition().decode()
>>> 'logstore_topic_records_in_total{topic="t"} 3.0' in text
True
>>> 'logstore_throttle_time_ms_total{quota_type="produce"} 12.5' in text
True
>>> 'logstore_example_events_total{kind="a"} 1.0' in text
True
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import typing
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric

_log = logging.getLogger("logstore.broker")

LATENCY_BUCKETS: tuple[float, ...] = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
"""Upper bounds (seconds) of ``logstore_request_duration_seconds``: 0.1 ms to 10 s, then +Inf."""

QUOTA_TYPES = ("produce", "fetch", "request", "controller_mutation")
"""Kafka's quota types; ``logstore_throttle_time_ms_total`` shows each from the start (0)."""

_bucket = bisect.bisect_left  # the bucket of an observation: the first bound >= it ("le")
_BUCKET_LABELS = [repr(bound) for bound in LATENCY_BUCKETS] + ["+Inf"]


class RequestStats:
    """One API's counts: requests per version, time per bucket, errors per code (plain ints)."""

    __slots__ = ("buckets", "by_version", "errors", "name", "seconds")

    def __init__(self, name: str, max_version: int) -> None:
        self.name = name
        self.by_version = [0] * (max_version + 1)
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)  # not cumulative; the last is +Inf
        self.seconds = 0.0
        self.errors: dict[int, int] = {}


class TopicTraffic:
    """One topic's client traffic: record batch bytes and records appended by Produce (in) and
    sent by consumer Fetches (out), and the bytes sent to follower replicas."""

    __slots__ = ("bytes_in", "bytes_out", "records_in", "records_out", "replication_bytes_out")

    def __init__(self) -> None:
        self.bytes_in = 0
        self.records_in = 0
        self.bytes_out = 0
        self.records_out = 0
        self.replication_bytes_out = 0


class TrafficCounters(dict[str, TopicTraffic]):
    """:class:`TopicTraffic` by topic; the ReplicaManager and Fetch count into it. O(1) per call."""

    def produced(self, topic: str, nbytes: int, records: int) -> None:
        """An appended Produce batch: its bytes (the whole v2 batch, header included) and records."""
        traffic = self.get(topic)
        if traffic is None:
            traffic = self[topic] = TopicTraffic()
        traffic.bytes_in += nbytes
        traffic.records_in += records

    def fetched(self, topic: str, nbytes: int, records: int, replica: bool) -> None:
        """Batches a Fetch sends: their bytes and records (counted by the read's own C check)."""
        traffic = self.get(topic)
        if traffic is None:
            traffic = self[topic] = TopicTraffic()
        if replica:
            traffic.replication_bytes_out += nbytes
        else:
            traffic.bytes_out += nbytes
            traffic.records_out += records


class ApiName(typing.Protocol):
    """What the request counts need of an API (the broker's Api)."""

    @property
    def key(self) -> int: ...

    @property
    def name(self) -> str: ...

    @property
    def max_version(self) -> int: ...


class BrokerMetrics:
    """The broker's metrics: hot-path counts, scrape-time sources, one registry (see the module doc)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.requests: dict[int, RequestStats] = {}
        self.traffic = TrafficCounters()
        self.connections_created: dict[str, int] = {}
        self.connections_closed: dict[str, int] = {}
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.throttle_ms: dict[str, float] = dict.fromkeys(QUOTA_TYPES, 0.0)
        self._families: dict[str, Any] = {}
        self._collectors: list[Callable[[], Iterable[Metric]]] = []
        self.registry.register(_Collector(self))

    # -- hot paths ---------------------------------------------------------------

    def observe(self, api: ApiName, version: int, seconds: float, response: Any) -> None:
        """One request served in ``seconds``; counts its top-level ``error_code`` if it has one."""
        stats = self.requests.get(api.key)
        if stats is None:
            stats = self.requests[api.key] = RequestStats(api.name, api.max_version)
        stats.by_version[version] += 1
        stats.buckets[_bucket(LATENCY_BUCKETS, seconds)] += 1
        stats.seconds += seconds
        if response is None:
            return
        # Per response, not per API: an API's versions differ (FindCoordinator v4+ answers a list
        # of coordinators, each with its own error, and no top-level error_code).
        code = getattr(response, "error_code", 0)
        if code:
            stats.errors[code] = stats.errors.get(code, 0) + 1

    def error(self, api: ApiName, code: int) -> None:
        """A partition-level error of an API (Produce, Fetch count theirs; others: the top level)."""
        stats = self.requests.get(api.key)
        if stats is None:
            stats = self.requests[api.key] = RequestStats(api.name, api.max_version)
        stats.errors[code] = stats.errors.get(code, 0) + 1

    def connection_opened(self, listener: str) -> None:
        self.connections_created[listener] = self.connections_created.get(listener, 0) + 1

    def connection_closed(self, listener: str) -> None:
        self.connections_closed[listener] = self.connections_closed.get(listener, 0) + 1

    def isr_changed(self, before: Sequence[int], after: Sequence[int]) -> None:
        """An ISR change this broker made as leader (AlterPartition accepted)."""
        if len(after) < len(before):
            self.isr_shrinks += 1
        elif len(after) > len(before):
            self.isr_expands += 1

    def throttled(self, quota_type: str, ms: float) -> None:
        """Add ``ms`` of throttle time for ``quota_type`` (produce, fetch, request, controller_mutation)."""
        self.throttle_ms[quota_type] = self.throttle_ms.get(quota_type, 0.0) + ms

    # -- other modules' metrics ----------------------------------------------------

    def counter(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> Counter:
        """A prometheus_client Counter in this registry (exported as ``<name>_total``); the same
        object for the same name. For cold paths: each ``inc`` takes a lock."""
        return typing.cast(Counter, self._family(Counter, name, documentation, labelnames))

    def gauge(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> Gauge:
        """A prometheus_client Gauge in this registry; the same object for the same name."""
        return typing.cast(Gauge, self._family(Gauge, name, documentation, labelnames))

    def histogram(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        buckets: Sequence[float] = LATENCY_BUCKETS,
    ) -> Histogram:
        """A prometheus_client Histogram in this registry; the same object for the same name."""
        return typing.cast(
            Histogram, self._family(Histogram, name, documentation, labelnames, buckets=buckets)
        )

    def _family(
        self, kind: Any, name: str, documentation: str, labelnames: Sequence[str], **extra: Any
    ) -> Any:
        found = self._families.get(name)
        if found is None:
            found = self._families[name] = kind(
                name, documentation, labelnames, registry=self.registry, **extra
            )
        elif not isinstance(found, kind):
            raise ValueError(f"metric {name} is already a {type(found).__name__}")
        return found

    def add_collector(self, collect: Callable[[], Iterable[Metric]]) -> None:
        """A scrape-time source of metric families (called on the event loop at each scrape)."""
        self._collectors.append(collect)

    # -- export ---------------------------------------------------------------------

    def exposition(self) -> bytes:
        """The Prometheus text format (version 0.0.4) of every family, read now."""
        return typing.cast(bytes, generate_latest(self.registry))

    async def exposition_async(self) -> bytes:
        """:meth:`exposition` for the event loop: the families are read on the loop (so they see
        the state between two requests), the text is made in the default executor. Formatting is
        most of a scrape (~8 us a sample, against ~2 us to read it): 150 partitions take ~5 ms,
        which the loop would otherwise spend in one block."""
        families = list(self.registry.collect())
        loop = asyncio.get_running_loop()
        return typing.cast(bytes, await loop.run_in_executor(None, generate_latest, _Collected(families)))

    def collect(self) -> Iterable[Metric]:
        yield from self._counted()
        for collect in self._collectors:
            try:
                yield from collect()
            except Exception:  # one bad source must not fail the scrape
                _log.exception("a metrics collector failed; its families are left out of this scrape")

    def _counted(self) -> Iterable[Metric]:
        requests = CounterMetricFamily(
            "logstore_requests", "Requests served, by API and version.", labels=["api", "version"]
        )
        errors = CounterMetricFamily(
            "logstore_request_errors",
            "Error codes answered, by API and Kafka error name (top-level codes; Produce and Fetch: per partition).",
            labels=["api", "error"],
        )
        latency = HistogramMetricFamily(
            "logstore_request_duration_seconds",
            "Time to decode, handle and encode a request (Fetch: long-poll wait included), by API.",
            labels=["api"],
        )
        for stats in list(self.requests.values()):
            for version, count in enumerate(stats.by_version):
                if count:
                    requests.add_metric([stats.name, str(version)], count)
            for code, count in list(stats.errors.items()):
                errors.add_metric([stats.name, _error_name(code)], count)
            cumulative, total = [], 0
            for label, count in zip(_BUCKET_LABELS, stats.buckets, strict=True):
                total += count
                cumulative.append((label, total))
            latency.add_metric([stats.name], cumulative, stats.seconds)
        yield from (requests, errors, latency)
        families = {
            "bytes_in": ("logstore_topic_bytes_in", "Record batch bytes appended by Produce, by topic."),
            "records_in": ("logstore_topic_records_in", "Records appended by Produce, by topic."),
            "bytes_out": (
                "logstore_topic_bytes_out",
                "Record batch bytes sent to consumers by Fetch, by topic.",
            ),
            "records_out": (
                "logstore_topic_records_out",
                "Records in the batches sent to consumers by Fetch (whole batches), by topic.",
            ),
            "replication_bytes_out": (
                "logstore_topic_replication_bytes_out",
                "Record batch bytes sent to follower replicas by Fetch, by topic.",
            ),
        }
        for attribute, (name, documentation) in families.items():
            family = CounterMetricFamily(name, documentation, labels=["topic"])
            for topic, traffic in list(self.traffic.items()):
                family.add_metric([topic], getattr(traffic, attribute))
            yield family
        created = CounterMetricFamily(
            "logstore_connections_created", "Connections accepted, by listener.", labels=["listener"]
        )
        for listener, count in list(self.connections_created.items()):
            created.add_metric([listener], count)
        closed = CounterMetricFamily(
            "logstore_connections_closed", "Connections closed, by listener.", labels=["listener"]
        )
        for listener, count in list(self.connections_closed.items()):
            closed.add_metric([listener], count)
        yield from (created, closed)
        yield CounterMetricFamily(
            "logstore_isr_shrinks", "ISR shrinks made by this broker as leader.", value=self.isr_shrinks
        )
        yield CounterMetricFamily(
            "logstore_isr_expands", "ISR expansions made by this broker as leader.", value=self.isr_expands
        )
        throttle = CounterMetricFamily(
            "logstore_throttle_time_ms",
            "Throttle time given to clients (ms), by quota type.",
            labels=["quota_type"],
        )
        for quota_type, ms in list(self.throttle_ms.items()):
            throttle.add_metric([quota_type], ms)
        yield throttle


class _Collected:
    """Families already read, as generate_latest wants them (a registry's ``collect``)."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return iter(self._families)


class _Collector:
    """The registry's view of :meth:`BrokerMetrics.collect`."""

    def __init__(self, metrics: BrokerMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterable[Metric]:
        return self._metrics.collect()


def _error_name(code: int) -> str:
    from kio.schema.errors import ErrorCode

    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return str(code)
