"""The transaction coordinator (KIP-98) and its ``__transaction_state`` records.

Imports name the modules; this package re-exports nothing.
"""
