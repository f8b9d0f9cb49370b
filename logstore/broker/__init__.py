"""The Kafka-protocol broker over a Store: ``logstore broker`` runs it."""

from logstore.broker.config import BrokerConfig
from logstore.broker.server import Broker

__all__ = ["Broker", "BrokerConfig"]
