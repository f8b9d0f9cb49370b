"""``logstore schemas``: a Schema Registry from the command line (logstore's, or any with Confluent's API).

Every command talks HTTP to ``--url`` (default ``http://127.0.0.1:8081``: the registry ``make
run`` starts) with ``--user``/``--password`` for basic auth and ``--ca-file`` for an https
registry's CA; ``--json`` prints the registry's JSON answer as it came (one line), else a
human form. A refusal of the registry (Confluent's ``{"error_code", "message"}``) is printed as
``Error: <message> (error <code>)`` with what to do, exit 1; ``check`` exits 1 when the schema
is not compatible, so scripts can test it.

Requests go through :mod:`urllib.request` (no client library: the CLI is the top layer and this
is a thin shell over the REST API: docs/schemas.md lists the routes).
"""

from __future__ import annotations

import base64
import json
import pathlib
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import click

from logstore.cli._options import with_options

CT = "application/vnd.schemaregistry.v1+json"
TYPES = ("AVRO", "JSON", "PROTOBUF")
LEVELS = ("BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE", "NONE")
MODES = ("READWRITE", "READONLY", "IMPORT")
_HINTS = {
    40401: "`logstore schemas list` shows the subjects",
    40402: "`logstore schemas list SUBJECT` shows its versions",
    40403: "check the id or the schema text",
    409: "the subject's compatibility level refuses it: `logstore schemas check` says why",
    42201: "fix the schema (its parser's reason is above)",
    42205: "the registry or subject is READONLY: `logstore schemas config --mode READWRITE`",
    401: "give --user and --password of a broker user",
}


class Registry:
    """A Confluent Schema Registry at ``url``: ``call`` -> the parsed JSON answer, or a click error."""

    def __init__(self, url: str, user: str | None, password: str | None, ca_file: str | None, timeout: float) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.headers = {"Accept": CT, "Content-Type": CT}
        if user is not None or password is not None:
            token = base64.b64encode(f"{user or ''}:{password or ''}".encode()).decode()
            self.headers["Authorization"] = f"Basic {token}"
        self.context = ssl.create_default_context(cafile=ca_file) if ca_file else None

    def call(self, method: str, path: str, body: Any = None, **query: Any) -> Any:
        params = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in query.items() if v not in (None, False)}
        url = self.url + path + (f"?{urllib.parse.urlencode(params)}" if params else "")
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, headers=self.headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self.context) as reply:
                return json.loads(reply.read() or b"null")
        except urllib.error.HTTPError as e:
            raise click.ClickException(_refusal(e)) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise click.ClickException(
                f"cannot reach the schema registry at {self.url}: {reason}; start a broker with "
                "--override schema.registry.listeners=http://127.0.0.1:8081 (make run does), or give --url"
            ) from None


def _refusal(error: urllib.error.HTTPError) -> str:
    text = error.read().decode(errors="replace")
    try:
        answer = json.loads(text)
        code, message = int(answer["error_code"]), str(answer["message"])
    except (ValueError, KeyError, TypeError):
        return f"the registry answered HTTP {error.code}: {text[:300] or error.reason}"
    hint = _HINTS.get(code)
    return f"{message} (error {code}){'; ' + hint if hint else ''}"


def _path(*parts: str | int) -> str:
    return "".join("/" + urllib.parse.quote(str(part), safe="") for part in parts)


_registry_options = with_options(
    click.option(
        "--url", default="http://127.0.0.1:8081", show_default=True, envvar="LOGSTORE_SCHEMA_REGISTRY_URL",
        help="The registry's base URL (env LOGSTORE_SCHEMA_REGISTRY_URL).",
    ),
    click.option("--user", default=None, help="Basic auth user (a broker SASL user)."),
    click.option("--password", default=None, help="Basic auth password."),
    click.option("--ca-file", default=None, type=click.Path(exists=True, dir_okay=False),
                 help="CA certificates (PEM) of an https registry."),
    click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=15, show_default=True,
                 help="Seconds to wait for each answer."),
    click.option("--json", "as_json", is_flag=True, help="Print the registry's JSON answer."),
)  # fmt: skip


def _connect(url: str, user: str | None, password: str | None, ca_file: str | None, timeout: float) -> Registry:
    return Registry(url, user, password, ca_file, timeout)


def _emit(as_json: bool, answer: Any, text: str) -> None:
    click.echo(json.dumps(answer) if as_json else text)


def _schema_text(schema: str | None, file: str | None) -> str:
    if (schema is None) == (file is None):
        raise click.UsageError("give the schema as --schema TEXT or --file PATH (one of them)")
    if file is not None:
        return pathlib.Path(file).read_text()
    assert schema is not None
    return schema


