"""Draw logstore-dashboard.json's panels from a real Prometheus into a PNG (a documentation tool).

This is not part of the package and not a test: it makes docs/grafana/dashboard.png,
the picture of the dashboard that docs/metrics.md shows, where Grafana itself
cannot run (it is not packaged for Debian). It needs matplotlib
(``.venv/bin/pip install matplotlib``; not a dependency of logstore) and, for
``--demo``, Debian's ``prometheus`` (``apt-get install prometheus``) and
confluent-kafka.

What it draws is the dashboard JSON itself: for every panel, its title, its
position on Grafana's 24-column grid, and the result of each of its PromQL
queries over the time range, asked of Prometheus's HTTP API
(``/api/v1/query_range``), with Grafana's variables replaced
(``$__rate_interval`` by ``--rate-interval``, ``$instance``, ``$topic`` and ``$group``
by their "All" value) and its legend format applied. Time series panels become line
charts; stat panels the last value with the series under it.

``--demo`` makes the data first: a broker (``python -m logstore broker`` with
``metrics.listener``) and a Prometheus scraping it every second, both on free
127.0.0.1 ports in a temporary directory, and a load of ``--seconds``: a
producer to ``orders`` (3 partitions; its rate steps up, then down) and
``clicks`` (2 partitions), a consumer group ``billing`` on orders that consumes
more slowly than the peak (its lag grows, then drains), a group
``analytics`` on clicks whose second member joins and leaves, and a short-lived
admin connection every 10 s. Then it renders and stops everything.

Examples::

    .venv/bin/python docs/grafana/render_dashboard.py --demo --out docs/grafana/dashboard.png
    .venv/bin/python docs/grafana/render_dashboard.py --prometheus http://127.0.0.1:9090 \\
        --start 1795550000 --end 1795550300 --out /tmp/dashboard.png
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DASHBOARD = os.path.join(HERE, "logstore-dashboard.json")

# Grafana's dark theme, roughly.
BACKGROUND, PANEL, TEXT, GRID = "#111217", "#181b1f", "#ccccdc", "#2c3235"
PALETTE = ["#73bf69", "#f2cc0c", "#5794f2", "#ff9830", "#f2495c", "#b877d9", "#8ab8ff", "#ffb357", "#96d98d"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------- Prometheus


def query_range(prometheus: str, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
    params = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
    with urllib.request.urlopen(f"{prometheus}/api/v1/query_range?{params}", timeout=30) as response:
        body = json.load(response)
    if body.get("status") != "success":
        raise RuntimeError(f"Prometheus refused {expr!r}: {body}")
    return list(body["data"]["result"])


def substitute(expr: str, rate_interval: str, all_values: dict[str, str]) -> str:
    """Grafana's variables in a panel's query, as Grafana sends them with "All" selected (each
    variable's ``allValue``, else ``.*``)."""
    expr = expr.replace("$__rate_interval", rate_interval)
    return re.sub(r"\$(\w+)\b", lambda m: all_values.get(m[1], ".*"), expr)


def legend(fmt: str, labels: dict[str, str]) -> str:
    if not fmt:
        return ", ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "__name__") or "value"
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m[1], ""), fmt)


# --------------------------------------------------------------------------- drawing


def _scale(unit: str, values: list[float]) -> tuple[float, str]:
    """A factor and a suffix for the axis, Grafana's units approximately."""
    peak = max((abs(v) for v in values if not math.isnan(v)), default=0.0)
    if unit == "s":
        return (1000.0, "ms") if peak < 1 else (1.0, "s")
    if unit in ("Bps", "bytes"):
        suffix = "/s" if unit == "Bps" else ""
        for factor, name in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
            if peak >= factor:
                return 1 / factor, name + suffix
        return 1.0, "B" + suffix
    if unit == "reqps":
        return 1.0, "req/s"
    if unit == "ops":
        return 1.0, "ops/s"
    if unit == "ms":
        return 1.0, "ms/s"
    for factor, name in ((1e6, "M"), (1e3, "K")):
        if peak >= factor:
            return 1 / factor, name
    return 1.0, ""


