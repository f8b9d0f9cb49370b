"""Client quotas (Kafka's ClientQuotaManager, KIP-13/KIP-55/KIP-124, throttling per KIP-219).

Quota keys, per user and/or client id (Kafka's names and types):

- ``producer_byte_rate`` (long, bytes/s): Produce request bytes;
- ``consumer_byte_rate`` (long, bytes/s): Fetch response bytes (consumers; a follower's
  fetches are exempt, as in Kafka);
- ``request_percentage`` (double, % of one thread): time the event loop spends on the
  client's requests (decode, handler steps, encode), as Kafka counts request-handler
  thread time;
- ``controller_mutation_rate`` (double): accepted and stored, not enforced.

An IP entity takes ``connection_creation_rate`` (see connection_limits.py).

**Entities and precedence** (Kafka's, most specific first; each quota key resolved on its own)::

    /config/users/<user>/clients/<client-id>
    /config/users/<user>/clients/<default>
    /config/users/<user>
    /config/users/<default>/clients/<client-id>
    /config/users/<default>/clients/<default>
    /config/users/<default>
    /config/clients/<client-id>
    /config/clients/<default>

The user is the connection's principal *name* (``User:alice`` -> ``alice``; every
connection is ``ANONYMOUS`` until SASL authenticates it). Who shares one rate follows
Kafka's metric tags: a quota on ``<user>`` is shared by all that user's client ids; a
``<default>`` entity gives *each* user (client id) the quota, not all of them together.

**Rate** (Kafka's ``Rate`` over a ``SampledStat``): ``quota.window.num`` (11) samples of
``quota.window.size.seconds`` (1 s); the rate is the sum of the retained samples over the
elapsed window, which counts at least ``num - 1`` full windows (so a fresh client is not
throttled for its first burst). The value is recorded first, then checked: over the bound,
``throttle_ms = (rate - bound) / bound * window_ms`` (Kafka's ``QuotaUtils.throttleTime``):
how long the client must stay silent for the rate to fall back to the bound. The request
quota's is capped at one window (size), as Kafka's ``ClientRequestQuotaManager`` caps it;
the byte rates' at the whole window (num x size), where Kafka leaves them uncapped: the cap
keeps one huge request from muting a client for minutes.

**Throttling** (KIP-219): the response goes out at once with ``throttle_time_ms`` set, then
the connection is muted (its socket is not read, queued requests wait) for that long. A
client on a request version older than KIP-219's (:data:`KIP219_VERSIONS`) does not back off
by itself: its response is held back for the throttle time instead (Kafka before 2.0).
The two rates throttle together: the response carries the larger time.

Cost: with no quota configured anywhere :attr:`ClientQuotas.active` is False and the broker
serves as before (one attribute test per request). With quotas, a request costs a dict
lookup of the resolved quotas of its (user, client id) (cached; the cache is cleared on
every change) and one sample update per enforced key; ``request_percentage`` adds a timer
around each step of the handler.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import math
import os
import threading
import time
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping
from typing import Any, Protocol

from logstore.protocol import Codec, DeferredBody, FileRegion, RawBody, build, encode_response
from logstore.protocol.primitives import SIZE
from logstore.storage.checkpoints import read_json, write_atomically

_log = logging.getLogger("logstore.broker.quotas.client_quotas")

DEFAULT = "<default>"
USER, CLIENT_ID, IP = "user", "client-id", "ip"

# key -> Kafka's ConfigDef type
QUOTA_KEYS = {
    "producer_byte_rate": "long",
    "consumer_byte_rate": "long",
    "request_percentage": "double",
    "controller_mutation_rate": "double",
}
IP_QUOTA_KEYS = {"connection_creation_rate": "int"}
PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
# Quota key -> the quota type of the throttle-time metric (Kafka's Produce/Fetch/Request sensors).
_METRIC_TYPES = {PRODUCE: "produce", FETCH: "fetch", REQUEST: "request"}
ENFORCED = (PRODUCE, FETCH, REQUEST)

# The first version of each API whose clients throttle themselves (KIP-219: "on quota violation,
# brokers send out responses before throttling"). APIs not listed came later: every version.
KIP219_VERSIONS = {
    0: 6, 1: 8, 2: 3, 3: 6, 8: 4, 9: 4, 10: 2, 11: 3, 12: 2, 13: 2, 14: 2, 15: 2, 16: 2, 18: 2,
    19: 3, 20: 2, 21: 1, 22: 1, 23: 2, 24: 1, 25: 1, 26: 1, 28: 1, 29: 1, 30: 1, 31: 1, 32: 2,
    33: 1, 34: 1, 35: 1, 36: 1, 37: 1, 38: 1, 39: 1, 40: 1, 41: 1, 42: 1,
}  # fmt: skip
# Never throttled: cluster actions between brokers (Kafka's exempt ClusterAction APIs) and SASL.
EXEMPT_APIS = frozenset({4, 5, 6, 7, 17, 27, 36, 56})

Entity = tuple[tuple[str, str], ...]
"""An entity: sorted ((type, name), ...); name DEFAULT for the default entity."""


def entity_path(entity: Entity) -> str:
    """The znode path under /config of an entity: ``users/alice/clients/app``, ``clients/<default>``, ``ips/1.2.3.4``."""
    names = dict(entity)
    if IP in names:
        return f"ips/{names[IP]}"
    if USER in names and CLIENT_ID in names:
        return f"users/{sanitize(names[USER])}/clients/{sanitize(names[CLIENT_ID])}"
    if USER in names:
        return f"users/{sanitize(names[USER])}"
    return f"clients/{sanitize(names[CLIENT_ID])}"


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: URL-encode (UTF-8), ``*`` as ``%2A``; ``<default>`` kept."""
    if name == DEFAULT:
        return name
    from urllib.parse import quote

    return quote(name, safe="").replace("*", "%2A").replace("%7E", "~")