def _references(items: tuple[str, ...]) -> list[dict[str, Any]]:
    found = []
    for item in items:
        name, sep, target = item.partition("=")
        subject, colon, version = target.rpartition(":")
        if not sep or not colon or not name or not subject or not version.lstrip("-").isdigit():
            raise click.BadParameter(f"takes NAME=SUBJECT:VERSION (e.g. common.proto=common-value:1), got {item!r}",
                                     param_hint="--reference")  # fmt: skip
        found.append({"name": name, "subject": subject, "version": int(version)})
    return found


_schema_options = with_options(
    click.option("--schema", default=None, metavar="TEXT", help="The schema text."),
    click.option("--file", default=None, type=click.Path(exists=True, dir_okay=False), help="A file holding the schema."),
    click.option("--type", "schema_type", type=click.Choice(TYPES, case_sensitive=False), default="AVRO",
                 show_default=True, help="The schema's type."),
    click.option("--reference", "references", multiple=True, metavar="NAME=SUBJECT:VERSION",
                 help="A schema it references (repeatable)."),
)  # fmt: skip


def _body(schema: str | None, file: str | None, schema_type: str, references: tuple[str, ...]) -> dict[str, Any]:
    body: dict[str, Any] = {"schema": _schema_text(schema, file)}
    if schema_type.upper() != "AVRO":
        body["schemaType"] = schema_type.upper()
    if references:
        body["references"] = _references(references)
    return body


@click.group()
def schemas() -> None:
    """A Schema Registry (Confluent's API: logstore's broker with schema.registry.listeners).

    \b
    logstore schemas list                                  subjects
    logstore schemas list orders-value                     its versions
    logstore schemas get orders-value [--version 2]        a version (default: latest)
    logstore schemas get --id 7                            a schema by global id
    logstore schemas register orders-value --file user.avsc
    logstore schemas register orders-value --type PROTOBUF --file order.proto \\
        --reference common.proto=common-value:1
    logstore schemas check orders-value --file user-v2.avsc    exit 1 if incompatible
    logstore schemas delete orders-value [--version 2] [--permanent]
    logstore schemas config [orders-value] [--set FULL] [--mode READONLY] [--delete]

    Every command takes --url (default http://127.0.0.1:8081), --user/--password (basic auth),
    --ca-file (https) and --json (the registry's JSON answer).
    """


@schemas.command("list")
@click.argument("subject", required=False)
@click.option("--prefix", default=None, help="Only subjects starting with this.")
@click.option("--deleted", is_flag=True, help="Soft-deleted subjects or versions too.")
@_registry_options
def list_(subject: str | None, prefix: str | None, deleted: bool, url: str, user: str | None,
          password: str | None, ca_file: str | None, timeout: float, as_json: bool) -> None:  # fmt: skip
    """The subjects, or with SUBJECT its versions."""
    registry = _connect(url, user, password, ca_file, timeout)
    if subject is None:
        answer = registry.call("GET", "/subjects", deleted=deleted, subjectPrefix=prefix)
    else:
        answer = registry.call("GET", _path("subjects", subject, "versions"), deleted=deleted)
    _emit(as_json, answer, "\n".join(str(item) for item in answer))


def _describe(answer: dict[str, Any]) -> str:
    head = [f"{key}: {answer[key]}" for key in ("subject", "version", "id") if key in answer]
    head.append(f"type: {answer.get('schemaType', 'AVRO')}")
    for ref in answer.get("references") or []:
        head.append(f"reference: {ref.get('name')} = {ref.get('subject')}:{ref.get('version')}")
    return "\n".join([*head, answer.get("schema", "")])


@schemas.command("get")
@click.argument("subject", required=False)
@click.option("--version", default="latest", show_default=True, help="The version: a number, or latest.")
@click.option("--id", "schema_id", type=int, default=None, help="A schema by its global id instead of a subject.")
@click.option("--deleted", is_flag=True, help="A soft-deleted version too.")
@_registry_options
def get(subject: str | None, version: str, schema_id: int | None, deleted: bool, url: str, user: str | None,
        password: str | None, ca_file: str | None, timeout: float, as_json: bool) -> None:  # fmt: skip
    """A subject's version (its id, type, references and schema), or a schema by --id."""
    if (subject is None) == (schema_id is None):
        raise click.UsageError("give a SUBJECT or --id N (one of them)")
    registry = _connect(url, user, password, ca_file, timeout)
    if schema_id is not None:
        answer = registry.call("GET", _path("schemas", "ids", schema_id))
        used = registry.call("GET", _path("schemas", "ids", schema_id, "versions"))
        shown = {"id": schema_id, **answer}
        text = _describe(shown)
        if used:
            text = "used by: " + ", ".join(f"{u['subject']}:{u['version']}" for u in used) + "\n" + text
        _emit(as_json, shown, text)
        return
    assert subject is not None
    answer = registry.call("GET", _path("subjects", subject, "versions", version), deleted=deleted)
    _emit(as_json, answer, _describe(answer))


