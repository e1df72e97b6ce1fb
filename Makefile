# Every target creates .venv itself, so each works on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install demo test lint bench fusion-table stubs clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: install
	$(PY) examples/demo.py

lint: install
	$(VENV)/bin/ruff check src tests benchmarks examples tools
	$(VENV)/bin/mypy

test: lint
	$(PY) -m pytest -q

bench: install
	$(PY) -m pip install --quiet -e ".[dev,bench]"
	$(PY) benchmarks/run_all.py

fusion-table: install
	$(PY) tools/fusion_table.py --built --write README.md

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .ruff_cache
