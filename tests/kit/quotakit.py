"""Client quotas over the wire: AlterClientQuotas / DescribeClientQuotas by hand (kio requests on a
:class:`~tests.kit.wire.WireClient`), for the quota tests of one broker and of a cluster."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from logstore.protocol import from_dict
from tests.kit.wire import WireClient, request_class


def alter(
    bootstrap: str, entries: list[dict[str, Any]], validate_only: bool = False, version: int = 1
) -> Any:
    request = from_dict(request_class(49, version), {"entries": entries, "validate_only": validate_only})
    with WireClient(bootstrap) as client:
        return client.call(request)


def describe(bootstrap: str, components: list[dict[str, Any]], strict: bool = False, version: int = 1) -> Any:
    request = from_dict(request_class(48, version), {"components": components, "strict": strict})
    with WireClient(bootstrap) as client:
        return client.call(request)


def entity(**names: str | None) -> list[dict[str, Any]]:
    return [{"entity_type": k.replace("_", "-"), "entity_name": v} for k, v in names.items()]


def op(key: str, value: float = 0.0, remove: bool = False) -> dict[str, Any]:
    return {"key": key, "value": value, "remove": remove}


def described(response: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    assert response.error_code == ErrorCode.none, response.error_message
    return {
        tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)): {
            v.key: v.value for v in entry.values
        }
        for entry in response.entries
    }


def set_quota(bootstrap: str, names: dict[str, str | None], **quotas: float) -> None:
    response = alter(bootstrap, [{"entity": entity(**names), "ops": [op(k, v) for k, v in quotas.items()]}])
    assert [e.error_code for e in response.entries] == [ErrorCode.none], response
