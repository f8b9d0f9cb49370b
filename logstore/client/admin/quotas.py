"""The admin client's client quotas: describe and alter (DescribeClientQuotas, AlterClientQuotas;
Java's ``describeClientQuotas`` / ``alterClientQuotas``, not in confluent-kafka).

An entity is named by (entity type, name) pairs: ``user``, ``client-id`` or ``ip``, a name or
None for the ``<default>`` entity. Both requests go to any broker (a dropped connection is
retried once). ``describe_client_quotas`` has one future, failed with the answer's error
code and message; ``alter_client_quotas`` one per alteration, failed with that entry's
(INVALID_REQUEST and its message for a bad key, value or entity).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future

from logstore.client.admin.client import AdminBase, kafka_error, new_future
from logstore.client.errors import KafkaException

DESCRIBE_CLIENT_QUOTAS = 48
ALTER_CLIENT_QUOTAS = 49


class QuotasAdmin(AdminBase):
    """The calls on client quotas (see the module docstring)."""

    def describe_client_quotas(
        self,
        components: Sequence[tuple[str, str | None]] = (),
        *,
        strict: bool = False,
        request_timeout: float | None = None,
    ) -> Future[dict[tuple[tuple[str, str | None], ...], dict[str, float]]]:
        """Quotas of the entities matching a filter (DescribeClientQuotas; Java's describeClientQuotas).

        ``components``: (entity type, match) pairs, entity type ``user``, ``client-id`` or ``ip``;
        match a name (EXACT), None (the ``<default>`` entity: DEFAULT) or ``"*"`` (any entity of
        that type: SPECIFIED). ``strict``: only entities with no other type. The result maps
        each entity, a sorted tuple of (type, name or None for the default), to its quotas.
        """
        fields = {
            "components": [
                {"entity_type": t, "match_type": 2 if m == "*" else 1 if m is None else 0,
                 "match": None if m is None or m == "*" else m}
                for t, m in components
            ],
            "strict": bool(strict),
        }  # fmt: skip
        deadline = self._deadline(request_timeout)
        future = new_future()

        def work() -> None:
            response = self._call(DESCRIBE_CLIENT_QUOTAS, fields, deadline)
            future.set_result({
                tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
                    {v.key: float(v.value) for v in entry.values}
                for entry in response.entries
            })  # fmt: skip

        self._submit([future], work, deadline)
        return future

    def alter_client_quotas(
        self,
        alterations: Sequence[tuple[Mapping[str, str | None], Mapping[str, float | None]]],
        *,
        validate_only: bool = False,
        request_timeout: float | None = None,
    ) -> list[Future[None]]:
        """Set (a value) or remove (None) quotas of entities (AlterClientQuotas; Java's alterClientQuotas).

        Each alteration: ({entity type: name or None for ``<default>``}, {quota key: value or
        None}). One future per alteration, failed with the broker's error (INVALID_REQUEST
        and its message for a bad key, value or entity)."""
        entries = [
            {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
             "ops": [{"key": k, "value": 0.0 if v is None else float(v), "remove": v is None} for k, v in ops.items()]}
            for entity, ops in alterations
        ]  # fmt: skip
        fields = {"entries": entries, "validate_only": bool(validate_only)}
        deadline = self._deadline(request_timeout)
        futures = [new_future() for _ in entries]

        def work() -> None:
            response = self._call(ALTER_CLIENT_QUOTAS, fields, deadline)
            for future, entry in zip(futures, response.entries, strict=True):
                if entry.error_code:
                    future.set_exception(KafkaException(kafka_error(entry.error_code, entry.error_message)))
                else:
                    future.set_result(None)

        self._submit(futures, work, deadline)
        return futures
