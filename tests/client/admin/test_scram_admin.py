"""AdminClient.describe_user_scram_credentials / alter_user_scram_credentials against a broker
process, cross-checked with confluent-kafka's AdminClient on the same broker. Every wait is bounded."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import confluent_kafka
import confluent_kafka.admin as ck
import pytest

from logstore.client.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from logstore.client.errors import KafkaException
from tests.kit.brokerkit import BrokerProcess

pytestmark = pytest.mark.integration

TIMEOUT = 30


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(str(tmp_path_factory.mktemp("scram-admin") / "data"), {}).start()
    yield b
    assert b.stop() == 0, b.log_text()[-3000:]


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[AdminClient]:
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    yield client
    client.close()


@pytest.fixture(scope="module")
def cadmin(broker: BrokerProcess) -> ck.AdminClient:
    return ck.AdminClient({"bootstrap.servers": broker.bootstrap})


def code_of(future: Future[Any]) -> int:
    try:
        future.result(TIMEOUT)
    except KafkaException as e:
        return int(e.args[0].code())
    except confluent_kafka.KafkaException as e:
        return int(e.args[0].code())
    return 0


def infos(description: Any) -> list[tuple[str, int]]:
    return sorted((i.mechanism.name, i.iterations) for i in description.scram_credential_infos)


def test_upsert_describe_delete_match_confluent(admin: AdminClient, cadmin: ck.AdminClient) -> None:
    ours, theirs = f"ours-{uuid.uuid4().hex[:6]}", f"theirs-{uuid.uuid4().hex[:6]}"
    done = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(ours, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw"),
        UserScramCredentialUpsertion(ours, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"pw", b"salt"),
    ])
    assert list(done) == [ours] and done[ours].result(TIMEOUT) is None
    cdone = cadmin.alter_user_scram_credentials([
        ck.UserScramCredentialUpsertion(theirs, ck.ScramCredentialInfo(ck.ScramMechanism.SCRAM_SHA_256, 4096), b"pw"),
    ])
    cdone[theirs].result(TIMEOUT)

    mine = admin.describe_user_scram_credentials().result(TIMEOUT)
    confluent = cadmin.describe_user_scram_credentials().result(TIMEOUT)  # type: ignore[union-attr]  # confluent: a future or a dict
    assert set(mine) == set(confluent) >= {ours, theirs}
    for user in (ours, theirs):
        assert infos(mine[user]) == infos(confluent[user])
    assert infos(mine[ours]) == [("SCRAM_SHA_256", 4096), ("SCRAM_SHA_512", 8192)]

    per_user = admin.describe_user_scram_credentials([theirs, "nobody-here"])
    cper_user = cadmin.describe_user_scram_credentials([theirs, "nobody-here"])
    assert infos(per_user[theirs].result(TIMEOUT)) == [("SCRAM_SHA_256", 4096)]
    assert code_of(per_user["nobody-here"]) == code_of(cper_user["nobody-here"]) != 0  # type: ignore[index]

    deleted = admin.alter_user_scram_credentials([UserScramCredentialDeletion(ours, ScramMechanism.SCRAM_SHA_256)])
    assert deleted[ours].result(TIMEOUT) is None
    assert infos(admin.describe_user_scram_credentials([ours])[ours].result(TIMEOUT)) == [("SCRAM_SHA_512", 8192)]


def test_refusals_match_confluent(admin: AdminClient, cadmin: ck.AdminClient) -> None:
    user = f"bad-{uuid.uuid4().hex[:6]}"
    few = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), b"pw")]
    )
    cfew = cadmin.alter_user_scram_credentials(
        [ck.UserScramCredentialUpsertion(user, ck.ScramCredentialInfo(ck.ScramMechanism.SCRAM_SHA_256, 100), b"pw")]
    )
    assert code_of(few[user]) == code_of(cfew[user]) != 0
    missing = admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)])
    cmissing = cadmin.alter_user_scram_credentials([ck.UserScramCredentialDeletion(user, ck.ScramMechanism.SCRAM_SHA_512)])
    assert code_of(missing[user]) == code_of(cmissing[user]) != 0
    with pytest.raises(ValueError):
        admin.alter_user_scram_credentials([])
    with pytest.raises(TypeError):
        admin.alter_user_scram_credentials(["not an alteration"])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        admin.describe_user_scram_credentials("alice")