def render(dashboard: dict[str, Any], prometheus: str, start: float, end: float, out: str, rate_interval: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    panels = dashboard["panels"]
    all_values = {v["name"]: v.get("allValue", ".*") for v in dashboard.get("templating", {}).get("list", [])}
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    unit_w, unit_h = 0.9, 0.36  # inches per grid column / row
    fig = plt.figure(figsize=(24 * unit_w, rows * unit_h + 0.8), facecolor=BACKGROUND)
    top = 0.8 / (rows * unit_h + 0.8)
    fig.text(
        0.01, 1 - top / 2, f"{dashboard['title']}   ·   "
        f"{datetime.fromtimestamp(start):%Y-%m-%d %H:%M:%S} to {datetime.fromtimestamp(end):%H:%M:%S}   ·   "
        "rendered from the dashboard's PromQL over a real Prometheus (not a Grafana screenshot)",
        color=TEXT, fontsize=13, va="center",
    )  # fmt: skip
    step = max((end - start) / 300, 1.0)
    for panel in panels:
        g = panel["gridPos"]
        left, width = g["x"] / 24, g["w"] / 24
        bottom = (1 - top) * (1 - (g["y"] + g["h"]) / rows)
        height = (1 - top) * g["h"] / rows
        if panel["type"] == "row":
            fig.text(left + 0.005, bottom + height / 2, panel["title"], color=TEXT, fontsize=12, weight="bold", va="center")
            continue
        pad_x, pad_y = 0.004, 0.006
        frame = fig.add_axes((left + pad_x, bottom + pad_y, width - 2 * pad_x, height - 2 * pad_y))
        frame.set_facecolor(PANEL)
        frame.set_xticks([])
        frame.set_yticks([])
        for spine in frame.spines.values():
            spine.set_color(GRID)
        frame.set_title(panel["title"], color=TEXT, fontsize=10, loc="left", pad=4)
        unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "short")
        series = []
        for target in panel["targets"]:
            for result in query_range(prometheus, substitute(target["expr"], rate_interval, all_values), start, end, step):
                times = [datetime.fromtimestamp(float(t)) for t, _ in result["values"]]
                values = [float(v) for _, v in result["values"]]
                series.append((legend(target.get("legendFormat", ""), result["metric"]), times, values))
        inner = fig.add_axes(
            (left + pad_x + 0.03, bottom + pad_y + height * 0.28, width - 2 * pad_x - 0.04, height * 0.55)
            if panel["type"] == "timeseries"
            else (left + pad_x + 0.01, bottom + pad_y + 0.01, width - 2 * pad_x - 0.02, height * 0.35)
        )
        inner.set_facecolor(PANEL)
        inner.tick_params(colors=TEXT, labelsize=7)
        for spine in inner.spines.values():
            spine.set_visible(False)
        inner.grid(color=GRID, linewidth=0.5)
        if not series:
            inner.text(0.5, 0.5, "No data", color=TEXT, ha="center", va="center", transform=inner.transAxes)
            inner.set_xticks([])
            inner.set_yticks([])
            continue
        factor, suffix = _scale(unit, [v for _, _, values in series for v in values])
        if panel["type"] == "stat":
            last = series[0][2][-1] * factor
            frame.text(0.5, 0.72, f"{last:g}{(' ' + suffix) if suffix else ''}", color="#73bf69" if last < 1 else "#f2495c",
                       fontsize=28, ha="center", va="center", transform=frame.transAxes)  # fmt: skip
            inner.plot(series[0][1], [v * factor for v in series[0][2]], color="#73bf69", linewidth=1)
            inner.set_xticks([])
            inner.set_yticks([])
            continue
        # The busiest series first: they get the first colours and the legend's places.
        ranked = sorted(series, key=lambda s: (-max((v for v in s[2] if not math.isnan(v)), default=0), s[0]))
        for i, (name, times, values) in enumerate(ranked):
            color = PALETTE[i % len(PALETTE)]
            inner.plot(times, [v * factor for v in values], color=color, linewidth=1.2, label=name)
        inner.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))
        inner.xaxis.set_major_locator(mdates.AutoDateLocator(maxticks=5))
        inner.set_ylabel(suffix, color=TEXT, fontsize=7)
        inner.set_ylim(bottom=0)
        handles, labels = inner.get_legend_handles_labels()
        shown = 8 if g["w"] >= 12 else 6
        frame.legend(handles[:shown], labels[:shown], loc="lower left",
                     ncol=3 if g["w"] >= 12 else 2, fontsize=7, frameon=False, labelcolor=TEXT,
                     bbox_to_anchor=(0.0, 0.0), handlelength=1.2, columnspacing=1.0)  # fmt: skip
        if len(labels) > shown:
            frame.text(0.99, 0.02, f"+{len(labels) - shown} more", color=TEXT, fontsize=7, ha="right",
                       transform=frame.transAxes)  # fmt: skip
    fig.savefig(out, dpi=80, facecolor=BACKGROUND)
    plt.close(fig)


# --------------------------------------------------------------------------- the demo


