"""The broker's side of transactions: __transaction_state, markers, verification, producer ids."""
