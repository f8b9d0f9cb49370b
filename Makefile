# logstore: every set-up step lives here, so a fresh machine needs only `make test`.
#
#   make run     build, then run the main job: a broker on 127.0.0.1:9092 with ./data, its schema
#                registry on http://127.0.0.1:8081 and the web console on http://127.0.0.1:8080
#   make example the embedded engine example (a Store in ./data, no network)
#   make test    create .venv, install system and Python packages, build the
#                C core, lint, type-check and run the whole suite
#   LOGSTORE_SANITIZE=1 make test   the same with ASan + UBSan in the C core
#   make unit    the unit tier only (pytest -m unit: no broker process; about a minute); tiers are
#                markers (pyproject.toml), e.g. PYTEST_ARGS='-m "not slow"' make test
#   make spark-example  the Spark pipeline of examples/ against the broker of `make run`
#   make bench   microbenchmarks (pytest-benchmark), results in .benchmarks/

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
SANITIZE := $(if $(filter 1,$(LOGSTORE_SANITIZE)),1,0)
STAMP := $(VENV)/.build-stamp-sanitize-$(SANITIZE)
NATIVE_SOURCES := $(wildcard native/*.c native/*.h native/*.py) setup.py pyproject.toml
# Debian packages the build and the suite need: compiler and headers; a Java 17 JDK for Spark and
# the Java client's tests (javac);
# ZooKeeper for the cluster (its server runs on that Java); libfiu's fiu-run/fiu-ctrl to inject I/O errors;
# chromium and its driver for the web console's browser tests (tests/console/test_browser.py);
# protoc (and the well-known .proto files) for the schema registry's Protobuf schemas.
SYSTEM_PACKAGES := gcc python3-dev openjdk-17-jdk-headless zookeeper fiu-utils chromium chromium-driver \
	protobuf-compiler
PYTEST_ARGS ?=

ifeq ($(SANITIZE),1)
SANITIZER_ENV := LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
else
SANITIZER_ENV :=
endif

.PHONY: run example spark-example test lint typecheck unit bench system-packages clean

system-packages:
	@missing=""; for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing system packages:$$missing"; \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(STAMP): $(VENV)/bin/python $(NATIVE_SOURCES) | system-packages
	rm -f $(VENV)/.build-stamp-*
	LOGSTORE_SANITIZE=$(SANITIZE) $(PIP) install -q -e '.[test]'
	touch $@

run: $(STAMP)
	$(PY) -m logstore broker --data-dir ./data --listeners PLAINTEXT://127.0.0.1:9092 \
		--override schema.registry.listeners=http://127.0.0.1:8081 \
		--override console.listeners=http://127.0.0.1:8080

example: $(STAMP)
	$(PY) -m logstore.examples.embedded

spark-example: $(STAMP)
	$(PY) examples/spark_pipeline.py --bootstrap 127.0.0.1:9092

lint: $(STAMP)
	$(VENV)/bin/ruff check logstore tests bench examples pyspark_logstore
	$(VENV)/bin/mypy

test: $(STAMP) lint
	$(SANITIZER_ENV) $(PY) -m pytest $(PYTEST_ARGS)

unit: $(STAMP)
	$(SANITIZER_ENV) $(PY) -m pytest -m unit $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) -m pytest bench -q --benchmark-only --benchmark-columns=min,median,mean,ops --benchmark-sort=name

clean:
	rm -rf build *.egg-info logstore/*.so logstore/_native_c.c .pytest_cache .mypy_cache .ruff_cache
