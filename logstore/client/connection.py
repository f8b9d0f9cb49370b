"""One connection to one broker: requests pipelined, responses matched in order.

:class:`BrokerConnection` is the TCP one. A caller's thread encodes and
writes a request (under a lock, so frames never interleave) and gets a
:class:`~concurrent.futures.Future`; the connection's reader thread reads
response frames, checks each correlation id against the oldest request in
flight (Kafka answers a connection's requests in order), decodes the body
with kio and settles the future. A request not answered within
``request.timeout.ms`` fails with ``_TIMED_OUT`` and closes the connection,
as Kafka's clients do (later answers on it could no longer be trusted to
arrive); every request still in flight then fails with ``_TRANSPORT``.
Connecting is bounded by ``socket.connection.setup.timeout.ms``; the first
request is ApiVersions, whose answer fixes the version of every later
request (:meth:`version`). On a SASL_PLAINTEXT listener the connection then
authenticates (:mod:`logstore.client.sasl`) before it is handed out; a
refusal closes it with ``_AUTHENTICATION`` and the broker's reason.

The embedded transport (``logstore.embedded``) provides the same methods
without a socket: the client code above it cannot tell.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import socket
import struct
import threading
import time
from concurrent.futures import Future
from typing import Any, Protocol

from logstore._native import arena_bytes
from logstore.client.errors import KafkaError, KafkaException, local
from logstore.client.sasl import SaslSettings
from logstore.protocol import SIZE, encode_request_header, requests
from logstore.protocol.produce import Chunk
from logstore.protocol.requests import encode_body

_CORRELATION = struct.Struct(">i")
API_VERSIONS = 18
PRODUCE = 0
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
# A connection whose SASL session has a lifetime is replaced at this share of it: a new connection
# authenticates, this one takes no more requests and closes once its answers are in (the broker
# answers every request that arrives before the session ends).
RENEW_AT = 0.85
_SETUP_NAMES = {
    API_VERSIONS: "ApiVersions",
    SASL_HANDSHAKE: "SaslHandshake",
    SASL_AUTHENTICATE: "SaslAuthenticate",
}
RECV_CHUNK = 256 * 1024
FRAME_MAX = 1 << 30

# The newest version of each API this client's code is written for. A broker's
# ApiVersions answer may lower it; a version above these is never sent.
CLIENT_MAX_VERSIONS: dict[int, int] = {
    0: 10,  # Produce
    1: 12,  # Fetch (v13 names topics by id)
    2: 7,  # ListOffsets
    3: 12,  # Metadata
    8: 8,  # OffsetCommit
    9: 8,  # OffsetFetch
    10: 4,  # FindCoordinator
    11: 9,  # JoinGroup
    12: 4,  # Heartbeat
    13: 5,  # LeaveGroup
    14: 5,  # SyncGroup
    15: 5,  # DescribeGroups
    16: 5,  # ListGroups (v5 filters by group type)
    17: 1,  # SaslHandshake (v0 is the legacy exchange of raw tokens)
    18: 3,  # ApiVersions
    19: 7,  # CreateTopics
    20: 6,  # DeleteTopics
    21: 2,  # DeleteRecords
    22: 4,  # InitProducerId
    24: 3,  # AddPartitionsToTxn (v4 is the brokers' batched form)
    25: 3,  # AddOffsetsToTxn
    26: 3,  # EndTxn
    28: 3,  # TxnOffsetCommit
    29: 3,  # DescribeAcls
    30: 3,  # CreateAcls
    31: 3,  # DeleteAcls
    32: 4,  # DescribeConfigs
    33: 2,  # AlterConfigs
    34: 2,  # AlterReplicaLogDirs
    35: 4,  # DescribeLogDirs
    36: 2,  # SaslAuthenticate
    37: 3,  # CreatePartitions
    42: 2,  # DeleteGroups
    43: 2,  # ElectLeaders
    44: 1,  # IncrementalAlterConfigs
    45: 1,  # AlterPartitionReassignments
    46: 0,  # ListPartitionReassignments
    47: 0,  # OffsetDelete
    48: 1,  # DescribeClientQuotas
    49: 1,  # AlterClientQuotas
    50: 0,  # DescribeUserScramCredentials
    51: 0,  # AlterUserScramCredentials
    60: 1,  # DescribeCluster
}


class Connection(Protocol):
    """What the client needs of a connection to one broker (TCP or in-process)."""

    node_id: int
    closed: bool

    @property
    def stale(self) -> bool:
        """Past its renewal time (a SASL session about to end): open a new one and retire this."""

    def retire(self) -> None:
        """Take no more requests; close once those in flight are answered."""

    def send(
        self,
        api_key: int,
        fields: dict[str, Any],
        *,
        expect_response: bool = True,
        timeout: float | None = None,
    ) -> Future[Any]: ...

    def version(self, api_key: int) -> int: ...

    def close(self, error: KafkaError | None = None) -> None: ...


def negotiated(api_key: int, ranges: dict[int, tuple[int, int]], where: str) -> int:
    """The version of ``api_key`` to speak: the highest both the broker and this client know."""
    ours = CLIENT_MAX_VERSIONS.get(api_key)
    theirs = ranges.get(api_key)
    if ours is None or theirs is None or theirs[0] > ours:
        raise KafkaException(
            KafkaError(
                KafkaError.UNSUPPORTED_VERSION,  # type: ignore[attr-defined]
                f"{where} does not serve API {api_key} at a version this client speaks "
                f"(broker: {theirs}, client: up to v{ours})",
            )
        )
    return min(ours, theirs[1])


def send_all(sock: socket.socket, chunks: list[Chunk], deadline: float) -> None:
    """Write every chunk, in order, with as few system calls as the kernel allows (no join).

    The socket has a short timeout (the reader thread's wake-up): a send the broker's back-pressure
    stalls that long is tried again, until ``deadline`` (monotonic seconds).
    """
    views = [memoryview(chunk).cast("B") for chunk in chunks if len(chunk)]
    for _ in range(1 << 20):  # each pass sends at least one byte, waits out a timeout, or raises
        if not views:
            return
        try:
            sent = sock.sendmsg(views[:1024])  # IOV_MAX
        except TimeoutError:
            if time.monotonic() > deadline:
                raise
            continue
        while sent:
            if sent >= len(views[0]):
                sent -= len(views.pop(0))
            else:
                views[0] = views[0][sent:]
                sent = 0
    raise OSError("sendmsg made no progress")


def decode_response(api_key: int, version: int, frame: bytes | memoryview, where: str) -> Any:
    """The kio response in ``frame`` (correlation id first, no size), or KafkaException ``_BAD_MSG``."""
    try:
        return requests.decode_response(api_key, version, frame, where)
    except requests.ResponseError as e:
        raise KafkaException(local("_BAD_MSG", str(e))) from None


class BrokerConnection:
    """A TCP connection to one broker (see the module's docstring)."""

    def __init__(
        self,
        node_id: int,
        host: str,
        port: int,
        client_id: str,
        setup_timeout: float,
        request_timeout: float,
        sasl: SaslSettings | None = None,
    ) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.where = f"{host}:{port}"
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.closed = False
        self.error: KafkaError | None = None
        self._lock = threading.Lock()  # in-flight requests and the error
        self._write_lock = threading.Lock()  # the socket's write side, and correlation ids
        self._in_flight: collections.deque[tuple[int, int, int, Future[Any], float]] = collections.deque()
        self._correlation = itertools.count(1)
        self._versions: dict[int, tuple[int, int]] = {}
        self._chosen: dict[int, int] = {}
        self.renew_at: float | None = None  # monotonic; set from a SASL session's lifetime
        self._retiring = False
        self._sock = self._connect(setup_timeout)
        self._reader = threading.Thread(
            target=self._read_loop, name=f"logstore-conn-{self.where}", daemon=True
        )
        self._reader.start()
        self._handshake(setup_timeout)
        if sasl is not None:
            self._authenticate(sasl, setup_timeout)

    def _connect(self, timeout: float) -> socket.socket:
        deadline = time.monotonic() + timeout
        try:
            infos = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
        except OSError as e:
            raise KafkaException(
                local("_TRANSPORT", f"{self.where}: cannot resolve {self.host!r}: {e}")
            ) from None
        last: OSError | None = None
        for family, kind, proto, _, address in infos:
            sock = socket.socket(family, kind, proto)
            try:
                sock.settimeout(max(deadline - time.monotonic(), 0.001))
                sock.connect(address)
            except OSError as e:
                sock.close()
                last = e
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(None)
            return sock
        reason = "timed out" if isinstance(last, TimeoutError) else str(last)
        raise KafkaException(
            local(
                "_TRANSPORT",
                f"{self.where}: connect failed ({reason}) within socket.connection.setup.timeout.ms="
                f"{timeout * 1000:.0f}; is a broker listening there?",
            )
        ) from None

    def _handshake(self, timeout: float) -> None:
        """ApiVersions at v3 (v0 if the broker answers UNSUPPORTED_VERSION): the versions to speak."""
        for version in (3, 0):
            self._chosen[API_VERSIONS] = version
            fields = {"client_software_name": "logstore", "client_software_version": "0.1.0"}
            response = self._setup_request(API_VERSIONS, fields, timeout)
            if response.error_code == KafkaError.UNSUPPORTED_VERSION and version:  # type: ignore[attr-defined]
                continue
            if response.error_code:
                raise KafkaException(
                    KafkaError(int(response.error_code), f"{self.where}: ApiVersions failed")
                )
            self._versions = {
                int(a.api_key): (int(a.min_version), int(a.max_version)) for a in response.api_keys
            }
            return

    def _authenticate(self, sasl: SaslSettings, timeout: float) -> None:
        """SaslHandshake v1, then SaslAuthenticate rounds until the mechanism is done (KIP-152)."""
        handshake = self._setup_request(SASL_HANDSHAKE, {"mechanism": sasl.mechanism}, timeout)
        if handshake.error_code:
            offered = ", ".join(handshake.mechanisms) or "none"
            self._refused(
                f"the broker does not enable sasl.mechanism={sasl.mechanism} on this listener "
                f"(it offers: {offered})"
            )
        steps = sasl.steps()
        token = next(steps)
        for _ in range(8):  # bounded: PLAIN takes one round, SCRAM two
            answer = self._setup_request(SASL_AUTHENTICATE, {"auth_bytes": token}, timeout)
            if answer.error_code:
                reason = answer.error_message or KafkaError(int(answer.error_code)).str()
                self._refused(f"{reason} (sasl.mechanism={sasl.mechanism}, sasl.username={sasl.username})")
            try:
                token = steps.send(bytes(answer.auth_bytes))
            except StopIteration:
                # connections.max.reauth.ms (KIP-368), renewed before it ends; v0 answers have none
                lifetime = getattr(answer, "session_lifetime", None)
                if lifetime is not None and lifetime.total_seconds() > 0:
                    self.renew_at = time.monotonic() + lifetime.total_seconds() * RENEW_AT
                return
            except ValueError as e:
                self._refused(str(e))
        self._refused(f"the {sasl.mechanism} exchange did not end")

    def _setup_request(self, api_key: int, fields: dict[str, Any], timeout: float) -> Any:
        """A request of the connection's set-up, answered within ``timeout`` or the connection closed."""
        try:
            return self.send(api_key, fields).result(timeout)
        except TimeoutError:
            name = _SETUP_NAMES[api_key]
            self.close(local("_TIMED_OUT", f"{self.where}: no {name} answer in {timeout:.1f} s"))
            raise KafkaException(self.error or local("_TIMED_OUT")) from None

    def _refused(self, reason: str) -> None:
        """Close with ``_AUTHENTICATION`` and raise it: this connection serves nothing."""
        error = local("_AUTHENTICATION", f"{self.where}: SASL authentication failed: {reason}")
        self.close(error)
        raise KafkaException(error)

    @property
    def stale(self) -> bool:
        return self.renew_at is not None and time.monotonic() >= self.renew_at

    def retire(self) -> None:
        with self._write_lock:  # after any write under way, so its answer is waited for
            self._retiring = True
            idle = not self._in_flight
        if idle:
            self._close_retired()

    def _close_retired(self) -> None:
        self.close(local("_DESTROY", f"{self.where}: retired (its SASL session is ending)"))

    def version(self, api_key: int) -> int:
        chosen = self._chosen.get(api_key)
        if chosen is None:
            chosen = self._chosen[api_key] = negotiated(api_key, self._versions, self.where)
        return chosen

    def supports(self, api_key: int) -> bool:
        return api_key in self._versions and api_key in CLIENT_MAX_VERSIONS

    def send(
        self,
        api_key: int,
        fields: dict[str, Any],
        *,
        expect_response: bool = True,
        timeout: float | None = None,
    ) -> Future[Any]:
        """Write one request; the future settles with its kio response (None when none is expected).

        ``timeout`` (seconds) replaces ``request.timeout.ms`` for this request: a JoinGroup may be
        held by the coordinator for the whole rebalance timeout, as Kafka's clients allow for.
        """
        future: Future[Any] = Future()
        if self.closed:
            future.set_exception(KafkaException(self.error or local("_TRANSPORT", f"{self.where}: closed")))
            return future
        version = self.version(api_key)
        body, size, flexible = encode_body(api_key, version, fields)  # outside the lock: the slow part
        failed: KafkaError | None = None
        deadline = time.monotonic() + (self.request_timeout if timeout is None else timeout)
        # The write lock orders frames and in-flight entries alike; the state lock is held only to
        # append: a write that the broker's back-pressure stalls must not stop the reader thread
        # from settling answers (which is what lets the broker read on).
        with self._write_lock:
            correlation = next(self._correlation) & 0x7FFFFFFF
            header = encode_request_header(api_key, version, correlation, self.client_id, flexible)
            if expect_response:
                with self._lock:
                    self._in_flight.append((correlation, api_key, version, future, deadline))
            try:
                send_all(self._sock, [SIZE.pack(len(header) + size), header, *body], deadline)
            except OSError as e:
                failed = local("_TRANSPORT", f"{self.where}: send failed: {e}")
        if failed is not None:  # _fail takes the state lock: not while holding it
            self._fail(failed)
            if not future.done():
                future.set_exception(KafkaException(failed))
        if not expect_response and not future.done():
            future.set_result(None)
        return future

    # -- the reader thread ---------------------------------------------------

    def _read_loop(self) -> None:
        sock = self._sock
        buffer = bytearray()
        sock.settimeout(0.2)  # wake now and then to expire timed-out requests
        try:
            while not self.closed:
                try:
                    chunk = sock.recv(RECV_CHUNK)
                except TimeoutError:
                    self._expire()
                    continue
                if not chunk:
                    self._fail(local("_TRANSPORT", f"{self.where}: the broker closed the connection"))
                    return
                buffer += chunk
                buffer = self._frames(buffer, sock)
                self._expire()
        except OSError as e:
            self._fail(local("_TRANSPORT", f"{self.where}: receive failed: {e}"))
        except KafkaException as e:
            self._fail(e.error)

    def _frames(self, buffer: bytearray, sock: socket.socket) -> bytearray:
        """Settle every whole frame in ``buffer``; a large frame is read straight to its end."""
        at = 0
        while len(buffer) - at >= 4:
            (size,) = SIZE.unpack_from(buffer, at)
            if not 4 <= size <= FRAME_MAX:
                raise KafkaException(local("_BAD_MSG", f"{self.where}: a response frame of {size} bytes"))
            if len(buffer) - at - 4 < size:
                if at:
                    del buffer[:at]
                    at = 0
                if size > RECV_CHUNK:
                    # A large answer (a Fetch) is read into its own buffer and settled
                    # from there: its record sets are views of it, never copied.
                    whole = self._read_rest(buffer, size + 4, sock)
                    if whole is not None:
                        self._settle(whole.toreadonly()[4:])
                    return bytearray()
                return buffer
            self._settle(bytes(buffer[at + 4 : at + 4 + size]))
            at += 4 + size
        if at:
            del buffer[:at]
        return buffer

    def _read_rest(self, buffer: bytearray, total: int, sock: socket.socket) -> memoryview | None:
        """The frame begun in ``buffer``, read to ``total`` bytes; None if closed first."""
        have = len(buffer)
        out = arena_bytes(total)  # pages reused from the last large answer, not faulted anew
        out[:have] = buffer
        view = out
        while have < total and not self.closed:
            try:
                n = sock.recv_into(view[have:], total - have)
            except TimeoutError:
                self._expire()
                continue
            if not n:
                raise OSError("the broker closed the connection mid-frame")
            have += n
        return out if have == total else None

    def _settle(self, frame: bytes | memoryview) -> None:
        (correlation,) = _CORRELATION.unpack_from(frame, 0)
        with self._lock:
            if not self._in_flight:
                raise KafkaException(
                    local("_BAD_MSG", f"{self.where}: an answer to no request ({correlation})")
                )
            expected, api_key, version, future, _ = self._in_flight.popleft()
        if correlation != expected:
            raise KafkaException(
                local("_BAD_MSG", f"{self.where}: answer {correlation} where {expected} was due")
            )
        try:
            response = requests.decode_response(api_key, version, frame, self.where)
        except requests.ResponseError as e:
            future.set_exception(KafkaException(local("_BAD_MSG", str(e))))
            raise KafkaException(local("_BAD_MSG", f"{self.where}: undecodable answer")) from None
        if not future.done():
            future.set_result(response)
        if self._retiring and not self._in_flight:
            self._close_retired()

    def _expire(self) -> None:
        if not self._in_flight:
            return
        _, api_key, _, _, deadline = self._in_flight[0]
        if time.monotonic() > deadline:
            self._fail(
                local(
                    "_TIMED_OUT",
                    f"{self.where}: no answer to API {api_key} within request.timeout.ms="
                    f"{self.request_timeout * 1000:.0f}",
                )
            )

    def _fail(self, error: KafkaError) -> None:
        """Close, failing every request in flight with ``error`` (the first failure wins)."""
        with self._lock:
            if self.error is None:
                self.error = error
            pending = list(self._in_flight)
            self._in_flight.clear()
            self.closed = True
        for _, _, _, future, _ in pending:
            if not future.done():
                future.set_exception(KafkaException(error))
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)

    def close(self, error: KafkaError | None = None) -> None:
        self._fail(error or local("_DESTROY", f"{self.where}: connection closed by the client"))
        if threading.current_thread() is not self._reader:
            self._reader.join(2)
        self._sock.close()

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)
