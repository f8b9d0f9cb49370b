"""The broker's network layer: client connections (connection.py)."""
