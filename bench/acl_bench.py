"""ACLs' bars (issue 14): the cost of one authorization check, and produce with ACLs on vs off.

(a) **Checks**: an :class:`~logstore.security.authorizer.Authorizer` holding 10,000 ACLs
    (literal and prefixed topics and groups, transactional ids, wildcards; 1,000
    principals; hosts ``*`` or an IP; ALLOW and DENY) answers ``--checks`` random
    questions (principal, host, operation, resource) drawn from 20,000 distinct ones.
    Reported in µs per check, median of ``--runs``: through the broker's path
    (``security.operations.allowed`` with a request context: the table lookup included),
    with the cache warm (questions repeat, as a broker's do) and cold (the cache cleared
    before every check: the index alone). Bar: <= 2 µs per check.
(b) **Produce**: two brokers on 127.0.0.1, one without an authorizer and one with
    ``authorizer.class.name`` and the same 10,000 ACLs plus the two that let
    ``User:ANONYMOUS`` create and write the topics (a PREFIXED pattern; a topic per run); confluent-kafka produces ``--records`` 100-byte
    values (acks=1) to each, interleaved, ``--runs`` times. Bar: ACLs on >= 90% of off
    (median of per-run ratios).

Usage::

    .venv/bin/python bench/acl_bench.py [--runs 3] [--checks 200000] [--records 500000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.broker_perf import Broker, produce_confluent
from logstore.security import KafkaPrincipal, operations
from logstore.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from logstore.security.authorizer import Authorizer, MemoryAclStore

ACLS = 10_000
PRINCIPALS = 1_000
QUESTIONS = 20_000
RECORD_BYTES = 100
# API keys whose table entry needs the (operation, type) asked: Produce WRITE Topic, Fetch READ
# Topic, Metadata DESCRIBE Topic, JoinGroup READ Group, EndTxn WRITE TransactionalId.
_API_FOR = {
    (AclOperation.WRITE, ResourceType.TOPIC): 0,
    (AclOperation.READ, ResourceType.TOPIC): 1,
    (AclOperation.DESCRIBE, ResourceType.TOPIC): 3,
    (AclOperation.READ, ResourceType.GROUP): 11,
    (AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID): 26,
}


def make_acls(rng: random.Random, count: int = ACLS) -> list[AclBinding]:
    """``count`` distinct ACLs: 40% literal topics, 20% prefixed topics, 20% literal groups,
    10% prefixed groups, 10% transactional ids and wildcards."""
    ops = [AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.ALL, AclOperation.ALTER]
    acls: set[AclBinding] = set()
    while len(acls) < count:
        roll = rng.random()
        if roll < 0.4:
            pattern = ResourcePattern(ResourceType.TOPIC, f"topic-{rng.randrange(4000)}", PatternType.LITERAL)
        elif roll < 0.6:
            prefix = f"team-{rng.randrange(300)}-" + "x" * rng.randrange(0, 4)
            pattern = ResourcePattern(ResourceType.TOPIC, prefix, PatternType.PREFIXED)
        elif roll < 0.8:
            pattern = ResourcePattern(ResourceType.GROUP, f"group-{rng.randrange(2000)}", PatternType.LITERAL)
        elif roll < 0.9:
            pattern = ResourcePattern(ResourceType.GROUP, f"app-{rng.randrange(200)}", PatternType.PREFIXED)
        elif roll < 0.97:
            pattern = ResourcePattern(
                ResourceType.TRANSACTIONAL_ID, f"txn-{rng.randrange(500)}", PatternType.LITERAL
            )
        else:
            pattern = ResourcePattern(
                rng.choice([ResourceType.TOPIC, ResourceType.GROUP]), "*", PatternType.LITERAL
            )
        entry = AccessControlEntry(
            f"User:u{rng.randrange(PRINCIPALS)}",
            rng.choice(["*", "*", "*", f"10.0.{rng.randrange(4)}.{rng.randrange(8)}"]),
            rng.choice(ops),
            AclPermissionType.ALLOW if rng.random() < 0.9 else AclPermissionType.DENY,
        )
        acls.add(AclBinding(pattern, entry))
    return list(acls)


def make_questions(rng: random.Random) -> list[tuple[Any, ...]]:
    """(principal, host, operation, type, name): what brokers ask, mostly about named resources."""
    questions = []
    kinds = list(_API_FOR)
    for _ in range(QUESTIONS):
        op, rtype = rng.choice(kinds)
        if rtype == ResourceType.TOPIC:
            name = rng.choice(
                [f"topic-{rng.randrange(4000)}", f"team-{rng.randrange(300)}-xyz-{rng.randrange(50)}"]
            )
        elif rtype == ResourceType.GROUP:
            name = rng.choice([f"group-{rng.randrange(2000)}", f"app-{rng.randrange(200)}-consumers"])
        else:
            name = f"txn-{rng.randrange(500)}"
        questions.append(
            (
                KafkaPrincipal("User", f"u{rng.randrange(PRINCIPALS)}"),
                f"10.0.{rng.randrange(4)}.{rng.randrange(8)}",
                op,
                rtype,
                name,
            )
        )
    return questions


def time_checks(auth: Authorizer, questions: list[tuple[Any, ...]], checks: int, cold: bool) -> float:
    """µs per check through ``operations.allowed`` (a context per question, made beforehand)."""
    broker = SimpleNamespace(authorizer=auth)
    contexts = [
        (
            SimpleNamespace(
                broker=broker,
                header=SimpleNamespace(api_key=_API_FOR[(op, rtype)]),
                connection=SimpleNamespace(principal=principal, client_host=host),
            ),
            rtype,
            name,
        )
        for principal, host, op, rtype, name in questions
    ]
    allowed = operations.allowed
    n = len(contexts)
    granted = 0
    if cold:
        start = time.perf_counter()
        for i in range(checks):
            ctx, rtype, name = contexts[i % n]
            auth.checks.clear()
            auth._cache.clear()
            granted += allowed(ctx, rtype, name)  # type: ignore[arg-type]
        seconds = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(checks):  # what the clears themselves cost, taken off
            auth.checks.clear()
            auth._cache.clear()
        seconds -= time.perf_counter() - start
    else:
        for ctx, rtype, name in contexts:  # warm: every question asked once
            allowed(ctx, rtype, name)  # type: ignore[arg-type]
        start = time.perf_counter()
        for i in range(checks):
            ctx, rtype, name = contexts[i % n]
            granted += allowed(ctx, rtype, name)  # type: ignore[arg-type]
        seconds = time.perf_counter() - start
    if not 0 < granted < checks:
        print(f"  (note: {granted} of {checks} checks allowed)", file=sys.stderr)
    return seconds / checks * 1e6


def bench_checks(args: argparse.Namespace) -> dict[str, float]:
    rng = random.Random(14)
    auth = Authorizer(MemoryAclStore())
    started = time.perf_counter()
    errors = auth.create_acls(make_acls(rng))
    assert not any(errors), errors[:3]
    print(f"loaded {len(auth.acls())} ACLs in {time.perf_counter() - started:.2f} s", file=sys.stderr)
    questions = make_questions(rng)
    figures: dict[str, list[float]] = {"warm cache": [], "cold (index only)": [], "the rules alone": []}
    for run in range(1, args.runs + 1):
        for label, cold in (("warm cache", False), ("cold (index only)", True)):
            us = time_checks(
                auth, questions, args.checks if not cold else max(args.checks // 2, 100_000), cold
            )
            figures[label].append(us)
            print(f"run {run}: {label}: {us:.3f} µs/check", file=sys.stderr)
        us = time_decisions(auth, questions, args.checks)
        figures["the rules alone"].append(us)
        print(f"run {run}: the rules alone: {us:.3f} µs/check", file=sys.stderr)
    return {label: statistics.median(values) for label, values in figures.items()}


def time_decisions(auth: Authorizer, questions: list[tuple[Any, ...]], checks: int) -> float:
    """µs per uncached decision (``Authorizer._decide``: the index lookups and Kafka's rules, no
    cache at all, no request context): what a question never asked before costs, without the
    cold loop's cache churn (a cleared dict re-grown on every check)."""
    asks = [
        (str(principal), host, int(operations._OPERATION[(_API_FOR[(op, rtype)], rtype, "")]), int(rtype), name)
        for principal, host, op, rtype, name in questions
    ]
    decide = auth._decide
    n = len(asks)
    start = time.perf_counter()
    for i in range(checks):
        decide(*asks[i % n])
    return (time.perf_counter() - start) / checks * 1e6


