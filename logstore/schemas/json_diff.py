"""Confluent's JSON Schema compatibility rules: a structural diff and the table of its change types.

:func:`compare` walks an *original* schema (the writer's: data written with it)
and an *update* (the reader's) side by side and names each change with one of
Confluent's ``Difference.Type`` names (its ``JsonSchemaDiff``); :data:`RULES`
says which are compatible. The update can read everything the original wrote
when none of the changes is incompatible. BACKWARD compares (old, new), FORWARD
(new, old), as compatibility.py's levels do.

The rules, in short (the table is the reference):

- a constraint added or tightened (``maxLength`` added or lowered, ``minimum``
  added or raised, ``pattern`` added or changed, ``multipleOf`` made a multiple,
  ``uniqueItems`` turned on, an ``enum`` value removed, a property made
  ``required``) is incompatible; one removed or relaxed is compatible;
- types: ``integer`` to ``number``, or a type added to a list, extends
  (compatible); the reverse narrows, a different type changes (incompatible);
- content models: an object is *open* (``additionalProperties`` absent or true,
  no ``patternProperties``), *closed* (``additionalProperties: false``) or
  *partially open* (a schema for the additional or pattern properties). Adding a
  property to an open model is incompatible (old data may hold that name with
  any value), unless its schema is ``{}``; adding an optional one to a closed
  model is compatible, a required one is not (unless it has a ``default``);
  removing one from a closed model is incompatible, from an open one
  compatible; partially open models ask whether the added or removed property
  is covered by the pattern/additional schema. Array items in tuple form follow
  the same rules with ``additionalItems`` (2020-12: ``prefixItems`` + ``items``);
- ``additionalProperties``/``additionalItems`` false to true extends, true to
  false or to a schema narrows;
- ``anyOf``/``oneOf`` gaining alternatives extends, losing them narrows;
  ``allOf`` losing subschemas relaxes, gaining them tightens; allOf/oneOf to
  anyOf extends; subschemas are matched one to one by compatibility.

Where this differs from Confluent's Java diff, it errs towards the semantics:
removing a ``not`` relaxes (Confluent: a type change). ``$ref`` is followed on
both sides, from the base of the nearest ``$id`` (recursive schemas compare each
pair once); one that cannot be followed (parse() refuses those, so only a
resolver's surprise) counts as ``false``, reading nothing: never a false
"compatible".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

import referencing
import referencing.exceptions
import referencing.jsonschema

from logstore.schemas import errors
from logstore.schemas.difference import Difference

if TYPE_CHECKING:
    from referencing._core import Resolver

# Confluent's Difference.Type: compatible?, what it means (original -> update).
RULES: dict[str, tuple[bool, str]] = {
    "ID_CHANGED": (True, "$id changed"),
    "DESCRIPTION_CHANGED": (True, "description changed"),
    "TITLE_CHANGED": (True, "title changed"),
    "DEFAULT_CHANGED": (True, "default changed"),
    "SCHEMA_ADDED": (False, "a schema where there was none"),
    "SCHEMA_REMOVED": (True, "a schema removed"),
    "TYPE_EXTENDED": (True, "the type accepts more (integer to number, a type added)"),
    "TYPE_NARROWED": (False, "the type accepts less (number to integer, a type removed)"),
    "TYPE_CHANGED": (False, "the type changed"),
    "MAX_LENGTH_ADDED": (False, "maxLength added"),
    "MAX_LENGTH_REMOVED": (True, "maxLength removed"),
    "MAX_LENGTH_INCREASED": (True, "maxLength increased"),
    "MAX_LENGTH_DECREASED": (False, "maxLength decreased"),
    "MIN_LENGTH_ADDED": (False, "minLength added"),
    "MIN_LENGTH_REMOVED": (True, "minLength removed"),
    "MIN_LENGTH_INCREASED": (False, "minLength increased"),
    "MIN_LENGTH_DECREASED": (True, "minLength decreased"),
    "PATTERN_ADDED": (False, "pattern added"),
    "PATTERN_REMOVED": (True, "pattern removed"),
    "PATTERN_CHANGED": (False, "pattern changed"),
    "MAXIMUM_ADDED": (False, "maximum added"),
    "MAXIMUM_REMOVED": (True, "maximum removed"),
    "MAXIMUM_INCREASED": (True, "maximum increased"),
    "MAXIMUM_DECREASED": (False, "maximum decreased"),
    "MINIMUM_ADDED": (False, "minimum added"),
    "MINIMUM_REMOVED": (True, "minimum removed"),
    "MINIMUM_INCREASED": (False, "minimum increased"),
    "MINIMUM_DECREASED": (True, "minimum decreased"),
    "EXCLUSIVE_MAXIMUM_ADDED": (False, "exclusiveMaximum added"),
    "EXCLUSIVE_MAXIMUM_REMOVED": (True, "exclusiveMaximum removed"),
    "EXCLUSIVE_MAXIMUM_INCREASED": (True, "exclusiveMaximum increased"),
    "EXCLUSIVE_MAXIMUM_DECREASED": (False, "exclusiveMaximum decreased"),
    "EXCLUSIVE_MINIMUM_ADDED": (False, "exclusiveMinimum added"),
    "EXCLUSIVE_MINIMUM_REMOVED": (True, "exclusiveMinimum removed"),
    "EXCLUSIVE_MINIMUM_INCREASED": (False, "exclusiveMinimum increased"),
    "EXCLUSIVE_MINIMUM_DECREASED": (True, "exclusiveMinimum decreased"),
    "MULTIPLE_OF_ADDED": (False, "multipleOf added"),
    "MULTIPLE_OF_REMOVED": (True, "multipleOf removed"),
    "MULTIPLE_OF_EXPANDED": (False, "multipleOf became a multiple of the old one"),
    "MULTIPLE_OF_REDUCED": (True, "multipleOf became a divisor of the old one"),
    "MULTIPLE_OF_CHANGED": (False, "multipleOf changed"),
    "REQUIRED_ATTRIBUTE_ADDED": (False, "a property became required"),
    "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED": (True, "a property with a default became required"),
    "REQUIRED_ATTRIBUTE_REMOVED": (True, "a property is no longer required"),
    "MAX_PROPERTIES_ADDED": (False, "maxProperties added"),
    "MAX_PROPERTIES_REMOVED": (True, "maxProperties removed"),
    "MAX_PROPERTIES_INCREASED": (True, "maxProperties increased"),
    "MAX_PROPERTIES_DECREASED": (False, "maxProperties decreased"),
    "MIN_PROPERTIES_ADDED": (False, "minProperties added"),
    "MIN_PROPERTIES_REMOVED": (True, "minProperties removed"),
    "MIN_PROPERTIES_INCREASED": (False, "minProperties increased"),
    "MIN_PROPERTIES_DECREASED": (True, "minProperties decreased"),
    "ADDITIONAL_PROPERTIES_ADDED": (True, "additionalProperties false to true"),
    "ADDITIONAL_PROPERTIES_REMOVED": (False, "additionalProperties true to false"),
    "ADDITIONAL_PROPERTIES_EXTENDED": (True, "the additionalProperties schema removed"),
    "ADDITIONAL_PROPERTIES_NARROWED": (False, "an additionalProperties schema added"),
    "DEPENDENCY_ARRAY_ADDED": (False, "a property dependency added"),
    "DEPENDENCY_ARRAY_REMOVED": (True, "a property dependency removed"),
    "DEPENDENCY_ARRAY_EXTENDED": (False, "a property dependency gained properties"),
    "DEPENDENCY_ARRAY_NARROWED": (True, "a property dependency lost properties"),
    "DEPENDENCY_ARRAY_CHANGED": (False, "a property dependency changed"),
    "DEPENDENCY_SCHEMA_ADDED": (False, "a schema dependency added"),
    "DEPENDENCY_SCHEMA_REMOVED": (True, "a schema dependency removed"),
    "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL": (False, "a property added to an open content model (Confluent's older name)"),
    "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL": (False, "an optional property added to an open content model"),
    "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL": (False, "a required property added to an open content model"),
    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL": (False, "a required property with a default added to an open content model"),
    "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL": (True, "a property with schema {} added to an open content model"),
    "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL": (False, "a required property added to a closed or partially open content model"),
    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL": (True, "a required property with a default added to a closed or partially open content model"),
    "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL": (True, "an optional property added to a closed content model"),
    "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL": (True, "a property removed from an open content model"),
    "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL": (True, "a property with schema false removed from a closed content model"),
    "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL": (False, "a property removed from a closed content model"),
    "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL": (True, "a property added that the partially open content model covered"),
    "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL": (False, "a property added that the partially open content model did not cover"),
    "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL": (True, "a property removed that the partially open content model covers"),
    "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL": (False, "a property removed that the partially open content model does not cover"),
    "UNEVALUATED_PROPERTIES_ADDED": (True, "unevaluatedProperties false to true"),
    "UNEVALUATED_PROPERTIES_REMOVED": (False, "unevaluatedProperties true to false"),
    "UNEVALUATED_PROPERTIES_EXTENDED": (True, "the unevaluatedProperties schema removed"),
    "UNEVALUATED_PROPERTIES_NARROWED": (False, "an unevaluatedProperties schema added"),
    "UNEVALUATED_ITEMS_ADDED": (True, "unevaluatedItems false to true"),
    "UNEVALUATED_ITEMS_REMOVED": (False, "unevaluatedItems true to false"),
    "UNEVALUATED_ITEMS_EXTENDED": (True, "the unevaluatedItems schema removed"),
    "UNEVALUATED_ITEMS_NARROWED": (False, "an unevaluatedItems schema added"),
    "MAX_CONTAINS_ADDED": (False, "maxContains added"),
    "MAX_CONTAINS_REMOVED": (True, "maxContains removed"),
    "MAX_CONTAINS_INCREASED": (True, "maxContains increased"),
    "MAX_CONTAINS_DECREASED": (False, "maxContains decreased"),
    "MIN_CONTAINS_ADDED": (False, "minContains added"),
    "MIN_CONTAINS_REMOVED": (True, "minContains removed"),
    "MIN_CONTAINS_INCREASED": (False, "minContains increased"),
    "MIN_CONTAINS_DECREASED": (True, "minContains decreased"),
    "MAX_ITEMS_ADDED": (False, "maxItems added"),
    "MAX_ITEMS_REMOVED": (True, "maxItems removed"),
    "MAX_ITEMS_INCREASED": (True, "maxItems increased"),
    "MAX_ITEMS_DECREASED": (False, "maxItems decreased"),
    "MIN_ITEMS_ADDED": (False, "minItems added"),
    "MIN_ITEMS_REMOVED": (True, "minItems removed"),
    "MIN_ITEMS_INCREASED": (False, "minItems increased"),
    "MIN_ITEMS_DECREASED": (True, "minItems decreased"),
    "UNIQUE_ITEMS_ADDED": (False, "uniqueItems turned on"),
    "UNIQUE_ITEMS_REMOVED": (True, "uniqueItems turned off"),
    "ADDITIONAL_ITEMS_ADDED": (True, "additionalItems false to true"),
    "ADDITIONAL_ITEMS_REMOVED": (False, "additionalItems true to false"),
    "ADDITIONAL_ITEMS_EXTENDED": (True, "the additionalItems schema removed"),
    "ADDITIONAL_ITEMS_NARROWED": (False, "an additionalItems schema added"),
    "ITEM_ADDED_TO_OPEN_CONTENT_MODEL": (False, "a tuple item added to an open content model"),
    "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL": (True, "a tuple item with schema {} added to an open content model"),
    "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL": (True, "a tuple item added to a closed content model"),
    "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL": (True, "a tuple item removed from an open content model"),
    "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL": (True, "a tuple item with schema false removed from a closed content model"),
    "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL": (False, "a tuple item removed from a closed content model"),
    "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL": (True, "a tuple item added that additionalItems covered"),
    "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL": (False, "a tuple item added that additionalItems did not cover"),
    "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL": (True, "a tuple item removed that additionalItems covers"),
    "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL": (False, "a tuple item removed that additionalItems does not cover"),
    "ENUM_ARRAY_EXTENDED": (True, "enum values added"),
    "ENUM_ARRAY_NARROWED": (False, "enum values removed"),
    "ENUM_ARRAY_CHANGED": (False, "enum values changed (or const)"),
    "COMBINED_TYPE_EXTENDED": (True, "allOf or oneOf became anyOf"),
    "COMBINED_TYPE_CHANGED": (False, "the combination (allOf, anyOf, oneOf) changed"),
    "PRODUCT_TYPE_EXTENDED": (False, "allOf gained subschemas"),
    "PRODUCT_TYPE_NARROWED": (True, "allOf lost subschemas"),
    "SUM_TYPE_EXTENDED": (True, "anyOf/oneOf gained alternatives"),
    "SUM_TYPE_NARROWED": (False, "anyOf/oneOf lost alternatives"),
    "COMBINED_TYPE_SUBSCHEMAS_CHANGED": (False, "the subschemas of a combination do not match one to one"),
    "NOT_TYPE_EXTENDED": (False, "the 'not' schema accepts more (so the schema accepts less)"),
    "NOT_TYPE_NARROWED": (True, "the 'not' schema accepts less (so the schema accepts more)"),
}

# keyword -> Confluent's name for it: NAME_ADDED, _REMOVED, _INCREASED, _DECREASED (RULES says
# which relax: a max increased or a min decreased)
LIMITS: dict[str, str] = {
    "maxLength": "MAX_LENGTH", "minLength": "MIN_LENGTH", "maximum": "MAXIMUM", "minimum": "MINIMUM",
    "exclusiveMaximum": "EXCLUSIVE_MAXIMUM", "exclusiveMinimum": "EXCLUSIVE_MINIMUM",
    "maxProperties": "MAX_PROPERTIES", "minProperties": "MIN_PROPERTIES", "maxItems": "MAX_ITEMS", "minItems": "MIN_ITEMS",
    "maxContains": "MAX_CONTAINS", "minContains": "MIN_CONTAINS",
}  # fmt: skip
ANNOTATIONS = frozenset({
    "$schema", "$id", "id", "$comment", "$defs", "definitions", "title", "description", "default",
    "examples", "readOnly", "writeOnly", "deprecated", "format", "$anchor", "$dynamicAnchor", "$vocabulary",
})  # fmt: skip
COMBINERS = ("allOf", "anyOf", "oneOf")
SUMS = ("anyOf", "oneOf")
MAX_REF_HOPS = 64


Node: TypeAlias = "tuple[Any, Resolver[Any]]"


@dataclass
class _Walk:
    """One comparison: its differences, the pairs being compared (recursion), trial results."""

    found: list[Difference] = field(default_factory=list)
    visiting: set[tuple[int, int]] = field(default_factory=set)
    trials: dict[tuple[int, int], bool] = field(default_factory=dict)
    keep: list[Any] = field(default_factory=list)  # nodes made here stay alive: ids stay unique

    def add(self, kind: str, path: str) -> None:
        assert kind in RULES, kind
        self.found.append(Difference(kind, path, *RULES[kind]))

    def fits(self, original: Node, update: Node) -> bool:
        """Can ``update`` read what ``original`` wrote? (a trial: records nothing here)"""
        key = (id(original[0]), id(update[0]))
        if key not in self.trials:
            self.trials[key] = True  # a recursive pair assumes yes while it is being decided
            trial = _Walk(trials=self.trials, keep=self.keep)
            trial.node(original, update, "#")
            self.trials[key] = all(d.compatible for d in trial.found)
        return self.trials[key]

    # -- the walk ------------------------------------------------------------------

    def node(self, original: Node, update: Node, path: str) -> None:
        o, ro = self.deref(original)
        u, ru = self.deref(update)
        key = (id(o), id(u))
        if key in self.visiting:
            return
        self.visiting.add(key)
        try:
            self.compare(o, ro, u, ru, path)
        finally:
            self.visiting.discard(key)

    def deref(self, at: Node) -> Node:
        """Follow ``$ref`` (keywords beside it apply too); booleans as their schemas."""
        node, resolver = at
        for _ in range(MAX_REF_HOPS):
            if node is True:
                return {}, resolver
            if node is False:
                return self.hold({"not": {}}), resolver
            if isinstance(node, dict) and isinstance(node.get("$id"), str):  # a new base for what is inside
                resolver = resolver.in_subresource(referencing.jsonschema.DRAFT202012.create_resource(node))
            if not isinstance(node, dict) or not isinstance(node.get("$ref"), str):
                return node, resolver
            try:
                resolved = resolver.lookup(node["$ref"])
            except referencing.exceptions.Unresolvable:  # parse() resolved every $ref: not expected
                return self.hold({"not": {}}), resolver  # assume the worst: it reads nothing
            beside = {k: v for k, v in node.items() if k != "$ref" and k not in ANNOTATIONS}
            target = resolved.contents
            if beside and isinstance(target, dict):
                target = self.hold({**target, **beside})
            node, resolver = target, resolved.resolver
        return {}, resolver

    def hold(self, made: dict[str, Any]) -> dict[str, Any]:
        self.keep.append(made)
        return made

    def compare(self, o: Any, ro: Resolver[Any], u: Any, ru: Resolver[Any],
                path: str) -> None:  # fmt: skip
        if _is_false(o) or _is_empty(u):
            return  # the original wrote nothing, or the update reads anything
        if _is_empty(o) or _is_false(u):
            self.add("TYPE_NARROWED", path)
            return
        self.annotations(o, u, path)
        if any(k in o or k in u for k in COMBINERS):
            self.combined(o, ro, u, ru, path)
            replaced = not any(k in u for k in COMBINERS) and _is_empty(_without(o, COMBINERS))
            if replaced:  # the original was a combination only: combined() compared all of it
                return
            o, u = _without(o, COMBINERS), _without(u, COMBINERS)
            self.keep += [o, u]
        if "not" in o or "not" in u:
            self.negation(o, ro, u, ru, path)
        self.types(o, u, path)
        self.limits(o, u, path)
        self.values(o, u, path)
        self.objects(o, ro, u, ru, path)
        self.arrays(o, ro, u, ru, path)

    def annotations(self, o: dict[str, Any], u: dict[str, Any], path: str) -> None:
        for key, kind in (("$id", "ID_CHANGED"), ("title", "TITLE_CHANGED"),
                          ("description", "DESCRIPTION_CHANGED"), ("default", "DEFAULT_CHANGED")):  # fmt: skip
            if o.get(key) != u.get(key):
                self.add(kind, path)

    def combined(self, o: dict[str, Any], ro: Any, u: dict[str, Any], ru: Any, path: str) -> None:
        ko = next((k for k in COMBINERS if k in o), None)
        ku = next((k for k in COMBINERS if k in u), None)
        if ko is None:  # the update adds a combination
            assert ku is not None
            subs = [(s, ru) for s in u[ku]]
            whole = (self.hold(_without(o, ())), ro)
            if ku in SUMS:
                self.add("SUM_TYPE_EXTENDED" if any(self.fits(whole, s) for s in subs) else "TYPE_CHANGED", path)
            elif not all(self.fits(whole, s) for s in subs):
                self.add("PRODUCT_TYPE_EXTENDED", path)
            return
        osubs = [(s, ro) for s in o[ko]]
        if ku is None:  # the update drops the combination
            if _is_empty(_without(o, COMBINERS)):  # it was all there was: the update replaces it
                whole = (self.hold(dict(u)), ru)
                if ko in SUMS and not all(self.fits(s, whole) for s in osubs):
                    self.add("SUM_TYPE_NARROWED", path)
                elif ko == "allOf":
                    fits = any(self.fits(s, whole) for s in osubs)
                    self.add("PRODUCT_TYPE_NARROWED" if fits else "COMBINED_TYPE_CHANGED", path)
            return  # beside other keywords, dropping a combination only relaxes
        osubs = _distinct(osubs)
        usubs = _distinct([(s, ru) for s in u[ku]])
        if ko != ku:  # a single subschema reads the same under any criterion
            single = len(osubs) == 1 and (len(usubs) == 1 or ku in SUMS)
            if ko == "allOf" or ku == "anyOf" or single:
                self.add("COMBINED_TYPE_EXTENDED", path)
            else:
                self.add("COMBINED_TYPE_CHANGED", path)
                return
        product = (ko == "allOf" and len(osubs) > 1) or (ku == "allOf" and (ko == "allOf" or len(osubs) == 1))
        if not product:  # every original alternative is read by its own update alternative
            pairs = _match(osubs, usubs, self.fits)
            if len(usubs) < len(osubs):
                self.add("SUM_TYPE_NARROWED", path)
            elif pairs is None:
                self.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED", path)
            elif len(usubs) > len(osubs):
                self.add("SUM_TYPE_EXTENDED", path)
        else:  # every update conjunct reads what its own original conjunct wrote
            flipped = _match(usubs, osubs, lambda a, b: self.fits(b, a))
            pairs = None if flipped is None else [(b, a) for a, b in flipped]
            if len(usubs) > len(osubs):
                self.add("PRODUCT_TYPE_EXTENDED", path)
            elif pairs is None:
                self.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED", path)
            elif len(usubs) < len(osubs):
                self.add("PRODUCT_TYPE_NARROWED", path)
        for i, (a, b) in enumerate(pairs or []):
            self.node(a, b, f"{path}/{ku}/{i}")

    def negation(self, o: dict[str, Any], ro: Any, u: dict[str, Any], ru: Any, path: str) -> None:
        if "not" in o and "not" in u:  # the update reads more when its 'not' rules out less
            fits = self.fits((u["not"], ru), (o["not"], ro))
            self.add("NOT_TYPE_NARROWED" if fits else "NOT_TYPE_EXTENDED", f"{path}/not")
        elif "not" in u:
            self.add("TYPE_CHANGED", f"{path}/not")

    def types(self, o: dict[str, Any], u: dict[str, Any], path: str) -> None:
        ot, ut = _types(o), _types(u)
        if ut is None:
            if ot is not None:
                self.add("TYPE_EXTENDED", path)
            return
        if ot is None:
            self.add("TYPE_NARROWED", path)
            return
        covered = {t for t in ot if t in ut or (t == "integer" and "number" in ut)}
        if covered == ot:
            if ut - ot:
                self.add("TYPE_EXTENDED", path)
        else:  # number to integer keeps part of what was written
            partly = covered or ("number" in ot and "integer" in ut)
            self.add("TYPE_NARROWED" if partly else "TYPE_CHANGED", path)

    def limits(self, o: dict[str, Any], u: dict[str, Any], path: str) -> None:
        for key, name in LIMITS.items():
            a, b = o.get(key), u.get(key)
            if isinstance(a, bool) or isinstance(b, bool):  # draft 4's exclusiveMaximum: true/false
                a, b = (a is True) or None, (b is True) or None
                if a != b:
                    self.add(f"{name}_ADDED" if b else f"{name}_REMOVED", path)
                continue
            if a == b:
                continue
            if a is None:
                self.add(f"{name}_ADDED", path)
            elif b is None:
                self.add(f"{name}_REMOVED", path)
            else:
                self.add(f"{name}_INCREASED" if b > a else f"{name}_DECREASED", path)
        a, b = o.get("multipleOf"), u.get("multipleOf")
        if a != b:
            if a is None:
                self.add("MULTIPLE_OF_ADDED", path)
            elif b is None:
                self.add("MULTIPLE_OF_REMOVED", path)
            elif _divides(b, a):
                self.add("MULTIPLE_OF_REDUCED", path)
            elif _divides(a, b):
                self.add("MULTIPLE_OF_EXPANDED", path)
            else:
                self.add("MULTIPLE_OF_CHANGED", path)

    def values(self, o: dict[str, Any], u: dict[str, Any], path: str) -> None:
        a, b = o.get("pattern"), u.get("pattern")
        if a != b:
            self.add("PATTERN_ADDED" if a is None else "PATTERN_REMOVED" if b is None else "PATTERN_CHANGED", path)
        if bool(o.get("uniqueItems")) != bool(u.get("uniqueItems")):
            self.add("UNIQUE_ITEMS_ADDED" if u.get("uniqueItems") else "UNIQUE_ITEMS_REMOVED", path)
        oe, ue = _enum(o), _enum(u)
        if oe == ue:
            return
        if ue is None:
            self.add("ENUM_ARRAY_EXTENDED", path)
        elif oe is None:
            self.add("ENUM_ARRAY_NARROWED", path)
        elif oe < ue:
            self.add("ENUM_ARRAY_EXTENDED", path)
        elif ue < oe:
            self.add("ENUM_ARRAY_NARROWED", path)
        else:
            self.add("ENUM_ARRAY_CHANGED", path)

    def objects(self, o: dict[str, Any], ro: Any, u: dict[str, Any], ru: Any, path: str) -> None:
        for key, name in (("additionalProperties", "ADDITIONAL_PROPERTIES"),
                          ("unevaluatedProperties", "UNEVALUATED_PROPERTIES")):  # fmt: skip
            if key in o or key in u:
                self.additional(o.get(key, True), ro, u.get(key, True), ru, f"{path}/{key}", name)
        oprops, uprops = o.get("properties") or {}, u.get("properties") or {}
        oreq, ureq = set(o.get("required") or ()), set(u.get("required") or ())
        for name in list(oprops) + [n for n in uprops if n not in oprops]:
            at = f"{path}/properties/{name}"
            if name in oprops and name in uprops:
                self.node((oprops[name], ro), (uprops[name], ru), at)
                if name in ureq and name not in oreq:
                    self.add("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED" if _has_default(uprops[name])
                             else "REQUIRED_ATTRIBUTE_ADDED", at)  # fmt: skip
                elif name in oreq and name not in ureq:
                    self.add("REQUIRED_ATTRIBUTE_REMOVED", at)
            elif name in oprops:  # removed: does the update still read what the original wrote there?
                model, cover = _model(u, name)
                if model == "open":
                    self.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", at)
                elif model == "partial":
                    covered = self.fits((oprops[name], ro), (cover, ru))
                    self.add(f"PROPERTY_REMOVED_{'IS' if covered else 'NOT'}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", at)
                elif oprops[name] is False:
                    self.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", at)
                else:
                    self.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", at)
            else:  # added: could the original have written something else under that name?
                model, cover = _model(o, name)
                if model == "open":
                    if _is_empty(self.deref((uprops[name], ru))[0]):
                        self.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", at)
                    elif name in ureq:
                        self.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL"
                                 if _has_default(uprops[name]) else "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", at)  # fmt: skip
                    else:
                        self.add("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", at)
                elif name in ureq:
                    self.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL"
                             if _has_default(uprops[name]) else "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", at)  # fmt: skip
                elif model == "partial":
                    covered = self.fits((cover, ro), (uprops[name], ru))
                    self.add(f"PROPERTY_ADDED_{'IS' if covered else 'NOT'}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", at)
                else:
                    self.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", at)
        opat, upat = o.get("patternProperties") or {}, u.get("patternProperties") or {}
        for pattern in opat:
            if pattern in upat:
                self.node((opat[pattern], ro), (upat[pattern], ru), f"{path}/patternProperties/{pattern}")
        if "propertyNames" in o or "propertyNames" in u:
            self.node((o.get("propertyNames", True), ro), (u.get("propertyNames", True), ru), f"{path}/propertyNames")
        self.dependencies(o, ro, u, ru, path)

    def dependencies(self, o: dict[str, Any], ro: Any, u: dict[str, Any], ru: Any, path: str) -> None:
        def split(node: dict[str, Any]) -> tuple[dict[str, list[str]], dict[str, Any]]:
            arrays = dict(node.get("dependentRequired") or {})
            schemas = dict(node.get("dependentSchemas") or {})
            for name, dep in (node.get("dependencies") or {}).items():
                (arrays if isinstance(dep, list) else schemas)[name] = dep
            return arrays, schemas

        (oa, os_), (ua, us) = split(o), split(u)
        for name in sorted(set(oa) | set(ua)):
            at = f"{path}/dependencies/{name}"
            if name not in ua:
                self.add("DEPENDENCY_ARRAY_REMOVED", at)
            elif name not in oa:
                self.add("DEPENDENCY_ARRAY_ADDED", at)
            elif set(oa[name]) != set(ua[name]):
                a, b = set(oa[name]), set(ua[name])
                self.add("DEPENDENCY_ARRAY_EXTENDED" if a < b else "DEPENDENCY_ARRAY_NARROWED" if b < a
                         else "DEPENDENCY_ARRAY_CHANGED", at)  # fmt: skip
        for name in sorted(set(os_) | set(us)):
            at = f"{path}/dependencies/{name}"
            if name not in us:
                self.add("DEPENDENCY_SCHEMA_REMOVED", at)
            elif name not in os_:
                self.add("DEPENDENCY_SCHEMA_ADDED", at)
            else:
                self.node((os_[name], ro), (us[name], ru), at)

    def additional(self, a: Any, ra: Any, b: Any, rb: Any, path: str, name: str) -> None:
        """additionalProperties / additionalItems: true, false or a schema on each side."""
        a, b = (True if _is_empty(a) else a), (True if _is_empty(b) else b)
        if a is b or (a is False and b is False):
            return
        if a is False:
            self.add(f"{name}_ADDED", path)
        elif b is False:
            self.add(f"{name}_REMOVED", path)
        elif a is True:
            self.add(f"{name}_NARROWED", path)
        elif b is True:
            self.add(f"{name}_EXTENDED", path)
        else:
            self.node((a, ra), (b, rb), path)

    def arrays(self, o: dict[str, Any], ro: Any, u: dict[str, Any], ru: Any, path: str) -> None:
        (oprefix, orest), (uprefix, urest) = _items(o), _items(u)
        if oprefix is None and uprefix is None:
            if "additionalItems" in o or "additionalItems" in u:  # meaningless without a tuple; Confluent compares it
                self.additional(o.get("additionalItems", True), ro, u.get("additionalItems", True), ru,
                                f"{path}/additionalItems", "ADDITIONAL_ITEMS")  # fmt: skip
            if orest is not None and urest is not None:
                self.node((orest, ro), (urest, ru), f"{path}/items")
            elif urest is not None and not _is_empty(urest):
                self.add("SCHEMA_ADDED", f"{path}/items")
            elif orest is not None and urest is None:
                self.add("SCHEMA_REMOVED", f"{path}/items")
            return
        oprefix, uprefix = oprefix or [], uprefix or []
        orest = True if orest is None else orest
        urest = True if urest is None else urest
        uneval = "unevaluatedItems" in o or "unevaluatedItems" in u
        name = "UNEVALUATED_ITEMS" if uneval and "additionalItems" not in o and "additionalItems" not in u else "ADDITIONAL_ITEMS"
        self.additional(orest, ro, urest, ru, f"{path}/{'unevaluatedItems' if name[0] == 'U' else 'additionalItems'}", name)
        for i in range(max(len(oprefix), len(uprefix))):
            at = f"{path}/items/{i}"
            if i < len(oprefix) and i < len(uprefix):
                self.node((oprefix[i], ro), (uprefix[i], ru), at)
            elif i < len(oprefix):
                model = _rest_model(urest)
                if model == "open":
                    self.add("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL", at)
                elif model == "partial":
                    covered = self.fits((oprefix[i], ro), (urest, ru))
                    self.add(f"ITEM_REMOVED_{'IS' if covered else 'NOT'}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", at)
                else:
                    self.add("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL" if oprefix[i] is False
                             else "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL", at)  # fmt: skip
            else:
                model = _rest_model(orest)
                if model == "open":
                    self.add("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL" if _is_empty(uprefix[i])
                             else "ITEM_ADDED_TO_OPEN_CONTENT_MODEL", at)  # fmt: skip
                elif model == "partial":
                    covered = self.fits((orest, ro), (uprefix[i], ru))
                    self.add(f"ITEM_ADDED_{'IS' if covered else 'NOT'}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", at)
                else:
                    self.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL", at)


def compare(original: Any, original_resolver: Resolver[Any],
            update: Any, update_resolver: Resolver[Any]) -> list[Difference]:  # fmt: skip
    """Every difference from ``original`` (the writer's schema) to ``update`` (the reader's)."""
    walk = _Walk()
    try:
        walk.node((original, original_resolver), (update, update_resolver), "#")
    except RecursionError:  # $refs can chain deeper than the documents nest
        raise errors.invalid_schema("the schemas nest too deeply (through $ref) to be compared") from None
    return walk.found


# -- helpers over schema nodes -------------------------------------------------------


def _is_false(node: Any) -> bool:
    return node is False or (isinstance(node, dict) and _is_empty(node.get("not", None)) and len(node) == 1)


def _is_empty(node: Any) -> bool:
    """Does ``node`` accept every instance (``true``, ``{}``, annotations only)?"""
    return node is True or (isinstance(node, dict) and all(k in ANNOTATIONS for k in node))


def _without(node: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in node.items() if k not in keys}


def _types(node: dict[str, Any]) -> set[str] | None:
    found = node.get("type")
    if found is None:
        return None
    return {found} if isinstance(found, str) else set(found)


def _enum(node: dict[str, Any]) -> frozenset[str] | None:
    if "const" in node:
        return frozenset([json.dumps(node["const"], sort_keys=True)])
    if "enum" in node:
        return frozenset(json.dumps(v, sort_keys=True) for v in node["enum"])
    return None


def _divides(small: Any, large: Any) -> bool:
    """Is ``large`` a whole multiple of ``small``?"""
    try:
        ratio = large / small
    except (TypeError, ZeroDivisionError):
        return False
    return abs(ratio - round(ratio)) < 1e-9


def _has_default(node: Any) -> bool:
    return isinstance(node, dict) and "default" in node


def _model(node: dict[str, Any], name: str) -> tuple[str, Any]:
    """``node``'s content model for the property ``name``: ("open"|"closed"|"partial", the schema
    that covers ``name`` when partial)."""
    for pattern, schema in (node.get("patternProperties") or {}).items():
        try:
            if re.search(pattern, name):
                return "partial", schema
        except re.error:
            continue
    extra = node.get("additionalProperties", node.get("unevaluatedProperties", True))
    if node.get("patternProperties"):
        return ("partial", extra) if extra is not False else ("partial", False)
    if _is_empty(extra):
        return "open", None
    return ("closed", None) if extra is False else ("partial", extra)


def _rest_model(rest: Any) -> str:
    return "open" if _is_empty(rest) else "closed" if rest is False else "partial"


def _items(node: dict[str, Any]) -> tuple[list[Any] | None, Any]:
    """(the tuple's item schemas or None, the schema of the items after them or None if unsaid)."""
    if "prefixItems" in node:  # 2020-12
        return list(node["prefixItems"]), node.get("items", node.get("unevaluatedItems"))
    items = node.get("items")
    if isinstance(items, list):
        return items, node.get("additionalItems", node.get("unevaluatedItems"))
    return None, items


def _distinct(nodes: list[Node]) -> list[Node]:
    """``nodes`` without repeats (a subschema listed twice in a combination counts once)."""
    seen: set[str] = set()
    found = []
    for node in nodes:
        key = json.dumps(node[0], sort_keys=True)
        if key not in seen:
            seen.add(key)
            found.append(node)
    return found


def _match(left: list[Node], right: list[Node], fits: Any) -> list[tuple[Node, Node]] | None:
    """A one-to-one pairing of every ``left`` node with a ``right`` node where ``fits(l, r)``
    (augmenting paths, Kuhn's algorithm), or None when there is none."""
    owner: dict[int, int] = {}

    def place(i: int, seen: set[int]) -> bool:
        for j in range(len(right)):
            if j not in seen and fits(left[i], right[j]):
                seen.add(j)
                if j not in owner or place(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    for i in range(len(left)):
        if not place(i, set()):
            return None
    return sorted(((left[i], right[j]) for j, i in owner.items()), key=lambda p: left.index(p[0]))
