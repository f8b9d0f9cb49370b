"""Consumer groups on the broker: how fast a group settles, how many commits per second.

Starts ``python -m logstore broker`` on 127.0.0.1 (a free port, a fresh
temporary data directory, removed afterwards; ``bench/broker_perf.py``'s
``Broker``) and measures, ``--runs`` times each:

1. **join** (twice: ``group.initial.rebalance.delay.ms`` 0 and Kafka's
   default 3000, each on its own broker): ``--consumers`` confluent-kafka
   consumers (range assignor, session.timeout.ms 6000, heartbeat.interval.ms
   500, each polling in its own thread) subscribe to one group on a topic of
   ``--partitions`` partitions, started back to back as fast as possible.
   Reported: the time from the last consumer's ``subscribe()`` (the last
   join; its JoinGroup reaches the broker a little later) until every
   consumer holds its final assignment (the group Stable: every partition
   owned by exactly one member, every member owning one), and the number of
   rebalances that took after the last join: with the eager range assignor
   a member receives one assignment per generation it is in, so the fewest
   assignments any member received is the number of rebalances after the
   last JoinGroup reached the broker; the most is the number from the first
   join. The bar: Stable within one rebalance after the last join. A fresh
   group per run.
2. **commits**: OffsetCommit requests per second to one broker, raw on the
   wire: ``--connections`` sockets, each in its own thread, pipelining
   ``--window`` requests at a time for ``--seconds``; every request commits
   one partition (v8, generation -1, member "": a group with no members, as
   admin tools and manually assigned consumers commit). The request bytes
   are encoded once by kio (only the correlation id changes), and every
   response's error code is checked, so the client costs little. The bar:
   >= 20,000 commits/s. ``--partitions-per-commit N`` (default 1) makes each
   request commit N partitions: offsets/s is reported too.
3. **confluent commits**: one confluent-kafka consumer assigned a partition
   calls ``commit(offsets=..., asynchronous=True)`` in a tight loop (at most
   1,000 unacknowledged) for ``--seconds``; the rate is commits acknowledged
   (``on_commit``) per second.

Figures are medians over the runs. Every loop is bounded in count and time.

Examples::

    .venv/bin/python bench/groups_bench.py                 # 3 runs of everything
    .venv/bin/python bench/groups_bench.py --runs 1 --seconds 3 --skip-join
"""

from __future__ import annotations

import argparse
import datetime
import io
import os
import shutil
import signal
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from broker_perf import BenchError, Broker, versions

JOIN_BAR_REBALANCES = 1
COMMIT_BAR = 20_000.0
CONFLUENT_IN_FLIGHT = 1000
SESSION = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}


# --------------------------------------------------------------------------- join


@dataclass
class JoinRun:
    delay_ms: int
    seconds_after_last_join: float
    rebalances_after_last_join: int
    rebalances_from_first_join: int
    join_spread_s: float


class _Member:
    def __init__(self, bootstrap: str, group: str, topic: str, index: int) -> None:
        from confluent_kafka import Consumer

        self.owned: frozenset[int] = frozenset()
        self.assignments: list[float] = []  # when each assignment arrived
        self.stop = threading.Event()
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": f"bench-{index}",
                "partition.assignment.strategy": "range",
                "enable.auto.commit": False,
                **SESSION,
            }
        )
        self.topic = topic
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _assigned(self, consumer: Any, partitions: list[Any]) -> None:
        self.owned = frozenset(tp.partition for tp in partitions)
        self.assignments.append(time.monotonic())

    def _revoked(self, consumer: Any, partitions: list[Any]) -> None:
        self.owned = frozenset()

    def start(self) -> float:
        self.consumer.subscribe([self.topic], on_assign=self._assigned, on_revoke=self._revoked)
        joined = time.monotonic()
        self.thread.start()
        return joined

    def _run(self) -> None:
        while not self.stop.is_set():
            self.consumer.poll(0.05)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.consumer.close()


