"""Fuzzing SASL: >= 10,000 mutated SaslHandshake / SaslAuthenticate frames at one broker.

Each exchange runs a valid prefix of a real exchange (PLAIN, SCRAM-SHA-256 or
SCRAM-SHA-512; KIP-152 framing or the v0 raw-token one), then sends one
mutated frame (bit flips, truncations, insertions, random or huge tokens
re-encoded as well-formed requests; or the frame itself broken: huge,
negative or wrong sizes, flipped API key/version bytes, random bytes), then a
Metadata request that would auto-create the topic ``fuzzcanary``. The
invariants: that Metadata is never answered (no mutated exchange ends
authenticated, nothing unauthenticated reaches another API: the canary topic
never exists), the broker stays up, and a good client works afterwards.
Bounded: 12,000 exchanges or 90 s, 24 at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import struct
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from logstore.security.scram import MECHANISMS, ScramClient
from tests.kit.brokerkit import BrokerProcess, cli, free_port
from tests.kit.saslkit import SaslWire, authenticate_request, handshake_request, metadata_request
from tests.kit.wire import encode_request

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXCHANGES = 12_000
MINIMUM = 10_000
SECONDS = 90.0
CONCURRENCY = 24
CANARY_ID = 0x7FFF0000
CANARY = b""  # set in the test: the encoded canary frame
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
USERS = {
    "PLAIN": ("alice", "alice-secret"),
    "SCRAM-SHA-256": ("carol", "carol-pw"),
    "SCRAM-SHA-512": ("carol", "carol-pw"),
}
TOKEN_KINDS = ("flip", "truncate", "insert", "delete", "random", "huge", "empty", "double")
FRAME_KINDS = ("size_huge", "size_negative", "size_short", "size_long", "api_bits", "cut", "random_frame")


def mutate_token(token: bytes, kind: str, rng: random.Random) -> bytes:
    if kind == "flip":
        data = bytearray(token or b"\0")
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        out = bytes(data)
    elif kind == "truncate":
        out = token[: rng.randrange(len(token))] if token else b"x"
    elif kind == "insert":
        at = rng.randint(0, len(token))
        out = token[:at] + rng.randbytes(rng.randint(1, 16)) + token[at:]
    elif kind == "delete":
        at = rng.randrange(max(len(token), 1))
        out = token[:at] + token[at + rng.randint(1, 8) :]
    elif kind == "random":
        out = rng.randbytes(rng.randint(0, 300))
    elif kind == "huge":
        out = rng.randbytes(65_536)
    elif kind == "empty":
        out = b""
    else:
        out = token + token
    if out == token:  # a mutation must change the token
        out = token + b"\x01"
    return out


def mutate_frame(frame: bytes, kind: str, rng: random.Random) -> bytes:
    body = frame[4:]
    if kind == "size_huge":
        return struct.pack(">i", rng.choice([2**31 - 1, 1_000_000_000, 104_857_601])) + body
    if kind == "size_negative":
        return struct.pack(">i", rng.choice([-1, -(2**31), -rng.randint(2, 10_000)])) + body
    if kind == "size_short":
        return struct.pack(">i", rng.randint(0, max(len(body) - 1, 0))) + body
    if kind == "size_long":
        return struct.pack(">i", len(body) + rng.randint(1, 64)) + body
    if kind == "api_bits":
        data = bytearray(body)
        data[rng.randrange(4)] ^= 1 << rng.randrange(8)  # API key or version
        return struct.pack(">i", len(data)) + bytes(data)
    if kind == "cut":
        return frame[: rng.randrange(4, len(frame))]
    random_body = rng.randbytes(rng.randint(0, 200))
    return struct.pack(">i", len(random_body)) + random_body


def handshake_frame(mechanism: bytes) -> bytes:
    """SaslHandshake v1 by hand: the mechanism as raw bytes (any bytes, at most 32767)."""
    mechanism = mechanism[:32767]
    body = struct.pack(">hhih", 17, 1, 1, 4) + b"fuzz" + struct.pack(">h", len(mechanism)) + mechanism
    return struct.pack(">i", len(body)) + body


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return await reader.readexactly(size)


async def call(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: Any, cid: int) -> bytes:
    writer.write(encode_request(request, cid))
    return await read_frame(reader)


def auth_bytes(frame: bytes) -> bytes:
    """The auth_bytes of a SaslAuthenticate v2 response frame (correlation id, tag byte, body)."""
    from kio.serial import entity_reader

    from tests.kit.wire import response_class

    response: Any
    response, _ = entity_reader(response_class(36, 2))(frame, 5)
    assert response.error_code.value == 0, response
    return bytes(response.auth_bytes)


async def exchange(port: int, rng: random.Random, stats: Counter[str], control: bool = False) -> None:
    """One exchange with one mutated frame; ``control``: the last frame of a whole exchange, unmutated
    (the canary must then be answered: the check can fail)."""
    mechanism = rng.choice(list(USERS))
    user, password = USERS[mechanism]
    stage = rng.choice(["handshake", "first", "first", "final", "final", "legacy"])
    if stage == "final" and mechanism == "PLAIN":
        stage = "first"
    if control:
        stage = "first" if mechanism == "PLAIN" else "final"
    kind = "none" if control else rng.choice(TOKEN_KINDS + FRAME_KINDS)
    stats[f"{mechanism}/{stage}"] += 1
    stats[kind] += 1
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        scram = ScramClient(MECHANISMS[mechanism], user, password) if mechanism != "PLAIN" else None
        first_token = f"\0{user}\0{password}".encode() if scram is None else scram.first()
        make: Callable[[bytes], bytes]
        if stage == "handshake":
            token, make = mechanism.encode(), handshake_frame
        else:
            await call(reader, writer, handshake_request(mechanism, 0 if stage == "legacy" else 1), 1)
            if stage == "legacy":
                token, make = first_token, lambda t: struct.pack(">i", len(t)) + t
            elif stage == "first":
                token, make = first_token, lambda t: encode_request(authenticate_request(t), 2)
            else:
                assert scram is not None
                server_first = auth_bytes(await call(reader, writer, authenticate_request(first_token), 2))
                token, make = scram.final(server_first), lambda t: encode_request(authenticate_request(t), 3)
        if control:
            mutated = make(token)
        elif kind in TOKEN_KINDS:
            mutated = make(mutate_token(token, kind, rng))
        else:
            mutated = mutate_frame(make(token), kind, rng)
        canary = encode_request(metadata_request("controlcanary"), CANARY_ID) if control else CANARY
        writer.write(mutated + canary)
        await writer.drain()
        deadline = time.monotonic() + 0.5
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                stats["silent"] += 1
                break
            frame = await asyncio.wait_for(read_frame(reader), left)
            if len(frame) >= 4 and struct.unpack_from(">i", frame, 0)[0] == CANARY_ID:
                stats["canary_answered"] += 1
                break
    except (asyncio.IncompleteReadError, ConnectionError):
        stats["closed"] += 1
    except TimeoutError:
        stats["silent"] += 1
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()


async def fuzz(port: int, seed: int) -> tuple[int, Counter[str], float]:
    rng = random.Random(seed)
    stats: Counter[str] = Counter()
    started = time.monotonic()
    done = 0

    async def worker(worker_rng: random.Random) -> None:
        nonlocal done
        while done < EXCHANGES and time.monotonic() - started < SECONDS:
            done += 1
            await exchange(port, worker_rng, stats)

    await asyncio.gather(*(worker(random.Random(rng.random())) for _ in range(CONCURRENCY)))
    return done, stats, time.monotonic() - started


def test_mutated_sasl_frames(tmp_path: Any) -> None:
    global CANARY
    ports = {"PLAINTEXT": free_port(), "SASL_PLAINTEXT": free_port()}
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    broker = BrokerProcess(
        os.path.join(str(tmp_path), "data"),
        {
            "sasl.enabled.mechanisms": ",".join(USERS),
            "sasl.jaas.config": JAAS,
            "offsets.topic.num.partitions": "1",
        },
        port=ports["PLAINTEXT"],
        listeners=listeners,
    )
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        made = cli("users", "add", "--data-dir", broker.data_dir, "--user", "carol", "--password", "carol-pw",
                   "--mechanism", mechanism)  # fmt: skip
        assert made.returncode == 0, made.stderr
    broker.start()
    try:
        CANARY = encode_request(metadata_request("fuzzcanary"), CANARY_ID)
        seed = int.from_bytes(os.urandom(4), "big")
        controls: Counter[str] = Counter()
        for i in range(12):
            asyncio.run(exchange(ports["SASL_PLAINTEXT"], random.Random(i), controls, control=True))
        assert controls["canary_answered"] == 12, controls  # the detector sees an authenticated exchange
        # (their canary is another topic: controlcanary)
        done, stats, seconds = asyncio.run(fuzz(ports["SASL_PLAINTEXT"], seed))
        print(f"fuzz seed {seed}: {done} mutated exchanges in {seconds:.1f} s: {dict(stats)}")
        assert stats["canary_answered"] == 0, (seed, stats)
        assert done >= MINIMUM, f"only {done} exchanges in {SECONDS} s"
        assert broker.alive
        with SaslWire(f"127.0.0.1:{ports['SASL_PLAINTEXT']}") as client:  # a good client still works
            assert client.scram("SCRAM-SHA-512", "carol", "carol-pw").error_code.value == 0
            assert client.answered(metadata_request())
        from confluent_kafka.admin import AdminClient

        topics = (
            AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"})
            .list_topics(timeout=15)
            .topics
        )
        assert "fuzzcanary" not in topics
    finally:
        assert broker.stop() == 0, broker.log_text()[-3000:]
