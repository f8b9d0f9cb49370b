"""Network faults with Linux network namespaces: partitions, one-way cuts, latency, resets.

Each member of a test cluster (``zk``, ``b1``, ``b2``, ...) runs in a network
namespace of its own, with one veth interface ``eth0`` on a private range
(``10.77.0.0/24``, the addresses exist only inside these namespaces); a hub
namespace holds the bridge that joins the veths, and the hub's own address
(``10.77.0.254``) is where the clients' traffic enters. Nothing is added to
the root namespace: clients there reach a member through a :class:`Forwarder`,
a thread listening on 127.0.0.1 that opens its upstream sockets inside the hub
namespace (the kernel binds a socket to the namespace of the thread that
creates it; ``setns(2)`` through ctypes, Python 3.11 has no ``os.setns``).

The faults are kernel-level, in the member's own namespace, on its ``eth0``
(and on the hub's end of its veth, for the packets coming to it). This
kernel has neither ``sch_netem`` nor the ``gact`` action (no ``action drop``)
and iptables/nft are not installed, so every veth end gets an ``htb`` root
with two classes: ``1:10`` (unlimited, the default) and ``1:20`` whose leaf
is a ``pfifo`` of length 0, so a packet a ``u32`` filter sends there is
dropped:

- :meth:`Net.block` ``(src, dst)``: packets from ``src`` to ``dst`` dropped,
  silently, so TCP retransmits and times out as on a real partition; both
  directions of a link are two blocks (:meth:`Net.cut`), a one-way cut one;
- :meth:`Net.slow`: a ``tbf`` token bucket under ``1:10`` on both ends of the
  member's veth: a slow link whose queue delays packets by up to its latency
  bound (50-300 ms) and drops past it (netem's fixed delay is not available);
- :meth:`Net.reset_connections`: every established TCP connection in the
  namespace aborted (``ss -K``: the peer gets a RST), for a flaky link;
- :meth:`Net.heal`: every filter and token bucket removed.

Processes are started inside a namespace by :meth:`Net.run_in`, which runs a
function in a thread that entered the namespace: a child forked from that
thread is born there (its pid is the one ``subprocess`` returns, so signals
work as before). Namespaces are named ``lsnet-<pid>-<n>-<member>``;
:func:`sweep_stale` deletes those whose creating process is gone (and kills
what still runs in them), and :meth:`Net.destroy` (also registered with
``atexit``) deletes a run's own. :func:`unavailable` says why a machine
cannot do this (not root, no ``ip`` or ``tc``, no namespaces), for a skip.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import itertools
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

PREFIX = "lsnet-"
SUBNET = "10.77.0"
HUB_ADDRESS = f"{SUBNET}.254"
CLONE_NEWNET = 0x40000000
COMMAND_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 3.0
PASS = "1:10"  # the htb class every packet takes unless a filter says DROP
DROP = "1:20"  # the htb class whose fifo holds nothing: a packet classified there is dropped

T = TypeVar("T")
_counter = itertools.count(1)
_libc = ctypes.CDLL(None, use_errno=True)


class NetError(Exception):
    """A namespace command failed or a bounded wait ran out."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return _run(["ip", *args], check)


def _tc(namespace: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return _run(["tc", "-n", namespace, *args], check)


def _run(argv: list[str], check: bool) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False)
    if check and done.returncode != 0:
        raise NetError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
    return done


def unavailable() -> str | None:
    """Why this machine cannot run :class:`Net` (None if it can): root, ``ip``, ``tc``, namespaces."""
    if os.geteuid() != 0:
        return "network faults need root (ip netns, tc): run as root, as CI does"
    for tool in ("ip", "tc", "ss"):
        if shutil.which(tool) is None:
            return f"network faults need `{tool}` (Debian: iproute2)"
    probe = f"{PREFIX}{os.getpid()}-probe"
    try:
        _ip("netns", "add", probe)
        _ip("-n", probe, "link", "set", "lo", "up")
        _tc(probe, "qdisc", "add", "dev", "lo", "clsact")
    except (NetError, OSError, subprocess.TimeoutExpired) as e:
        return f"network namespaces do not work here: {e}"
    finally:
        _ip("netns", "del", probe, check=False)
    return None