def acl_file(data_dir: str, acls: list[AclBinding], topic: str) -> None:
    os.makedirs(data_dir, exist_ok=True)
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in acls:
        by_pattern.setdefault(b.pattern, []).append(b.entry)
    mine = ResourcePattern(ResourceType.TOPIC, topic, PatternType.PREFIXED)  # a topic per run
    for op in (AclOperation.WRITE, AclOperation.CREATE):
        by_pattern.setdefault(mine, []).append(
            AccessControlEntry("User:ANONYMOUS", "*", op, AclPermissionType.ALLOW)
        )
    resources = [
        {
            "resourceType": p.resource_type.title, "patternType": p.pattern_type.name, "name": p.name,
            "acls": [e.to_json() for e in entries],
        }
        for p, entries in by_pattern.items()
    ]  # fmt: skip
    with open(os.path.join(data_dir, "acls.json"), "w") as f:
        json.dump({"version": 1, "resources": resources}, f)


def bench_produce(args: argparse.Namespace) -> tuple[dict[str, float], float]:
    workdir = tempfile.mkdtemp(prefix="acl-bench-")
    topic = "acl-bench"
    plain = Broker(os.path.join(workdir, "off"), args.event_loop, ["num.partitions=1"])
    secured = Broker(
        os.path.join(workdir, "on"), args.event_loop,
        ["num.partitions=1", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
         "allow.everyone.if.no.acl.found=false"],
    )  # fmt: skip
    os.makedirs(plain.data_dir)
    acl_file(secured.data_dir, make_acls(random.Random(15)), topic)
    value = os.urandom(RECORD_BYTES)
    rates: dict[str, list[float]] = {"ACLs off": [], "ACLs on": []}
    ratios = []
    try:
        plain.start()
        secured.start()
        for run in range(1, args.runs + 1):
            order = [("ACLs off", plain), ("ACLs on", secured)]
            if run % 2 == 0:
                order.reverse()  # interleaved: neither always goes first
            got = {}
            for label, broker in order:
                phase = produce_confluent(broker, f"{topic}-{run}", args.records, value, "1", 300.0, label)
                got[label] = phase.records_per_s
                rates[label].append(phase.records_per_s)
                print(f"run {run}: produce {label}: {phase.records_per_s:,.0f} records/s", file=sys.stderr)
            ratios.append(got["ACLs on"] / got["ACLs off"])
    finally:
        plain.stop()
        secured.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return {label: statistics.median(v) for label, v in rates.items()}, statistics.median(ratios)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])  # fmt: skip
    parser.add_argument("--runs", type=int, default=3, help="runs (default 3; figures are medians)")
    parser.add_argument("--checks", type=int, default=200_000, help="checks per run (default 200,000)")
    parser.add_argument(
        "--records", type=int, default=500_000, help="records per produce phase (default 500,000)"
    )
    parser.add_argument("--event-loop", default="auto", help="the brokers' --event-loop (default auto)")
    parser.add_argument("--skip-produce", action="store_true", help="only the checks")
    args = parser.parse_args(argv)
    checks = bench_checks(args)
    print(f"\n| authorization check, {ACLS:,} ACLs | µs/check (median of {args.runs}) |\n|---|---:|")
    for label, us in checks.items():
        print(f"| {label} | {us:.3f} |")
    print(f"bar: <= 2 µs per check: warm {'met' if checks['warm cache'] <= 2 else 'NOT met'}, "
          f"cold {'met' if checks['cold (index only)'] <= 2 else 'NOT met'}, "
          f"the rules alone {'met' if checks['the rules alone'] <= 2 else 'NOT met'}")  # fmt: skip
    if not args.skip_produce:
        rates, ratio = bench_produce(args)
        print(f"\n| produce, 100-byte values, acks=1 | records/s (median of {args.runs}) |\n|---|---:|")
        for label, rate in rates.items():
            print(f"| {label} | {rate:,.0f} |")
        print(f"ACLs on / off: {ratio:.2f}x (bar >= 0.90: {'met' if ratio >= 0.9 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
