"""The admin client's core: connections, worker threads, futures, and where each request goes.

:class:`AdminBase` owns the :class:`~logstore.client.cluster.Cluster` (connections and
metadata) and :data:`WORKERS` worker threads; every call of the admin client runs its
requests on one of them and settles the futures it returned (:func:`settle`). Routing
follows Kafka's ``KafkaAdminClient``: to the controller metadata names (any broker when it
names none; :meth:`AdminBase._to_controller`), to each group's coordinator
(FindCoordinator; :meth:`AdminBase._to_coordinators`), to each partition's leader
(:meth:`AdminBase._to_leaders`), or to any broker. An answer of NOT_CONTROLLER,
NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS, a leader change,
or a dropped connection is retried once, for the resources it concerns, after the metadata
or the coordinator is looked up again. Every future settles: a resource the broker left out
of its answer fails with ``_BAD_MSG``, one still waiting when ``request_timeout`` runs out
with ``_TIMED_OUT``, a call not yet started at :meth:`AdminBase.close` with ``_DESTROY``.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, Self, TypeVar

from logstore.client.admin.checks import check_seconds
from logstore.client.cluster import Cluster
from logstore.client.config import ClientConfig
from logstore.client.errors import KafkaError, KafkaException, from_code, local

# Kafka's error codes the routing acts on.
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
NOT_CONTROLLER = 41
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
_TRANSPORT = -195

_CONTROLLER_RETRY = frozenset({NOT_CONTROLLER, _TRANSPORT})
COORDINATOR_RETRY = frozenset(
    {NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, _TRANSPORT}
)
_LEADER_RETRY = frozenset({UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER,
                           FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, _TRANSPORT})  # fmt: skip
_ANY_RETRY = frozenset({_TRANSPORT})

WORKERS = 4
"""Worker threads per client: each runs one admin call at a time (its lookups, requests and retry)."""

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


# -- futures and request fields ------------------------------------------------------------------


def new_future() -> Future[Any]:
    """A future already running, as confluent's: the application cannot cancel it."""
    future: Future[Any] = Future()
    future.set_running_or_notify_cancel()
    return future


def kafka_error(code: int, message: str | None) -> KafkaError:
    """The broker's error code and message (None when empty) as a KafkaError."""
    return KafkaError(int(code), message or None)


def settle(futures: Mapping[Any, Future[Any]], outcomes: Mapping[Any, Any]) -> None:
    """Settle each future with its outcome: a KafkaError fails it, anything else is its result."""
    for key, future in futures.items():
        if future.done():
            continue
        if key not in outcomes:
            future.set_exception(KafkaException(local("_BAD_MSG", f"the broker's answer left out {key!r}")))
            continue
        outcome = outcomes[key]
        if isinstance(outcome, KafkaError):
            future.set_exception(KafkaException(outcome))
        else:
            future.set_result(outcome)


def by_topic(
    pairs: Iterable[tuple[str, V]], field: str = "partitions", name: str = "name"
) -> list[dict[str, Any]]:
    """A request's topics: ``{name: topic, field: [values]}`` for the (topic, value) pairs, in
    the order the topics first appear.

    >>> by_topic([("a", 0), ("b", 0), ("a", 1)], "partition_indexes")
    [{'name': 'a', 'partition_indexes': [0, 1]}, {'name': 'b', 'partition_indexes': [0]}]
    """
    topics: dict[str, list[V]] = {}
    for topic, value in pairs:
        topics.setdefault(topic, []).append(value)
    return [{name: topic, field: values} for topic, values in topics.items()]


