"""The direct Produce encoder writes exactly what kio writes, for every version it covers."""

from __future__ import annotations

import datetime
import io
import random

import pytest

from logstore.protocol import client_codec, from_dict
from logstore.protocol.produce import MAX_VERSION, MIN_VERSION, encode_produce_request

pytestmark = pytest.mark.unit


def _kio(version: int, fields: dict) -> bytes:  # type: ignore[type-arg]
    codec = client_codec(0, version)
    buffer = io.BytesIO()
    codec.write(buffer, from_dict(codec.request_class, fields))
    return buffer.getvalue()


def _fields(rng: random.Random) -> dict:  # type: ignore[type-arg]
    topics = []
    for t in range(rng.randint(0, 3)):
        parts = []
        for p in range(rng.randint(0, 4)):
            records = (
                None if rng.random() < 0.1 else rng.randbytes(rng.choice([0, 1, 126, 127, 128, 300, 20_000]))
            )
            parts.append({"index": p * 3 + t, "records": records})
        topics.append({"name": "t" * rng.randint(1, 200) + str(t), "partition_data": parts})
    return {
        "transactional_id": rng.choice([None, "", "txn-é", "x" * 300]),
        "acks": rng.choice([-1, 0, 1]),
        "timeout": rng.choice([0, 30_000, 2**31 - 1]),
        "topic_data": topics,
    }


@pytest.mark.parametrize("version", range(MIN_VERSION, MAX_VERSION + 1))
def test_byte_for_byte_with_kio(version: int) -> None:
    rng = random.Random(version)
    for _ in range(200):
        fields = _fields(rng)
        ours = b"".join(encode_produce_request(version, fields))
        assert ours == _kio(version, fields), fields


def test_record_sets_are_not_copied_and_timedeltas_are_taken() -> None:
    records = bytearray(b"r" * 1000)
    chunks = encode_produce_request(9, {"transactional_id": None, "acks": 1, "timeout": datetime.timedelta(seconds=2),
                                        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}]})  # fmt: skip
    assert any(chunk is records for chunk in chunks)
    assert b"".join(chunks) == _kio(9, {"transactional_id": None, "acks": 1, "timeout": 2000,
                                        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": bytes(records)}]}]})  # fmt: skip


def test_versions_outside_the_range_are_refused() -> None:
    with pytest.raises(ValueError, match="v2"):
        encode_produce_request(2, {"transactional_id": None, "acks": 1, "timeout": 0, "topic_data": []})
