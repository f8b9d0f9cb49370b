"""An offset range of one partition read from a broker, as raw record sets: no per-record decode.

:class:`RangeReader` is what a Spark task (or ``logstore.arrow.read_table``)
needs of a broker: the partition's bounds (ListOffsets: earliest, latest, by
timestamp) and the record bytes of ``[start, end)`` (Fetch, key 1), handed
on exactly as the broker sent them, for a columnar decoder
(``logstore.records.arrow.decode_arrow``) to turn into rows.

Wire format: a Fetch answer's ``records`` are v2 record batches back to
back, whole ones from the batch holding the fetch offset (so the first may
start before it), possibly ending in a truncated batch (normal: the broker
cuts at ``partition_max_bytes``). The reader walks only the batch headers
(in C) to learn the next offset, and never copies the bytes.

Pipelining: as soon as an answer is in, the Fetch for the next offset is
sent, before the answer is handed to the caller, so the broker and the
network work while the caller decodes (one request in flight ahead; a
broker answers one connection's requests in order, so more would only
queue).

Errors, as Kafka's consumer handles them:

- OFFSET_OUT_OF_RANGE below the log start: :class:`OffsetGoneError` with
  the broker's log start offset (Spark's ``failOnDataLoss`` decides);
  above the log end: :class:`OffsetOutOfRangeError`.
- NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION and kin, and lost
  connections: the metadata is refreshed and the request retried after
  ``retry.backoff.ms``, at most ``RETRIES`` times in a row.
- A first batch larger than the fetch size (a broker without KIP-74):
  the fetch size grows to hold it, as Kafka's consumer does.
- ``end`` beyond what the log holds: the reader long-polls for the records
  until ``poll_timeout_ms``, then raises (Spark's ``pollTimeoutMs``).

Threads: one reader per thread (a Cluster's connections are shared safely,
but ``read``'s generator is not).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future
from typing import Any, NamedTuple

from logstore.client.cluster import Cluster
from logstore.client.config import ClientConfig
from logstore.client.errors import KafkaError, KafkaException, from_code, local
from logstore.client.fetcher import _REFRESH_ERRORS, FETCH, LIST_OFFSETS
from logstore.errors import (
    CorruptRecordError,
    InvalidArgumentError,
    LogstoreError,
    OffsetGoneError,
    OffsetOutOfRangeError,
)
from logstore.records.batch import scan

__all__ = ["OffsetGoneError", "OffsetOutOfRangeError", "RangeReader"]

EARLIEST = -2
LATEST = -1
DEFAULT_PARTITION_MAX_BYTES = 8 << 20
"""Record bytes asked for per Fetch unless ``max.partition.fetch.bytes`` is given."""
RETRIES = 10
"""Retriable failures in a row (leader moves, lost connections) before the error is raised."""
FETCH_SIZE_MAX = 2**31 - 1
_OUT_OF_RANGE = KafkaError.OFFSET_OUT_OF_RANGE  # type: ignore[attr-defined]
_UNKNOWN_PARTITION = KafkaError.UNKNOWN_TOPIC_OR_PARTITION  # type: ignore[attr-defined]
_BAD_MSG = KafkaError._BAD_MSG  # type: ignore[attr-defined]
_INCOMPLETE = -1  # LS_ERR_INCOMPLETE: the answer ends inside a batch


class _Step(NamedTuple):
    """What to do after one Fetch answer (see ``RangeReader._classify``)."""

    kind: str
    number: int = 0
    error: KafkaError | None = None


class _Fetch:
    """One Fetch in flight: where it went, what it asked."""

    __slots__ = ("future", "node", "offset", "size")

    def __init__(self, future: Future[Any], node: int, offset: int, size: int) -> None:
        self.future = future
        self.node = node
        self.offset = offset
        self.size = size


class RangeReader:
    """Raw record sets of offset ranges, and partition bounds, from a broker (see the module).

    ``config``: client settings (``bootstrap.servers`` and any consumer key:
    ``fetch.max.wait.ms``, ``request.timeout.ms``, ``retry.backoff.ms``,
    ``max.partition.fetch.bytes``, ...). ``partition_max_bytes``: record
    bytes per Fetch (default ``max.partition.fetch.bytes`` if given, else
    8 MiB: large answers amortize a round trip). ``poll_timeout_ms``: how
    long ``read`` waits for records past the log's end. ``cluster``: share
    an existing client's connections (not closed by :meth:`close`).
    """

    def __init__(
        self,
        config: Mapping[str, Any] | ClientConfig,
        *,
        partition_max_bytes: int | None = None,
        poll_timeout_ms: int = 120_000,
        cluster: Cluster | None = None,
    ) -> None:
        self.config = config if isinstance(config, ClientConfig) else ClientConfig.parse(config, "consumer")
        if partition_max_bytes is None:
            given = "max.partition.fetch.bytes" in self.config.given
            partition_max_bytes = (
                int(self.config["max.partition.fetch.bytes"]) if given else DEFAULT_PARTITION_MAX_BYTES
            )
        if not 1 <= partition_max_bytes <= FETCH_SIZE_MAX:
            raise InvalidArgumentError(
                f"partition_max_bytes must be 1 to {FETCH_SIZE_MAX}, not {partition_max_bytes}"
            )
        if poll_timeout_ms < 0:
            raise InvalidArgumentError(f"poll_timeout_ms must be >= 0, not {poll_timeout_ms}")
        self.partition_max_bytes = partition_max_bytes
        self.poll_timeout_s = poll_timeout_ms / 1000
        self.max_wait_ms = int(self.config["fetch.max.wait.ms"])
        self.backoff_s = self.config.seconds("retry.backoff.ms")
        self.request_timeout_s = self.config.seconds("request.timeout.ms")
        self._own_cluster = cluster is None
        self.cluster = cluster if cluster is not None else Cluster(self.config)
        self._closed = False

    # -- record sets ---------------------------------------------------------------

    def read(
        self,
        topic: str,
        partition: int,
        start: int,
        end: int,
        *,
        read_committed: bool = False,
        max_bytes: int | None = None,
    ) -> Iterator[tuple[memoryview | bytes, int]]:
        """Record sets covering offsets ``[start, end)``, each with the fetch offset it answers.

        A set holds whole batches (the first may start before the fetch
        offset, the last may run past ``end``; a trailing partial batch may
        follow them): the decoder filters by offset. Stops once the next
        offset reaches ``end``. ``max_bytes``: record bytes per Fetch for this
        read (default ``partition_max_bytes``). Cost: one Fetch per
        ``max_bytes``, one C header walk per answer; no copy.
        """
        self._check_open()
        if not 0 <= start <= end:
            raise InvalidArgumentError(f"need 0 <= start <= end, not start={start}, end={end}")
        if max_bytes is not None and not 1 <= max_bytes <= FETCH_SIZE_MAX:
            raise InvalidArgumentError(f"max_bytes must be 1 to {FETCH_SIZE_MAX}, not {max_bytes}")
        if start == end:
            return
        offset, size, failures = start, max_bytes or self.partition_max_bytes, 0
        waiting_since: float | None = None
        pending = self._fetch(topic, partition, offset, size, read_committed)
        # Each pass yields (offset advances), grows the fetch size (at most 31 times), counts a
        # failure (at most RETRIES in a row) or long-polls (at most poll_timeout_ms).
        while True:
            assert pending.offset == offset, (pending.offset, offset)
            answer, error = self._settle(pending)
            if error is None:
                step = self._classify(topic, partition, offset, size, answer, read_committed)
            else:
                step = _Step("error", error=error)
            if step.kind == "records":
                failures, waiting_since = 0, None
                if step.number < end:  # the next request leaves before this answer is decoded
                    pending = self._fetch(topic, partition, step.number, size, read_committed)
                yield answer.records, offset
                offset = step.number
                if offset >= end:
                    return
                continue
            if step.error is not None:
                failures = self._retry_or_raise(topic, partition, offset, step.error, failures)
            elif step.kind == "grow":
                size = step.number
            else:  # "wait": nothing at the offset yet
                waiting_since = time.monotonic() if waiting_since is None else waiting_since
                if time.monotonic() - waiting_since > self.poll_timeout_s:
                    raise LogstoreError(
                        f"{topic}[{partition}]: offsets {offset} to {end - 1} are not in the log (it ends at "
                        f"{step.number}) after waiting {self.poll_timeout_s:g} s; ask for an end at most the latest offset"
                    )
            pending = self._fetch(topic, partition, offset, size, read_committed)

    def _classify(
        self, topic: str, partition: int, offset: int, size: int, answer: Any, committed: bool
    ) -> _Step:
        """What an answer without an error code means: records (up to the next offset ``number``),
        grow (to a fetch size ``number`` that holds the first batch), wait (the log ends at
        ``number``), or error (retriable)."""
        records = answer.records
        if committed and getattr(answer, "aborted_transactions", None):
            raise LogstoreError(
                f"{topic}[{partition}]: the range holds aborted transactions, which raw record sets "
                "cannot leave out; read it with logstore.client.Consumer (isolation.level=read_committed)"
            )
        if not records:
            limit = int(answer.last_stable_offset if committed else answer.high_watermark)
            if offset < limit:  # records exist but none came
                return _Step(
                    "error", error=KafkaError(_BAD_MSG, "no records below the high watermark", retriable=True)
                )
            return _Step("wait", limit)
        state = scan(records, 0)
        if state.bytes_valid > 0 and state.offset_last < offset:
            # Whole batches, all below the fetch offset: a broker bug; asking again may help.
            why = f"the answer's batches end at offset {state.offset_last}"
            return _Step("error", error=KafkaError(_BAD_MSG, why, retriable=True))
        if state.bytes_valid > 0:
            return _Step("records", max(offset, int(state.offset_last) + 1))
        if state.stop == _INCOMPLETE:
            return _Step("grow", self._larger(topic, partition, offset, size, records))
        raise CorruptRecordError(
            f"{topic}[{partition}]: the record batch at offset {offset} from broker "
            f"{self.cluster.leader(topic, partition)} is malformed (sizes, magic or varints); the broker's copy "
            "is damaged"
        )

    def _fetch(self, topic: str, partition: int, offset: int, size: int, committed: bool) -> _Fetch:
        """Send a Fetch to the partition's leader (a failed future if there is none)."""
        node = self.cluster.leader(topic, partition)
        if node < 0:
            try:
                self.cluster.refresh([topic], auto_create=False)
            except KafkaException as e:
                return _Fetch(_failed(e), node, offset, size)
            node = self.cluster.leader(topic, partition)
        if node < 0:
            error = KafkaException(from_code(_UNKNOWN_PARTITION, f"{topic}[{partition}]: no leader known"))
            return _Fetch(_failed(error), node, offset, size)
        fields = {
            "cluster_id": None,
            "replica_id": -1,
            "max_wait": self.max_wait_ms,
            "min_bytes": 1,
            "max_bytes": max(size, int(self.config["fetch.max.bytes"])),
            "isolation_level": 1 if committed else 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {
                            "partition": partition,
                            "current_leader_epoch": -1,
                            "fetch_offset": offset,
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": size,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": self.config["client.rack"] or "",
        }
        return _Fetch(self.cluster.send(node, FETCH, fields), node, offset, size)

    def _settle(self, pending: _Fetch) -> tuple[Any, KafkaError | None]:
        """The partition's answer to a Fetch, or the error that stands for it."""
        wait = self.request_timeout_s + self.max_wait_ms / 1000
        try:
            response = pending.future.result(wait)
        except TimeoutError:
            return None, local(
                "_TIMED_OUT", f"no Fetch answer from broker {pending.node} within {wait:.1f} s"
            )
        except KafkaException as e:
            return None, e.error
        if response.error_code:
            return None, from_code(int(response.error_code), f"fetch from broker {pending.node}")
        for topic in response.responses:
            for answer in topic.partitions:
                code = int(answer.error_code)
                if code:
                    error = from_code(
                        code, f"fetch {topic.topic}[{answer.partition_index}] at offset {pending.offset}"
                    )
                    return answer, error
                return answer, None
        return None, from_code(_UNKNOWN_PARTITION, f"broker {pending.node} answered without the partition")

    def _retry_or_raise(
        self, topic: str, partition: int, offset: int, error: KafkaError, failures: int
    ) -> int:
        """Back off and refresh the metadata for a retriable error; raise the rest. Returns the count."""
        code = error.code()
        if code == _OUT_OF_RANGE:
            bounds = self.offsets(topic, [partition]).get(partition)
            start, latest = bounds if bounds is not None else (-1, -1)
            if offset < start or start < 0:
                raise OffsetGoneError(topic, partition, offset, start, " on the broker")
            raise OffsetOutOfRangeError(
                f"{topic}[{partition}]: offset {offset} is past the log end {latest}; read up to the latest offset"
            )
        if not (code in _REFRESH_ERRORS or error.retriable()) or failures + 1 > RETRIES:
            raise KafkaException(KafkaError(code, f"{topic}[{partition}] at offset {offset}: {error.str()}"
                                            + (f" (after {failures + 1} attempts)" if failures else "")))  # fmt: skip
        time.sleep(self.backoff_s * min(2**failures, 10))
        try:
            self.cluster.refresh([topic], auto_create=False)
        except KafkaException:
            return failures + 1  # the next attempt reports it
        if code == _UNKNOWN_PARTITION and failures >= 1 and self._missing(topic, partition):
            raise KafkaException(
                from_code(code, f"{topic}[{partition}] does not exist (deleted, or never created)")
            )
        return failures + 1

    def _missing(self, topic: str, partition: int) -> bool:
        """Whether the metadata just refreshed says the partition does not exist (no retry helps)."""
        meta = self.cluster.topics.get(topic)
        return meta is None or bool(meta.error) or partition not in meta.partitions

    @staticmethod
    def _larger(topic: str, partition: int, offset: int, size: int, records: Any) -> int:
        """A fetch size that holds the first batch of an answer that holds no whole one."""
        needed = 0
        if len(records) >= 12:
            needed = int.from_bytes(bytes(memoryview(records)[8:12]), "big", signed=True) + 12
        grown = min(max(size * 2, needed), FETCH_SIZE_MAX)
        if grown <= size:
            raise CorruptRecordError(
                f"{topic}[{partition}]: the batch at offset {offset} claims {needed} bytes, more than a fetch "
                f"can hold ({FETCH_SIZE_MAX})"
            )
        return grown

    # -- bounds ---------------------------------------------------------------------

    def partition_counts(self, topics: Iterable[str] | None = None) -> dict[str, int]:
        """Topic -> partition count (Metadata; all topics when None). Unknown topics are left out."""
        self._check_open()
        names = None if topics is None else sorted(set(topics))
        self.cluster.refresh(names, auto_create=False)
        known = self.cluster.topics
        wanted = known if names is None else {n: known[n] for n in names if n in known}
        return {name: len(meta.partitions) for name, meta in wanted.items() if not meta.error}

    def offsets(
        self, topic: str, partitions: list[int] | None = None, *, read_committed: bool = False
    ) -> dict[int, tuple[int, int]]:
        """Partition -> (earliest, latest) offsets (ListOffsets; latest is the high watermark, or the
        last stable offset when ``read_committed``). ``partitions`` None: every partition of the topic."""
        self._check_open()
        if partitions is None:
            counts = self.partition_counts([topic])
            if topic not in counts:
                raise KafkaException(
                    from_code(_UNKNOWN_PARTITION, f"topic {topic!r} is not known to the cluster")
                )
            partitions = list(range(counts[topic]))
        earliest = self._list_offsets({(topic, p): EARLIEST for p in partitions}, read_committed)
        latest = self._list_offsets({(topic, p): LATEST for p in partitions}, read_committed)
        return {p: (earliest[(topic, p)][0], latest[(topic, p)][0]) for p in partitions}

    def offsets_for_times(
        self, times: Mapping[tuple[str, int], int], *, read_committed: bool = False
    ) -> dict[tuple[str, int], int | None]:
        """(topic, partition) -> the first offset whose timestamp is >= the given ms, or None if none."""
        self._check_open()
        for key, timestamp in times.items():
            if timestamp < 0:
                raise InvalidArgumentError(f"{key}: timestamp {timestamp} must be >= 0 (ms since the epoch)")
        found = self._list_offsets(dict(times), read_committed)
        return {key: (offset if offset >= 0 else None) for key, (offset, _) in found.items()}

    def _list_offsets(
        self, wanted: dict[tuple[str, int], int], committed: bool
    ) -> dict[tuple[str, int], tuple[int, int]]:
        """(offset, timestamp) per partition; retriable errors retried (bounded), others raised."""
        results: dict[tuple[str, int], tuple[int, int]] = {}
        pending = dict(wanted)
        last: KafkaError | None = None
        if any(self.cluster.leader(*key) < 0 for key in pending):
            self.cluster.refresh({t for t, _ in pending}, auto_create=False)  # a fresh client knows no leader
        for attempt in range(RETRIES + 1):
            if not pending:
                return results
            if attempt:
                time.sleep(self.backoff_s * min(2**attempt, 10))
                try:
                    self.cluster.refresh({t for t, _ in pending}, auto_create=False)
                except KafkaException as e:
                    last = e.error
                    continue
            for key, (code, offset, timestamp) in self._list_once(pending, committed).items():
                if code == 0:
                    results[key] = (offset, timestamp)
                    del pending[key]
                    continue
                error = from_code(code, f"ListOffsets {key[0]}[{key[1]}]") if code > 0 else KafkaError(code)
                gone = code == _UNKNOWN_PARTITION and attempt >= 1 and self._missing(*key)
                if gone or not (code in _REFRESH_ERRORS or error.retriable()):
                    raise KafkaException(error)
                last = error
        raise KafkaException(KafkaError(last.code() if last else -1,
                                        f"ListOffsets of {sorted(pending)} failed {RETRIES + 1} times: "
                                        f"{last.str() if last else 'no answer'}"))  # fmt: skip

    def _list_once(
        self, wanted: dict[tuple[str, int], int], committed: bool
    ) -> dict[tuple[str, int], tuple[int, int, int]]:
        """One ListOffsets per leader; (error code, offset, timestamp) per partition."""
        by_node: dict[int, dict[tuple[str, int], int]] = {}
        out: dict[tuple[str, int], tuple[int, int, int]] = {}
        for key, timestamp in wanted.items():
            node = self.cluster.leader(*key)
            if node < 0:
                out[key] = (_UNKNOWN_PARTITION, -1, -1)
            else:
                by_node.setdefault(node, {})[key] = timestamp
        sent = []
        for node, keys in by_node.items():
            topics: dict[str, list[dict[str, Any]]] = {}
            for (topic, partition), timestamp in keys.items():
                topics.setdefault(topic, []).append(
                    {"partition_index": partition, "current_leader_epoch": -1, "timestamp": timestamp}
                )
            fields = {
                "replica_id": -1,
                "isolation_level": 1 if committed else 0,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            }
            sent.append((self.cluster.send(node, LIST_OFFSETS, fields), keys))
        for future, keys in sent:
            try:
                response = future.result(self.request_timeout_s)
            except TimeoutError:
                out.update({k: (local("_TIMED_OUT").code(), -1, -1) for k in keys})
                continue
            except KafkaException as e:
                out.update({k: (e.error.code(), -1, -1) for k in keys})
                continue
            got = {
                (t.name, int(p.partition_index)): (int(p.error_code), int(p.offset), int(p.timestamp))
                for t in response.topics
                for p in t.partitions
            }
            out.update({k: got.get(k, (_UNKNOWN_PARTITION, -1, -1)) for k in keys})
        return out

    # -- lifecycle ------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise LogstoreError("this RangeReader is closed; make a new one")

    def close(self) -> None:
        """Close the connections (unless the cluster was handed in). Idempotent."""
        if not self._closed:
            self._closed = True
            if self._own_cluster:
                self.cluster.close()

    def __enter__(self) -> RangeReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _failed(error: BaseException) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_exception(error)
    return future
