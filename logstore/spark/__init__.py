"""The ``logstore`` PySpark data source (Spark 4's Python Data Source API).

>>> import logstore.spark                                     # doctest: +SKIP
>>> logstore.spark.register(spark)                            # doctest: +SKIP
>>> spark.read.format("logstore").option("kafka.bootstrap.servers", "127.0.0.1:9092") \\
...     .option("subscribe", "events").load()                 # doctest: +SKIP

Spark also finds it without ``register`` once logstore is installed where
Spark's Python workers run (the top-level package ``pyspark_logstore``).
Schema, options and semantics are those of Spark's Kafka connector; see
docs/spark.md. Needs ``pip install 'logstore[spark]'`` (pyspark, pyarrow).
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["LogstoreDataSource", "register", "session"]


def register(spark: Any) -> None:
    """Register the ``logstore`` format with ``spark`` (a SparkSession)."""
    from logstore.spark.source import LogstoreDataSource

    spark.dataSource.register(LogstoreDataSource)


def session(master: str = "local[2]", app: str = "logstore", **conf: str) -> Any:
    """A SparkSession with ``logstore`` registered and Python workers on this interpreter.

    ``conf``: extra Spark settings (dots as in Spark's names, passed as a dict:
    ``session(**{"spark.sql.shuffle.partitions": "4"})``).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName(app).config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))  # fmt: skip
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark


def __getattr__(name: str) -> Any:
    if name == "LogstoreDataSource":
        from logstore.spark.source import LogstoreDataSource

        return LogstoreDataSource
    raise AttributeError(name)
