# Every target bootstraps what it needs from a fresh clone: `make demo`, `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install test demo lint clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "sparkcast needs Python 3.11+"'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@$(PY) -m sparkcast.spark.java --check || true
	@touch $(STAMP)

test: install
	$(PY) -m pytest -q

demo: install
	$(PY) -m sparkcast.demo

lint: install
	$(PY) -m ruff check src tests

clean:
	rm -rf $(VENV) .pytest_cache build dist src/*.egg-info
