"""logstore's client over SASL_PLAINTEXT (SCRAM-SHA-512), beside confluent-kafka in the same run.

One broker on 127.0.0.1 (bench/security_bench.py's SecureBroker: PLAINTEXT and
SASL_PLAINTEXT listeners, the SCRAM-SHA-512 user ``bench`` with 4,096
iterations). Each of ``--runs`` runs measures, interleaved:

(a) set-up: ``--clients`` fresh AdminClients, each timed from construction to
    its first Metadata answer (``list_topics``), over PLAINTEXT and over SCRAM,
    for logstore's client and confluent-kafka: what authenticating adds to a
    new connection (both clients run PBKDF2 once per login);
(b) produce: ``--records`` 100-byte values with acks=all over each listener
    with logstore's client; SASL authenticates each connection once, so the
    ratio should sit near 1.

Medians of the runs; ratios are medians of per-run ratios. Usage::

    .venv/bin/python bench/client_sasl_bench.py [--runs 3] [--clients 20] [--records 300000]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

from security_bench import RECORD_BYTES, Figures, SecureBroker

SCRAM = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "bench",
    "sasl.password": "bench-pw",
}


def first_answer_ms(client: str, config: dict[str, Any]) -> float:
    """Construction to the first Metadata answer of a fresh AdminClient, in ms."""
    if client == "logstore":
        from logstore.client.admin import AdminClient
    else:
        from confluent_kafka.admin import AdminClient
    started = time.perf_counter()
    admin = AdminClient(config)
    admin.list_topics(timeout=30)
    took = (time.perf_counter() - started) * 1000
    if client == "logstore":
        admin.close()
    return took


def produce_rate(config: dict[str, Any], topic: str, records: int) -> float:
    """Records/s of logstore's producer (acks=all) over ``config``'s listener."""
    from logstore.client import Producer

    producer = Producer({**config, "linger.ms": 5})
    value = b"x" * RECORD_BYTES
    producer.produce(topic, value)
    if producer.flush(60):
        raise SystemExit(f"the first record to {topic} was not delivered")
    started = time.perf_counter()
    for i in range(records):  # bounded by --records
        producer.produce(topic, value)
        if i % 10_000 == 0:
            producer.poll(0)
    left = producer.flush(300)
    elapsed = time.perf_counter() - started
    producer.close()
    if left:
        raise SystemExit(f"{left} records to {topic} were not delivered")
    return records / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="Interleaved runs (medians over them).")
    parser.add_argument(
        "--clients", type=int, default=20, help="Fresh AdminClients per run, client and listener."
    )
    parser.add_argument("--records", type=int, default=300_000, help="100-byte records per produce.")
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="client-sasl-bench-")
    broker = SecureBroker(workdir)
    broker.start()
    figures = Figures()
    note = figures.note

    plain = {"bootstrap.servers": broker.at("PLAINTEXT")}
    scram = {"bootstrap.servers": broker.at("SASL_PLAINTEXT"), **SCRAM}
    try:
        for run in range(1, args.runs + 1):
            print(f"run {run}", file=sys.stderr, flush=True)
            clients = ("logstore", "confluent") if run % 2 else ("confluent", "logstore")
            for client in clients:
                for name, config in (("PLAINTEXT", plain), ("SCRAM-SHA-512", scram)):
                    times = [first_answer_ms(client, config) for _ in range(args.clients)]
                    note(f"{client} first answer {name} median ms", statistics.median(times), "ms")
            for client in clients:
                note(
                    f"{client} SCRAM/PLAINTEXT first answer",
                    figures[f"{client} first answer SCRAM-SHA-512 median ms"][-1]
                    / figures[f"{client} first answer PLAINTEXT median ms"][-1],
                    "x",
                )
            rates = {}
            for name, config in (("PLAINTEXT", plain), ("SCRAM-SHA-512", scram))[:: 1 if run % 2 else -1]:
                rates[name] = produce_rate(config, f"sasl-bench-{name.lower()}-{run}", args.records)
                note(f"logstore produce {name} records/s", rates[name], "records/s")
            note("logstore produce SCRAM/PLAINTEXT", rates["SCRAM-SHA-512"] / rates["PLAINTEXT"], "x")
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    figures.print_medians()


if __name__ == "__main__":
    main()
