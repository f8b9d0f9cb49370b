"""Running a broker process: logging, the event loop, signals, a clean close."""

from __future__ import annotations

import asyncio
import faulthandler
import gc
import logging
import signal
import sys
from collections.abc import Callable

from logstore.broker.broker import Broker
from logstore.broker.cluster_member import ClusterLink
from logstore.broker.config.broker_config import BrokerConfig
from logstore.errors import LogstoreError

Join = Callable[[Broker, tuple[str, int]], ClusterLink]

_log = logging.getLogger("logstore.broker")


def _loop_factory(choice: str) -> type[asyncio.AbstractEventLoop] | None:
    if choice == "asyncio":
        return None
    try:
        import uvloop  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        if choice == "uvloop":
            raise SystemExit("--event-loop uvloop: uvloop is not installed; pip install uvloop") from None
        return None
    loop_class: type[asyncio.AbstractEventLoop] = uvloop.Loop
    return loop_class


def raise_nofile_limit() -> tuple[int, int]:
    """Raise RLIMIT_NOFILE's soft limit to the hard limit (each connection is a descriptor;
    a soft limit of 1,024 would refuse the 1,025th client). Returns (soft, hard)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as e:
            _log.warning("cannot raise the open file limit from %d to %d: %s", soft, hard, e)
    return resource.getrlimit(resource.RLIMIT_NOFILE)


async def serve(config: BrokerConfig, data_dir: str | None, join: Join | None = None) -> None:
    raise_nofile_limit()
    broker = Broker(config, data_dir=data_dir, join=join)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await broker.start()
    except OSError as e:
        await broker.close()
        raise SystemExit(
            f"cannot listen on {config.values['listeners']}: {e.strerror}; pick another port"
        ) from None
    except LogstoreError as e:  # joining a cluster: ZooKeeper down, a duplicate broker.id, ...
        await broker.close()
        raise SystemExit(f"broker {broker.node_id} cannot start: {e}") from None
    for name, host, port in broker.bound_listeners:
        print(
            f"logstore broker {broker.node_id} listening on {name}://{host}:{port} (data: {broker.data_dir})",
            flush=True,
        )
    if broker.schema_registry is not None:
        for url in broker.schema_registry.urls:
            print(f"logstore broker {broker.node_id} schema registry on {url}", flush=True)
    for key in config.ignored:
        _log.warning("config %s is not used by this broker; ignored", key)
    tune_gc()
    await stop.wait()
    _log.info("shutting down")
    # A close that hangs (a lock, an executor job that never returns) shows where: every thread's
    # stack goes to the log after SHUTDOWN_DUMP_S, and again each period while the process lives.
    faulthandler.dump_traceback_later(SHUTDOWN_DUMP_S, repeat=True, file=sys.stderr)
    await broker.close()
    print("logstore broker stopped cleanly", flush=True)


SHUTDOWN_DUMP_S = 20.0
"""A shutdown still running after this long logs every thread's stack (and again each period)."""

GC_THRESHOLDS = (50_000, 20, 20)
"""The cyclic collector's thresholds for a running broker (CPython's default: 700, 10, 10)."""


def tune_gc() -> None:
    """Tune the cyclic garbage collector for serving, once started.

    Every request allocates dozens of short-lived objects; at the default
    threshold a young-generation collection ran every ~15 small requests and
    full collections walked every module and schema class loaded at start.
    Freezing what exists after start (it lives as long as the process) and
    collecting the young generation every 50,000 allocations took small
    requests from 50 to 39 us of CPU each (bench/groups_bench.py, OffsetCommit).
    Almost nothing a request makes is part of a cycle, so memory is not held
    longer in practice.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def run(
    config: BrokerConfig, data_dir: str | None = None, event_loop: str = "auto", join: Join | None = None
) -> None:
    """Run a broker until SIGTERM or Ctrl-C; ``join``: how it joins a cluster (``zookeeper.connect``)."""
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    factory = _loop_factory(event_loop)
    if factory is None:
        asyncio.run(serve(config, data_dir, join))
    else:
        with asyncio.Runner(loop_factory=factory) as runner:
            runner.run(serve(config, data_dir, join))
