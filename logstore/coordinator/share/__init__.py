"""Share groups (KIP-932, "queues for Kafka"), without sockets.

- :mod:`~logstore.coordinator.share.share_partition`: the delivery state of one
  topic-partition for one share group (acquire, acknowledge, release, lock
  expiry, the start offset, snapshots).
"""
