"""The produce path's schema id check (broker/schema_validation.py) over an in-memory registry:
framing, unknown ids, ids under another subject, the three subject name strategies, keys and
values, tombstones, compressed batches, and the cache following the registry's changes."""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from logstore.broker.schema_validation import SchemaIdCheck, framed_ids
from logstore.records.builder import build_batch
from logstore.schemas.registry import Registry
from logstore.schemas.service import RegistryService
from logstore.storage.config import LogConfig
from tests.schemas.test_service import ListJournal

pytestmark = pytest.mark.unit


def avro(name: str, namespace: str = "shop") -> str:
    return json.dumps({"type": "record", "name": name, "namespace": namespace, "fields": [{"name": "f", "type": "int"}]})


def framed(schema_id: int, payload: bytes = b"\x02") -> bytes:
    return b"\x00" + struct.pack(">i", schema_id) + payload


class FakeServer:
    def __init__(self, service: RegistryService) -> None:
        self.service = service


class FakeBroker:
    def __init__(self) -> None:
        self.service = RegistryService(ListJournal())
        self.schema_registry = FakeServer(self.service)

    def register(self, subject: str, schema: str) -> int:
        async def write() -> int:
            await self.service.write(lambda registry: (0, registry.set_compatibility("NONE")))
            return await self.service.write(lambda registry: registry.register(subject, schema, "AVRO"))  # type: ignore[return-value]

        return asyncio.run(write())

    def delete(self, subject: str) -> None:
        asyncio.run(self.service.write(lambda registry: registry.delete_subject(subject)))


def config(**values: str) -> LogConfig:
    return LogConfig.from_dict({name.replace("_", "."): value for name, value in values.items()})


VALUE_ON = config(confluent_value_schema_validation="true")


@pytest.fixture
def fake() -> FakeBroker:
    return FakeBroker()


def test_off_by_default_and_framed_records_of_the_topic_subject_pass(fake: FakeBroker) -> None:
    check = SchemaIdCheck(fake)  # type: ignore[arg-type]
    user = fake.register("orders-value", avro("User"))
    assert check("orders", LogConfig.from_dict({}), build_batch([b"plain bytes"])) is None  # validation off
    assert check("orders", VALUE_ON, build_batch([framed(user), framed(user, b""), None])) is None  # a tombstone passes


def test_each_refused_record_is_named_with_its_reason(fake: FakeBroker) -> None:
    check = SchemaIdCheck(fake)  # type: ignore[arg-type]
    user = fake.register("orders-value", avro("User"))
    other = fake.register("payments-value", avro("Payment"))
    batch = build_batch([framed(user), b"not framed", framed(99), framed(other), b"\x01" + framed(user)[1:], b"\x00ab"])
    refused = check("orders", VALUE_ON, batch)
    assert refused is not None and refused.error == ErrorCode.invalid_record
    indexes = [index for index, _ in refused.record_errors]
    assert indexes == [1, 2, 3, 4, 5]
    reasons = dict(refused.record_errors)
    assert "has no schema id" in str(reasons[1]) and "has no schema id" in str(reasons[4])  # magic 1
    assert "has no schema id" in str(reasons[5])  # shorter than the frame
    assert "schema id 99 is unknown" in str(reasons[2])
    assert f"schema id {other} is not registered under subject 'orders-value'" in str(reasons[3])
    assert refused.message is not None and "5 record errors" in refused.message


def test_keys_and_the_redpanda_synonym(fake: FakeBroker) -> None:
    check = SchemaIdCheck(fake)  # type: ignore[arg-type]
    key = fake.register("orders-key", avro("Key"))
    keys_on = config(redpanda_key_schema_id_validation="true")
    assert check("orders", keys_on, build_batch([(framed(key), b"any value"), (None, b"no key")])) is None
    refused = check("orders", keys_on, build_batch([(framed(key), b"v"), (b"plain", b"v")]))
    assert refused is not None and [i for i, _ in refused.record_errors] == [1]
    assert "the key has no schema id" in str(refused.record_errors[0][1])


def test_record_name_strategies(fake: FakeBroker) -> None:
    check = SchemaIdCheck(fake)  # type: ignore[arg-type]
    user = fake.register("shop.User", avro("User"))
    topic_user = fake.register("orders-shop.Order", avro("Order"))
    misnamed = fake.register("shop.Other", avro("Order", "elsewhere"))  # its record is elsewhere.Order
    by_record = config(
        confluent_value_schema_validation="true",
        confluent_value_subject_name_strategy="io.confluent.kafka.serializers.subject.RecordNameStrategy",
    )
    assert check("orders", by_record, build_batch([framed(user)])) is None
    refused = check("orders", by_record, build_batch([framed(user), framed(topic_user), framed(misnamed)]))
    assert refused is not None and [i for i, _ in refused.record_errors] == [1, 2]
    by_topic_record = config(
        confluent_value_schema_validation="true", confluent_value_subject_name_strategy="TopicRecordNameStrategy"
    )
    assert check("orders", by_topic_record, build_batch([framed(topic_user)])) is None
    refused = check("payments", by_topic_record, build_batch([framed(topic_user)]))  # registered for orders
    assert refused is not None and "TopicRecordNameStrategy" in str(refused.record_errors[0][1])
    redpanda = config(redpanda_value_schema_id_validation="true", redpanda_value_subject_name_strategy="RecordNameStrategy")
    assert check("orders", redpanda, build_batch([framed(user)])) is None  # Redpanda's strategy key
    both = config(redpanda_value_schema_id_validation="true", redpanda_value_subject_name_strategy="RecordNameStrategy",
                  confluent_value_subject_name_strategy="TopicNameStrategy")  # fmt: skip
    assert check("orders", both, build_batch([framed(user)])) is not None  # Confluent's wins: orders-value has none


