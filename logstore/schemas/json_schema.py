"""The JSON Schema type: parsed and checked by ``jsonschema``, compared by Confluent's rules.

Parsing (:func:`parse`): the text is JSON (an object or a boolean); its
``$schema`` names the draft (4, 6, 7, 2019-09 or 2020-12; none: draft 7, as
Confluent's registry assumes) and ``jsonschema`` checks the schema against that
draft's meta-schema (with the meta-schema's formats: a ``pattern`` that is not a
regex is refused). References are other subjects' schemas, each known by its
reference ``name`` (and its ``$id`` if it has one): ``{"$ref": "customer.json"}``
or ``"customer.json#/$defs/Address"`` resolves in the referenced schema, as
Confluent resolves them; ``referencing`` (jsonschema's resolver) does the
resolving, and every ``$ref`` must resolve when the schema is parsed. Any failure
is Confluent's 42201 (invalid schema) with the reason.

Forms: :meth:`JsonSchema.canonical` is the schema re-serialized compactly with
its keys in their order (Confluent's canonical string: two texts that differ
only in white space are the same schema); :meth:`JsonSchema.normalized` also
sorts the keys, recursively (Confluent's ``normalize=true``: key order does not
matter either). Both are idempotent: parsing a form gives the same form.

Compatibility: no library implements Confluent's JSON Schema rules, so they live
here, in :mod:`logstore.schemas.json_diff` (the difference types and the table
that says which are compatible).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jsonschema
import jsonschema.exceptions
import referencing
import referencing.exceptions
import referencing.jsonschema

if TYPE_CHECKING:
    from referencing._core import Resolver

from logstore.schemas import errors, json_diff

# $schema (without a trailing '#') -> (jsonschema's validator class, referencing's specification)
DRAFTS: dict[str, tuple[Any, referencing.Specification[Any]]] = {
    "http://json-schema.org/draft-04/schema": (jsonschema.Draft4Validator, referencing.jsonschema.DRAFT4),
    "http://json-schema.org/draft-06/schema": (jsonschema.Draft6Validator, referencing.jsonschema.DRAFT6),
    "http://json-schema.org/draft-07/schema": (jsonschema.Draft7Validator, referencing.jsonschema.DRAFT7),
    "https://json-schema.org/draft/2019-09/schema": (
        jsonschema.Draft201909Validator, referencing.jsonschema.DRAFT201909),
    "https://json-schema.org/draft/2020-12/schema": (
        jsonschema.Draft202012Validator, referencing.jsonschema.DRAFT202012),
}  # fmt: skip
DEFAULT_DRAFT = "http://json-schema.org/draft-07/schema"
# Keys whose values are data, not subschemas: a "$ref" inside them is not a reference.
DATA_KEYS = frozenset({"enum", "const", "default", "examples"})
# Keys whose values map names the user chose to subschemas.
# Nesting deeper than this is refused: the checks and the comparison recurse per level.
MAX_DEPTH = 128
MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"})


def draft_of(schema: object) -> str:
    """The draft ``schema`` declares (its ``$schema`` without the trailing '#'); 42201 if unknown."""
    declared = schema.get("$schema") if isinstance(schema, dict) else None
    if declared is None:
        return DEFAULT_DRAFT
    key = str(declared).rstrip("#")
    if key.startswith("https://json-schema.org/draft-0"):  # the http form is the drafts' own
        key = "http" + key[5:]
    if key not in DRAFTS:
        raise errors.invalid_schema(f"unsupported $schema {declared!r}; supported: {', '.join(DRAFTS)}")
    return key


def _load(text: str, what: str) -> Any:
    try:
        found = json.loads(text)
    except RecursionError:
        raise errors.invalid_schema(f"{what} is nested too deeply (over {MAX_DEPTH} levels)") from None
    except ValueError as e:
        raise errors.invalid_schema(f"{what} is not JSON: {e}") from None
    if not isinstance(found, dict | bool):
        raise errors.invalid_schema(f"{what} is not a JSON Schema (an object or a boolean)")
    if _depth(found) > MAX_DEPTH:
        raise errors.invalid_schema(f"{what} is nested too deeply (over {MAX_DEPTH} levels)")
    return found


def _depth(document: Any) -> int:
    """How deeply ``document`` nests (iteratively: a deep document must not exhaust the stack)."""
    deepest, stack = 0, [(document, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(node, dict):
            stack += [(v, depth + 1) for v in node.values()]
        elif isinstance(node, list):
            stack += [(v, depth + 1) for v in node]
    return deepest


def _check(schema: Any, what: str) -> str:
    draft = draft_of(schema)
    validator = DRAFTS[draft][0]
    try:
        validator.check_schema(schema)
    except jsonschema.exceptions.SchemaError as e:
        where = "/".join(str(p) for p in e.absolute_path)
        raise errors.invalid_schema(f"{what} does not meet {draft}: {e.message} at #/{where}") from None
    except RecursionError:
        raise errors.invalid_schema(f"{what} is nested too deeply") from None
    return draft


@dataclass(frozen=True)
class JsonSchema:
    """A JSON Schema: its parsed document, the draft it declares and a resolver for its
    ``$ref``s (local ones and the references')."""

    document: Any
    draft: str
    resolver: Resolver[Any] = field(compare=False, repr=False)

    def canonical(self) -> str:
        return json.dumps(self.document, separators=(",", ":"), ensure_ascii=False)

    def normalized(self) -> str:
        return json.dumps(self.document, separators=(",", ":"), ensure_ascii=False, sort_keys=True)

    def differences(self, writer: JsonSchema) -> list[json_diff.Difference]:
        """Every difference from ``writer`` (the original) to this schema (the update)."""
        return json_diff.compare(writer.document, writer.resolver, self.document, self.resolver)

    def reads(self, writer: object) -> list[str]:
        assert isinstance(writer, JsonSchema)
        return [d.message() for d in self.differences(writer) if not d.compatible]


def parse(text: str, references: Sequence[tuple[str, str]] = ()) -> JsonSchema:
    """``text`` as a JSON Schema, ``references`` ((name, text), dependencies first) resolvable
    from it by name; 42201 with the reason if it is not one or a ``$ref`` does not resolve."""
    document = _load(text, "the schema")
    draft = _check(document, "the schema")
    spec = DRAFTS[draft][1]
    resources: list[tuple[str, referencing.Resource[Any]]] = []
    for name, referenced_text in references:
        referenced = _load(referenced_text, f"reference {name!r}")
        referenced_spec = DRAFTS[_check(referenced, f"reference {name!r}")][1]
        resource = referenced_spec.create_resource(referenced)
        resources.append((name, resource))
        if isinstance(referenced, dict) and isinstance(referenced.get("$id"), str):
            resources.append((referenced["$id"], resource))
    root = spec.create_resource(document)
    registry: referencing.Registry[Any] = referencing.Registry().with_resources(resources)
    base = document.get("$id", "") if isinstance(document, dict) else ""
    registry = registry.with_resource(base, root)
    resolver = registry.resolver(base_uri=base)
    try:
        _resolve_all(document, resolver, spec)
    except RecursionError:
        raise errors.invalid_schema("the schema is nested too deeply") from None
    return JsonSchema(document, draft, resolver)


def _resolve_all(node: Any, resolver: Resolver[Any], spec: referencing.Specification[Any]) -> None:
    """Raise 42201 for the first ``$ref`` in ``node`` that does not resolve."""
    if isinstance(node, list):
        for item in node:
            _resolve_all(item, resolver, spec)
        return
    if not isinstance(node, dict):
        return
    if isinstance(node.get("$id"), str):
        resolver = resolver.in_subresource(spec.create_resource(node))
    ref = node.get("$ref")
    if isinstance(ref, str):
        try:
            resolver.lookup(ref)
        except referencing.exceptions.Unresolvable as e:
            raise errors.invalid_schema(f"$ref {ref!r} does not resolve (no reference or definition by that name): {e}") from None
    for key, value in node.items():
        if key in MAPS and isinstance(value, dict):  # keyed by names the user chose
            for sub in value.values():
                _resolve_all(sub, resolver, spec)
        elif key not in DATA_KEYS:
            _resolve_all(value, resolver, spec)