def join_run(
    broker: Broker, consumers: int, partitions: int, delay_ms: int, run: int, timeout_s: float
) -> JoinRun:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = f"join-{delay_ms}-{run}", f"joiners-{delay_ms}-{run}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(10)
    members = [_Member(broker.bootstrap, group, topic, i) for i in range(consumers)]
    try:
        joins = [member.start() for member in members]
        first, last = joins[0], joins[-1]
        deadline = last + timeout_s
        while True:
            owned = [p for m in members for p in m.owned]
            if sorted(owned) == list(range(partitions)) and all(m.owned for m in members):
                done = time.monotonic()
                break
            if time.monotonic() > deadline:
                raise BenchError(
                    f"{consumers} consumers did not settle within {timeout_s:g} s of the last join"
                )
            broker.check_alive()
            time.sleep(0.002)
        # Eager assignor: a member gets one assignment per generation it is in, so the member
        # whose JoinGroup reached the broker last has seen only the rebalances after it.
        after = min(len(m.assignments) for m in members)
        total = max(len(m.assignments) for m in members)
        return JoinRun(delay_ms, done - last, after, total, last - first)
    finally:
        for member in members:
            member.close()


# --------------------------------------------------------------------------- commits


def _commit_frame(group: str, topic: str, partitions: int) -> tuple[bytes, int]:
    """A whole OffsetCommit v8 frame and where its correlation id sits."""
    from kio.schema.offset_commit.v8 import request as oc
    from kio.serial import entity_writer

    request = oc.OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=(
            oc.OffsetCommitRequestTopic(
                name=topic,
                partitions=tuple(
                    oc.OffsetCommitRequestPartition(
                        partition_index=p,
                        committed_offset=1000 + p,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    )
                    for p in range(partitions)
                ),
            ),
        ),
    )
    client_id = b"groups-bench"
    header = struct.pack(">hhih", 8, 8, 0, len(client_id)) + client_id + b"\x00"
    body = io.BytesIO()
    entity_writer(type(request))(body, request)
    payload = header + body.getvalue()
    return struct.pack(">i", len(payload)) + payload, 8  # size(4) api(2) version(2) -> correlation id


def _check_response(frame: bytes, partitions: int) -> None:
    """The response's every error code is 0 (v8: one topic; flexible encoding)."""
    from kio.schema.offset_commit.v8.response import OffsetCommitResponse
    from kio.serial import entity_reader

    response, _ = entity_reader(OffsetCommitResponse)(frame, 5)  # correlation id + tagged fields
    errors = [p.error_code for t in response.topics for p in t.partitions]
    if len(errors) != partitions or any(errors):
        raise BenchError(f"OffsetCommit answered {errors}")


class _Committer(threading.Thread):
    def __init__(
        self, bootstrap: str, frame: bytes, at: int, window: int, seconds: float, partitions: int
    ) -> None:
        super().__init__(daemon=True)
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.frame = bytearray(frame)
        self.at = at
        self.window = window
        self.seconds = seconds
        self.partitions = partitions
        self.done = 0
        self.error: BaseException | None = None
        self.start_gate = threading.Event()
        self._buffer = bytearray()

    def _frames(self, count: int) -> list[bytes]:
        frames = []
        while len(frames) < count:
            while len(self._buffer) >= 4:
                (size,) = struct.unpack_from(">i", self._buffer, 0)
                if len(self._buffer) < 4 + size:
                    break
                frames.append(bytes(self._buffer[4 : 4 + size]))
                del self._buffer[: 4 + size]
            if len(frames) >= count:
                break
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise BenchError("the broker closed the connection")
            self._buffer += chunk
        return frames

    def run(self) -> None:
        try:
            self.start_gate.wait()
            correlation = 0
            end = time.monotonic() + self.seconds
            checked = False
            while time.monotonic() < end:
                batch = bytearray()
                for _ in range(self.window):
                    correlation += 1
                    struct.pack_into(">i", self.frame, self.at, correlation)
                    batch += self.frame
                self.sock.sendall(batch)
                frames = self._frames(self.window)
                if not checked:
                    _check_response(frames[0], self.partitions)
                    checked = True
                (last,) = struct.unpack_from(">i", frames[-1], 0)
                if last != correlation:
                    raise BenchError(f"response {last} for request {correlation}")
                self.done += self.window
            _check_response(frames[-1], self.partitions)
        except BaseException as e:
            self.error = e
        finally:
            self.sock.close()


