"""Client quotas (bytes, requests, mutations) and connection limits."""