def desanitize(name: str) -> str:
    from urllib.parse import unquote

    return name if name == DEFAULT else unquote(name)


# -- the rate ---------------------------------------------------------------------------------


class Rate:
    """Kafka's ``Rate`` (per second) over a ``SampledStat`` of ``samples`` windows of ``window_ms``.

    Memory: ``samples`` [start_ms, value] pairs. Each record or measure is O(samples).
    """

    __slots__ = ("_current", "_samples", "last_ms", "n", "window_ms")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.n = samples
        self.window_ms = window_ms
        self._samples: list[list[float]] = []
        self._current = 0
        self.last_ms = 0.0

    def record(self, value: float, now_ms: float) -> None:
        self.last_ms = now_ms
        if not self._samples:
            self._samples.append([now_ms, 0.0])
        sample = self._samples[self._current]
        if now_ms - sample[0] >= self.window_ms:  # complete: the next sample (a new or the oldest)
            self._current = (self._current + 1) % self.n
            if self._current >= len(self._samples):
                self._samples.append([now_ms, 0.0])
            else:
                self._samples[self._current][:] = [now_ms, 0.0]
            sample = self._samples[self._current]
        sample[1] += value

    def _purge(self, now_ms: float) -> None:
        expire = self.n * self.window_ms
        for sample in self._samples:
            if now_ms - sample[0] >= expire:
                sample[:] = [now_ms, 0.0]

    def window_size_ms(self, now_ms: float) -> float:
        """Kafka's ``Rate.windowSize``: the elapsed window, at least ``n - 1`` full windows."""
        self._purge(now_ms)
        oldest = min((s[0] for s in self._samples), default=now_ms)
        elapsed = now_ms - oldest
        full = int(elapsed // self.window_ms)
        if full < self.n - 1:
            elapsed += (self.n - 1 - full) * self.window_ms
        return max(elapsed, 1.0)

    def measure(self, now_ms: float) -> float:
        """Units per second over the window."""
        self._purge(now_ms)
        total = sum(s[1] for s in self._samples)
        return total / (self.window_size_ms(now_ms) / 1000.0)

    def throttle_ms(self, bound: float, now_ms: float, cap_ms: float) -> int:
        """0 if the rate is within ``bound``; else how long until it falls back (Kafka's throttleTime), capped."""
        value = self.measure(now_ms)
        if value <= bound:
            return 0
        if bound <= 0:
            return int(cap_ms)
        return int(min(round((value - bound) / bound * self.window_size_ms(now_ms)), cap_ms))


# -- storage ----------------------------------------------------------------------------------


class QuotaStore(Protocol):
    """Where quota configs are kept: entity -> {key: value}."""

    def load(self) -> dict[Entity, dict[str, float]]: ...

    def save(self, changes: Mapping[Entity, Mapping[str, float]]) -> None:
        """Make each entity's quotas exactly the given ones ({}: none)."""
        ...


class FileQuotaStore:
    """A broker alone: ``<data-dir>/client-quotas.json``, written atomically (tmp, fsync, rename)::

    {"version": 1, "entities": [{"entity": {"user": "alice"}, "config": {"producer_byte_rate": 1024.0}}]}
    """

    FILE = "client-quotas.json"

    def __init__(self, data_dir: str) -> None:
        self.path = os.path.join(data_dir, self.FILE)
        self._lock = threading.Lock()

    def load(self) -> dict[Entity, dict[str, float]]:
        data = read_json(self.path, "client quotas")
        if data is None:
            return {}
        out: dict[Entity, dict[str, float]] = {}
        for item in data.get("entities", ()):
            entity = tuple(sorted((str(k), str(v)) for k, v in item["entity"].items()))
            out[entity] = {str(k): float(v) for k, v in item["config"].items()}
        return out

    def save(self, changes: Mapping[Entity, Mapping[str, float]]) -> None:
        with self._lock:
            entities = self.load()
            for entity, config in changes.items():
                if config:
                    entities[entity] = dict(config)
                else:
                    entities.pop(entity, None)
            items = [
                {"entity": dict(entity), "config": config} for entity, config in sorted(entities.items())
            ]
            text = json.dumps({"version": 1, "entities": items}, indent=1, sort_keys=True)
            write_atomically(self.path, text.encode())


# -- the manager ------------------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class Resolved:
    """One (user, client id)'s quota of one key: its bound and the rate it shares."""

    bound: float
    rate: Rate


class ClientQuotas:
    """The quota configs and the rates they are measured against (one per broker).

    ``configs``: entity -> {key: value}. ``_resolved``: (user, client id) -> {key: Resolved}
    for the enforced keys that apply, cleared when configs change. ``_rates``: (key, user tag,
    client tag) -> Rate, where the tags follow Kafka's metric tags (see the module doc).
    Rates idle for an hour are dropped (Kafka's sensor expiry).
    """

    SENSOR_EXPIRY_MS = 3_600_000

    def __init__(
        self,
        store: QuotaStore,
        samples: int = 11,
        window_seconds: int = 1,
        on_ip_quotas: Callable[[dict[str, float]], None] | None = None,
        on_throttle: Callable[[str, float], None] | None = None,
    ) -> None:
        """``on_ip_quotas``: told the IP quotas after each change (the connection limits);
        ``on_throttle``: told (quota type, ms) of each throttle decided (the broker's metrics)."""
        self.store = store
        self.samples = samples
        self.window_ms = window_seconds * 1000
        self.configs: dict[Entity, dict[str, float]] = {}
        self._resolved: dict[tuple[str, str], dict[str, Resolved]] = {}
        self._rates: dict[tuple[str, str, str], Rate] = {}
        self.active = False
        self.on_ip_quotas = on_ip_quotas
        self.on_throttle = on_throttle
        self.reload()

    def use_store(self, store: QuotaStore) -> None:
        """Keep the quotas in ``store`` from now on (a cluster's ZooKeeper; its follower reloads)."""
        self.store = store

    def reload(self) -> None:
        """Read every quota from the store again (start, and a change made elsewhere)."""
        self.set_configs(self.store.load())

    def set_configs(self, configs: Mapping[Entity, Mapping[str, float]]) -> None:
        self.configs = {entity: dict(config) for entity, config in configs.items() if config}
        self._resolved.clear()
        self.active = any(
            key in ENFORCED
            for entity, config in self.configs.items()
            if IP not in dict(entity)
            for key in config
        )
        if self.on_ip_quotas is not None:
            self.on_ip_quotas(self.ip_quotas())

    def ip_quotas(self) -> dict[str, float]:
        """IP (or ``<default>``) -> connection_creation_rate."""
        out = {}
        for entity, config in self.configs.items():
            names = dict(entity)
            if IP in names and "connection_creation_rate" in config:
                out[names[IP]] = config["connection_creation_rate"]
        return out

    # -- resolution -------------------------------------------------------------------------

    def quota_entity(self, user: str, client_id: str, key: str) -> tuple[Entity, tuple[str, str]] | None:
        """The entity whose ``key`` applies to (user, client id), Kafka's precedence, and the
        (user tag, client tag) of the rate it is measured on; None if no quota applies."""
        candidates: tuple[tuple[Entity, tuple[str, str]], ...] = (
            (((CLIENT_ID, client_id), (USER, user)), (user, client_id)),
            (((CLIENT_ID, DEFAULT), (USER, user)), (user, client_id)),
            (((USER, user),), (user, "")),
            (((CLIENT_ID, client_id), (USER, DEFAULT)), (user, client_id)),
            (((CLIENT_ID, DEFAULT), (USER, DEFAULT)), (user, client_id)),
            (((USER, DEFAULT),), (user, "")),
            (((CLIENT_ID, client_id),), ("", client_id)),
            (((CLIENT_ID, DEFAULT),), ("", client_id)),
        )
        for entity, tags in candidates:
            config = self.configs.get(entity)
            if config is not None and key in config:
                return entity, tags
        return None

    def resolve(self, user: str, client_id: str) -> dict[str, Resolved]:
        found = self._resolved.get((user, client_id))
        if found is None:
            found = {}
            for key in ENFORCED:
                match = self.quota_entity(user, client_id, key)
                if match is None:
                    continue
                entity, (user_tag, client_tag) = match
                rate_key = (key, user_tag, client_tag)
                rate = self._rates.get(rate_key)
                if rate is None:
                    rate = self._rates[rate_key] = Rate(self.samples, self.window_ms)
                found[key] = Resolved(self.configs[entity][key], rate)
            if len(self._resolved) > 100_000:
                self._resolved.clear()
            self._resolved[(user, client_id)] = found
        return found

    def record(self, quotas: Mapping[str, Resolved], key: str, value: float, now_ms: float) -> int:
        """Record ``value`` on ``key``'s rate (if a quota applies); the throttle time in ms."""
        resolved = quotas.get(key)
        if resolved is None:
            return 0
        resolved.rate.record(value, now_ms)
        cap = self.window_ms if key == REQUEST else self.samples * self.window_ms
        return resolved.rate.throttle_ms(resolved.bound, now_ms, cap)

    def unrecord(self, quotas: Mapping[str, Resolved], key: str, value: float, now_ms: float) -> None:
        """Take ``value`` back off ``key``'s rate (a throttled fetch sends nothing: Kafka's unrecord)."""
        resolved = quotas.get(key)
        if resolved is not None:
            resolved.rate.record(-value, now_ms)

    def expire(self, now_ms: float) -> None:
        """Drop rates unused for SENSOR_EXPIRY_MS (Kafka expires idle quota sensors after an hour)."""
        stale = [k for k, rate in self._rates.items() if now_ms - rate.last_ms > self.SENSOR_EXPIRY_MS]
        if stale:
            for k in stale:
                del self._rates[k]
            self._resolved.clear()

    # -- serving -------------------------------------------------------------------------------

    def charge(
        self, user: str, client_id: str, api_key: int, version: int, request: Any, request_bytes: int
    ) -> QuotaCharge | None:
        """What one request owes the quotas of its (user, client id); None when none applies.

        The dispatcher (dispatch.py) runs the handler through :meth:`QuotaCharge.timed`, then
        asks :meth:`QuotaCharge.response` and :meth:`QuotaCharge.chunks` for the throttled answer.
        """
        if api_key in EXEMPT_APIS:
            return None
        quotas = self.resolve(user, client_id)
        if not quotas:
            return None
        consumer_fetch = api_key == 1 and _replica_id(request) < 0
        return QuotaCharge(self, quotas, api_key, version, request_bytes, consumer_fetch)

    def recorded(self, quotas: Mapping[str, Resolved], quota: str, value: float, now_ms: float) -> int:
        """:meth:`record`, and the throttle it decides reported to :attr:`on_throttle`."""
        throttle = self.record(quotas, quota, value, now_ms)
        if throttle and self.on_throttle is not None:
            self.on_throttle(_METRIC_TYPES[quota], throttle)
        return throttle

    # -- AlterClientQuotas / DescribeClientQuotas ------------------------------------------------

    def describe(
        self, components: Iterable[tuple[str, int, str | None]], strict: bool
    ) -> list[tuple[Entity, dict[str, float]]]:
        """Entities matching the filter (validated by :func:`check_filter`) with their quotas."""
        wanted = {entity_type: (match_type, match) for entity_type, match_type, match in components}
        out = []
        for entity, config in sorted(self.configs.items()):
            names = dict(entity)
            if strict and set(names) - set(wanted):
                continue
            ok = True
            for entity_type, (match_type, match) in wanted.items():
                name = names.get(entity_type)
                if name is None:
                    ok = False
                elif match_type == 0:  # EXACT
                    ok = name == match
                elif match_type == 1:  # DEFAULT
                    ok = name == DEFAULT
                if not ok:
                    break
            if ok:
                keys = IP_QUOTA_KEYS if IP in names else QUOTA_KEYS
                values = {k: v for k, v in config.items() if k in keys}
                if values:
                    out.append((entity, values))
        return out

    def plan(
        self, changes: Mapping[Entity, Mapping[str, float | None]]
    ) -> tuple[dict[Entity, dict[str, float]], dict[Entity, dict[str, float]]]:
        """Validated ops (value None: remove the key) -> (every entity's quotas after them, the
        entities they touch). Nothing changes until :meth:`set_configs`; the store is saved between."""
        new = {entity: dict(config) for entity, config in self.configs.items()}
        touched: dict[Entity, dict[str, float]] = {}
        for entity, ops in changes.items():
            config = new.setdefault(entity, {})
            for op_key, value in ops.items():
                if value is None:
                    config.pop(op_key, None)
                else:
                    config[op_key] = value
            touched[entity] = config
        return new, touched


def check_entity(entity: Iterable[tuple[str, str | None]]) -> tuple[Entity | None, str | None]:
    """(entity, None) for a valid AlterClientQuotas entity; (None, why) otherwise (INVALID_REQUEST)."""
    names: dict[str, str] = {}
    for entity_type, name in entity:
        if entity_type not in (USER, CLIENT_ID, IP):
            return None, f"Unhandled client quota entity type: {entity_type}"
        if entity_type in names:
            return None, f"Duplicate {entity_type} entity type"
        if name == "" and entity_type != CLIENT_ID:
            return None, f"Invalid empty {entity_type} entity name"
        if entity_type == IP and name is not None and not _is_ip(name):
            return None, f"{name} is not a valid IP address"
        names[entity_type] = DEFAULT if name is None else name
    if not names:
        return None, "Invalid empty client quota entity"
    if IP in names and len(names) > 1:
        return (
            None,
            "Invalid quota entity combination, IP entity should not be combined with User or ClientId",
        )
    return tuple(sorted(names.items())), None


def check_op(entity: Entity, key: str, value: float, remove: bool) -> str | None:
    """None for a valid op on ``entity``; else why (INVALID_REQUEST)."""
    keys = IP_QUOTA_KEYS if IP in dict(entity) else QUOTA_KEYS
    if key not in keys:
        return f"Invalid configuration key {key}"
    if remove:
        return None
    if math.isnan(value) or math.isinf(value):
        return f"Invalid value {value} for {key}"
    if keys[key] in ("long", "int"):
        if abs(round(value) - value) > 1e-6:
            return f"Configuration {key} must be a {keys[key].capitalize()} value"
        if keys[key] == "int" and value > 2**31 - 1:
            return f"Proposed value for {key} is too large for an INT."
    if value <= 0:
        return f"Quota {key} must be greater than 0, not {value}"
    return None


def check_filter(components: Iterable[tuple[str, int, str | None]]) -> tuple[int, str] | None:
    """None for a valid DescribeClientQuotas filter; else (error code, message)."""
    from kio.schema.errors import ErrorCode

    seen: set[str] = set()
    for entity_type, match_type, match in components:
        if entity_type == "":
            return ErrorCode.invalid_request.value, "Unexpected empty filter component entity type"
        if entity_type not in (USER, CLIENT_ID, IP):
            return ErrorCode.unsupported_version.value, f"Custom entity type '{entity_type}' not supported"
        if entity_type in seen:
            return ErrorCode.invalid_request.value, f"Duplicate {entity_type} filter component entity type"
        seen.add(entity_type)
        if match_type == 0 and match is None:
            return ErrorCode.invalid_request.value, f"Match must be set for an EXACT {entity_type} component"
        if match_type in (1, 2) and match is not None:
            return (
                ErrorCode.invalid_request.value,
                f"Match must be null for a DEFAULT or SPECIFIED {entity_type} component",
            )
        if match_type not in (0, 1, 2):
            return ErrorCode.invalid_request.value, f"Unexpected match type: {match_type}"
    if IP in seen and len(seen) > 1:
        return (
            ErrorCode.invalid_request.value,
            "Invalid entity filter component combination, IP filter component should not be used with "
            "user or clientId filter component.",
        )
    return None


def _is_ip(name: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class QuotaCharge:
    """One request's charge against the quotas that apply to it (see :meth:`ClientQuotas.charge`).

    Steps, in the dispatcher's order: :meth:`timed` wraps the handler (``request_percentage``:
    the time of its steps, not its waits); :meth:`response` records the request time and the
    Produce bytes and writes the throttle into the response; :meth:`chunks` records a
    consumer fetch's response bytes and, over the quota, swaps the answer for an empty one
    (Kafka's ``getThrottledResponse``). :attr:`throttle_ms` is then what the connection mutes
    for (:attr:`client_throttles`: after the answer, KIP-219; else the answer waits).
    """

    __slots__ = (
        "_quotas", "_resolved", "_timed", "api_key", "consumer_fetch", "request_bytes", "throttle_ms", "version",
    )  # fmt: skip

    def __init__(
        self,
        quotas: ClientQuotas,
        resolved: Mapping[str, Resolved],
        api_key: int,
        version: int,
        request_bytes: int,
        consumer_fetch: bool,
    ) -> None:
        self._quotas = quotas
        self._resolved = resolved
        self._timed: _Timed | None = None
        self.api_key = api_key
        self.version = version
        self.request_bytes = request_bytes
        self.consumer_fetch = consumer_fetch  # throttled by its response's size (chunks)
        self.throttle_ms = 0

    @property
    def client_throttles(self) -> bool:
        """The client backs off by itself (a KIP-219 version): mute after answering, not before."""
        return self.version >= KIP219_VERSIONS.get(self.api_key, 0)

    def timed(self, coro: Awaitable[Any]) -> Awaitable[Any]:
        """``coro``, its steps timed when ``request_percentage`` applies (a deferred wait too)."""
        if REQUEST not in self._resolved:
            return coro
        if self._timed is None:
            self._timed = _Timed(coro)
            return self._timed
        timed = _Timed(coro)  # the deferred part of the same request: one total
        timed.ns = self._timed.ns
        self._timed = timed
        return timed

    def response(self, response: Any, flexible: bool) -> Any:
        """Record the request's time and Produce bytes; ``response`` with the throttle written in
        (a consumer fetch's throttle is written by :meth:`chunks`, once its size is known)."""
        now_ms = time.monotonic() * 1000
        quotas = self._quotas
        if self._timed is not None:
            percent = (
                self._timed.ns * 100 / 1e9
            )  # % of one thread, x seconds: a rate per second is a percentage
            self.throttle_ms = quotas.recorded(self._resolved, REQUEST, percent, now_ms)
        if self.api_key == 0:
            produced = quotas.recorded(self._resolved, PRODUCE, self.request_bytes, now_ms)
            self.throttle_ms = max(self.throttle_ms, produced)
        if self.throttle_ms and response is not None and not self.consumer_fetch:
            return with_throttle(response, self.throttle_ms, self.api_key, self.version, flexible)
        return response

    def chunks(self, chunks: list[Any], codec_: Codec, request: Any, correlation_id: int) -> list[Any]:
        """A consumer fetch's encoded answer, or the empty one that replaces it when throttled."""
        if not self.consumer_fetch:
            return chunks
        now_ms = time.monotonic() * 1000
        quotas = self._quotas
        size = sum(len(chunk) for chunk in chunks)
        self.throttle_ms = max(self.throttle_ms, quotas.recorded(self._resolved, FETCH, size, now_ms))
        if not self.throttle_ms or self.version < 1:
            return chunks
        # Kafka's KafkaApis: a throttled fetch is answered empty, its bytes taken back off the
        # rate (``unrecordQuotaSensor``); the consumer asks for the same offsets again once the
        # throttle time has passed.
        quotas.unrecord(self._resolved, FETCH, size, now_ms)
        for chunk in chunks:
            if isinstance(chunk, FileRegion):
                chunk.close()
        return encode_response(codec_, correlation_id, _throttled_fetch(codec_, request, self.throttle_ms))


# -- throttle_time_ms in a response -------------------------------------------------------------


def with_throttle(response: Any, throttle_ms: int, api_key: int, version: int, flexible: bool) -> Any:
    """``response`` with ``throttle_time_ms`` set: the one place a non-zero throttle is written.

    Handlers answer ``NO_THROTTLE``; a kio response gets its ``throttle_time`` replaced, a
    hand-encoded Produce body (:class:`RawBody`) its int32 before the final tag section, a
    deferred OffsetCommit body (v3+) its first int32. Versions without the field: unchanged.
    """
    if isinstance(response, RawBody):
        if api_key == 0 and version >= 1:  # Produce: throttle_time_ms last, before the tag section
            end = len(response) - (1 if flexible else 0)
            return RawBody(response[: end - 4] + SIZE.pack(throttle_ms) + response[end:])
        if api_key == 8 and version >= 3:  # OffsetCommit: first
            return RawBody(SIZE.pack(throttle_ms) + response[4:])
        return response
    if isinstance(response, DeferredBody):
        if (api_key, version) < (8, 3) or api_key != 8:
            return response
        encode = response.encode

        def patched() -> bytes:
            body = encode()
            return SIZE.pack(throttle_ms) + body[4:]

        return DeferredBody(patched)
    if dataclasses.is_dataclass(response) and any(
        f.name == "throttle_time" for f in dataclasses.fields(response)
    ):
        return dataclasses.replace(response, throttle_time=datetime.timedelta(milliseconds=throttle_ms))  # type: ignore[type-var]
    return response


def _throttled_fetch(codec_: Codec, request: Any, throttle_ms: int) -> Any:
    """Kafka's ``getThrottledResponse``: no partitions, ``throttle_time_ms`` set; an incremental
    fetch keeps its session id, a full one gets none (INVALID_SESSION_ID, 0)."""
    from kio.schema.errors import ErrorCode

    module = codec_.response_module
    incremental = (
        int(getattr(request, "session_id", 0) or 0) > 0 and int(getattr(request, "session_epoch", -1)) > 0
    )
    return build(
        module.FetchResponse,
        throttle_time=datetime.timedelta(milliseconds=throttle_ms),
        error_code=ErrorCode.none,
        session_id=int(request.session_id) if incremental else 0,
        responses=(),
    )


def _replica_id(request: Any) -> int:
    state = getattr(request, "replica_state", None)
    if state is not None:
        return int(state.replica_id)
    return int(getattr(request, "replica_id", -1))


class _Timed:
    """An awaitable running a coroutine and adding up the time spent in its steps (not its waits)."""

    __slots__ = ("coro", "ns")

    def __init__(self, coro: Awaitable[Any]) -> None:
        self.coro: Any = coro
        self.ns = 0

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self.coro
        value: Any = None
        error: BaseException | None = None
        clock = time.perf_counter_ns
        while True:
            started = clock()
            try:
                yielded = coro.send(value) if error is None else coro.throw(error)
            except StopIteration as stop:
                self.ns += clock() - started
                return stop.value
            except BaseException:
                self.ns += clock() - started
                raise
            self.ns += clock() - started
            try:
                value = yield yielded
                error = None
            except BaseException as e:  # cancellation included: the coroutine decides
                value, error = None, e
