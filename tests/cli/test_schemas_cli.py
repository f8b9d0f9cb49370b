"""``logstore schemas`` as subprocesses against a broker's schema registry: register, list, get by
subject and id, check (exit 1 when incompatible), config and mode, soft and permanent deletes,
``--json``, and the errors (an unknown subject, no registry at the URL)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.kit.brokerkit import free_port
from tests.schemas.test_http import start_registry

pytestmark = pytest.mark.integration

V1 = json.dumps({"type": "record", "name": "User", "namespace": "shop", "fields": [{"name": "name", "type": "string"}]})
V2 = json.dumps({"type": "record", "name": "User", "namespace": "shop",
                 "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": 0}]})  # fmt: skip
BREAKING = json.dumps({"type": "record", "name": "User", "namespace": "shop", "fields": [{"name": "name", "type": "long"}]})


def schemas(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "logstore", "schemas", *args, "--url", url],
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_register_list_get_check_config_delete(broker_factory: Any, tmp_path: Any) -> None:
    _broker, rest = start_registry(broker_factory)
    url = f"http://127.0.0.1:{rest.port}"
    assert ok(schemas(url, "list")).strip() == ""
    avsc = tmp_path / "user.avsc"
    avsc.write_text(V1)
    assert ok(schemas(url, "register", "users-value", "--file", str(avsc))).strip() == "id 1"
    assert json.loads(ok(schemas(url, "register", "users-value", "--schema", V2, "--json"))) == {"id": 2}
    assert ok(schemas(url, "list")).split() == ["users-value"]
    assert ok(schemas(url, "list", "users-value")).split() == ["1", "2"]
    latest = json.loads(ok(schemas(url, "get", "users-value", "--json")))
    assert latest == {"subject": "users-value", "version": 2, "id": 2, "schema": V2}
    shown = ok(schemas(url, "get", "users-value", "--version", "1"))
    assert "version: 1" in shown and "id: 1" in shown and V1 in shown
    by_id = ok(schemas(url, "get", "--id", "2"))
    assert "used by: users-value:2" in by_id and V2 in by_id
    # check: compatible (exit 0), incompatible (exit 1, the reasons printed)
    assert ok(schemas(url, "check", "users-value", "--schema", V2)).strip() == "compatible"
    refused = schemas(url, "check", "users-value", "--schema", BREAKING)
    assert refused.returncode == 1 and refused.stdout.startswith("not compatible:") and len(refused.stdout.splitlines()) > 1
    answer = schemas(url, "check", "users-value", "--schema", BREAKING, "--version", "all", "--json")
    assert answer.returncode == 1 and json.loads(answer.stdout)["is_compatible"] is False
    # register refuses the incompatible one with Confluent's 409 and says what to do
    failed = schemas(url, "register", "users-value", "--schema", BREAKING)
    assert failed.returncode == 1 and "(error 409)" in failed.stderr and "logstore schemas check" in failed.stderr
    # config and mode, global and per subject
    assert ok(schemas(url, "config")).strip() == "global: compatibility BACKWARD, mode READWRITE"
    assert ok(schemas(url, "config", "users-value", "--set", "none")).strip() == (
        "users-value: compatibility NONE, mode READWRITE"
    )
    assert ok(schemas(url, "register", "users-value", "--schema", BREAKING)).strip() == "id 3"  # NONE lets it in
    assert json.loads(ok(schemas(url, "config", "users-value", "--mode", "READONLY", "--json"))) == {
        "compatibilityLevel": "NONE", "mode": "READONLY",
    }  # fmt: skip
    readonly = schemas(url, "register", "users-value", "--schema", V1 + " ")
    assert readonly.returncode == 1 and "42205" in readonly.stderr
    ok(schemas(url, "config", "users-value", "--delete"))
    assert ok(schemas(url, "config", "users-value")).strip() == "users-value: compatibility BACKWARD, mode READWRITE"
    # deletes: a version, then the subject soft, then permanently
    assert "soft deleted users-value version(s) 3" in ok(schemas(url, "delete", "users-value", "--version", "3"))
    assert ok(schemas(url, "list", "users-value")).split() == ["1", "2"]
    assert ok(schemas(url, "list", "users-value", "--deleted")).split() == ["1", "2", "3"]
    assert json.loads(ok(schemas(url, "delete", "users-value", "--json"))) == [1, 2]
    assert ok(schemas(url, "list")).strip() == ""
    permanent = ok(schemas(url, "delete", "users-value", "--permanent"))
    assert permanent.startswith("permanently deleted users-value")
    missing = schemas(url, "get", "users-value")
    assert missing.returncode == 1 and "(error 40401)" in missing.stderr and "logstore schemas list" in missing.stderr


def test_usage_errors_and_no_registry() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    nothing = schemas(url, "list")
    assert nothing.returncode == 1 and "cannot reach the schema registry" in nothing.stderr
    assert "schema.registry.listeners" in nothing.stderr
    both = schemas(url, "register", "s", "--schema", V1, "--file", __file__)
    assert both.returncode == 2 and "--schema TEXT or --file PATH" in both.stderr
    neither = schemas(url, "get")
    assert neither.returncode == 2 and "SUBJECT or --id" in neither.stderr
    bad_ref = schemas(url, "register", "s", "--schema", V1, "--reference", "nope")
    assert bad_ref.returncode == 2 and "NAME=SUBJECT:VERSION" in bad_ref.stderr
    for command in ("list", "get", "register", "check", "delete", "config"):
        helped = subprocess.run([sys.executable, "-m", "logstore", "schemas", command, "--help"],
                                capture_output=True, text=True, timeout=60)  # fmt: skip
        assert helped.returncode == 0 and "--url" in helped.stdout and "--json" in helped.stdout
