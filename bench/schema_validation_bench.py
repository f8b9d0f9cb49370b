"""Validation on produce (issue 26): the same producer's rate to a topic with schema id validation on
and to one with it off, in the same run.

Starts ``python -m logstore broker`` with ``schema.registry.listeners`` on 127.0.0.1 (free ports, a
fresh temporary data directory, removed afterwards; ``bench/broker_perf.py``'s ``Broker``),
registers an Avro schema under ``on-<run>-value`` (and ``--extra-subjects`` other schemas, so the id
lookup is not against a set of one), and then ``--runs`` times creates two one-partition topics, ``on-<run>``
(``confluent.value.schema.validation=true``) and ``off-<run>`` (no validation) and,
alternating which goes first, confluent-kafka produces ``--records`` records of ``--size`` bytes
(Confluent's wire format: magic 0, the registered id, a payload) to each topic, acks=1,
``broker_perf.py``'s producer settings (1 MiB batches, linger 5 ms, no compression unless
``--compression``), every delivery checked and the high watermark counted after.

Reported per topic: records/s (median of the runs) and the broker's CPU seconds per MB, and the
ratio on/off of each. The bar: the rate with validation on >= 90% of the rate with it off.
First (unless ``--no-in-process``), in process: the check alone (``SchemaIdCheck`` over an
in-memory registry) beside storage's validation of the same batch, for batches of 1 to 5,000
records. Every loop is bounded in count and time.

Examples::

    .venv/bin/python bench/schema_validation_bench.py
    .venv/bin/python bench/schema_validation_bench.py --runs 3 --records 500000 --size 100
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import os
import shutil
import socket
import statistics
import struct
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import broker_perf
from bench.broker_perf import BenchError, Broker, Phase, free_port, produce_confluent, timed

CT = "application/vnd.schemaregistry.v1+json"


def register(port: int, subject: str, name: str) -> int:
    schema = json.dumps({"type": "record", "name": name, "fields": [{"name": "payload", "type": "bytes"}]})
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/subjects/{subject}/versions",
        data=json.dumps({"schema": schema}).encode(),
        headers={"Content-Type": CT},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        return int(json.loads(reply.read())["id"])


def produce_frame(topic: str, batch: bytes, correlation_id: int) -> bytes:
    """One Produce v8 request (acks=1) of ``batch`` to partition 0 of ``topic``, framed."""
    from kio.schema.produce.v8.request import PartitionProduceData, ProduceRequest, TopicProduceData
    from kio.serial import entity_writer

    data = PartitionProduceData(index=0, records=batch)  # type: ignore[arg-type]
    request = ProduceRequest(acks=1, timeout=datetime.timedelta(seconds=30),  # type: ignore[arg-type]
                             topic_data=(TopicProduceData(name=topic, partition_data=(data,)),))  # type: ignore[arg-type]  # fmt: skip
    body = io.BytesIO()
    entity_writer(ProduceRequest)(body, request)
    client = b"bench"
    header = struct.pack(">hhih", 0, 8, correlation_id, len(client)) + client
    payload = header + body.getvalue()
    return struct.pack(">i", len(payload)) + payload


def read_frame(sock: socket.socket) -> bytes:
    head = _read_exactly(sock, 4)
    return _read_exactly(sock, struct.unpack(">i", head)[0])


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks, got = [], 0
    for _ in range(1 << 20):
        if got >= size:
            break
        chunk = sock.recv(size - got)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def produce_wire(broker: Broker, topic: str, batch: bytes, records_per_batch: int, requests: int, window: int) -> Phase:
    """``requests`` Produce requests of the one ``batch`` over one connection, ``window`` in flight;
    every answer's error code checked (the last field before the throttle time: decoded with kio)."""
    from kio.schema.produce.v8.response import ProduceResponse
    from kio.serial import entity_reader

    frame = produce_frame(topic, batch, 1)
    reader = entity_reader(ProduceResponse)
    with socket.create_connection(("127.0.0.1", broker.port), timeout=60) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def body() -> tuple[int, int]:
            sent = 0
            for answered in range(requests):
                while sent < requests and sent - answered < window:  # at most ``window`` sends
                    sock.sendall(frame)
                    sent += 1
                response, _ = reader(read_frame(sock), 4)
                code = response.responses[0].partition_responses[0].error_code
                if code != 0:
                    raise BenchError(f"{topic}: the broker answered {code!r}")
            return requests * records_per_batch, requests * len(batch)

        return timed(broker, topic, body)


