"""How a user meets the data source: Spark finds it by itself, and the example pipeline runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.kit.sparkkit import consume_all

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]

FIND_ITSELF = """
import os, sys
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
# No logstore.spark.register(spark): Spark looks up pyspark_logstore.DefaultSource itself.
df = spark.read.format("logstore").option("subscribe", "t").load(sys.argv[1])
print("ROWS", df.count(), flush=True)
spark.stop()
"""


def test_spark_finds_the_source_without_register(tmp_path: Path) -> None:
    from logstore import Store

    path = str(tmp_path / "store")
    with Store(path, scheduler=False) as store:
        store.create_topic("t", partitions=2)
        store.log("t", 0).append([b"a", b"b"])
        store.log("t", 1).append([b"c"])
    run = subprocess.run([sys.executable, "-c", FIND_ITSELF, path], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})  # fmt: skip
    assert "ROWS 3" in run.stdout, run.stdout[-2000:] + run.stderr[-3000:]


def test_the_example_pipeline_runs_streaming_and_batch(broker: Any, tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "spark_pipeline.py"), "--bootstrap", broker.bootstrap,
         "--events", "3000", "--checkpoint", str(tmp_path / "cp")],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert "streaming and batch agree" in run.stdout, run.stdout
    counts = consume_all(broker.bootstrap, "event-counts-batch", 1)
    assert counts, "the batch job wrote no counts"


WRONG_WORKERS = """
import os, sys
os.environ["PYSPARK_PYTHON"] = sys.argv[1]
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").getOrCreate())
spark.sparkContext.setLogLevel("OFF")
import logstore.spark
try:
    logstore.spark.register(spark)
    print("REGISTERED", flush=True)
except logstore.spark.SparkSetupError as e:
    print("SETUP ERROR:", e, flush=True)
spark.stop()
"""


def test_workers_that_cannot_import_logstore_are_named_at_register(tmp_path: Path) -> None:
    """PYSPARK_PYTHON names an interpreter without logstore (the venv's base Python): register()
    says which interpreter to set, instead of a ModuleNotFoundError in a Java stack at the first
    query."""
    base = Path(sys.base_prefix) / "bin" / "python3"
    if not base.exists():
        pytest.skip(f"no base interpreter at {base}")
    has = subprocess.run([str(base), "-c", "import logstore.spark.source"], cwd=tmp_path, capture_output=True)
    if has.returncode == 0:
        pytest.skip(f"{base} imports logstore: it is not a wrong interpreter")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON")}
    run = subprocess.run([sys.executable, "-c", WRONG_WORKERS, str(base)], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path, env=env)  # fmt: skip
    assert f"Spark's Python workers run {base}" in run.stdout, run.stdout[-2000:] + run.stderr[-3000:]
    assert "cannot import logstore" in run.stdout and f"set PYSPARK_PYTHON={sys.executable}" in run.stdout
