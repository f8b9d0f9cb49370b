"""The consumer-group coordinator: classic groups and consumer groups (KIP-848), on ``__consumer_offsets``.

- :mod:`~logstore.coordinator.group.group_coordinator`: :class:`GroupCoordinator`,
  the facade the broker calls for both protocols, the offset APIs and the
  group admin APIs; :mod:`~logstore.coordinator.group.coordinator_config`
  (the broker's ``group.*`` and ``offsets.*`` settings) and
  :mod:`~logstore.coordinator.group.group_configs` (the groups' dynamic
  configs, the GROUP config resource);
- the classic protocol: :mod:`~logstore.coordinator.group.classic_group` (a
  group's members and state machine),
  :mod:`~logstore.coordinator.group.classic_membership` (joins, syncs,
  heartbeats, leaves, rebalances, sessions);
- committed offsets: :mod:`~logstore.coordinator.group.offsets` (commits,
  fetches, deletes, expiry) and :mod:`~logstore.coordinator.group.txn_offsets`
  (offsets a transaction commits, pending until its marker);
- ``__consumer_offsets``: :mod:`~logstore.coordinator.group.persistence` (the
  classic groups by id, their records written and loaded back) and
  :mod:`~logstore.coordinator.group.offsets_schemas` (those records' bytes);
- the consumer protocol (KIP-848):
  :mod:`~logstore.coordinator.group.consumer_group` (a group: epochs,
  assignments, reconciliation),
  :mod:`~logstore.coordinator.group.consumer_membership` (ConsumerGroupHeartbeat,
  fencing, timers), :mod:`~logstore.coordinator.group.consumer_group_manager`
  (its offsets, deletion and description),
  :mod:`~logstore.coordinator.group.consumer_group_store` (the groups by id,
  replayed from their records), :mod:`~logstore.coordinator.group.consumer_records`
  (those records' bytes) and :mod:`~logstore.coordinator.group.server_assignors`
  ("uniform" and "range").

Imports name the modules; this package re-exports nothing.
"""
