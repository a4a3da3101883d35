# Every target bootstraps what it needs from a fresh clone: `make demo`, `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# the JVM parts, resolved by Maven from jvm/*/pom.xml into .jars/ (cached in ~/.m2)
JARS   := .jars
JARS_STAMP := $(JARS)/.resolved
export SPARKCAST_JARS := $(CURDIR)/$(JARS)
# the wheels a fresh virtualenv installs sparkcast's wheel with offline (its spark and kafka
# extras, PySpark 4.2.0, setuptools to build it): tests/deploy/test_pip_install.py
WHEELHOUSE := .wheelhouse
WHEELS_STAMP := $(WHEELHOUSE)/.built
export SPARKCAST_WHEELHOUSE := $(CURDIR)/$(WHEELHOUSE)

.PHONY: install test check demo demo-postgres demo-kafka lint docs clean bench bench-quick bench-kafka bench-deps compat

install: $(STAMP) $(JARS_STAMP) $(WHEELS_STAMP)

# Spark's Kafka connector, spark-avro and Delta (spark.jars of the tests and demos), Kafka's
# broker (the throwaway broker of the tests and `make demo-kafka`); fetched here, never while
# tests run. jvm/packages: the rest of what Spark's resolver takes for the same connectors by
# coordinates (spark.jars.packages) from ~/.m2 alone, as a pip-installed sparkcast's test does
$(JARS_STAMP): jvm/spark/pom.xml jvm/kafka-broker/pom.xml jvm/packages/pom.xml
	@command -v mvn >/dev/null || (apt-get update -q && apt-get install -y -q maven)
	@for part in spark kafka-broker; do \
	  rm -rf $(JARS)/$$part && \
	  mvn -q -B dependency:copy-dependencies -f jvm/$$part/pom.xml -DincludeScope=runtime \
	      -DoutputDirectory=$(CURDIR)/$(JARS)/$$part || exit 1; \
	done
	mvn -q -B dependency:resolve -f jvm/packages/pom.xml
	@touch $(JARS_STAMP)

# from pip's cache where it has them (make install's own pip install put them there)
$(WHEELS_STAMP): pyproject.toml $(STAMP)
	rm -rf $(WHEELHOUSE)
	$(PY) -m pip wheel -q -w $(WHEELHOUSE) '.[spark,kafka]' 'pyspark==4.2.0' 'setuptools>=77'
	rm -f $(WHEELHOUSE)/sparkcast-*.whl
	@touch $(WHEELS_STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "sparkcast needs Python 3.11+"'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@$(PY) -m sparkcast.spark.launch.java --check
	@$(PY) -m sparkcast.testing.postgres install  # initdb/pg_ctl and the JDBC jar, via apt-get
	@touch $(STAMP)

# lint and types first (seconds), then the suite: its files two at a time (pytest-xdist, a
# file's tests together in one worker), then the standalone cluster's tests alone (marker
# solo); after it, its cost per file, its fresh JVMs and its wall time against the 25-minute
# budget (tests/suite_cost.py), both parts in one table, kept in .test-results/
test: install lint
	$(PY) -m pytest -q -n 2 --dist loadfile -m "not solo" --junitxml=.test-results/junit.xml
	$(PY) -m pytest -q -m solo --junitxml=.test-results/junit-solo.xml \
	    --cost-after=.test-results/durations.json

# the inner loop: lint, types and every test that needs no JVM (under 3 minutes); CI runs `test`
check: install lint
	$(PY) -m pytest -q --no-jvm

# the flagship demo (fraud rules) on local Spark: files arrive over time, a rule update lands
# mid-run, and the summary shows every subtask switching in one micro-batch with no event lost
demo: install
	$(PY) -m sparkcast.cli demo fraud

# the same demo the real way: rules in a throwaway PostgreSQL (started in a temporary folder,
# changed mid-run by an UPDATE), decisions written to PostgreSQL tables; the cluster stops at the end
demo-postgres: install
	$(PY) -m sparkcast.cli demo fraud --postgres

# the same demo on a throwaway Kafka broker: transactions and rules are topics (a rule update is
# produced mid-run), decisions go to topics exactly once and are read back with read_committed
demo-kafka: install
	$(PY) -m sparkcast.cli demo fraud --kafka

lint: install
	$(PY) -m ruff check src tests
	$(PY) -m mypy

# the documentation site with the API reference generated from the docstrings, into site/;
# --strict: a broken link or an unrenderable docstring fails (tests/test_docs_site.py too)
docs: install
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

# Benchmarks (benchmarks/run.py writes docs/benchmarks.md and docs/img/). PyFlink pins its own
# dependency versions, so it lives in its own venv, made here from PyPI.
FLINK_VENV  := benchmarks/.venv-flink
FLINK_STAMP := $(FLINK_VENV)/.installed
BENCH_STAMP := $(VENV)/.bench-installed

$(FLINK_STAMP):
	$(PYTHON) -m venv $(FLINK_VENV)
	$(FLINK_VENV)/bin/pip install -q --upgrade pip
	$(FLINK_VENV)/bin/pip install -q apache-flink==2.3.0
	@touch $(FLINK_STAMP)

$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install -q -e '.[dev,bench]'
	@touch $(BENCH_STAMP)

bench-deps: $(BENCH_STAMP) $(FLINK_STAMP)

bench: bench-deps  ## every workload and system and the scale curves, ~60 min; run on a quiet machine
	$(PY) benchmarks/run.py --mode full

bench-kafka: $(BENCH_STAMP)  ## Kafka in and out on a throwaway broker (throughput ratios; update and event latency beside the hand-written job at 5k and 20k events/s), ~15 min; writes its section of docs/benchmarks.md
	$(PY) benchmarks/kafka.py --mode full --write

bench-quick: bench-deps  ## the same at small sizes, ~6 min (no scale curves: add --scale); prints the table, leaves docs/ alone
	$(PY) benchmarks/run.py --mode quick

# The smoke job on the oldest and newest supported PySpark, each from PyPI in its own virtualenv
# with this tree's wheel (compat/.venv-<version>); not part of `make test`. About 5-10 min the
# first time (two PySpark downloads), results recorded in docs/deploy.md ("Spark versions").
compat: install
	$(PY) compat/run.py --python $(PYTHON)

clean:
	rm -rf $(VENV) $(JARS) $(WHEELHOUSE) .pytest_cache .test-results build dist site src/*.egg-info
