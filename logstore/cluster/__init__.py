"""The cluster: brokers joined through ZooKeeper, the controller, replication (issue 12).

- :mod:`~logstore.cluster.assignment`: replica assignment (Kafka's AdminUtils), rack-aware.
- :mod:`~logstore.cluster.zookeeper`: a ZooKeeper server process (Debian's package) for
  ``logstore cluster up`` and the tests.
- :mod:`~logstore.cluster.zk`: Kafka's znodes, read and written with kazoo.
"""
