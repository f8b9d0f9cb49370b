"""The Kafka-protocol broker over a Store: ``logstore broker`` runs it."""

from logstore.broker.broker import Broker
from logstore.broker.config.broker_config import BrokerConfig

__all__ = ["Broker", "BrokerConfig"]