@dataclass
class CommitRun:
    requests_per_s: float
    offsets_per_s: float
    broker_cpu_us_per_request: float


def commit_run(broker: Broker, args: argparse.Namespace, run: int) -> CommitRun:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"commit-target-{run}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, max(args.partitions_per_commit, 1))])[topic].result(10)
    frame, at = _commit_frame(f"committers-{run}", topic, args.partitions_per_commit)
    threads = [
        _Committer(broker.bootstrap, frame, at, args.window, args.seconds, args.partitions_per_commit)
        for _ in range(args.connections)
    ]
    for thread in threads:
        thread.start()
    cpu_before = broker.cpu_seconds()
    started = time.monotonic()
    for thread in threads:
        thread.start_gate.set()
    for thread in threads:
        thread.join(args.seconds + 60)
    elapsed = time.monotonic() - started
    cpu = broker.cpu_seconds() - cpu_before
    for thread in threads:
        if thread.error is not None:
            raise BenchError(f"a committer failed: {thread.error!r}")
    requests = sum(t.done for t in threads)
    return CommitRun(
        requests / elapsed, requests * args.partitions_per_commit / elapsed, cpu / requests * 1e6
    )


def confluent_commit_run(broker: Broker, seconds: float, run: int) -> float:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"confluent-commits-{run}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1)])[topic].result(10)
    acked = [0]
    failed: list[Any] = []

    def on_commit(error: Any, partitions: list[Any]) -> None:
        if error is not None:
            failed.append(error)
        else:
            acked[0] += 1

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"confluent-committers-{run}",
            "enable.auto.commit": False,
            "on_commit": on_commit,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
        acked[0] = 0
        sent = 0
        started = time.monotonic()
        end = started + seconds
        while time.monotonic() < end:
            # Back-pressure: librdkafka queues every async commit; without a cap the queue
            # (and this process) grows by the gigabyte while the broker keeps pace.
            while sent - acked[0] - len(failed) < CONFLUENT_IN_FLIGHT:
                sent += 1
                consumer.commit(offsets=[TopicPartition(topic, 0, sent)], asynchronous=True)
            consumer.poll(0.001)
        while acked[0] + len(failed) < sent and time.monotonic() < end + 30:
            consumer.poll(0.05)
        elapsed = time.monotonic() - started
        if failed:
            raise BenchError(f"{len(failed)} commits failed, e.g. {failed[0]}")
        return acked[0] / elapsed
    finally:
        consumer.close()


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="runs of each measurement; figures are medians")
    parser.add_argument("--consumers", type=int, default=10, help="consumers joining one group")
    parser.add_argument("--partitions", type=int, default=20, help="partitions of the joined topic")
    parser.add_argument("--join-timeout", type=float, default=60.0, help="seconds a group may take to settle")
    parser.add_argument("--connections", type=int, default=4, help="connections committing at once")
    parser.add_argument("--window", type=int, default=64, help="requests in flight per connection")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each commit measurement")
    parser.add_argument(
        "--partitions-per-commit", type=int, default=1, help="partitions in each OffsetCommit"
    )
    parser.add_argument("--skip-join", action="store_true", help="measure commits only")
    parser.add_argument("--skip-commits", action="store_true", help="measure joins only")
    parser.add_argument("--event-loop", default="auto", choices=["auto", "asyncio", "uvloop"])
    parser.add_argument("--tmp-root", default=tempfile.gettempdir(), help="where the data directories go")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.consumers < 1 or args.partitions < args.consumers:
        parser.error("--runs and --consumers must be >= 1, and --partitions >= --consumers")
    return args


