"""Checkpoint files in Kafka's text format, written atomically.

Format (Kafka's ``CheckpointFile``)::

    0                 <- version
    2                 <- number of entries
    topic 0 1234      <- one entry per line, fields separated by spaces
    topic 1 88

Crash policy: a write goes to ``<file>.tmp``, is fsynced, renamed over the
file, and the directory is fsynced; a crash leaves either the old or the new
file whole. A file that does not parse raises CorruptCheckpointError naming
the line; a leftover ``.tmp`` is ignored and overwritten.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from typing import Any

from logstore import _crashpoints as crashpoints
from logstore.errors import InvalidConfigError, LogstoreError

VERSION = 0


class CorruptCheckpointError(LogstoreError):
    """A checkpoint file does not parse; delete it to fall back to a full recovery."""


def fsync_directory(directory: str) -> None:
    """fsync a directory, so a rename or a new file in it survives a power loss."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_json(path: str, what: str, hint: str = "fix or remove it") -> Any:
    """The JSON document a state file of the data dir holds (dynamic configs, quotas,
    credentials); None when the file does not exist. One that cannot be read or parsed raises
    InvalidConfigError naming the file, ``what`` it holds and ``hint`` (what to do): the broker
    must not start on half its state."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise InvalidConfigError(f"{path}: cannot read the {what} ({e}); {hint}") from None


def write_atomically(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data``: tmp + fsync + rename + directory fsync."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        for _ in range(len(view) + 1):  # each pass writes at least one byte
            if not view:
                break
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    crashpoints.crash_point("checkpoint.after_tmp")
    os.replace(tmp, path)
    crashpoints.crash_point("checkpoint.after_rename")
    fsync_directory(os.path.dirname(os.path.abspath(path)))


def write_checkpoint(path: str, entries: Iterable[Sequence[object]], version: int = VERSION) -> None:
    """Write entries (each a sequence of fields) in Kafka's checkpoint format."""
    lines = [" ".join(str(field) for field in entry) for entry in entries]
    text = f"{version}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
    write_atomically(path, text.encode())


def read_checkpoint(path: str, fields: int, version: int = VERSION) -> list[list[str]]:
    """Entries of a checkpoint file as lists of ``fields`` strings; [] if absent."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    if len(lines) < 2:
        raise CorruptCheckpointError(f"{path}: missing version or count line")
    if lines[0].strip() != str(version):
        raise CorruptCheckpointError(f"{path}: unsupported version {lines[0]!r} (expected {version})")
    try:
        count = int(lines[1])
    except ValueError:
        raise CorruptCheckpointError(f"{path}: bad count line {lines[1]!r}") from None
    entries = [line.split() for line in lines[2:] if line.strip()]
    if len(entries) != count:
        raise CorruptCheckpointError(f"{path}: count says {count} entries, file has {len(entries)}")
    for number, entry in enumerate(entries, start=3):
        if len(entry) != fields:
            raise CorruptCheckpointError(f"{path}: line {number} has {len(entry)} fields, expected {fields}")
    return entries


def write_offsets(path: str, offsets: dict[tuple[str, int], int]) -> None:
    """A (topic, partition) -> offset checkpoint, like recovery-point-offset-checkpoint."""
    write_checkpoint(
        path, [(topic, partition, offset) for (topic, partition), offset in sorted(offsets.items())]
    )


def read_offsets(path: str) -> dict[tuple[str, int], int]:
    """Read a (topic, partition) -> offset checkpoint."""
    result: dict[tuple[str, int], int] = {}
    for topic, partition, offset in read_checkpoint(path, 3):
        try:
            result[(topic, int(partition))] = int(offset)
        except ValueError:
            raise CorruptCheckpointError(f"{path}: non-numeric entry {topic} {partition} {offset}") from None
    return result
