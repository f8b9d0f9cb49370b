"""The ZooKeeper worker's queue: a notice already queued and not yet begun is not queued twice."""

from __future__ import annotations

import concurrent.futures
import queue
import threading
import time

import pytest

from logstore.cluster.controller import ControllerMovedError
from logstore.cluster.zk_broker import ZkBroker, _coalescable

pytestmark = pytest.mark.unit


def bare_queue() -> ZkBroker:
    """A ZkBroker with only its queue (no ZooKeeper, no worker): what ``_queue`` touches."""
    link = object.__new__(ZkBroker)
    link._closed = False
    link._events = queue.Queue()
    link._pending = set()
    link._pending_lock = threading.Lock()
    return link


def drained(link: ZkBroker) -> list[object]:
    out = []
    while not link._events.empty():
        out.append(link._events.get_nowait())
    return out


def test_repeated_notices_are_one_pass_until_it_begins() -> None:
    link = bare_queue()
    for _ in range(50):
        link._queue(("topic", "__consumer_offsets"))
        link._queue("brokers")
    link._queue(("topic", "other"))
    assert drained(link) == [("topic", "__consumer_offsets"), "brokers", ("topic", "other")]
    # Once a pass has begun (the worker discards it from the pending set), a new notice queues again.
    link._pending.discard("brokers")
    link._queue("brokers")
    link._queue("brokers")
    assert drained(link) == ["brokers"]


def test_calls_and_waits_are_never_merged() -> None:
    link = bare_queue()
    future: concurrent.futures.Future[object] = concurrent.futures.Future()
    call = ("call", lambda: None, future)
    done = threading.Event()
    for _ in range(2):
        link._queue(call)
        link._queue(done)
    assert len(drained(link)) == 4
    assert not _coalescable(call) and not _coalescable(done) and _coalescable(("topic", "t"))


def test_controller_calls_fail_at_once_when_the_worker_stops() -> None:
    """A broker stopping while request handlers wait on its controller: each waiting call fails
    with ControllerMovedError at once, not after its 30 s timeout (which held up the broker's
    shutdown past the SIGTERM deadline: the event loop's close waits for executor threads)."""
    link = bare_queue()
    link.node_id, link._worker = 1, None
    queued: concurrent.futures.Future[object] = concurrent.futures.Future()
    link._queue(("call", lambda: 1, queued))  # queued before the stop, never begun
    waiting = threading.Event()
    link._queue(waiting)
    link._closed = True
    link._drain_stopped()  # what the worker does on _STOP
    assert isinstance(queued.exception(0), ControllerMovedError) and waiting.is_set()
    late: concurrent.futures.Future[object] = concurrent.futures.Future()
    link._queue(("call", lambda: 1, late))  # queued after the stop
    assert isinstance(late.exception(0), ControllerMovedError)
    started = time.monotonic()
    with pytest.raises(ControllerMovedError, match="stopping"):
        link.on_controller(lambda: 1, timeout=30)
    assert time.monotonic() - started < 5
