"""A log directory on a filesystem that fills up (a real tmpfs, mounted by the test; CI runs as
root): produce is refused below the reserve while groups still drain the backlog, writes resume
once space is back (the filesystem grown, or retention deleting segments), and the broker stops
and starts on a full disk with nothing acknowledged lost. confluent-kafka fills the disk; both
confluent-kafka's producer and logstore's get the broker's refusal.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

import logstore.client
from tests.kit.brokerkit import BrokerProcess

pytestmark = [pytest.mark.slow, pytest.mark.integration]

SIZE_MB = 40
VALUE = b"v" * 1000


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of SIZE_MB mounted at a fresh directory (unmounted after)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE_MB}m", "tmpfs", str(mount)],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _free(path: Path) -> int:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def _fill(bootstrap: str, start: int = 0, client: object = None) -> tuple[list[bytes], dict[str, int], float]:
    """Produce numbered values (acks=all, no retries: a refusal is reported at once) until
    deliveries fail; the acknowledged ones, the errors, and the seconds from the last
    acknowledgement to the first refusal. ``client``: the module with ``Producer``
    (confluent_kafka by default, or logstore.client)."""
    acked: list[bytes] = []
    errors: dict[str, int] = {}
    last_ack = [0.0]
    first_error = [0.0]

    def report(err: KafkaError | None, msg: object) -> None:
        if err is None:
            if not errors:
                last_ack[0] = time.monotonic()
            acked.append(msg.value()[:8])  # type: ignore[attr-defined]
        else:
            first_error[0] = first_error[0] or time.monotonic()
            errors[err.name()] = errors.get(err.name(), 0) + 1

    producer = getattr(client, "Producer", Producer)({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "retries": 0, "message.timeout.ms": 3000, "on_delivery": report})  # fmt: skip
    deadline = time.monotonic() + 60
    sent = start
    while not errors and time.monotonic() < deadline and sent < start + 200_000:  # ~5x the disk
        for _ in range(1000):
            try:
                producer.produce("fill", b"%08d" % sent + VALUE)
                sent += 1
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    producer.flush(20)
    return acked, errors, max(first_error[0] - last_ack[0], 0.0)


def _refusal(bootstrap: str, client: object = None) -> KafkaError | None:
    """One produce with no retries: the broker's own answer (``client``: the module with
    ``Producer``, confluent_kafka by default, or logstore.client)."""
    got: list[KafkaError | None] = []
    maker = getattr(client, "Producer", Producer)
    producer = maker({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0, "message.timeout.ms": 5000,
                      "on_delivery": lambda err, msg: got.append(err)})  # fmt: skip
    producer.produce("fill", b"one more")
    producer.flush(10)
    assert got, "no delivery report"
    return got[0]


def _read_all(bootstrap: str, group: str | None, want: int) -> list[bytes]:
    config = {"bootstrap.servers": bootstrap, "group.id": group or "reader", "auto.offset.reset": "earliest",
              "enable.auto.commit": False}  # fmt: skip
    consumer = Consumer(config)
    if group is None:
        consumer.assign([TopicPartition("fill", 0, 0)])
    else:
        consumer.subscribe(["fill"])
    seen: list[bytes] = []
    deadline = time.monotonic() + 90
    while len(seen) < want and time.monotonic() < deadline:
        for message in consumer.consume(10_000, 1.0):
            assert message.error() is None, message.error()
            seen.append(message.value()[:8])
    if group is not None:
        consumer.commit(asynchronous=False)  # __consumer_offsets writes into the reserve
    consumer.close()
    return seen


def test_a_full_disk_refuses_produce_drains_resumes_and_restarts(small_disk: Path, tmp_path: Path) -> None:
    overrides = {"log.segment.bytes": str(2**20), "log.retention.check.interval.ms": "500"}
    broker = BrokerProcess(str(small_disk / "data"), overrides, log_dir=str(tmp_path)).start()
    reserve = int(SIZE_MB * 2**20 * 0.05)  # log.dir.min.free.bytes unset: 5% of the filesystem

    acked, errors, late = _fill(broker.bootstrap)
    assert len(acked) > 10_000 and errors, (len(acked), errors)
    # Refused at the reserve, not at ENOSPC: the reserve is (nearly) all still free; and at once.
    assert _free(small_disk) >= reserve // 2, (_free(small_disk), reserve)
    assert late <= 1.0, f"writes went on for {late:.2f} s past the first refusal"
    for client in (None, logstore.client):
        refused = _refusal(broker.bootstrap, client)
        assert refused is not None and refused.code() == KafkaError.KAFKA_STORAGE_ERROR, (client, refused)
    assert "below its reserve" in broker.log_text() and "log.dir.min.free.bytes" in broker.log_text()

    # A consumer group drains the whole backlog while the disk is full: joining, syncing and
    # committing write __consumer_offsets into the reserve.
    drained = _read_all(broker.bootstrap, "drain", len(acked))
    assert sorted(drained) == sorted(acked) and len(set(drained)) == len(drained)

    # More space: produce resumes by itself within 5 s.
    subprocess.run(["mount", "-o", f"remount,size={SIZE_MB * 2}m", str(small_disk)], check=True)
    grown = time.monotonic()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "message.timeout.ms": 10_000})
    delivered: list[float] = []
    producer.produce("fill", b"%08d" % 999_999 + b"after", on_delivery=lambda err, msg: err or delivered.append(time.monotonic()))
    producer.flush(12)
    assert delivered and delivered[0] - grown <= 5.0, delivered
    acked.append(b"%08d" % 999_999)

    # Stop on a full disk, start on it, serve every acknowledged record.
    filler = small_disk / "filler"
    with open(filler, "wb") as f:
        try:
            for _ in range(SIZE_MB * 4):
                f.write(b"\0" * 2**20)
                f.flush()
        except OSError:
            pass
    assert _free(small_disk) < 2**20
    assert broker.stop() == 0, broker.log_text()[-2000:]
    broker.start()
    assert sorted(_read_all(broker.bootstrap, None, len(acked))) == sorted(acked)

    # Full again; retention deleting old segments gives the space back, and writes resume.
    filler.unlink()
    time.sleep(1.0)  # the broker's next look at the free space (every 250 ms) lets writes in again
    more, errors, _ = _fill(broker.bootstrap, start=1_000_000, client=logstore.client)  # logstore's producer fills
    assert more and errors, (len(more), errors)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = ConfigResource(ConfigResource.Type.TOPIC, "fill", incremental_configs=[
        ConfigEntry("retention.bytes", str(4 * 2**20), incremental_operation=AlterConfigOpType.SET)])  # fmt: skip
    admin.incremental_alter_configs([topic])[topic].result(15)
    trimmed = time.monotonic()
    delivered.clear()
    producer.produce("fill", b"after retention", on_delivery=lambda err, msg: err or delivered.append(time.monotonic()))
    producer.flush(12)
    assert delivered and delivered[0] - trimmed <= 5.0, (delivered, _free(small_disk))
    assert broker.stop() == 0, broker.log_text()[-2000:]
    assert "Traceback" not in broker.log_text()
