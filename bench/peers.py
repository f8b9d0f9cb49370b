"""logstore against its peers, whole system, in one run on one machine.

Every peer stores the same records (``--records`` values of ``--record-size``
random bytes, offsets 0..N-1) and is measured on the same workloads:

1. ``append``: 1,000 records per call, no fsync (records/s);
2. ``append_fsync``: the same with an fsync per 1,000 records (records/s);
3. ``bulk``: 1 MiB pre-encoded batches (logstore: ``append_batch`` of 10
   v2 batches of 1,000 records in a bytearray, as a request buffer is; each
   peer: its natural bulk write of the same 10,000 records, see the "how"
   column). Every peer is credited with the bytes of logstore's buffer, so
   GB/s ratios are records/s ratios;
4. ``read``: sequential read of everything as Python objects (records/s);
   ``columnar``: logstore's columnar read (GB/s of segment bytes);
5. ``lookup``: random read of one record by offset (lookups/s) over a
   pre-generated list of random offsets, after an untimed warm-up pass over
   the same list (that pass also checks every value it gets).

Peers: logstore; a naive pure-Python segmented log (bench/peers_naive.py);
the raw limits (``os.write`` of the same bytes in 1,000-record chunks, no
framing, read back by ``mmap`` slices: the floor/ceiling of a Python
program); sqlite3 (WAL); LMDB (py-lmdb); RocksDB (rocksdict); persist-queue
(its file ``Queue``: ``SQLiteQueue`` commits, and so fsyncs, on every put).
A peer whose package is missing is skipped with a message.

Method: every workload starts from a fresh store in a temporary directory
(under ``--tmp-root``) that is removed right after it, even on errors. The
read workloads read the store the no-fsync append wrote, so they read from
the page cache. Keys, values and pre-encoded buffers are built once before
anything is timed (8-byte big-endian keys for the key-value peers: that
favours them, logstore assigns its offsets itself). The first
``--warmup-runs`` runs are untimed: the machine is a VM whose pages are slow
the first time memory is touched. More than that, a page left free for a few
seconds goes back to the host and is slow again (~5x for writing a file), so
right before each timed loop a scratch file is written and deleted
(:func:`prefault`): every loop starts on warm pages, whatever ran before it
(``--no-prefault`` to see the difference). Peers run in a rotating order; each figure
is the median over ``--runs`` runs; a ratio is "logstore's figure / the
peer's" in the same run, median over runs. Each workload stops after
``--phase-seconds`` (the rate is then over what it did; marked †). The
garbage collector stays on (as in an application) and is run before each
timed loop.

Output: a markdown report on stdout (and in ``--markdown``), a bar plot
(``--plot``, default docs/peers.png) and optionally the raw figures
(``--json``).

Example::

    .venv/bin/python bench/peers.py              # ~1M records, 3 runs
    .venv/bin/python bench/peers.py --quick      # ~200K records, short caps
    .venv/bin/python bench/peers.py --peers logstore naive rocksdb --runs 5
"""

from __future__ import annotations

import argparse
import datetime
import gc
import importlib
import importlib.metadata
import json
import mmap
import os
import platform
import random
import shlex
import shutil
import signal
import sqlite3
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from itertools import islice
from typing import Any, ClassVar

if __package__ in (None, ""):  # run as a script: make ``bench`` and ``logstore`` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import peers_naive
from logstore import Log
from logstore.records import build_batch

MIB = 1 << 20
CHUNK = 1_000  # records per append call (and per fsync)
SEED = 20_261_121
LONG_MAX = 2**63 - 1
MAX_DATA_BYTES = 4 << 30  # bound on --records x --record-size
READ_WARM = 256 << 20  # pages warmed before a read workload (its Python objects)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PHASES: dict[str, tuple[str, str]] = {
    # name: (label, unit of the figure)
    "append": ("append, 1,000 records/call, no fsync", "records/s"),
    "append_fsync": ("append, 1,000 records/call, fsync per 1,000", "records/s"),
    "bulk": ("1 MiB pre-encoded batches", "GB/s"),
    "read": ("sequential read as Python objects", "records/s"),
    "columnar": ("columnar read (numpy arrays over the segment)", "GB/s"),
    "lookup": ("random read of one record by offset", "lookups/s"),
}


class BenchError(Exception):
    """A peer gave a wrong result (a benchmark that checks nothing measures nothing)."""


class Unsupported(Exception):
    """The peer has no way to do this workload."""


# -- data ------------------------------------------------------------------


@dataclass
class Data:
    """Everything the timed loops use, built once before anything is timed."""

    record_size: int
    values: list[bytes]
    chunks: list[list[bytes]]  # CHUNK values each
    keys: list[bytes]  # 8-byte big-endian offsets
    key_chunks: list[list[bytes]]
    bulk_batches: int  # v2 batches of CHUNK records per bulk call
    # Per bulk call: pre-encoded batches in a writable buffer, as a request buffer is (logstore and
    # the naive log then assign offsets in place, without a copy).
    logstore_bulk: list[bytearray]  # v2 batches
    naive_bulk: list[bytearray]  # naive batches
    lookups: list[int]  # random offsets in [0, records)

    @property
    def records(self) -> int:
        return len(self.values)

    @property
    def bulk_records(self) -> int:
        return self.bulk_batches * CHUNK


def bulk_batches_for(record_size: int) -> int:
    """v2 batches of 1,000 records that make about 1 MiB (10 for 100-byte values)."""
    return max(1, round(MIB / (CHUNK * record_size)))


def make_data(records: int, record_size: int, lookups: int, seed: int) -> Data:
    rng = random.Random(seed)
    blob = rng.randbytes(records * record_size)
    values = [blob[i : i + record_size] for i in range(0, len(blob), record_size)]
    del blob
    chunks = [values[i : i + CHUNK] for i in range(0, records, CHUNK)]
    keys = [struct.pack(">Q", i) for i in range(records)]
    key_chunks = [keys[i : i + CHUNK] for i in range(0, records, CHUNK)]
    per_call = bulk_batches_for(record_size)
    logstore_bulk, naive_bulk = [], []
    for first in range(0, len(chunks) - per_call + 1, per_call):
        group = chunks[first : first + per_call]
        logstore_bulk.append(bytearray(b"".join(build_batch(c, base_offset=0) for c in group)))
        naive_bulk.append(bytearray(b"".join(peers_naive.encode(c, 0) for c in group)))
    return Data(
        record_size=record_size,
        values=values,
        chunks=chunks,
        keys=keys,
        key_chunks=key_chunks,
        bulk_batches=per_call,
        logstore_bulk=logstore_bulk,
        naive_bulk=naive_bulk,
        lookups=[rng.randrange(records) for _ in range(lookups)],
    )


