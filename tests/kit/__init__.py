"""The suite's one shared kit: what tests of every package use to drive logstore.

============================  ==============================================================
``brokerkit``                 a broker process on 127.0.0.1 (``BrokerProcess``), topics, waits, the CLI
``wire``                      a minimal blocking Kafka wire client (kio-encoded requests)
``saslkit``                   raw SASL handshakes over TCP or TLS
``certs``                     test certificates (a CA, server and client certificates)
``txnkit``                    transactional producing by hand, one request at a time
``quotakit``                  AlterClientQuotas / DescribeClientQuotas by hand
``clusterkit``                brokers in one ZooKeeper cluster: metadata, replicas' bytes
``zookeeper_fixtures``        the ``zookeeper`` / ``zk_connect`` / ``cluster`` fixtures
``crashkit``, ``crash_child``  the crash trials' workload, child process and checks
``batchkit``                  hand-made record batches for the decoders' tests
``sparkkit``, ``stream_child``  the Spark data source's helpers and its kill -9 driver
``librdkafka_suite``          librdkafka's own test suite against a broker (a runner)
``java/``                     Java sources the tests compile (``JAVA``)
============================  ==============================================================

Scripts run by path (``crash_child.py``, ``stream_child.py``) import only logstore and
their neighbours here; the rest is imported as ``tests.kit.<name>``.
"""

from __future__ import annotations

import pathlib

KIT = pathlib.Path(__file__).resolve().parent
JAVA = KIT / "java"
