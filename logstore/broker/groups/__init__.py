"""The broker's side of the group coordinator: __consumer_offsets, its writer, KIP-848 options."""