# -- peers -----------------------------------------------------------------


class Peer:
    """One store under test. ``open`` makes a fresh store in an empty directory."""

    name: ClassVar[str] = ""
    module: ClassVar[str | None] = None  # the package it needs
    how: ClassVar[dict[str, str]] = {}
    columnar: ClassVar[bool] = False

    def __init__(self, data: Data) -> None:
        self.data = data
        self.fsync = False

    def open(self, path: str, fsync: bool) -> None:
        raise NotImplementedError

    def append(self, i: int) -> None:
        """Append chunk ``i`` (records i*1000 .. i*1000+999)."""
        raise NotImplementedError

    def bulk(self, k: int) -> None:
        """Append bulk payload ``k`` (records k*B .. k*B+B-1, B = data.bulk_records)."""
        raise NotImplementedError

    def read_chunks(self) -> Iterator[list[Any]]:
        """Everything, in offset order, as lists of Python objects (one per record)."""
        raise NotImplementedError

    def value_of(self, item: Any) -> bytes:
        return bytes(item[1])

    def lookup_many(self, offsets: list[int], keys: list[bytes]) -> Any:
        """Look up every offset (the timed loop); returns the last result."""
        raise Unsupported(f"{self.name} cannot read a record by its offset")

    def get(self, offset: int) -> bytes:
        """The value at ``offset`` (for checks, untimed)."""
        raise Unsupported(f"{self.name} cannot read a record by its offset")

    def stored(self) -> int | None:
        """Records stored (for checks, untimed), when the peer can say cheaply."""
        return None

    def close(self) -> None:
        raise NotImplementedError


class LogstorePeer(Peer):
    name = "logstore"
    how: ClassVar[dict[str, str]] = {
        "append": "`Log.append(list of 1,000 bytes)`",
        "append_fsync": "same, `flush.messages=1000`",
        "bulk": "`append_batch` of {batches} pre-encoded v2 batches ({mib} MiB, a bytearray)",
        "read": "`log.read(offset, 1 MiB).records` (Record objects)",
        "columnar": "`log.read(offset, 1 MiB).columns(out=previous)`",
        "lookup": "`log.get(offset)` (a Record)",
    }
    columnar = True

    def open(self, path: str, fsync: bool) -> None:
        self.fsync = fsync
        batch_bytes = CHUNK * (self.data.record_size + 32) + 128
        config = {
            "segment.bytes": 1 << 30,
            "max.message.bytes": max(1_048_588, batch_bytes),
            "flush.messages": CHUNK if fsync else LONG_MAX,
        }
        self.log = Log.open(path, config)

    def append(self, i: int) -> None:
        self.log.append(self.data.chunks[i])

    def bulk(self, k: int) -> None:
        self.log.append_batch(self.data.logstore_bulk[k])

    def read_chunks(self) -> Iterator[list[Any]]:
        log = self.log
        end = log.log_end_offset
        offset = 0
        for _ in range(end + 1):
            if offset >= end:
                return
            records = log.read(offset).records
            if not records:
                raise BenchError(f"logstore: read({offset}) returned no record below the log end {end}")
            yield records
            offset = records[-1].offset + 1

    def value_of(self, item: Any) -> bytes:
        return bytes(item.value)

    def read_columns(self, deadline: float) -> tuple[int, int, bool, bytes]:
        """The columnar loop: (records, bytes, capped, last value)."""
        log = self.log
        end = log.log_end_offset
        offset = records = size = 0
        cols = None
        capped = False
        for _ in range(end + 1):
            if offset >= end:
                break
            result = log.read(offset)
            cols = result.columns(out=cols)
            size += result.size
            records += len(cols)
            offset = int(cols.offsets[-1]) + 1
            if time.perf_counter() > deadline:
                capped = True
                break
        if cols is None:
            return 0, 0, capped, b""
        at, length = int(cols.value_positions[-1]), int(cols.value_lengths[-1])
        return records, size, capped, bytes(cols.buffer[at : at + length])

    def lookup_many(self, offsets: list[int], keys: list[bytes]) -> Any:
        get = self.log.get
        record = None
        for offset in offsets:
            record = get(offset)
        return record

    def get(self, offset: int) -> bytes:
        record = self.log.get(offset)
        if record is None or record.value is None:
            raise BenchError(f"logstore: get({offset}) returned no value")
        return bytes(record.value)

    def stored(self) -> int | None:
        return self.log.log_end_offset

    def close(self) -> None:
        self.log.close()


class NaivePeer(Peer):
    name = "naive Python log"
    how: ClassVar[dict[str, str]] = {
        "append": f"one `os.write` + one `{peers_naive.CRC_NAME}` per 1,000-record batch",
        "append_fsync": "same, `os.fdatasync` per batch",
        "bulk": "{batches} pre-encoded batches (a bytearray): CRC check each, offsets in place, one `os.write`",
        "read": "`os.pread` of whole batches (≤ 1 MiB), CRC check, parse to (offset, value) tuples",
        "lookup": "bisect the batch index, 2 `os.pread`s (length table, value)",
    }

    def open(self, path: str, fsync: bool) -> None:
        self.fsync = fsync
        self.log = peers_naive.NaiveLog(path, fsync_every=CHUNK if fsync else 0)

    def append(self, i: int) -> None:
        self.log.append(self.data.chunks[i])

    def bulk(self, k: int) -> None:
        self.log.append_encoded(self.data.naive_bulk[k])

    def read_chunks(self) -> Iterator[list[Any]]:
        log = self.log
        end = log.next_offset
        offset = 0
        for _ in range(end + 1):
            if offset >= end:
                return
            records = log.read(offset)
            yield records
            offset = records[-1][0] + 1

    def lookup_many(self, offsets: list[int], keys: list[bytes]) -> Any:
        get = self.log.get
        value = None
        for offset in offsets:
            value = get(offset)
        return value

    def get(self, offset: int) -> bytes:
        return self.log.get(offset)

    def stored(self) -> int | None:
        return self.log.next_offset

    def close(self) -> None:
        self.log.close()