class AdminBase:
    """The admin client's connections, worker threads and request routing; the areas' calls are
    its subclasses (mixins of :class:`logstore.client.admin.AdminClient`).

    Invariants: every future a call returns settles (a result, a KafkaError from the
    broker, ``_TIMED_OUT`` at its ``request_timeout``, ``_DESTROY`` at :meth:`close`);
    arguments are checked before any request; a call's requests run on one worker thread
    (at most :data:`WORKERS` calls run at once, later ones queue).
    """

    def __init__(self, conf: dict[str, Any], **kwargs: Any) -> None:
        self._config = ClientConfig.parse(conf, "admin", **kwargs)
        self._cluster = Cluster(self._config)
        self._default_timeout = self._config.seconds("socket.timeout.ms")
        self._executor = concurrent.futures.ThreadPoolExecutor(WORKERS, thread_name_prefix="logstore-admin")
        self._lock = threading.Lock()
        self._closed = False

    # -- lifecycle -----------------------------------------------------------

    def close(self) -> None:
        """Close connections; calls not yet started fail with ``_DESTROY``, running ones fail or finish."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._cluster.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def poll(self, timeout: float = -1) -> int:
        """Serve callbacks: there are none here (futures settle on their own); returns 0."""
        return 0

    def __len__(self) -> int:
        return 0

    def _submit(self, futures: Iterable[Future[Any]], work: Callable[[], None], deadline: float | None) -> None:
        """Run ``work`` on a worker, every wait of it cut at ``deadline`` (``time.monotonic()``:
        connecting to a broker that never answers included); any future it leaves unsettled
        fails (with its exception, if it raised)."""
        owned = list(futures)

        def run() -> None:
            try:
                with self._cluster.deadline(deadline):
                    work()
            except BaseException as e:
                failure = e
            else:
                failure = KafkaException(local("_FAIL", "internal error: the admin call settled no result"))
            for future in owned:
                if not future.done():
                    future.set_exception(failure)

        def cancelled(job: Future[None]) -> None:
            if job.cancelled():
                for future in owned:
                    if not future.done():
                        future.set_exception(KafkaException(local("_DESTROY", "the admin client was closed")))

        with self._lock:
            if self._closed:
                raise RuntimeError("AdminClient has been closed")
            self._executor.submit(run).add_done_callback(cancelled)

    # -- requests ------------------------------------------------------------

    def _deadline(self, request_timeout: Any) -> float:
        """When a call's ``request_timeout`` (seconds; None: ``socket.timeout.ms``) runs out."""
        return time.monotonic() + check_seconds("request_timeout", request_timeout, self._default_timeout)

    def _wait(self, future: Future[Any], deadline: float, what: str) -> Any:
        remaining = deadline - time.monotonic()
        try:
            return future.result(max(remaining, 0.0))
        except concurrent.futures.TimeoutError:
            raise KafkaException(local("_TIMED_OUT", f"{what}: no answer within request_timeout")) from None

    def _ensure_metadata(self, refresh: bool = False) -> None:
        if refresh or self._cluster.updated == 0 or self._cluster.stale():
            self._cluster.refresh([], auto_create=False)

    def _controller(self) -> int | None:
        """The controller metadata names, or None (any broker) when it names none we know."""
        controller = self._cluster.controller_id
        return controller if controller in self._cluster.brokers else None

    def _routed(
        self,
        api_key: int,
        items: Sequence[K],
        route: Callable[[K], int | KafkaError | None],
        build: Callable[[list[K]], dict[str, Any]],
        parse: Callable[[Any, list[K]], Mapping[K, Any]],
        retry_codes: frozenset[int],
        before_retry: Callable[[list[K]], None],
        deadline: float,
    ) -> dict[K, Any]:
        """Send ``items`` batched by the node ``route`` gives each; the outcome of each item.

        An item whose outcome (route error, request failure, or parsed KafkaError) has a
        code in ``retry_codes`` is sent once more, after ``before_retry`` (a metadata or
        coordinator lookup). Outcomes are results or KafkaErrors; each item gets one.
        Cost: one request per distinct node per attempt.
        """
        outcomes: dict[K, Any] = {}
        pending = list(items)
        for attempt in range(2):
            answers: list[tuple[K, Any]] = []
            batches: dict[int | None, list[K]] = {}
            for item in pending:
                try:
                    node = route(item)
                except KafkaException as e:
                    node = e.error
                if isinstance(node, KafkaError):
                    answers.append((item, node))
                else:
                    batches.setdefault(node, []).append(item)
            sent = [
                (batch, self._cluster.send(node, api_key, build(batch))) for node, batch in batches.items()
            ]
            for batch, future in sent:
                try:
                    parsed = parse(self._wait(future, deadline, f"API {api_key}"), batch)
                except KafkaException as e:
                    answers.extend((item, e.error) for item in batch)
                    continue
                missing = local("_BAD_MSG", f"API {api_key}: the broker's answer left out a resource")
                answers.extend((item, parsed.get(item, missing)) for item in batch)
            retry = []
            for item, outcome in answers:
                if attempt == 0 and isinstance(outcome, KafkaError) and outcome.code() in retry_codes:
                    retry.append(item)
                else:
                    outcomes[item] = outcome
            if not retry:
                break
            before_retry(retry)
            pending = retry
        assert len(outcomes) == len(set(items)), "every item has one outcome"
        return outcomes

    def _to_controller(
        self,
        api_key: int,
        items: Sequence[K],
        build: Callable[[list[K]], dict[str, Any]],
        parse: Callable[[Any, list[K]], Mapping[K, Any]],
        deadline: float,
        route: Callable[[K], int | KafkaError | None] | None = None,
    ) -> dict[K, Any]:
        self._ensure_metadata()
        return self._routed(api_key, items, route or (lambda _: self._controller()), build, parse,
                            _CONTROLLER_RETRY, lambda _: self._ensure_metadata(refresh=True), deadline)  # fmt: skip

    def _call(
        self, api_key: int, fields: dict[str, Any], deadline: float, *, controller: bool = False
    ) -> Any:
        """One request to the controller (``controller``) or to any broker, retried once as
        :meth:`_routed` does; its answer. Raises KafkaException with the answer's top-level
        ``error_code`` (and ``error_message``), or with the request's failure."""

        def parse(response: Any, _: list[str]) -> dict[str, Any]:
            code = getattr(response, "error_code", 0)
            return {"call": kafka_error(code, getattr(response, "error_message", None)) if code else response}

        if controller:
            outcome = self._to_controller(api_key, ["call"], lambda _: fields, parse, deadline)["call"]
        else:
            outcome = self._routed(api_key, ["call"], lambda _: None, lambda _: fields, parse, _ANY_RETRY,
                                   lambda _: None, deadline)["call"]  # fmt: skip
        if isinstance(outcome, KafkaError):
            raise KafkaException(outcome)
        return outcome

    def _to_coordinators(
        self,
        api_key: int,
        groups: Sequence[str],
        build: Callable[[list[str]], dict[str, Any]],
        parse: Callable[[Any, list[str]], Mapping[str, Any]],
        deadline: float,
    ) -> dict[str, Any]:
        def forget(retry: list[str]) -> None:
            for group in retry:
                self._cluster.forget_coordinator(group)
            time.sleep(self._config.seconds("retry.backoff.ms"))

        return self._routed(api_key, groups, self._cluster.coordinator, build, parse, COORDINATOR_RETRY,
                            forget, deadline)  # fmt: skip

    def _to_leaders(
        self,
        api_key: int,
        partitions: Sequence[tuple[str, int]],
        build: Callable[[list[tuple[str, int]]], dict[str, Any]],
        parse: Callable[[Any, list[tuple[str, int]]], Mapping[tuple[str, int], Any]],
        deadline: float,
    ) -> dict[tuple[str, int], Any]:
        def refresh(which: list[tuple[str, int]]) -> None:
            self._cluster.refresh({topic for topic, _ in which}, auto_create=False)

        def leader(tp: tuple[str, int]) -> int | KafkaError:
            topic = self._cluster.topics.get(tp[0])
            if topic is None or topic.error:
                code = topic.error if topic is not None else UNKNOWN_TOPIC_OR_PARTITION
                return from_code(code, f"topic {tp[0]!r}")
            partition = topic.partitions.get(tp[1])
            if partition is None:
                return kafka_error(UNKNOWN_TOPIC_OR_PARTITION, f"topic {tp[0]!r} has no partition {tp[1]}")
            if partition.leader < 0:
                return kafka_error(LEADER_NOT_AVAILABLE, f"{tp[0]} [{tp[1]}] has no leader")
            return partition.leader

        refresh(list(partitions))
        return self._routed(api_key, partitions, leader, build, parse, _LEADER_RETRY, refresh, deadline)
