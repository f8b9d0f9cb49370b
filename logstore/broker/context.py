"""What an API handler sees of the request it serves, and how it hands back an answer that waits.

:class:`RequestContext` is the handler's view: the broker's services, the
connection the request came on, and its header. :class:`Services` is what a
handler (and the group and transaction wiring it calls) may use of the
broker: the Broker (broker.py) satisfies it structurally. This module is a
leaf of the broker: it imports the services' own modules, never the server,
the dispatcher, the network or the APIs.

:class:`Deferred` is how a handler lets the requests behind its own go on
while it waits (Redpanda's two stages, "dispatched" and "produced"). A
handler does, in arrival order, everything that changes state (the append of
a Produce, the join of a JoinGroup, the session update of a Fetch), then
returns ``Deferred(coroutine)`` where it would otherwise await a wait
(replication to the ISR, a long poll, the rebalance). The connection then
starts the next request at once; the coroutine runs on as a task and
returns the response entity, which leaves the connection in request order
(docs/broker.md, "Pipelining"). A handler with nothing to wait for returns
its response as before and costs nothing more.
"""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from logstore.broker.cluster_member import ClusterLink, TopicController
from logstore.broker.config.broker_config import BrokerConfig
from logstore.broker.config.dynamic_config import DynamicBrokerConfig
from logstore.broker.config.legacy_topic_configs import LegacyTopicConfigs
from logstore.broker.groups.offsets_appender import OffsetsAppender
from logstore.broker.metadata_cache import MetadataCache
from logstore.broker.metrics.broker_metrics import BrokerMetrics
from logstore.broker.quotas.client_quotas import ClientQuotas
from logstore.broker.replication.fetch_session import FetchSessionCache
from logstore.broker.replication.replica_manager import ReplicaManager
from logstore.broker.transactions.producer_ids import ProducerIds
from logstore.broker.transactions.transaction_io import BrokerTransactionIO
from logstore.broker.transactions.txn_verification import TransactionVerifier
from logstore.coordinator.group.group_coordinator import GroupCoordinator
from logstore.coordinator.share.share_coordinator import ShareCoordinator
from logstore.coordinator.txn.transaction_coordinator import TransactionCoordinator
from logstore.protocol import RequestHeader
from logstore.security import KafkaPrincipal
from logstore.security.authorizer import Authorizer
from logstore.security.credentials import CredentialStore
from logstore.security.sasl import Connection as SaslConnection
from logstore.security.sasl import SaslSession


class Services(Protocol):
    """What the API handlers, and the group and transaction wiring they call, use of the broker.

    The coordinators and their writers (``coordinator``, ``share_coordinator``, ``offsets_appender``, ``transactions``,
    ``transaction_io``) are None until :meth:`Broker.start` builds them; ``controller`` and
    ``cluster_link`` change when a cluster broker joins; ``config`` when a dynamic config changes
    (:meth:`use_config`).
    """

    config: BrokerConfig
    node_id: int
    cluster_id: str
    data_dir: str
    metadata: MetadataCache
    replica_manager: ReplicaManager
    controller: TopicController
    cluster_link: ClusterLink | None
    dynamic_config: DynamicBrokerConfig
    legacy_topic_configs: LegacyTopicConfigs
    authorizer: Authorizer | None
    quotas: ClientQuotas
    metrics: BrokerMetrics
    producer_ids: ProducerIds
    fetch_sessions: FetchSessionCache
    coordinator: GroupCoordinator | None
    share_coordinator: ShareCoordinator | None
    offsets_appender: OffsetsAppender | None
    transactions: TransactionCoordinator | None
    transaction_io: BrokerTransactionIO | None
    txn_verifier: TransactionVerifier

    def use_config(self, new: BrokerConfig, controller: TopicController | None = None) -> None:
        """Make ``new`` the broker's config (a dynamic config changed)."""
        ...

    def credential_store(self) -> CredentialStore: ...

    def advertised_for(self, listener: str) -> tuple[str, int]:
        """This broker's host and port as clients of ``listener`` must use them."""
        ...


class Peer(SaslConnection, Protocol):
    """What a handler uses of the connection its request came on (SASL's view of it, and more)."""

    @property
    def client_host(self) -> str: ...

    @property
    def sasl(self) -> SaslSession | None: ...

    @property
    def closed(self) -> bool: ...


@dataclass(slots=True)
class RequestContext:
    """What a handler knows about the request it serves (``broker``: the :class:`Services`)."""

    broker: Services
    connection: Peer
    header: RequestHeader

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def principal(self) -> KafkaPrincipal:
        """Who sent the request: ``User:ANONYMOUS`` until TLS or SASL authenticates the connection."""
        return self.connection.principal

    @property
    def client_host(self) -> str:
        return self.connection.client_host

    @property
    def authorizer(self) -> Authorizer | None:
        """The broker's ACLs (None: every check allows); security/operations.py reads it."""
        return self.broker.authorizer


class Deferred:
    """A handler's answer still to come: ``waiting`` returns the response entity (or None).

    Invariant: whatever the request changes has been changed when the handler
    returns this; ``waiting`` only waits and then reads, so the requests the
    connection serves meanwhile see the same state as if it had been awaited.
    """

    __slots__ = ("waiting",)

    def __init__(self, waiting: Coroutine[Any, Any, Any]) -> None:
        self.waiting = waiting
