"""The broker's Prometheus metrics: request and traffic counters, scrape-time state, the /metrics endpoint."""
