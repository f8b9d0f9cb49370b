"""Spark's automatic registration of the ``logstore`` data source.

Spark (4.0+) imports every top-level ``pyspark_*`` module on its Python path
and registers its ``DefaultSource``: with logstore installed where Spark's
Python workers run, ``spark.read.format("logstore")`` works with no
``logstore.spark.register(spark)`` call.
"""

from logstore.spark.source import LogstoreDataSource as DefaultSource

__all__ = ["DefaultSource"]
