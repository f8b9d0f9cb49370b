"""logstore's benchmarks: pytest-benchmark microbenchmarks and scripts (see docs/benchmarks.md)."""
