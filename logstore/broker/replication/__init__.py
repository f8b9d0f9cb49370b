"""Replication on one broker: partitions, appends and acks, followers, the purgatory, fetch sessions."""
