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

from logstore.errors import LogstoreError

__all__ = ["LogstoreDataSource", "SparkSetupError", "check_python_workers", "register", "session"]


class SparkSetupError(LogstoreError):
    """Spark's Python workers cannot run the data source (they cannot import logstore)."""


_checked: set[str] = set()  # the Spark applications whose workers were checked


def register(spark: Any, check_workers: bool = True) -> None:
    """Register the ``logstore`` format with ``spark`` (a SparkSession).

    ``check_workers``: first run one tiny job that asks a Python worker whether it can import
    logstore (once per Spark application, ~0.5 s), and raise :class:`SparkSetupError` naming
    the interpreter to set when it cannot, instead of a ``ModuleNotFoundError`` inside a Java
    stack at the first query.
    """
    if check_workers:
        check_python_workers(spark)
    from logstore.spark.source import LogstoreDataSource

    spark.dataSource.register(LogstoreDataSource)


def check_python_workers(spark: Any) -> None:
    """Raise :class:`SparkSetupError` unless Spark's Python workers import logstore (see :func:`register`)."""
    context = spark.sparkContext
    app = str(context.applicationId)
    if app in _checked:
        return

    def probe(_: Any) -> tuple[str, str, str]:  # pickled by value: the worker needs no logstore to run it
        import importlib
        import sys as worker_sys

        try:
            importlib.import_module("logstore.spark.source")  # what the data source's readers run
        except Exception as e:
            failed = f"{type(e).__name__}: {e}"
        else:
            failed = ""
        return worker_sys.executable, worker_sys.version.split()[0], failed

    where = os.environ.get("PYSPARK_PYTHON") or context.getConf().get("spark.pyspark.python") or "python3"
    fix = (
        f"set PYSPARK_PYTHON={sys.executable} (this interpreter, which has logstore) before the SparkSession "
        "starts, or install logstore where the workers run, or use logstore.spark.session(), which sets it"
    )
    try:
        executable, version, failed = context.parallelize([0], 1).map(probe).collect()[0]
    except Exception as e:  # the worker did not start, or runs another Python version
        first = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
        raise SparkSetupError(f"Spark's Python workers ({where}) could not run a probe: {first}; {fix}") from None
    if failed:
        raise SparkSetupError(
            f"Spark's Python workers run {executable} (Python {version}), which cannot import logstore "
            f"({failed}); {fix}"
        )
    _checked.add(app)


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
