"""Share groups (KIP-932, "queues for Kafka"), without sockets.

- :mod:`~logstore.coordinator.share.share_partition`: the delivery state of one
  topic-partition for one share group (acquire, acknowledge, release, lock
  expiry, the start offset, snapshots);
- :mod:`~logstore.coordinator.share.share_assignor`: which members fetch from
  which partitions (every partition covered, every member busy, even, sticky).
"""