def namespaces() -> list[str]:
    done = _ip("netns", "list", check=False)
    return [line.split()[0] for line in done.stdout.splitlines() if line.startswith(PREFIX)]


def _kill_inside(namespace: str) -> None:
    for pid in _ip("netns", "pids", namespace, check=False).stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


def sweep_stale() -> list[str]:
    """Delete the ``lsnet-`` namespaces whose creating process is gone (their processes killed)."""
    swept = []
    for namespace in namespaces():
        owner = namespace[len(PREFIX) :].split("-", 1)[0]
        if owner.isdigit() and os.path.exists(f"/proc/{owner}"):
            continue
        _kill_inside(namespace)
        _ip("netns", "del", namespace, check=False)
        swept.append(namespace)
    return swept


def _enter(namespace: str) -> None:
    """Move the calling thread (only it) into ``namespace``'s network namespace."""
    fd = os.open(f"/run/netns/{namespace}", os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"setns({namespace}): {os.strerror(errno)}")
    finally:
        os.close(fd)


class Net:
    """A hub namespace with a bridge, and one namespace per member on ``10.77.0.<n>``."""

    def __init__(self, members: Sequence[str]) -> None:
        self.tag = f"{PREFIX}{os.getpid()}-{next(_counter)}"
        self.hub = f"{self.tag}-hub"
        self.members = list(members)
        self.address = {m: f"{SUBNET}.{i}" for i, m in enumerate(self.members, start=1)}
        self.forwarders: list[Forwarder] = []
        self._filtered: set[str] = set()
        self._created: list[str] = []

    def namespace(self, member: str) -> str:
        return f"{self.tag}-{member}"

    def create(self) -> None:
        """The namespaces, the bridge, a veth per member (all inside the namespaces)."""
        atexit.register(self.destroy)
        try:
            self._add(self.hub)
            _ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.hub, "addr", "add", f"{HUB_ADDRESS}/24", "dev", "br0")
            _ip("-n", self.hub, "link", "set", "br0", "up")
            for i, member in enumerate(self.members, start=1):
                ns, veth = self.namespace(member), f"h{i}"
                self._add(ns)
                _ip("-n", self.hub, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
                _ip("-n", self.hub, "link", "set", veth, "master", "br0", "up")
                _ip("-n", ns, "addr", "add", f"{self.address[member]}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
                for ns_dev in self._veths(member):
                    _shape(*ns_dev)
        except BaseException:
            self.destroy()
            raise

    def _add(self, namespace: str) -> None:
        _ip("netns", "add", namespace)
        self._created.append(namespace)
        _ip("-n", namespace, "link", "set", "lo", "up")

    def destroy(self) -> None:
        """Stop the forwarders, kill what runs in the namespaces, delete them (idempotent)."""
        for forwarder in self.forwarders:
            forwarder.stop()
        self.forwarders.clear()
        for namespace in reversed(self._created):
            _kill_inside(namespace)
            _ip("netns", "del", namespace, check=False)
        self._created.clear()

    # -- running things inside ---------------------------------------------------------------------

    def run_in(self, member: str, fn: Callable[[], T], timeout: float = 120.0) -> T:
        """``fn()`` in a thread inside ``member``'s namespace (children it forks are born there)."""
        return _in_namespace(self.namespace(member), fn, timeout)

    def forward(self, member: str, port: int) -> Forwarder:
        """A 127.0.0.1 port (root namespace) whose connections go to ``member``'s ``port``."""
        forwarder = Forwarder(self.hub, self.address[member], port)
        forwarder.start()
        self.forwarders.append(forwarder)
        return forwarder

    # -- faults ------------------------------------------------------------------------------------

    def block(self, src: str, dst: str) -> None:
        """Drop every packet from ``src`` to ``dst`` (one direction; the other still flows)."""
        _tc(self.namespace(src), "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip",
            "prio", "1", "u32", "match", "ip", "dst", f"{self.address[dst]}/32", "flowid", DROP)  # fmt: skip
        self._filtered.add(src)

    def cut(self, a: str, b: str) -> None:
        """Both directions between ``a`` and ``b``."""
        self.block(a, b)
        self.block(b, a)

    def _veths(self, member: str) -> list[tuple[str, str]]:
        """``member``'s end of its veth, and the hub's end (egress there is ingress to ``member``)."""
        return [(self.namespace(member), "eth0"), (self.hub, f"h{self.members.index(member) + 1}")]

    def slow(self, member: str, latency_ms: int, kbit: int) -> None:
        """``member``'s links both ways a ``kbit`` kbit/s pipe queueing up to ``latency_ms`` ms.

        This kernel has no ``sch_netem`` (no fixed delay): a token bucket
        (``tbf``) under the pass-through class delays what exceeds the rate
        by up to ``latency_ms`` and drops past that, as a slow, congested
        link does.
        """
        for ns, dev in self._veths(member):
            _tc(ns, "qdisc", "replace", "dev", dev, "parent", PASS, "handle", "10:", "tbf",
                "rate", f"{kbit}kbit", "burst", "3000", "latency", f"{latency_ms}ms")  # fmt: skip
        self._filtered.add(member)

    def reset_connections(self, member: str) -> int:
        """Abort every established TCP connection in ``member``'s namespace (peers get a RST)."""
        done = _run(["ss", "-N", self.namespace(member), "-K", "-t", "-n", "state", "established"], False)
        return max(0, len(done.stdout.splitlines()) - 1)

    def heal(self) -> None:
        """Every block and slow pipe removed."""
        for member in sorted(self._filtered):
            _tc(self.namespace(member), "filter", "del", "dev", "eth0", "parent", "1:", check=False)
            for ns, dev in self._veths(member):
                _tc(ns, "qdisc", "del", "dev", dev, "parent", PASS, "handle", "10:", check=False)
        self._filtered.clear()


def _shape(namespace: str, dev: str) -> None:
    """An ``htb`` root: class PASS (the default, unlimited) and class DROP (a zero-length fifo)."""
    _tc(
        namespace, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10", "r2q", "100000"
    )
    for classid in (PASS, DROP):
        _tc(namespace, "class", "add", "dev", dev, "parent", "1:", "classid", classid, "htb", "rate", "10gbit",
            "quantum", "60000")  # fmt: skip
    _tc(namespace, "qdisc", "add", "dev", dev, "parent", DROP, "handle", "20:", "pfifo", "limit", "0")


def _in_namespace(namespace: str, fn: Callable[[], T], timeout: float) -> T:
    result: list[T] = []
    error: list[BaseException] = []

    def body() -> None:
        try:
            _enter(namespace)
            result.append(fn())
        except BaseException as e:  # handed to the caller's thread
            error.append(e)

    thread = threading.Thread(target=body, name=f"in-{namespace}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise NetError(f"{getattr(fn, '__name__', fn)!s} in {namespace} did not return within {timeout:g} s")
    if error:
        raise error[0]
    return result[0]


class Forwarder:
    """127.0.0.1:<port> in the root namespace to ``address:port`` reached from the hub namespace.

    The accepting thread enters the hub namespace after binding its listening
    socket (which stays in the root namespace), so the upstream sockets it
    opens are the hub's. Two threads per connection copy bytes; a closed or
    reset side closes the other.
    """

    def __init__(self, hub: str, address: str, port: int) -> None:
        self.hub = hub
        self.upstream = (address, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.5)
        self.port: int = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._thread = threading.Thread(target=self._accept, name=f"forward-{self.port}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _accept(self) -> None:
        _enter(self.hub)
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=CONNECT_TIMEOUT_S)
            except OSError:
                client.close()  # the broker is down: the client sees a closed connection
                continue
            upstream.settimeout(None)
            client.settimeout(None)
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._open.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(262144)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            self._close(s)

    def _close(self, s: socket.socket) -> None:
        with self._lock:
            self._open.discard(s)
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)
        s.close()

    def stop(self) -> None:
        self._stop.set()
        self._listener.close()
        with self._lock:
            sockets = list(self._open)
        for s in sockets:
            self._close(s)
        self._thread.join(5)


def wait_until(predicate: Callable[[], object], what: str, timeout: float) -> None:
    """Poll ``predicate`` every 0.1 s until true (NetError after ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise NetError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.1)