class RawPeer(Peer):
    name = "raw os.write / mmap"
    how: ClassVar[dict[str, str]] = {
        "append": "`os.write(b''.join(1,000 values))`, no framing",
        "append_fsync": "same, `os.fdatasync` per 1,000",
        "bulk": "`os.write` of logstore's {mib} MiB buffer",
        "read": "`mmap` slices, 1 MiB at a time (bytes objects, no offsets)",
        "lookup": "one `mmap` slice at `offset * record_size`",
    }

    def open(self, path: str, fsync: bool) -> None:
        self.fsync = fsync
        os.makedirs(path, exist_ok=True)
        self.fd = os.open(os.path.join(path, "raw.bin"), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self.map: mmap.mmap | None = None
        self.framed = False  # holds logstore's batches (bulk), not bare values

    def _write(self, data: bytes | bytearray) -> None:
        if os.write(self.fd, data) != len(data):
            raise BenchError("raw: short write")

    def append(self, i: int) -> None:
        self._write(b"".join(self.data.chunks[i]))
        if self.fsync:
            os.fdatasync(self.fd)

    def bulk(self, k: int) -> None:
        self.framed = True
        self._write(self.data.logstore_bulk[k])

    def _mapped(self) -> mmap.mmap:
        if self.map is None:
            self.map = mmap.mmap(self.fd, os.fstat(self.fd).st_size, prot=mmap.PROT_READ)
        return self.map

    def read_chunks(self) -> Iterator[list[Any]]:
        data = self._mapped()
        size = self.data.record_size
        step = max(1, MIB // size) * size
        end = len(data)
        for start in range(0, end, step):
            yield [data[p : p + size] for p in range(start, min(start + step, end), size)]

    def value_of(self, item: Any) -> bytes:
        return bytes(item)

    def lookup_many(self, offsets: list[int], keys: list[bytes]) -> Any:
        data = self._mapped()
        size = self.data.record_size
        value = None
        for offset in offsets:
            at = offset * size
            value = data[at : at + size]
        return value

    def get(self, offset: int) -> bytes:
        if self.framed:
            raise Unsupported("raw: the file holds v2 batches")
        size = self.data.record_size
        return self._mapped()[offset * size : (offset + 1) * size]

    def stored(self) -> int | None:
        if self.framed:
            return None
        return os.fstat(self.fd).st_size // self.data.record_size

    def close(self) -> None:
        if self.map is not None:
            self.map.close()
            self.map = None
        os.close(self.fd)


class SqlitePeer(Peer):
    name = "sqlite3 (WAL)"
    how: ClassVar[dict[str, str]] = {
        "append": "`executemany` of 1,000 rows per transaction, `synchronous=OFF`",
        "append_fsync": "same, `synchronous=FULL` (a WAL fsync per commit)",
        "bulk": "`executemany` of {bulk} rows, one transaction, `synchronous=OFF`",
        "read": "`SELECT … ORDER BY offset`, `fetchmany(1000)` (row tuples)",
        "lookup": "`SELECT value … WHERE offset = ?` (primary key)",
    }
    INSERT = 'INSERT INTO log ("offset", value) VALUES (?, ?)'
    LOOKUP = 'SELECT value FROM log WHERE "offset" = ?'

    def open(self, path: str, fsync: bool) -> None:
        self.fsync = fsync
        os.makedirs(path, exist_ok=True)
        conn = sqlite3.connect(os.path.join(path, "log.sqlite"), isolation_level=None)
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode != "wal":
            raise BenchError(f"sqlite3: journal_mode is {mode}, not wal")
        conn.execute(f"PRAGMA synchronous={'FULL' if fsync else 'OFF'}")
        conn.execute('CREATE TABLE log ("offset" INTEGER PRIMARY KEY, value BLOB)')
        self.conn = conn

    def _insert(self, first: int, values: list[bytes]) -> None:
        conn = self.conn
        conn.execute("BEGIN")
        conn.executemany(self.INSERT, zip(range(first, first + len(values)), values, strict=True))
        conn.execute("COMMIT")

    def append(self, i: int) -> None:
        self._insert(i * CHUNK, self.data.chunks[i])

    def bulk(self, k: int) -> None:
        per = self.data.bulk_batches
        values = [v for c in self.data.chunks[k * per : (k + 1) * per] for v in c]
        self._insert(k * self.data.bulk_records, values)

    def read_chunks(self) -> Iterator[list[Any]]:
        cursor = self.conn.execute('SELECT "offset", value FROM log ORDER BY "offset"')
        try:
            for _ in range(self.data.records // CHUNK + 2):
                rows = cursor.fetchmany(CHUNK)
                if not rows:
                    return
                yield rows
        finally:
            cursor.close()

    def lookup_many(self, offsets: list[int], keys: list[bytes]) -> Any:
        execute = self.conn.execute
        sql = self.LOOKUP
        row = None
        for offset in offsets:
            row = execute(sql, (offset,)).fetchone()
        return row

    def get(self, offset: int) -> bytes:
        row = self.conn.execute(self.LOOKUP, (offset,)).fetchone()
        if row is None:
            raise BenchError(f"sqlite3: no row {offset}")
        return bytes(row[0])

    def stored(self) -> int | None:
        return int(self.conn.execute("SELECT count(*) FROM log").fetchone()[0])

    def close(self) -> None:
        self.conn.close()


class LmdbPeer(Peer):
    name = "LMDB"
    module = "lmdb"
    how: ClassVar[dict[str, str]] = {
        "append": "`putmulti(append=True)` of 1,000 pairs per write txn, `sync=False`",
        "append_fsync": "same, `env.sync(True)` after each txn",
        "bulk": "`putmulti(append=True)` of {bulk} pairs, one txn",
        "read": "cursor iteration in one read txn ((key, value) tuples)",
        "lookup": "`txn.get(key)` in one long read txn",
    }

    def open(self, path: str, fsync: bool) -> None:
        import lmdb

        self.fsync = fsync
        data_bytes = self.data.records * (self.data.record_size + 64)
        self.env = lmdb.open(path, map_size=max(1 << 30, 4 * data_bytes), sync=False, metasync=False)
        self.read_txn: Any = None

    def _put(self, keys: list[bytes], values: list[bytes]) -> None:
        with self.env.begin(write=True) as txn:
            _, added = txn.cursor().putmulti(zip(keys, values, strict=True), append=True)
        if added != len(keys):
            raise BenchError(f"LMDB: putmulti added {added} of {len(keys)}")
        if self.fsync:
            self.env.sync(True)

    def append(self, i: int) -> None:
        self._put(self.data.key_chunks[i], self.data.chunks[i])

    def bulk(self, k: int) -> None:
        first, count = k * self.data.bulk_records, self.data.bulk_records
        self._put(self.data.keys[first : first + count], self.data.values[first : first + count])

    def read_chunks(self) -> Iterator[list[Any]]:
        txn = self.env.begin()
        try:
            items = iter(txn.cursor())
            for _ in range(self.data.records // CHUNK + 2):
                chunk = list(islice(items, CHUNK))
                if not chunk:
                    return
                yield chunk
        finally:
            txn.abort()

    def _reader(self) -> Any:
        if self.read_txn is None:
            self.read_txn = self.env.begin()
        return self.read_txn

    def lookup_many(self, offsets: list[int], keys: list[bytes]) -> Any:
        get = self._reader().get
        value = None
        for key in keys:
            value = get(key)
        return value

    def get(self, offset: int) -> bytes:
        value = self._reader().get(self.data.keys[offset])
        if value is None:
            raise BenchError(f"LMDB: no key {offset}")
        return bytes(value)

    def stored(self) -> int | None:
        return int(self.env.stat()["entries"])

    def close(self) -> None:
        if self.read_txn is not None:
            self.read_txn.abort()
            self.read_txn = None
        self.env.close()


class RocksPeer(Peer):
    name = "RocksDB (rocksdict)"
    module = "rocksdict"
    how: ClassVar[dict[str, str]] = {
        "append": "`WriteBatch` of 1,000 puts, `WriteOptions.sync=False` (WAL on, no compression)",
        "append_fsync": "same, `sync=True`",
        "bulk": "`WriteBatch` of {bulk} puts",
        "read": "`db.items()` ((key, value) tuples)",
        "lookup": "`db[key]`",
    }

    def open(self, path: str, fsync: bool) -> None:
        from rocksdict import DBCompressionType, Options, Rdict, WriteOptions

        self.fsync = fsync
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        options.set_compression_type(DBCompressionType.none())
        self.db = Rdict(path, options)
        self.write_options = WriteOptions()
        self.write_options.sync = fsync

    def _put(self, keys: list[bytes], values: list[bytes]) -> None:
        from rocksdict import WriteBatch

        batch = WriteBatch(raw_mode=True)
        put = batch.put
        for key, value in zip(keys, values, strict=True):
            put(key, value)
        self.db.write(batch, self.write_options)

    def append(self, i: int) -> None:
        self._put(self.data.key_chunks[i], self.data.chunks[i])

    def bulk(self, k: int) -> None:
        first, count = k * self.data.bulk_records, self.data.bulk_records
        self._put(self.data.keys[first : first + count], self.data.values[first : first + count])

    def read_chunks(self) -> Iterator[list[Any]]:
        items = iter(self.db.items())
        for _ in range(self.data.records // CHUNK + 2):
            chunk = list(islice(items, CHUNK))
            if not chunk:
                return
            yield chunk

    def lookup_many(self, offsets: list[int], keys: list[bytes]) -> Any:
        db = self.db
        value = None
        for key in keys:
            value = db[key]
        return value

    def get(self, offset: int) -> bytes:
        value = self.db.get(self.data.keys[offset])
        if value is None:
            raise BenchError(f"RocksDB: no key {offset}")
        return bytes(value)

    def close(self) -> None:
        self.db.close()


class PersistQueuePeer(Peer):
    name = "persist-queue"
    module = "persistqueue"
    how: ClassVar[dict[str, str]] = {
        "append": "`Queue.put` × 1,000 (file queue; one chunk file, so no fsync)",
        "append_fsync": "same, `chunksize=1000` (it fsyncs each full chunk)",
        "bulk": "one `put` of a list of {bulk} values (pickled)",
        "read": "`get_nowait` × N (FIFO, consumes the queue)",
        "lookup": "n/a: no read by position",
    }

    def open(self, path: str, fsync: bool) -> None:
        import persistqueue

        self.fsync = fsync
        os.makedirs(path, exist_ok=True)
        # A chunk file is fsynced when it fills; with one chunk larger than the data, never.
        chunksize = CHUNK if fsync else self.data.records + 1
        self.queue = persistqueue.Queue(os.path.join(path, "q"), chunksize=chunksize, tempdir=path)
        self.per_item = 1  # records per queue item

    def append(self, i: int) -> None:
        put = self.queue.put
        for value in self.data.chunks[i]:
            put(value)

    def bulk(self, k: int) -> None:
        per = self.data.bulk_batches
        self.per_item = self.data.bulk_records
        self.queue.put([v for c in self.data.chunks[k * per : (k + 1) * per] for v in c])

    def read_chunks(self) -> Iterator[list[Any]]:
        get = self.queue.get_nowait
        remaining = self.queue.qsize()
        for _ in range(remaining // CHUNK + 1):
            n = min(CHUNK, remaining)
            if n <= 0:
                return
            yield [get() for _ in range(n)]
            remaining -= n

    def value_of(self, item: Any) -> bytes:
        return bytes(item)

    def stored(self) -> int | None:
        return int(self.queue.qsize()) * self.per_item

    def close(self) -> None:
        # Queue has no close(); its __del__ closes these two files.
        for name in ("headf", "tailf"):
            handle = getattr(self.queue, name, None)
            if handle is not None and not handle.closed:
                handle.close()
        del self.queue


PEERS: dict[str, type[Peer]] = {
    "logstore": LogstorePeer,
    "naive": NaivePeer,
    "raw": RawPeer,
    "sqlite": SqlitePeer,
    "lmdb": LmdbPeer,
    "rocksdb": RocksPeer,
    "persist-queue": PersistQueuePeer,
}


def available(key: str) -> str | None:
    """None if the peer can run here, else why not."""
    module = PEERS[key].module
    if module is None:
        return None
    try:
        importlib.import_module(module)
    except ImportError as exc:
        return f"cannot import {module} ({exc}); install it with `.venv/bin/pip install -e '.[bench]'`"
    return None


# -- measuring ---------------------------------------------------------------


@dataclass
class Measurement:
    peer: str
    phase: str
    value: float | None = None  # in the phase's unit
    records_per_s: float | None = None
    records: int = 0
    seconds: float = 0.0
    capped: bool = False
    error: str | None = None


_ZEROS = bytes(MIB)


def prefault(directory: str, size: int) -> None:
    """Write ``size`` bytes to a scratch file and delete it: its pages are now free and warm.

    On this VM a page that was free for a few seconds is handed back to the
    host (free page reporting), and touching it again costs ~5x more than
    reusing a recently freed one (writing a fresh file: ~0.5 GB/s instead of
    ~3.5 GB/s). The kernel hands out recently freed pages first, so a timed
    loop started right after this runs on warm pages whatever ran before it.
    """
    path = os.path.join(directory, "prefault.tmp")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for _ in range(-(-size // MIB)):
            os.write(fd, _ZEROS)
    finally:
        os.close(fd)
        os.unlink(path)


def _timed(fn: Callable[[float], tuple[int, bool]], ctx: RunContext, warm: int) -> tuple[int, bool, float]:
    """Run ``fn(deadline)`` -> (records, capped) and time it, after warming ``warm`` bytes of pages."""
    gc.collect()
    if ctx.prefault and warm:
        prefault(ctx.workdir, warm)
    start = time.perf_counter()
    records, capped = fn(start + ctx.cap)
    return records, capped, time.perf_counter() - start


def measure_appends(
    step: Callable[[int], None], calls: int, per_call: int, ctx: RunContext
) -> tuple[int, bool, float]:
    def loop(deadline: float) -> tuple[int, bool]:
        done = 0
        for i in range(calls):
            step(i)
            done = i + 1
            if time.perf_counter() > deadline:
                break
        return done * per_call, done < calls

    return _timed(loop, ctx, ctx.write_warm)


def check_stored(peer: Peer, written: int) -> None:
    """The store holds what was written: count when it can say, and the last value."""
    stored = peer.stored()
    if stored is not None and stored != written:
        raise BenchError(f"{peer.name}: {written} records written but {stored} stored")
    if written:
        try:
            last = peer.get(written - 1)
        except Unsupported:
            return
        if last != peer.data.values[written - 1]:
            raise BenchError(f"{peer.name}: the value at offset {written - 1} is not the one written")


def measure_read(peer: Peer, written: int, ctx: RunContext) -> Measurement:
    last: list[Any] = []

    def loop(deadline: float) -> tuple[int, bool]:
        count = 0
        chunk: list[Any] = []
        for chunk in peer.read_chunks():
            count += len(chunk)
            if time.perf_counter() > deadline:
                last.append(chunk[-1])
                return count, True
        if chunk:
            last.append(chunk[-1])
        return count, False

    count, capped, seconds = _timed(loop, ctx, READ_WARM)
    if not capped and count != written:
        raise BenchError(f"{peer.name}: read back {count} records of {written}")
    if count and peer.value_of(last[0]) != peer.data.values[count - 1]:
        raise BenchError(f"{peer.name}: record {count - 1} read back is not the one written")
    return Measurement(peer.name, "read", count / seconds, count / seconds, count, seconds, capped)


def measure_columnar(peer: LogstorePeer, written: int, ctx: RunContext) -> Measurement:
    out: list[Any] = []

    def loop(deadline: float) -> tuple[int, bool]:
        records, size, capped, last = peer.read_columns(deadline)
        out.extend((size, last))
        return records, capped

    count, capped, seconds = _timed(loop, ctx, READ_WARM)
    size, last = out
    if not capped and count != written:
        raise BenchError(f"logstore: columnar read gave {count} records of {written}")
    if count and last != peer.data.values[count - 1]:
        raise BenchError(f"logstore: columnar value of record {count - 1} is not the one written")
    return Measurement(peer.name, "columnar", size / seconds / 1e9, count / seconds, count, seconds, capped)


def measure_lookups(peer: Peer, written: int, ctx: RunContext) -> Measurement:
    data = peer.data
    offsets = data.lookups if written == data.records else [o % written for o in data.lookups]
    offset_chunks = [offsets[i : i + CHUNK] for i in range(0, len(offsets), CHUNK)]
    key_chunks = [[data.keys[o] for o in chunk] for chunk in offset_chunks]
    # Warm-up (untimed, same cap): every lookup once, every value checked.
    warm_deadline = time.perf_counter() + ctx.cap
    for chunk in offset_chunks:
        for offset in chunk:
            if peer.get(offset) != data.values[offset]:
                raise BenchError(f"{peer.name}: the value at offset {offset} is not the one written")
        if time.perf_counter() > warm_deadline:
            break
    for chunk, keys in zip(offset_chunks, key_chunks, strict=True):
        peer.lookup_many(chunk, keys)
        if time.perf_counter() > warm_deadline:
            break

    def loop(deadline: float) -> tuple[int, bool]:
        done = 0
        lookup = peer.lookup_many
        for chunk, keys in zip(offset_chunks, key_chunks, strict=True):
            lookup(chunk, keys)
            done += len(chunk)
            if time.perf_counter() > deadline:
                return done, done < len(offsets)
        return done, False

    count, capped, seconds = _timed(loop, ctx, READ_WARM)
    return Measurement(peer.name, "lookup", count / seconds, count / seconds, count, seconds, capped)


@dataclass
class RunContext:
    data: Data
    workdir: str
    cap: float
    phases: list[str]
    on_phase: Callable[[Measurement], None]
    prefault: bool = True

    @property
    def write_warm(self) -> int:
        """Pages to warm before a write workload: room for a store 3x the values (WAL, SSTs, ...)."""
        return 3 * self.data.records * (self.data.record_size + 32) + 64 * MIB


def _fresh(ctx: RunContext, label: str) -> str:
    return tempfile.mkdtemp(prefix=f"{label}-", dir=ctx.workdir)


def _failed(name: str, phase: str, exc: BaseException) -> Measurement:
    if isinstance(exc, Unsupported):
        return Measurement(name, phase, error="n/a")
    detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    if not isinstance(exc, BenchError):
        print(f"\n{name} / {phase} failed:\n{traceback.format_exc()}", file=sys.stderr)
    return Measurement(name, phase, error=detail)


def run_peer(cls: type[Peer], ctx: RunContext) -> list[Measurement]:
    """Every requested workload for one peer, each on a fresh store."""
    data = ctx.data
    results: list[Measurement] = []

    def done(m: Measurement) -> None:
        results.append(m)
        ctx.on_phase(m)

    reading: list[str] = [p for p in ("columnar", "read", "lookup") if p in ctx.phases]
    if not cls.columnar and "columnar" in reading:
        reading.remove("columnar")
    if "append" in ctx.phases or reading:
        peer = cls(data)
        path = _fresh(ctx, "append")
        try:
            peer.open(path, fsync=False)
            try:
                written, capped, seconds = measure_appends(peer.append, len(data.chunks), CHUNK, ctx)
                check_stored(peer, written)
                if "append" in ctx.phases:
                    rate = written / seconds
                    done(Measurement(cls.name, "append", rate, rate, written, seconds, capped))
                for phase in reading:
                    try:
                        if phase == "columnar":
                            assert isinstance(peer, LogstorePeer)
                            done(measure_columnar(peer, written, ctx))
                        elif phase == "read":
                            done(measure_read(peer, written, ctx))
                        else:
                            done(measure_lookups(peer, written, ctx))
                    except Exception as exc:
                        done(_failed(cls.name, phase, exc))
            finally:
                peer.close()
        except Exception as exc:
            for phase in ["append", *reading]:
                if phase in ctx.phases and not any(m.phase == phase for m in results):
                    done(_failed(cls.name, phase, exc))
        finally:
            shutil.rmtree(path, ignore_errors=True)

    for phase in ("append_fsync", "bulk"):
        if phase not in ctx.phases:
            continue
        peer = cls(data)
        path = _fresh(ctx, phase)
        try:
            peer.open(path, fsync=phase == "append_fsync")
            try:
                if phase == "append_fsync":
                    written, capped, seconds = measure_appends(peer.append, len(data.chunks), CHUNK, ctx)
                    check_stored(peer, written)
                    rate = written / seconds
                    done(Measurement(cls.name, phase, rate, rate, written, seconds, capped))
                else:
                    calls = len(data.logstore_bulk)
                    written, capped, seconds = measure_appends(peer.bulk, calls, data.bulk_records, ctx)
                    check_stored(peer, written)
                    size = sum(len(b) for b in data.logstore_bulk[: written // data.bulk_records])
                    done(
                        Measurement(
                            cls.name, phase, size / seconds / 1e9, written / seconds, written, seconds, capped
                        )
                    )
            finally:
                peer.close()
        except Exception as exc:
            done(_failed(cls.name, phase, exc))
        finally:
            shutil.rmtree(path, ignore_errors=True)
    return results


# -- reporting ---------------------------------------------------------------


@dataclass
class Summary:
    peer: str
    phase: str
    median: float | None = None
    low: float | None = None
    high: float | None = None
    records_per_s: float | None = None
    ratio: float | None = None  # logstore / peer, median over runs
    capped: bool = False
    runs: int = 0
    error: str | None = None
    values: list[float] = field(default_factory=list)


def summarize(
    runs: list[list[Measurement]], peers: list[str], phases: list[str]
) -> dict[tuple[str, str], Summary]:
    table: dict[tuple[str, str], Summary] = {}
    logstore = LogstorePeer.name
    for name in peers:
        for phase in phases:
            got = [m for run in runs for m in run if m.peer == name and m.phase == phase]
            if not got:
                continue
            ok = [m for m in got if m.error is None and m.value is not None]
            summary = Summary(name, phase, runs=len(ok))
            if not ok:
                summary.error = got[0].error
                table[name, phase] = summary
                continue
            values = [m.value for m in ok if m.value is not None]
            summary.values = values
            summary.median = statistics.median(values)
            summary.low, summary.high = min(values), max(values)
            summary.records_per_s = statistics.median([m.records_per_s or 0.0 for m in ok])
            summary.capped = any(m.capped for m in ok)
            ratios = []
            for run in runs:
                mine = next((m for m in run if m.peer == name and m.phase == phase and m.error is None), None)
                base = next(
                    (m for m in run if m.peer == logstore and m.phase == phase and m.error is None), None
                )
                if mine and base and mine.value and base.value:
                    ratios.append(base.value / mine.value)
            summary.ratio = statistics.median(ratios) if ratios else None
            table[name, phase] = summary
    return table


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "GB/s":
        return f"{value:.2f} GB/s" if value >= 0.1 else f"{value * 1000:.1f} MB/s"
    suffix = unit.split("/")[0]
    if value >= 1e6:
        return f"{value / 1e6:.2f} M {suffix}/s"
    if value >= 1e3:
        return f"{value / 1e3:.0f} K {suffix}/s"
    return f"{value:.0f} {suffix}/s"


def _short(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "GB/s":
        return f"{value:.2f}"
    return (
        f"{value / 1e6:.2f}M" if value >= 1e6 else f"{value / 1e3:.0f}K" if value >= 1e3 else f"{value:.0f}"
    )


# (phase, peer whose ratio is judged or None for logstore's own figure, target, label)
BAR_SPECS: list[tuple[str, str | None, float, str]] = [
    ("append", None, 10e6, "append 1,000 records/call, no fsync ≥ 10M records/s"),
    ("append", "naive", 1.15, "… and ≥ 1.15× the naive Python log"),
    ("append", "rocksdb", 4.0, "… and ≥ 4× RocksDB"),
    ("append_fsync", None, 2.5e6, "append with fsync per 1,000 ≥ 2.5M records/s"),
    ("bulk", None, 2.5, "1 MiB append_batch ≥ 2.5 GB/s"),
    ("read", None, 4e6, "sequential read as objects ≥ 4M records/s"),
    ("columnar", None, 5.0, "columnar read ≥ 5 GB/s"),
    ("lookup", None, 1e6, "random read ≥ 1M lookups/s"),
]


def _bar_value(table: dict[tuple[str, str], Summary], phase: str, peer: str | None) -> float | None:
    s = table.get((PEERS[peer].name if peer else LogstorePeer.name, phase))
    if s is None:
        return None
    return s.ratio if peer else s.median


def _bar_target(phase: str, peer: str | None, target: float) -> str:
    return f"≥ {target:g}×" if peer else f"≥ {fmt(target, PHASES[phase][1])}"


def _verdict(value: float | None, target: float) -> str:
    if value is None:
        return "not measured"
    return "**met**" if value >= target else "**not met**"


def bars(table: dict[tuple[str, str], Summary]) -> list[tuple[str, str, str]]:
    """(bar, logstore's figure or ratio, verdict) for every bar."""
    rows = []
    for phase, peer, target, label in BAR_SPECS:
        value = _bar_value(table, phase, peer)
        shown = "—" if value is None else (f"{value:.2f}×" if peer else fmt(value, PHASES[phase][1]))
        rows.append((label, shown, _verdict(value, target)))
    return rows


def bar_cell(table: dict[tuple[str, str], Summary], name: str, phase: str) -> str:
    """The bars a row's figure (logstore) or ratio (a peer) is judged against, and the verdicts."""
    cells = []
    for bar_phase, peer, target, _ in BAR_SPECS:
        mine = (PEERS[peer].name if peer else LogstorePeer.name) == name
        if bar_phase == phase and mine:
            verdict = _verdict(_bar_value(table, phase, peer), target).replace("**", "")
            cells.append(f"{_bar_target(phase, peer, target)}: {verdict}")
    return "; ".join(cells)


def machine(how: bool = True) -> str:
    """CPU model and cores (``how``: say where the model name comes from)."""
    models = []
    try:
        with open("/proc/cpuinfo") as f:
            models = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    except OSError:
        pass
    model = models[0] if models else platform.processor() or "unknown CPU"
    cores = os.cpu_count() or len(models)
    source = " (`grep 'model name' /proc/cpuinfo`)" if how else ""
    return f"{model}, {cores} cores{source}, Linux {platform.release()}"


def filesystem(path: str) -> str:
    """The file system type under ``path`` (from /proc/mounts)."""
    best, kind = "", "unknown"
    real = os.path.realpath(path)
    try:
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                under = len(parts) >= 3 and (real == parts[1] or real.startswith(parts[1].rstrip("/") + "/"))
                if under and len(parts[1]) >= len(best):
                    best, kind = parts[1], parts[2]
    except OSError:
        pass
    return kind


def git_state() -> str:
    """The checkout's commit, and whether logstore's sources differ from it."""
    try:
        commit = subprocess.run(
            ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", ROOT, "status", "--porcelain", "--", "logstore", "native"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "commit unknown"
    if not commit:
        return "commit unknown"
    return f"commit {commit}" + (" with uncommitted changes in logstore/ or native/" if dirty else "")


def versions(peers: list[str]) -> str:
    parts = [f"Python {platform.python_version()}", f"logstore {_version('logstore')} ({git_state()})"]
    names = {"sqlite": None, "lmdb": "lmdb", "rocksdb": "rocksdict", "persist-queue": "persist-queue"}
    for key in peers:
        if key == "sqlite":
            parts.append(f"SQLite {sqlite3.sqlite_version}")
        elif names.get(key):
            parts.append(f"{names[key]} {_version(str(names[key]))}")
    return ", ".join(parts)


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def report_markdown(
    table: dict[tuple[str, str], Summary],
    args: argparse.Namespace,
    peers: list[str],
    skipped: dict[str, str],
    data: Data,
    command: str,
    started: str,
    software: str,
) -> str:
    names = [PEERS[p].name for p in peers]
    how = {PEERS[p].name: PEERS[p].how for p in peers}
    lines = [
        f"Measured {started} with `{command}`.",
        "",
        f"- Machine: {machine()}; temporary files on {filesystem(args.tmp_root)} under `{args.tmp_root}`.",
        f"- Software: {software}.",
        f"- Data: {data.records:,} records of {data.record_size} random bytes per store "
        f"({data.records * data.record_size / 1e6:.0f} MB of values); "
        f"{len(data.lookups):,} random offsets for lookups; bulk calls of {data.bulk_records:,} records "
        f"({len(data.logstore_bulk[0]) / MIB:.2f} MiB as v2 batches).",
        f"- {args.runs} timed runs after {args.warmup_runs} untimed warm-up run(s) (the VM is slow the first "
        f"time memory is touched); "
        + (
            "before each timed loop a scratch file is written and deleted so that the loop runs on warm "
            "pages (on this VM a page left free for a few seconds goes back to the host and is ~5x slower "
            "to touch again); "
            if not args.no_prefault
            else "no page warming before the timed loops (`--no-prefault`); "
        )
        + "each figure is the median over runs (range: min–max); "
        f"each workload stops after {args.phase_seconds:g} s (†: it did, and the figure is over what it did).",
        "- logstore ÷ peer: logstore's figure divided by the peer's in the same run, median over runs "
        "(> 1: logstore is faster).",
    ]
    if skipped:
        lines.append("- Skipped: " + "; ".join(f"{k}: {v}" for k, v in skipped.items()) + ".")
    lines += [
        "",
        "| workload | peer | how | median | range | logstore ÷ peer | bar |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for phase in args.phases:
        label, unit = PHASES[phase]
        for name in names:
            s = table.get((name, phase))
            if s is None:
                continue
            method = (
                how[name]
                .get(phase, "")
                .format(
                    bulk=f"{data.bulk_records:,}",
                    batches=data.bulk_batches,
                    mib=f"{len(data.logstore_bulk[0]) / MIB:.2f}",
                )
            )
            if s.median is None:
                lines.append(f"| {label} | {name} | {method} | {s.error or 'failed'} | | | |")
                continue
            figure = fmt(s.median, unit)
            if phase in ("bulk", "columnar"):
                figure += f" ({fmt(s.records_per_s, 'records/s')})"
            if s.capped:
                figure += " †"
            spread = f"{_short(s.low, unit)}–{_short(s.high, unit)}"
            ratio = "1" if name == LogstorePeer.name else ("—" if s.ratio is None else f"{s.ratio:.2f}×")
            lines.append(
                f"| {label} | {name} | {method} | {figure} | {spread} | {ratio} | {bar_cell(table, name, phase)} |"
            )
    lines += ["", "| bar | logstore | verdict |", "|---|---:|---|"]
    lines += [f"| {label} | {value} | {verdict} |" for label, value, verdict in bars(table)]
    return "\n".join(lines) + "\n"


def plot(
    table: dict[tuple[str, str], Summary], peers: list[str], phases: list[str], path: str, title: str
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    targets = {phase: target for phase, peer, target, _ in BAR_SPECS if peer is None}
    names = [PEERS[p].name for p in peers]
    shown = [p for p in phases if any((n, p) in table and table[n, p].median for n in names)]
    if not shown:
        return
    columns = 2
    rows = (len(shown) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(13, 3.1 * rows), squeeze=False)
    for ax in axes.flat[len(shown) :]:
        ax.axis("off")
    for ax, phase in zip(axes.flat, shown, strict=False):
        label, unit = PHASES[phase]
        entries = [(n, table[n, phase]) for n in names if (n, phase) in table and table[n, phase].median]
        labels = [n for n, _ in entries][::-1]
        values = [s.median or 0.0 for _, s in entries][::-1]
        colors = ["tab:orange" if n == LogstorePeer.name else "tab:blue" for n in labels]
        ax.barh(labels, values, color=colors, height=0.6)
        ax.set_ylim(-0.6, max(len(values), 4) - 0.4)
        ax.set_xscale("log")
        ax.set_title(label, fontsize=10)
        ax.set_xlabel(unit)
        for y, (value, (_, s)) in enumerate(zip(values, entries[::-1], strict=True)):
            text = fmt(value, unit) + (" †" if s.capped else "")
            ax.text(value, y, " " + text, va="center", fontsize=8)
        ax.axvline(targets[phase], color="tab:red", linestyle="--", linewidth=1, label="bar for logstore")
        ax.legend(loc="lower right", fontsize=7, frameon=False)
        ax.set_xlim(min([*values, targets[phase]]) / 3, max([*values, targets[phase]]) * 12)
        ax.tick_params(axis="y", labelsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- main --------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/peers.py",
        description=(
            "Measure logstore against its peers (a naive pure-Python log, raw os.write/mmap, sqlite3, LMDB, "
            "RocksDB, persist-queue) on the same records in one run: append 1,000 records per call "
            "without and with an fsync per 1,000, 1 MiB pre-encoded batches, sequential read as Python "
            "objects (and logstore's columnar read), random read of one record by offset. Prints a "
            "markdown report with medians and ratios against logstore, and draws a bar plot."
        ),
        epilog=(
            "Examples: %(prog)s --quick | %(prog)s --runs 5 --markdown /tmp/peers.md | "
            "%(prog)s --peers logstore naive rocksdb --phases append read"
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--records",
        type=int,
        default=None,
        help="records per store (a multiple of 1,000) [default: 1,000,000; --quick 200,000]",
    )
    parser.add_argument("--record-size", type=int, default=100, help="bytes per value (random)")
    parser.add_argument(
        "--runs", type=int, default=3, help="timed runs; figures are medians over them (at least 3)"
    )
    parser.add_argument("--warmup-runs", type=int, default=1, help="untimed runs before the timed ones")
    parser.add_argument(
        "--peers",
        nargs="+",
        choices=list(PEERS),
        default=list(PEERS),
        metavar="PEER",
        help=f"peers to run, of: {', '.join(PEERS)}",
    )
    parser.add_argument(
        "--phases",
        nargs="+",
        choices=list(PHASES),
        default=list(PHASES),
        metavar="PHASE",
        help=f"workloads to run, of: {', '.join(PHASES)}",
    )
    parser.add_argument(
        "--lookups",
        type=int,
        default=None,
        help="random offsets looked up per run [default: 200,000; --quick 50,000]",
    )
    parser.add_argument(
        "--phase-seconds",
        type=float,
        default=None,
        help="time cap of one workload of one peer [default: 20; --quick 5]",
    )
    parser.add_argument(
        "--quick", action="store_true", help="~200K records, 50K lookups, 5 s caps: for a quick look"
    )
    parser.add_argument("--markdown", metavar="PATH", help="also write the markdown report to PATH")
    parser.add_argument("--json", metavar="PATH", help="also write every run's figures as JSON to PATH")
    parser.add_argument(
        "--plot", metavar="PATH", default=os.path.join(ROOT, "docs", "peers.png"), help="bar plot (PNG)"
    )
    parser.add_argument("--no-plot", action="store_true", help="do not draw the plot")
    parser.add_argument(
        "--no-prefault",
        action="store_true",
        help="do not warm pages before each timed loop (see prefault(); shows the VM's cold-page cost)",
    )
    parser.add_argument(
        "--tmp-root", default="/tmp", help="where the temporary stores go (removed afterwards)"
    )
    parser.add_argument("--seed", type=int, default=SEED, help="seed of the values and the random offsets")
    args = parser.parse_args(argv)
    if args.records is None:
        args.records = 200_000 if args.quick else 1_000_000
    if args.lookups is None:
        args.lookups = 50_000 if args.quick else 200_000
    if args.phase_seconds is None:
        args.phase_seconds = 5.0 if args.quick else 20.0
    per_bulk = bulk_batches_for(args.record_size) * CHUNK if args.record_size > 0 else CHUNK
    if args.record_size < 1:
        parser.error("--record-size must be at least 1")
    if args.records % CHUNK or args.records < per_bulk:
        parser.error(f"--records must be a multiple of {CHUNK:,} and at least {per_bulk:,} (one bulk call)")
    if args.records * args.record_size > MAX_DATA_BYTES:
        parser.error(f"--records x --record-size must stay under {MAX_DATA_BYTES >> 30} GiB")
    if args.runs < 3:
        parser.error("--runs must be at least 3 (figures are medians)")
    if args.warmup_runs < 0 or args.lookups < 1 or args.phase_seconds <= 0:
        parser.error("--warmup-runs must be >= 0, --lookups >= 1 and --phase-seconds > 0")
    if not os.path.isdir(args.tmp_root):
        parser.error(f"--tmp-root {args.tmp_root} is not a directory")
    args.peers = list(dict.fromkeys(args.peers))
    args.phases = [p for p in PHASES if p in args.phases]
    return args


class Progress:
    """A rich progress bar on a terminal, else one line per workload on stderr."""

    def __init__(self, total: int) -> None:
        self.bar: Any = None
        self.label = ""
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as Bar

            self.bar = Bar(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                console=Console(stderr=True), transient=True,
            )  # fmt: skip
            self.task = self.bar.add_task("starting", total=total)
            self.bar.start()

    def start(self, label: str) -> None:
        self.label = label
        if self.bar is not None:
            self.bar.update(self.task, description=label)

    def done(self, m: Measurement) -> None:
        unit = PHASES[m.phase][1]
        text = m.error if m.error else fmt(m.value, unit) + (" (capped)" if m.capped else "")
        line = f"{self.label}: {m.phase}: {text}"
        if self.bar is not None:
            self.bar.console.print(line, highlight=False)
            self.bar.advance(self.task)
        else:
            print(line, file=sys.stderr, flush=True)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _terminate(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # so that the temporary files are removed


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    shown_argv = sys.argv[1:] if argv is None else list(argv)
    command = " ".join([".venv/bin/python", "bench/peers.py", *map(shlex.quote, shown_argv)])
    skipped = {key: why for key in args.peers if (why := available(key)) is not None}
    for key, why in skipped.items():
        print(f"skipping {key}: {why}", file=sys.stderr)
    peers = [p for p in args.peers if p not in skipped]
    software = versions(peers)  # now: the checkout may change while this runs
    if not peers:
        print("no peer can run", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _terminate)

    print(f"building {args.records:,} records of {args.record_size} bytes …", file=sys.stderr)
    data = make_data(args.records, args.record_size, args.lookups, args.seed)
    total_runs = args.warmup_runs + args.runs
    phases_per_peer = {
        p: len([ph for ph in args.phases if ph != "columnar" or PEERS[p].columnar]) for p in peers
    }
    progress = Progress(total_runs * sum(phases_per_peer.values()))
    runs: list[list[Measurement]] = []
    workdir = tempfile.mkdtemp(prefix="logstore-peers-", dir=args.tmp_root)
    try:
        with tempfile.TemporaryDirectory(dir=workdir) as scratch:
            counter = [0]

            def scratch_dir() -> str:
                counter[0] += 1
                return os.path.join(scratch, str(counter[0]))

            peers_naive.self_check(scratch_dir)
        for run in range(total_runs):
            warm = run < args.warmup_runs
            title = (
                f"warm-up {run + 1}/{args.warmup_runs}"
                if warm
                else f"run {run - args.warmup_runs + 1}/{args.runs}"
            )
            shift = run % len(peers)
            order = peers[shift:] + peers[:shift]
            results: list[Measurement] = []
            for key in order:
                progress.start(f"{title} {PEERS[key].name}")
                ctx = RunContext(
                    data, workdir, args.phase_seconds, args.phases, progress.done, not args.no_prefault
                )
                results += run_peer(PEERS[key], ctx)
            if not warm:
                runs.append(results)
    finally:
        progress.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    table = summarize(runs, [PEERS[p].name for p in peers], args.phases)
    text = report_markdown(table, args, peers, skipped, data, command, started, software)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"command": command, "started": started, "runs": [[asdict(m) for m in r] for r in runs]},
                f,
                indent=1,
            )
    if not args.no_plot:
        plot(
            table,
            peers,
            args.phases,
            args.plot,
            f"logstore vs peers, {args.record_size}-byte values, medians of {args.runs} runs — {machine(how=False)}, {started}",
        )
        print(f"plot: {args.plot}", file=sys.stderr)
    failed = [s for s in table.values() if s.peer == LogstorePeer.name and s.error]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