def test_the_cache_follows_the_registry(fake: FakeBroker) -> None:
    check = SchemaIdCheck(fake)  # type: ignore[arg-type]
    first = fake.register("orders-value", avro("User"))
    assert check("orders", VALUE_ON, build_batch([framed(first)])) is None
    second = fake.register("orders-value", avro("User2"))
    assert check("orders", VALUE_ON, build_batch([framed(second)])) is None  # registered after the cache was built
    fake.delete("orders-value")  # soft delete: its ids no longer accepted
    refused = check("orders", VALUE_ON, build_batch([framed(first), framed(second)]))
    assert refused is not None and len(refused.record_errors) == 2


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_compressed_batches_are_checked(fake: FakeBroker, compression: str) -> None:
    check = SchemaIdCheck(fake)  # type: ignore[arg-type]
    user = fake.register("orders-value", avro("User"))
    assert check("orders", VALUE_ON, build_batch([framed(user)] * 50, compression=compression)) is None
    records: list[Any] = [framed(user)] * 50
    records[37] = b"plain"
    refused = check("orders", VALUE_ON, build_batch(records, compression=compression))
    assert refused is not None and [i for i, _ in refused.record_errors] == [37]


def test_framed_ids_reads_big_endian_ids() -> None:
    import numpy as np

    buffer = framed(0x01020304) + b"\x05\x00\x00\x00\x01"
    ids_framed, ids = framed_ids(buffer, np.array([0, 0, 6], dtype=np.int32), np.array([6, 4, 5], dtype=np.int32))
    assert ids_framed.tolist() == [True, False, False]  # the second is too short, the third starts with 5
    assert int(ids[0]) == 0x01020304


def test_a_registry_with_no_subject_refuses_every_framed_record(fake: FakeBroker) -> None:
    check = SchemaIdCheck(fake)  # type: ignore[arg-type]
    refused = check("orders", VALUE_ON, build_batch([framed(1)]))
    assert refused is not None and "unknown" in str(refused.record_errors[0][1])


def test_record_names_of_each_type() -> None:
    registry = Registry()
    registry.state.apply(*_schema_record("a", 1, avro("User")))
    registry.state.apply(*_schema_record("b", 2, json.dumps({"title": "Thing", "type": "object"}), "JSON"))
    registry.state.apply(*_schema_record("c", 3, avro("plain.Named", "ignored")))
    assert registry.record_names(1) == ("shop.User",)
    assert registry.record_names(2) == ("Thing",)
    assert registry.record_names(3) == ("plain.Named",)
    assert registry.record_names(4) == ()


def _schema_record(subject: str, schema_id: int, schema: str, schema_type: str = "AVRO") -> tuple[bytes, bytes | None]:
    from logstore.schemas.records import SchemaValue, schema_record

    return schema_record(SchemaValue(subject, 1, schema_id, schema, schema_type))


def test_the_c_walk_reads_ids_nulls_and_unframed_fields() -> None:
    from logstore._native import ffi, lib

    batch = build_batch([(None, framed(7)), (framed(9), None), (b"k", b"plain"), (b"\x00\x00", framed(7, b""))])
    ids, count, uniform = ffi.new("int64_t[]", 8), ffi.new("int64_t *"), ffi.new("int64_t *")
    assert lib.ls_schema_ids(batch, len(batch), 1, 8, ids, count, uniform) == 0
    assert count[0] == 4 and list(ids[0:4]) == [7, -1, -2, 7] and uniform[0] == -3
    assert lib.ls_schema_ids(batch, len(batch), 0, 8, ids, count, uniform) == 0
    assert list(ids[0:4]) == [-1, 9, -2, -2]
    same = build_batch([b"\x00\x80\x00\x00\x05"] * 3)  # read as unsigned 32-bit
    assert lib.ls_schema_ids(same, len(same), 1, 8, ids, count, uniform) == 0 and uniform[0] == 2**31 + 5
    assert lib.ls_schema_ids(same, len(same), 1, 2, ids, count, uniform) == lib.LS_ERR_CAPACITY
    zipped = build_batch([framed(1)], compression="gzip")
    assert lib.ls_schema_ids(zipped, len(zipped), 1, 8, ids, count, uniform) == lib.LS_ERR_ARGUMENT
