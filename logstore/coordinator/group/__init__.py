"""The consumer-group coordinator: classic groups and consumer groups (KIP-848), on ``__consumer_offsets``.

Imports name the modules; this package re-exports nothing.
"""