def _terminate(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def _with_broker(args: argparse.Namespace, overrides: list[str], body: Any) -> Any:
    workdir = tempfile.mkdtemp(prefix="logstore-groups-bench-", dir=args.tmp_root)
    broker = Broker(workdir, args.event_loop, overrides)
    try:
        broker.start()
        return body(broker)
    except BenchError:
        print(broker.log_tail(), file=sys.stderr)
        raise
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    started = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    print(f"groups_bench {started}; {versions()}; load {os.getloadavg()[0]:.2f}", flush=True)
    median = statistics.median
    if not args.skip_join:
        for delay in (0, 3000):

            def joins(broker: Broker, delay: int = delay) -> list[JoinRun]:
                runs = []
                for run in range(args.runs):
                    result = join_run(broker, args.consumers, args.partitions, delay, run, args.join_timeout)
                    print(
                        f"  join delay={delay} run {run}: stable {result.seconds_after_last_join * 1000:.0f} ms "
                        f"after the last join, {result.rebalances_after_last_join} rebalance(s) after it, "
                        f"{result.rebalances_from_first_join} from the first join "
                        f"(joins spread over {result.join_spread_s * 1000:.0f} ms)",
                        flush=True,
                    )
                    runs.append(result)
                return runs

            runs = _with_broker(args, [f"group.initial.rebalance.delay.ms={delay}"], joins)
            worst = max(r.rebalances_after_last_join for r in runs)
            print(
                f"join, {args.consumers} consumers, group.initial.rebalance.delay.ms={delay}: "
                f"median {median(r.seconds_after_last_join for r in runs) * 1000:.0f} ms from the last join "
                f"to Stable; rebalances after the last join: {[r.rebalances_after_last_join for r in runs]} "
                f"(bar <= {JOIN_BAR_REBALANCES}: {'met' if worst <= JOIN_BAR_REBALANCES else 'NOT met'}); "
                f"from the first join: {[r.rebalances_from_first_join for r in runs]}",
                flush=True,
            )
    if not args.skip_commits:

        def commits(broker: Broker) -> tuple[list[CommitRun], list[float]]:
            raw, confluent = [], []
            for run in range(args.runs):
                result = commit_run(broker, args, run)
                print(
                    f"  commits run {run}: {result.requests_per_s:,.0f} requests/s "
                    f"({result.offsets_per_s:,.0f} offsets/s), broker CPU "
                    f"{result.broker_cpu_us_per_request:.0f} us per request",
                    flush=True,
                )
                raw.append(result)
            for run in range(args.runs):
                rate = confluent_commit_run(broker, args.seconds, run)
                print(f"  confluent commit(asynchronous=True) run {run}: {rate:,.0f} commits/s", flush=True)
                confluent.append(rate)
            return raw, confluent

        raw, confluent = _with_broker(args, [], commits)
        rate = median(r.requests_per_s for r in raw)
        print(
            f"commits, raw OffsetCommit v8 ({args.connections} connections x {args.window} in flight, "
            f"{args.partitions_per_commit} partition(s) each): median {rate:,.0f} commits/s, "
            f"{median(r.offsets_per_s for r in raw):,.0f} offsets/s, "
            f"{median(r.broker_cpu_us_per_request for r in raw):.0f} us broker CPU per request "
            f"(bar >= {COMMIT_BAR:,.0f}/s: {'met' if rate >= COMMIT_BAR else 'NOT met'})",
            flush=True,
        )
        print(
            f"commits, confluent commit(asynchronous=True), one consumer: median {median(confluent):,.0f}/s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