@contextmanager
def demo_stack(workdir: str) -> Iterator[tuple[str, str]]:
    """A broker with metrics.listener and a Prometheus scraping it every second: (bootstrap, prometheus URL)."""
    prometheus_bin = shutil.which("prometheus")
    if prometheus_bin is None:
        raise SystemExit("--demo needs Prometheus: apt-get install prometheus (or give --prometheus URL)")
    kafka_port, metrics_port, prometheus_port = free_port(), free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": ROOT}
    broker_log = open(os.path.join(workdir, "broker.log"), "w")  # noqa: SIM115 - closed below
    broker = subprocess.Popen(
        [sys.executable, "-m", "logstore", "broker", "--data-dir", os.path.join(workdir, "data"),
         "--listeners", f"PLAINTEXT://127.0.0.1:{kafka_port}",
         "--override", f"metrics.listener=http://127.0.0.1:{metrics_port}",
         "--override", "group.initial.rebalance.delay.ms=0"],
        stdout=subprocess.PIPE, stderr=broker_log, text=True, cwd=ROOT, env=env,
    )  # fmt: skip
    config = os.path.join(workdir, "prometheus.yml")
    with open(config, "w") as f:
        f.write(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: logstore\n    static_configs:\n"
            f"      - targets: ['127.0.0.1:{metrics_port}']\n"
        )
    prometheus_log = open(os.path.join(workdir, "prometheus.log"), "w")  # noqa: SIM115 - closed below
    prometheus = subprocess.Popen(
        [prometheus_bin, f"--config.file={config}", f"--storage.tsdb.path={os.path.join(workdir, 'tsdb')}",
         f"--web.listen-address=127.0.0.1:{prometheus_port}"],
        stdout=prometheus_log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{prometheus_port}"
    try:
        assert broker.stdout is not None
        line = broker.stdout.readline()
        if "listening on" not in line:
            raise SystemExit(f"the broker did not start: {line!r}; see {workdir}/broker.log")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                up = query_range(url, "up", time.time() - 5, time.time(), 1)
                if up and float(up[0]["values"][-1][1]) == 1:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        else:
            raise SystemExit(f"Prometheus never scraped the broker; see {workdir}/prometheus.log")
        yield f"127.0.0.1:{kafka_port}", url
    finally:
        for process in (broker, prometheus):
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        broker_log.close()
        prometheus_log.close()


def run_load(bootstrap: str, seconds: float) -> None:
    """The demo's clients (see the module doc); every loop bounded by ``seconds``."""
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic("orders", 3, 1), NewTopic("clicks", 2, 1)])
    for future in futures.values():
        future.result(30)
    stop = threading.Event()
    started = time.monotonic()

    def orders_rate(t: float) -> float:
        return 3000 if t < seconds * 0.25 else 12000 if t < seconds * 0.6 else 1500

    def produce() -> None:
        producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        value = os.urandom(300)
        tick = 0.1
        while not stop.is_set():
            t = time.monotonic() - started
            for _ in range(int(orders_rate(t) * tick)):
                producer.produce("orders", value, key=os.urandom(4))
            for _ in range(int((4000 if int(t) % 40 < 30 else 9000) * tick)):
                producer.produce("clicks", value[:120])
            producer.poll(0)
            time.sleep(tick)
        producer.flush(30)

    def consume(group: str, topic: str, max_rate: float, begin: float, end: float) -> None:
        while time.monotonic() - started < begin and not stop.is_set():
            time.sleep(0.2)
        consumer = ck.Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "auto.commit.interval.ms": 1000, "session.timeout.ms": 6000,
        })  # fmt: skip
        consumer.subscribe([topic])
        window_start, window_count = time.monotonic(), 0
        try:
            while not stop.is_set() and time.monotonic() - started < end:
                batch = consumer.consume(num_messages=500, timeout=0.5)
                window_count += len(batch)
                elapsed = time.monotonic() - window_start
                if window_count > max_rate * elapsed:
                    time.sleep(window_count / max_rate - elapsed)
                if elapsed > 5:
                    window_start, window_count = time.monotonic(), 0
        finally:
            consumer.close()

    def admin_churn() -> None:
        while not stop.wait(10):
            AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)

    threads = [
        threading.Thread(target=produce),
        threading.Thread(target=consume, args=("billing", "orders", 7000, 0, seconds)),
        threading.Thread(target=consume, args=("analytics", "clicks", 1e9, 0, seconds)),
        threading.Thread(target=consume, args=("analytics", "clicks", 1e9, seconds * 0.3, seconds * 0.7)),
        threading.Thread(target=admin_churn),
    ]
    for thread in threads:
        thread.daemon = True
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="docs/grafana/render_dashboard.py",
        description="Render logstore-dashboard.json's panels from Prometheus into a PNG (a documentation tool).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--demo", action="store_true", help="start a broker, Prometheus and a load first")
    parser.add_argument("--seconds", type=float, default=150.0, help="--demo: how long the load runs")
    parser.add_argument("--prometheus", help="a Prometheus that scrapes a logstore broker (without --demo)")
    parser.add_argument("--start", type=float, help="Unix time the range starts (without --demo)")
    parser.add_argument("--end", type=float, help="Unix time the range ends (without --demo; default: now)")
    parser.add_argument("--rate-interval", default="10s", help="what $__rate_interval becomes")
    parser.add_argument("--dashboard", default=DASHBOARD, help="the dashboard JSON")
    parser.add_argument("--out", default=os.path.join(HERE, "dashboard.png"), help="the PNG to write")
    args = parser.parse_args(argv)
    with open(args.dashboard) as f:
        dashboard = json.load(f)
    if args.demo:
        workdir = tempfile.mkdtemp(prefix="logstore-dashboard-")
        try:
            with demo_stack(workdir) as (bootstrap, prometheus):
                start = time.time()
                run_load(bootstrap, args.seconds)
                time.sleep(3)  # the last scrapes
                render(dashboard, prometheus, start, time.time(), args.out, args.rate_interval)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    else:
        if not args.prometheus or args.start is None:
            parser.error("give --demo, or --prometheus and --start")
        render(dashboard, args.prometheus, args.start, args.end or time.time(), args.out, args.rate_interval)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
