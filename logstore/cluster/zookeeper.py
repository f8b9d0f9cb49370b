"""A standalone ZooKeeper server process: Debian's ``zookeeper`` package, run by Java.

For ``logstore cluster up`` and the tests: one server on 127.0.0.1, its
data (snapshots and transaction log) in a directory of its own, so a
restart keeps every znode. It is ZooKeeper's own server
(``org.apache.zookeeper.server.ZooKeeperServerMain``), not a stand-in.

``make test`` installs the package (``apt-get install zookeeper``); where it is
missing, :func:`find_jar` says how to get it. ``LOGSTORE_ZOOKEEPER_JAR`` points
at another ``zookeeper.jar`` (whose manifest names its dependencies, as
Debian's does).

The server's own log is ``zookeeper.log`` in its directory: where Debian's
``slf4j-simple.jar`` (a dependency of the package) is found, it holds
ZooKeeper's warnings and its session lines (expired, refused, invalid on reconnection)
with the same timestamps as the brokers' logs, to read beside them when a
session is lost; without it SLF4J prints nothing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time

from logstore.errors import LogstoreError

DEBIAN_JAR = "/usr/share/java/zookeeper.jar"
MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
SLF4J_SIMPLE_JAR = "/usr/share/java/slf4j-simple.jar"
# Warnings from everything; INFO from the classes that say when a session is
# revalidated, expired or refused, and when the data is loaded. A client's dropped connection is
# a WARN with a stack trace in NIOServerCnxn: every killed broker would print one, so ERROR there.
_LOGGER = "-Dorg.slf4j.simpleLogger."
_LOG_OPTIONS = [
    _LOGGER + "defaultLogLevel=warn",
    _LOGGER + "showDateTime=true",
    _LOGGER + "dateTimeFormat=yyyy-MM-dd HH:mm:ss,SSS",
    _LOGGER + "showThreadName=false",
    *(
        f"{_LOGGER}log.org.apache.zookeeper.server.{name}=info"
        for name in ("ZooKeeperServer", "SessionTrackerImpl", "ZKDatabase", "ZooKeeperServerMain")
    ),
    _LOGGER + "log.org.apache.zookeeper.server.NIOServerCnxn=error",
]


class ZooKeeperError(LogstoreError):
    """ZooKeeper is missing, would not start, or does not answer."""


def find_jar() -> str:
    """The ZooKeeper server jar, or ZooKeeperError saying how to install it."""
    jar = os.environ.get("LOGSTORE_ZOOKEEPER_JAR", DEBIAN_JAR)
    if not os.path.isfile(jar):
        raise ZooKeeperError(
            f"no ZooKeeper at {jar}: install Debian's package (`apt-get install zookeeper`, which "
            "`make test` does) or set LOGSTORE_ZOOKEEPER_JAR to a zookeeper.jar"
        )
    if shutil.which("java") is None:
        raise ZooKeeperError("ZooKeeper needs Java: install a Java 17 runtime (openjdk-17-jre-headless)")
    return jar


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on right now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def answers(host: str, port: int, timeout: float = 1.0) -> bool:
    """True if a ZooKeeper server answers ``ruok`` with ``imok`` at host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(b"ruok")
            return s.recv(16) == b"imok"
    except OSError:
        return False


class ZooKeeperServer:
    """One ZooKeeper server process on ``host:port`` with its data under ``directory``.

    >>> server = ZooKeeperServer("/tmp/zk-example")   # doctest: +SKIP
    >>> server.start(); server.connect_string          # doctest: +SKIP
    '127.0.0.1:40123'
    """

    def __init__(
        self,
        directory: str,
        port: int | None = None,
        host: str = "127.0.0.1",
        tick_ms: int = 500,
        max_session_timeout_ms: int = 60_000,
    ) -> None:
        self.directory = os.path.abspath(directory)
        self.host = host
        self.port = port or free_port(host)
        self.tick_ms = tick_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def connect_string(self) -> str:
        """``host:port``, what ``zookeeper.connect`` takes."""
        return f"{self.host}:{self.port}"

    def _write_config(self) -> str:
        os.makedirs(os.path.join(self.directory, "data"), exist_ok=True)
        path = os.path.join(self.directory, "zoo.cfg")
        lines = [
            f"tickTime={self.tick_ms}",
            f"dataDir={os.path.join(self.directory, 'data')}",
            f"clientPort={self.port}",
            f"clientPortAddress={self.host}",
            f"maxSessionTimeout={self.max_session_timeout_ms}",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr",
            "autopurge.snapRetainCount=3",
            "autopurge.purgeInterval=1",
        ]
        with open(path, "w", encoding="ascii") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def start(self, timeout: float = 30.0) -> None:
        """Start the server and wait until it answers (ZooKeeperError after ``timeout`` s)."""
        if self.process is not None and self.process.poll() is None:
            return
        jar = find_jar()
        classpath = jar + (os.pathsep + SLF4J_SIMPLE_JAR if os.path.isfile(SLF4J_SIMPLE_JAR) else "")
        config = self._write_config()
        log = open(os.path.join(self.directory, "zookeeper.log"), "ab")  # noqa: SIM115 - the child's
        try:
            self.process = subprocess.Popen(
                ["java", "-Xmx256m", "-XX:+UseSerialGC", *_LOG_OPTIONS, "-cp", classpath, MAIN, config],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C to the parent is the parent's to pass on
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ZooKeeperError(
                    f"ZooKeeper exited with {self.process.returncode}; see "
                    f"{os.path.join(self.directory, 'zookeeper.log')} (is port {self.port} taken?)"
                )
            if answers(self.host, self.port, 0.5):
                return
            time.sleep(0.1)
        self.stop()
        raise ZooKeeperError(f"ZooKeeper did not answer on {self.connect_string} within {timeout} s")

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL after ``timeout`` s); its data stays."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout)

    def kill(self) -> None:
        """kill -9 the server (its data stays, as after a power cut of the process)."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait(10)

    def __enter__(self) -> ZooKeeperServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