class _Journal:
    """An in-memory ``_schemas`` for the in-process measure."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []

    def start(self) -> int:
        return 0

    def end(self) -> int:
        return len(self.records)

    def read(self, position: int) -> tuple[list[tuple[bytes, bytes | None]], int]:
        return self.records[position:], len(self.records)

    async def append(self, records: list[tuple[bytes, bytes | None]]) -> int:
        self.records.extend(records)
        return len(self.records)

    async def writer(self) -> str | None:
        return None


def in_process(size: int, subjects: int) -> None:
    """The check alone (broker/schema_validation.py's SchemaIdCheck over an in-memory registry)
    beside storage's validation of the same batch, per batch size: best of 11 repeats each."""
    import asyncio
    import timeit

    from logstore.broker.schema_validation import SchemaIdCheck
    from logstore.records.builder import build_batch
    from logstore.schemas.service import RegistryService
    from logstore.storage.config import LogConfig
    from logstore.storage.validator import validate_from_client

    service = RegistryService(_Journal())

    def schema(name: str) -> str:
        return json.dumps({"type": "record", "name": name, "fields": [{"name": "payload", "type": "bytes"}]})

    async def fill() -> int:
        for n in range(subjects):
            await service.write(lambda r, n=n: r.register(f"other-{n}-value", schema(f"Other{n}"), "AVRO"))  # type: ignore[misc]
        return await service.write(lambda r: r.register("t-value", schema("Payload"), "AVRO"))  # type: ignore[no-any-return]

    schema_id = asyncio.run(fill())

    class Server:
        pass

    server = Server()
    server.service = service  # type: ignore[attr-defined]

    class Fake:
        schema_registry = server

    check = SchemaIdCheck(Fake())  # type: ignore[arg-type]
    on = LogConfig.from_dict({"confluent.value.schema.validation": "true", "max.message.bytes": "100000000"})
    value = (b"\x00" + struct.pack(">i", schema_id) + b"x" * size)[:size]
    for count in (1, 10, 100, 1000, 5000):
        batch = bytearray(build_batch([value] * count))
        assert check("t", on, batch, count) is None
        stored = min(timeit.repeat(lambda b=batch: validate_from_client(b, on, "t-0"), number=200, repeat=11)) / 200
        checked = min(timeit.repeat(lambda b=batch, n=count: check("t", on, b, n), number=200, repeat=11)) / 200
        print(
            f"in process, {count:>5} records of {size} B: storage's validation {stored * 1e6:7.1f} us/batch, "
            f"schema id check {checked * 1e6:7.1f} us/batch ({checked / count * 1e9:,.0f} ns/record)",
            flush=True,
        )


def create_topics(bootstrap: str, run: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [
        NewTopic(f"on-{run}", 1, 1, config={"confluent.value.schema.validation": "true"}),
        NewTopic(f"off-{run}", 1, 1),
    ]
    for future in admin.create_topics(topics).values():
        future.result(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=300_000, help="records per topic per run")
    parser.add_argument("--size", type=int, default=100, help="bytes per value, the 5-byte frame included")
    parser.add_argument("--extra-subjects", type=int, default=100)
    parser.add_argument("--compression", default="none", choices=["none", "lz4", "zstd", "gzip", "snappy"])
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per phase at most")
    parser.add_argument("--client", default="wire", choices=["wire", "confluent"],
                        help="wire: pipelined Produce requests of one prebuilt batch (the broker is the bottleneck); "
                        "confluent: confluent-kafka's producer (its Python loop is)")  # fmt: skip
    parser.add_argument("--batch-records", type=int, default=1000, help="wire: records per batch")
    parser.add_argument("--window", type=int, default=8, help="wire: requests in flight")
    parser.add_argument("--no-in-process", action="store_true", help="skip the in-process measure of the check")
    parser.add_argument("--event-loop", default="auto", choices=["auto", "asyncio", "uvloop"])
    args = parser.parse_args()
    broker_perf.PRODUCER_CONFIG["compression.type"] = args.compression
    if not args.no_in_process:
        in_process(args.size, args.extra_subjects)
    workdir = tempfile.mkdtemp(prefix="validation-bench-")
    port = free_port()
    broker = Broker(workdir, args.event_loop, [f"schema.registry.listeners=http://127.0.0.1:{port}"])
    phases: dict[str, list[Phase]] = {"on": [], "off": []}
    try:
        broker.start()
        for n in range(args.extra_subjects):
            register(port, f"other-{n}-value", f"Other{n}")
        ids = {register(port, f"on-{run}-value", "Payload") for run in range(args.runs)}
        assert len(ids) == 1, ids  # one schema under each run's subject: one id
        value = b"\x00" + struct.pack(">i", ids.pop()) + bytes(range(256)) * (args.size // 256 + 1)
        value = value[: max(args.size, 6)]
        from logstore.records.builder import build_batch

        batch = build_batch([value] * args.batch_records, compression=args.compression)
        for run in range(args.runs):
            create_topics(broker.bootstrap, run)  # fresh topics per run: the high watermark counts its records
            order = ("on", "off") if run % 2 == 0 else ("off", "on")
            for kind in order:
                topic = f"{kind}-{run}"
                if args.client == "confluent":
                    phase = produce_confluent(broker, topic, args.records, value, "1", args.timeout, topic)
                else:
                    requests = max(args.records // args.batch_records, 1)
                    phase = produce_wire(broker, topic, batch, args.batch_records, requests, args.window)
                phases[kind].append(phase)
            on, off = phases["on"][-1], phases["off"][-1]
            print(
                f"run {run + 1}: validation on {on.records_per_s:,.0f} rec/s ({on.broker_cpu_s_per_mb:.4f} broker "
                f"CPU s/MB), off {off.records_per_s:,.0f} rec/s ({off.broker_cpu_s_per_mb:.4f}); on/off "
                f"{on.records_per_s / off.records_per_s:.1%}",
                flush=True,
            )
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    rate = {t: statistics.median(p.records_per_s for p in ps) for t, ps in phases.items()}
    cpu = {t: statistics.median(p.broker_cpu_s_per_mb for p in ps) for t, ps in phases.items()}
    print(
        f"median of {args.runs} runs, {args.client} producer, {args.records:,} records of {args.size} B"
        f"{f' in batches of {args.batch_records}' if args.client == 'wire' else ''}, compression {args.compression}: "
        f"validation on {rate['on']:,.0f} rec/s, off {rate['off']:,.0f} rec/s: on/off {rate['on'] / rate['off']:.1%} "
        f"(bar >= 90%); broker CPU s/MB on {cpu['on']:.4f}, off {cpu['off']:.4f} "
        f"(on/off {cpu['on'] / cpu['off']:.2f}x)"
    )


if __name__ == "__main__":
    main()
