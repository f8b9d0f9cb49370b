"""What the Prometheus metrics cost: produce and consume throughput with and without the endpoint.

Starts two ``logstore broker`` processes (bench/broker_perf.py's ``Broker``,
each on a fresh data directory) in the same run:

- ``off``: ``metrics.listener`` empty (the default). The hot-path counts are
  made all the same (they are plain integer adds, always on); nothing serves them;
- ``on``: ``metrics.listener=http://127.0.0.1:<free port>``, scraped by a
  thread of this process every ``--scrape-interval`` seconds (1 s: fifteen
  times Prometheus's default rate) for the whole run;

and, with ``--baseline-tree PATH``, a third, ``base``: the broker of another
checkout (``PYTHONPATH=PATH``; e.g. ``git worktree add /tmp/base <commit
before the metrics>`` with the C extensions copied in), which has no metrics
code at all.

Each of ``--runs`` runs does, for every broker in turn (the order rotates from
run to run): ``produce acks=1`` of ``--records`` values of ``--record-size``
bytes with confluent-kafka to a new one-partition topic, then ``consume`` of
them back (broker_perf's phases, timed from the first send to the last
acknowledgement or record). One untimed warm-up (a tenth of the records)
per broker comes first. Figures are medians over the runs; the ratios
``on/off`` (and ``off/base``) of records/s and of broker CPU per MB are the
result. Client and brokers share the machine's cores, so each rate is the
client's and the broker's together, and noise of a few percent is usual on a
shared VM: read ratios within ~5% of 1.0 as "no measurable difference".

Every loop is bounded in count and time (``--phase-timeout``).

Examples::

    .venv/bin/python bench/metrics_overhead.py                   # 500K records, 3 runs
    .venv/bin/python bench/metrics_overhead.py --records 200000 --runs 5 --baseline-tree /tmp/base
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import broker_perf
from broker_perf import Broker, Phase, consume_confluent, free_port, produce_confluent


@contextlib.contextmanager
def _pythonpath(path: str | None) -> Iterator[None]:
    """The child broker imports ``logstore`` from ``path`` (None: as this process does). ``python -m``
    puts its working directory first on the path, so the child starts in ``path`` too."""
    saved = os.environ.get("PYTHONPATH")
    saved_root = broker_perf.ROOT
    if path is not None:
        os.environ["PYTHONPATH"] = path
        broker_perf.ROOT = path
    try:
        yield
    finally:
        broker_perf.ROOT = saved_root
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


class Scraper:
    """GET /metrics every ``interval`` seconds on a thread until stopped; counts scrapes and bytes."""

    def __init__(self, url: str, interval: float) -> None:
        self.url = url
        self.interval = interval
        self.scrapes = 0
        self.bytes = 0
        self.seconds = 0.0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.wait(self.interval) and self.scrapes < 1_000_000:
            started = time.perf_counter()
            try:
                with urllib.request.urlopen(self.url, timeout=10) as response:
                    self.bytes += len(response.read())
            except OSError as e:
                self.errors.append(str(e))
                continue
            self.seconds += time.perf_counter() - started
            self.scrapes += 1


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/metrics_overhead.py",
        description="Produce/consume throughput of brokers with and without metrics.listener (same run).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--runs", type=int, default=3, help="timed runs; figures are medians")
    parser.add_argument("--records", type=int, default=500_000, help="records per phase")
    parser.add_argument("--record-size", type=int, default=100, help="bytes per record value")
    parser.add_argument("--scrape-interval", type=float, default=1.0, help="seconds between scrapes of 'on'")
    parser.add_argument("--phase-timeout", type=float, default=120.0, help="seconds any one phase may take")
    parser.add_argument("--event-loop", default="auto", choices=["auto", "asyncio", "uvloop"])
    parser.add_argument(
        "--baseline-tree", metavar="PATH", help="also run the broker of this checkout (PYTHONPATH=PATH)"
    )
    parser.add_argument("--tmp-root", default=tempfile.gettempdir(), help="where the data directories go")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.records < 1:
        parser.error("--runs and --records must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    value = os.urandom(args.record_size)
    metrics_port = free_port()
    peers: list[tuple[str, Broker, str | None]] = []
    workdirs = []
    scraper: Scraper | None = None
    try:
        configs: list[tuple[str, list[str], str | None]] = [
            ("off", [], None),
            ("on", [f"metrics.listener=http://127.0.0.1:{metrics_port}"], None),
        ]
        if args.baseline_tree:
            configs.append(("base", [], os.path.abspath(args.baseline_tree)))
        for name, overrides, tree in configs:
            workdir = tempfile.mkdtemp(prefix=f"logstore-metrics-{name}-", dir=args.tmp_root)
            workdirs.append(workdir)
            broker = Broker(workdir, args.event_loop, overrides)
            with _pythonpath(tree):
                broker.start()
            peers.append((name, broker, tree))
            print(f"{name}: {broker.banner}; pid {broker.pid}", file=sys.stderr)
        for name, broker, _ in peers:
            warm = max(args.records // 10, 1)
            produce_confluent(broker, "warmup", warm, value, "1", args.phase_timeout, f"{name} warm-up produce")
            consume_confluent(broker, "warmup", warm, args.phase_timeout, f"{name} warm-up consume")
        scraper = Scraper(f"http://127.0.0.1:{metrics_port}/metrics", args.scrape_interval)
        scraper.start()
        results: dict[str, dict[str, list[Phase]]] = {name: {"produce": [], "consume": []} for name, _, _ in peers}
        for run in range(args.runs):
            order = peers[run % len(peers) :] + peers[: run % len(peers)]
            for name, broker, _ in order:
                topic = f"run{run}"
                produced = produce_confluent(
                    broker, topic, args.records, value, "1", args.phase_timeout, f"{name} produce"
                )
                consumed = consume_confluent(broker, topic, args.records, args.phase_timeout, f"{name} consume")
                results[name]["produce"].append(produced)
                results[name]["consume"].append(consumed)
                print(
                    f"run {run} {name:>4}: produce {produced.records_per_s:>10,.0f} rec/s "
                    f"(broker {produced.broker_cpu_s_per_mb * 1000:.1f} ms CPU/MB), consume "
                    f"{consumed.records_per_s:>10,.0f} rec/s (broker {consumed.broker_cpu_s_per_mb * 1000:.1f} ms CPU/MB)",
                    file=sys.stderr,
                )
        scraper.stop()
        print(
            f"\n{args.runs} runs of {args.records:,} records of {args.record_size} B; 'on' scraped "
            f"{scraper.scrapes} times (every {args.scrape_interval:g} s, median "
            f"{scraper.bytes / max(scraper.scrapes, 1) / 1000:.1f} kB, "
            f"{scraper.seconds / max(scraper.scrapes, 1) * 1000:.1f} ms per scrape as the client saw it; "
            f"{len(scraper.errors)} failed)"
        )
        medians: dict[str, dict[str, tuple[float, float]]] = {}
        print(f"{'broker':>6} {'phase':>8} {'records/s':>12} {'broker ms CPU/MB':>17}")
        for name, phases in results.items():
            medians[name] = {}
            for phase, runs in phases.items():
                rate = statistics.median(p.records_per_s for p in runs)
                cpu = statistics.median(p.broker_cpu_s_per_mb for p in runs) * 1000
                medians[name][phase] = (rate, cpu)
                print(f"{name:>6} {phase:>8} {rate:>12,.0f} {cpu:>17.2f}")
        pairs = [("on", "off")] + ([("off", "base"), ("on", "base")] if args.baseline_tree else [])
        for a, b in pairs:
            for phase in ("produce", "consume"):
                (rate_a, cpu_a), (rate_b, cpu_b) = medians[a][phase], medians[b][phase]
                print(
                    f"{a}/{b} {phase}: records/s {rate_a / rate_b:.3f}x, broker CPU per MB {cpu_a / cpu_b:.3f}x"
                )
        return 0
    finally:
        if scraper is not None:
            scraper.stop()
        for _, broker, _ in peers:
            broker.stop()
        for workdir in workdirs:
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
