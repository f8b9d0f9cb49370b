"""The mapped-read guard (native/guard.c): a page of a mapped segment or index that cannot be read
in is an error for that read (MappedReadError, an OSError), never a SIGBUS that kills the process.

The fault is made for real: a file cut short under its map (``ftruncate`` by another file
descriptor, as a tool or an operator would), whose pages past the end raise SIGBUS when read, as a
bad block's do. Each case runs in a child process, so a guard that fails kills the child (its exit
code says SIGBUS), not the test run; the first case shows that the same read without the guard does
kill, so the others cannot pass by a fault that never happened.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.unit

PRELUDE = """
import json, mmap, os, sys
from logstore.errors import MappedReadError
path = sys.argv[1]
out = {}
"""


def _child(tmp_path: Path, body: str) -> tuple[int, dict[str, Any], str]:
    """Run ``body`` (after PRELUDE) in a child; its exit code, the dict ``out`` it printed, stderr."""
    script = PRELUDE + textwrap.dedent(body) + "\nprint(json.dumps(out))\n"
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True,
                          timeout=60, cwd=Path(__file__).resolve().parents[2])  # fmt: skip
    lines = done.stdout.strip().splitlines()
    return done.returncode, json.loads(lines[-1]) if lines else {}, done.stderr


def test_a_read_past_a_cut_is_a_sigbus_without_the_guard_and_an_error_with_it(tmp_path: Path) -> None:
    body = """
        from logstore._native import copy_mapped
        name = os.path.join(path, "f")
        with open(name, "wb") as f:
            f.write(b"x" * 65536)
        fd = os.open(name, os.O_RDONLY)
        m = mmap.mmap(fd, 65536, access=mmap.ACCESS_READ)
        os.truncate(name, 4096)
        out["first page"] = len(copy_mapped(memoryview(m)[:100]))
        try:
            copy_mapped(memoryview(m)[8192:9000])
        except MappedReadError as e:
            out["guarded"] = [isinstance(e, OSError), str(e)]
        sys.stdout.write(json.dumps(out) + "\\n")
        sys.stdout.flush()
        if os.environ.get("UNGUARDED"):
            out["unguarded"] = m[9000]  # Python's own read: no guard
    """
    code, out, _ = _child(tmp_path, body)
    assert code == 0 and out["first page"] == 100
    assert out["guarded"][0] is True and "could not be read in" in out["guarded"][1]
    script = PRELUDE + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True,
                          timeout=60, env={"UNGUARDED": "1", "PATH": "/usr/bin:/bin"},
                          cwd=Path(__file__).resolve().parents[2])  # fmt: skip
    assert done.returncode == -signal.SIGBUS, (done.returncode, done.stderr[-500:])


def test_segment_reads_and_index_lookups_over_a_cut_file_raise_and_the_process_lives(tmp_path: Path) -> None:
    code, out, err = _child(tmp_path, """
        from logstore.records import build_batch
        from logstore.storage import LogSegment
        segment = LogSegment(path, 0, index_interval_bytes=512, create=True)
        for i in range(200):
            segment.append(build_batch([b"v" * 100] * 5, base_offset=segment.next_offset, timestamp=1000 + i))
        segment.seal()
        out["read before"] = segment.read(0, 1 << 20).size
        assert segment.read(500, 100) is not None
        log = os.path.join(path, "00000000000000000000.log")
        index = os.path.join(path, "00000000000000000000.index")
        os.truncate(log, 4096)  # under the segment's map, which stays as long as it was
        cases = {
            "read small": lambda: segment.read(900, 100),   # the span copied: read in under the guard
            "read large": lambda: segment.read(500, 1 << 20),
            "translate": lambda: segment.translate_offset(600),
            "record_at": lambda: segment.record_at(700),
            "by timestamp": lambda: segment.find_offset_by_timestamp(1150),
        }
        for name, call in cases.items():
            try:
                call()
                out[name] = "no error"
            except MappedReadError as e:
                out[name] = "MappedReadError" if isinstance(e, OSError) else "not an OSError"
        out["page 0 still reads"] = segment.read(0, 100).size > 0
        os.truncate(index, 0)  # the offset index's map now has no pages at all
        for name, call in {"index lookup": lambda: segment.offset_index.lookup(900),
                           "time index": lambda: segment.time_index.lookup(1150)}.items():
            try:
                call()
                out[name] = "no error"
            except MappedReadError:
                out[name] = "MappedReadError"
    """)
    assert code == 0, (code, err[-2000:])
    assert out["read before"] > 60_000
    for name in ("read small", "read large", "translate", "record_at", "by timestamp", "index lookup"):
        assert out[name] == "MappedReadError", (name, out)
    assert out["page 0 still reads"] is True
    # The time index was not cut: its lookup still answers.
    assert out["time index"] == "no error"
