"""RegistryService over an in-memory journal: a write is applied only once the journal holds it, a
failed append changes nothing, concurrent writes are serialized (distinct ids), and a journal that
shrinks under the reader makes it rebuild."""

from __future__ import annotations

import asyncio
import json

import pytest

from logstore.schemas import errors
from logstore.schemas.records import Record
from logstore.schemas.registry import Registry
from logstore.schemas.service import RegistryService

pytestmark = pytest.mark.unit


def schema(name: str) -> str:
    return json.dumps({"type": "record", "name": name, "fields": [{"name": "f", "type": "int"}]})


class ListJournal:
    """Records in a list; ``fail`` makes the next append raise; each append yields to the loop."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.first = 0
        self.fail = False
        self.appends = 0

    def start(self) -> int:
        return self.first

    def end(self) -> int:
        return self.first + len(self.records)

    def read(self, position: int) -> tuple[list[Record], int]:
        chunk = self.records[position - self.first : position - self.first + 2]  # small chunks: several reads
        return chunk, position + len(chunk)

    async def append(self, records: list[Record]) -> int:
        self.appends += 1
        await asyncio.sleep(0)  # another write could run here if writes were not serialized
        if self.fail:
            self.fail = False
            raise errors.store_error("disk gone")
        self.records.extend(records)
        return self.end()

    async def writer(self) -> str | None:
        return None


def register(name: str, subject: str = "s") -> object:
    def operation(registry: Registry) -> tuple[int, list[Record]]:
        return registry.register(subject, schema(name), "AVRO")

    return operation


def test_writes_are_applied_once_appended_and_serialized() -> None:
    async def main() -> None:
        journal = ListJournal()
        service = RegistryService(journal)
        # any schema may follow any (the level is not the point here)
        assert await service.write(lambda registry: (1, registry.set_compatibility("NONE"))) == 1
        ids = await asyncio.gather(*(service.write(register(f"N{n}", f"s{n % 3}")) for n in range(9)))  # type: ignore[arg-type]
        assert sorted(ids) == list(range(1, 10))  # serialized: no two writes computed the same next id
        assert service.position == journal.end() == 10
        journal.fail = True
        with pytest.raises(errors.RegistryError) as failed:
            await service.write(register("Lost"))  # type: ignore[arg-type]
        assert failed.value.code == 50001
        assert service.registry.state.next_id == 10 and service.position == 10  # nothing applied
        assert await service.write(register("N0", "s0")) == 1  # already there: nothing appended
        assert journal.appends == 11
        # another node's replica: it reads the same journal to the same state
        follower = RegistryService(journal)
        assert follower.catch_up() == 10 and follower.registry.state == service.registry.state

    asyncio.run(main())


def test_a_journal_that_shrinks_or_moves_its_start_is_read_again_from_its_start() -> None:
    async def main() -> None:
        journal = ListJournal()
        service = RegistryService(journal)
        await service.write(register("A"))  # type: ignore[arg-type]
        await service.write(register("B", "t"))  # type: ignore[arg-type]
        assert service.read().subjects() == ["s", "t"]
        journal.records = journal.records[1:]
        journal.first = 1  # the first record deleted (DeleteRecords): read again from 1
        service.position = 0
        assert service.catch_up() == 1 and service.registry.subjects() == ["t"]
        journal.records, journal.first = [], 0  # the topic deleted and made again
        assert service.catch_up() == 0 and service.read().subjects() == [] and service.position == 0

    asyncio.run(main())
