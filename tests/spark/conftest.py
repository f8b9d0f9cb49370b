"""A real local Spark (``local[2]``) for the data source's tests, and brokers as everywhere.

One SparkSession serves the whole directory (starting one costs ~10 s);
tests that must kill a driver run their own in a child process. Brokers:
``broker`` / ``broker_factory`` of tests/conftest.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    import logstore.spark

    session = logstore.spark.session(
        "local[2]", "logstore-tests",
        **{"spark.sql.shuffle.partitions": "4", "spark.driver.memory": "2g",
           "spark.sql.session.timeZone": "UTC", "spark.python.worker.reuse": "true"},
    )  # fmt: skip
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