@schemas.command("register")
@click.argument("subject")
@_schema_options
@click.option("--normalize", is_flag=True, help="Register the schema's normal form (?normalize=true).")
@_registry_options
def register(subject: str, schema: str | None, file: str | None, schema_type: str, references: tuple[str, ...],
             normalize: bool, url: str, user: str | None, password: str | None, ca_file: str | None,
             timeout: float, as_json: bool) -> None:  # fmt: skip
    """Register a schema under SUBJECT (if it is new there and passes the subject's compatibility
    level); prints its global id."""
    registry = _connect(url, user, password, ca_file, timeout)
    answer = registry.call("POST", _path("subjects", subject, "versions"),
                           _body(schema, file, schema_type, references), normalize=normalize)  # fmt: skip
    _emit(as_json, answer, f"id {answer['id']}")


@schemas.command("check")
@click.argument("subject")
@_schema_options
@click.option("--version", default="latest", show_default=True,
              help="The version to check against: a number, latest, or all (what the level asks).")  # fmt: skip
@_registry_options
def check(subject: str, schema: str | None, file: str | None, schema_type: str, references: tuple[str, ...],
          version: str, url: str, user: str | None, password: str | None, ca_file: str | None, timeout: float,
          as_json: bool) -> None:  # fmt: skip
    """Whether a schema is compatible with SUBJECT's version(s) under its level; exit 1 if not."""
    registry = _connect(url, user, password, ca_file, timeout)
    parts: tuple[str, ...] = ("compatibility", "subjects", subject, "versions")
    if version != "all":
        parts = (*parts, version)
    answer = registry.call("POST", _path(*parts), _body(schema, file, schema_type, references), verbose=True)
    compatible = bool(answer.get("is_compatible"))
    text = "compatible" if compatible else "\n".join(["not compatible:", *(f"  {m}" for m in answer.get("messages", []))])
    _emit(as_json, answer, text)
    if not compatible:
        raise SystemExit(1)


@schemas.command("delete")
@click.argument("subject")
@click.option("--version", default=None, help="Only this version (a number, or latest); default: the whole subject.")
@click.option("--permanent", is_flag=True, help="Delete for good (only what is soft-deleted already).")
@_registry_options
def delete(subject: str, version: str | None, permanent: bool, url: str, user: str | None, password: str | None,
           ca_file: str | None, timeout: float, as_json: bool) -> None:  # fmt: skip
    """Delete a subject or one of its versions: soft first (ids still resolve), then --permanent."""
    registry = _connect(url, user, password, ca_file, timeout)
    parts: tuple[str, ...] = ("subjects", subject) if version is None else ("subjects", subject, "versions", version)
    answer = registry.call("DELETE", _path(*parts), permanent=permanent)
    deleted = answer if isinstance(answer, list) else [answer]
    kind = "permanently" if permanent else "soft"
    _emit(as_json, answer, f"{kind} deleted {subject} version(s) {', '.join(str(v) for v in deleted)}")


@schemas.command("config")
@click.argument("subject", required=False)
@click.option("--set", "level", type=click.Choice(LEVELS, case_sensitive=False), default=None,
              help="Set the compatibility level.")
@click.option("--mode", type=click.Choice(MODES, case_sensitive=False), default=None, help="Set the mode.")
@click.option("--delete", "remove", is_flag=True,
              help="Remove the subject's own level and mode (it follows the global ones again).")
@_registry_options
def config(subject: str | None, level: str | None, mode: str | None, remove: bool, url: str, user: str | None,
           password: str | None, ca_file: str | None, timeout: float, as_json: bool) -> None:  # fmt: skip
    """Show or set the compatibility level and mode, global or of SUBJECT."""
    if remove and (level or mode):
        raise click.UsageError("--delete removes the subject's settings; it takes no --set or --mode")
    if remove and subject is None:
        raise click.UsageError("--delete needs a SUBJECT (the global settings can only be set)")
    registry = _connect(url, user, password, ca_file, timeout)
    config_path = _path("config") if subject is None else _path("config", subject)
    mode_path = _path("mode") if subject is None else _path("mode", subject)
    if remove:
        answer = {"config": registry.call("DELETE", config_path)}
        try:
            answer["mode"] = registry.call("DELETE", mode_path)
        except click.ClickException as e:
            if "40409" not in e.message:  # no mode of its own: nothing to remove
                raise
        _emit(as_json, answer, f"{subject} follows the global level and mode again")
        return
    if level is not None:
        registry.call("PUT", config_path, {"compatibility": level.upper()})
    if mode is not None:
        registry.call("PUT", mode_path, {"mode": mode.upper()})
    shown = {
        "compatibilityLevel": registry.call("GET", config_path, defaultToGlobal=subject is not None)["compatibilityLevel"],
        "mode": registry.call("GET", mode_path, defaultToGlobal=subject is not None)["mode"],
    }
    where = "global" if subject is None else subject
    _emit(as_json, shown, f"{where}: compatibility {shown['compatibilityLevel']}, mode {shown['mode']}")
