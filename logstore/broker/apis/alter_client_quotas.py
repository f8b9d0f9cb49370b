"""AlterClientQuotas (key 49, v0-v1): set or remove quotas of user, client-id and ip entities.

An entry names an entity (``user`` and/or ``client-id``, or ``ip``; a null name is the
``<default>`` entity) and ops (key, value, remove). Each entry is checked on its own, Kafka's
way (INVALID_REQUEST with a message): an unknown entity type, a duplicate type, an empty
user or IP name, an IP combined with another type, an unknown key for the entity (user and
client-id take producer_byte_rate, consumer_byte_rate, request_percentage,
controller_mutation_rate; ip takes connection_creation_rate), the same key twice, a byte
rate that is not a whole number, a value that is not > 0. ``validate_only``: checked and
answered, nothing changed. Valid entries are applied together and kept (a file in the data
directory alone, ZooKeeper's ``/config/users``, ``/config/clients``, ``/config/ips`` in a
cluster); they apply to the next request.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.broker.quotas.client_quotas import Entity, check_entity, check_op
from logstore.protocol import NO_THROTTLE, build, codec


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(49, ctx.version).response_module
    results: list[tuple[Any, ErrorCode, str | None]] = []
    changes: dict[Entity, dict[str, float | None]] = {}
    for entry in request.entries:
        error, message = ErrorCode.none, None
        entity, why = check_entity((e.entity_type, e.entity_name) for e in entry.entity)
        ops: dict[str, float | None] = {}
        if entity is not None:
            for op in entry.ops:
                why = check_op(entity, op.key, float(op.value), bool(op.remove))
                if why is None and op.key in ops:
                    why = f"Duplicate quota key {op.key}"
                if why is not None:
                    break
                ops[op.key] = None if op.remove else float(op.value)
        if why is not None or entity is None:
            error, message = ErrorCode.invalid_request, why
        elif entity in changes:
            error, message = ErrorCode.invalid_request, "Entity appears more than once in the request"
        else:
            changes[entity] = ops
        results.append((entry.entity, error, message))
    if changes and not request.validate_only:
        try:
            quotas = ctx.broker.quotas
            after, touched = quotas.plan(changes)
            await asyncio.get_running_loop().run_in_executor(None, quotas.store.save, touched)
            quotas.set_configs(after)
        except Exception as e:  # the store failed (ZooKeeper down, disk): every valid entry says so
            failed = f"the quotas could not be saved: {e}"
            results = [
                (entity, ErrorCode.unknown_server_error if error == ErrorCode.none else error,
                 failed if error == ErrorCode.none else message)
                for entity, error, message in results
            ]  # fmt: skip
    entries = tuple(
        build(
            module.EntryData,
            error_code=error,
            error_message=message,
            entity=tuple(
                build(module.EntityData, entity_type=e.entity_type, entity_name=e.entity_name) for e in entity
            ),
        )
        for entity, error, message in results
    )
    return build(module.AlterClientQuotasResponse, throttle_time=NO_THROTTLE, entries=entries)


API = Api(49, "AlterClientQuotas", 0, 1, handle)
