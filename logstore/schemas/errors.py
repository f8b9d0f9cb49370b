"""The Schema Registry's errors: Confluent's HTTP statuses, error codes and messages, in one table.

Clients (confluent-kafka's ``SchemaRegistryClient``, the Java client) act on
the ``error_code`` of the JSON body ``{"error_code": 40401, "message": ...}``,
so the codes are Confluent's own.
"""

from __future__ import annotations

from logstore.errors import LogstoreError


class RegistryError(LogstoreError):
    """A registry request refused: ``status`` (HTTP), ``code`` (Confluent's), ``message``."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict[str, object]:
        """The JSON body Confluent's clients parse."""
        return {"error_code": self.code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(subject: str, version: int | str) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found for subject '{subject}'.")


def schema_not_found(schema_id: int | None = None) -> RegistryError:
    return RegistryError(404, 40403, "Schema not found" if schema_id is None else f"Schema {schema_id} not found")


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        404, 40404, f"Subject '{subject}' was soft deleted. Set permanent=true to delete permanently"
    )


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted"
    )


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        404, 40406,
        f"Subject '{subject}' Version {version} was soft deleted. Set permanent=true to delete permanently",
    )  # fmt: skip


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        404, 40407,
        f"Subject '{subject}' Version {version} was not deleted first before being permanently deleted",
    )  # fmt: skip


def incompatible(subject: str, details: list[str]) -> RegistryError:
    return RegistryError(
        409, 409,
        f'Schema being registered is incompatible with an earlier schema for subject "{subject}", '
        f"details: [{', '.join(details)}]",
    )  # fmt: skip


def invalid_schema(why: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema: {why}")


def invalid_version(version: object) -> RegistryError:
    return RegistryError(
        422, 42202,
        f"The specified version '{version}' is not a valid version id. Allowed values are between "
        '[1, 2^31-1] and the string "latest"',
    )  # fmt: skip


def invalid_compatibility(level: object) -> RegistryError:
    return RegistryError(
        422, 42203,
        f"Invalid compatibility level {level!r}. Valid values are none, backward, forward, full, "
        "backward_transitive, forward_transitive, and full_transitive",
    )  # fmt: skip


def invalid_mode(mode: object) -> RegistryError:
    return RegistryError(422, 42204, f"Invalid mode {mode!r}. Valid values are READWRITE, READONLY and IMPORT")


def operation_not_permitted(why: str) -> RegistryError:
    return RegistryError(422, 42205, why)


def reference_exists(subject: str, version: int) -> RegistryError:
    return RegistryError(
        422, 42206, f"One or more references exist to the schema {{subject={subject}, version={version}}}."
    )


def subject_compatibility_not_configured(subject: str) -> RegistryError:
    return RegistryError(
        404, 40408,
        f"Subject '{subject}' does not have subject-level compatibility configured; "
        "ask with defaultToGlobal=true for the level that applies",
    )  # fmt: skip


def subject_mode_not_configured(subject: str) -> RegistryError:
    return RegistryError(
        404, 40409,
        f"Subject '{subject}' does not have subject-level mode configured; "
        "ask with defaultToGlobal=true for the mode that applies",
    )  # fmt: skip


def bad_request(why: str) -> RegistryError:
    """A body that is not JSON (Confluent answers Jackson's parse errors with 400)."""
    return RegistryError(400, 400, why)


def unprocessable(why: str) -> RegistryError:
    """JSON of the wrong shape (Confluent answers Jackson's mapping errors with 422)."""
    return RegistryError(422, 422, why)


def store_error(why: str) -> RegistryError:
    return RegistryError(500, 50001, f"Error in the backend data store: {why}")


def operation_timeout(why: str) -> RegistryError:
    return RegistryError(500, 50002, f"Operation timed out: {why}")


def forwarding_error(why: str) -> RegistryError:
    return RegistryError(500, 50003, f"Error while forwarding the request to the primary: {why}")


def unknown_leader(why: str) -> RegistryError:
    return RegistryError(500, 50004, f"Unknown primary: {why}")
