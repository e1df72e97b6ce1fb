# Every target creates .venv itself, so each works on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install demo test test-floors lint bench fusion-table stubs clean

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

# The suite against the oldest versions pyproject.toml admits (tools/floor_constraints.py):
# a fresh venv of the oldest Python ge supports when this machine has it (on PATH or as a
# pyenv version), else $(PYTHON).
FLOOR_CANDIDATES := python3.10 $(wildcard $(HOME)/.pyenv/versions/3.10*/bin/python)
FLOOR_PYTHON ?= $(firstword $(foreach py,$(FLOOR_CANDIDATES),\
	$(shell $(py) -c "" >/dev/null 2>&1 && echo $(py))) $(PYTHON))
FLOOR_VENV   := .venv-floors
test-floors:
	rm -rf $(FLOOR_VENV)
	$(FLOOR_PYTHON) -m venv $(FLOOR_VENV)
	$(FLOOR_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(FLOOR_VENV)/bin/python -m pip install --quiet --no-deps -e .
	$(FLOOR_VENV)/bin/python tools/floor_constraints.py > $(FLOOR_VENV)/floors.txt
	$(FLOOR_VENV)/bin/python -m pip install --quiet -e ".[dev]" -c $(FLOOR_VENV)/floors.txt
	@echo "floors: $$($(FLOOR_VENV)/bin/python --version); $$(paste -sd' ' $(FLOOR_VENV)/floors.txt)"
	$(FLOOR_VENV)/bin/python -m pytest -q -p no:cacheprovider

bench: install
	$(PY) -m pip install --quiet -e ".[dev,bench]"
	$(PY) benchmarks/run_all.py

fusion-table: install
	$(PY) tools/fusion_table.py --built --write README.md

# The typed signatures of the ge.es operator modules (src/ge/es/*.pyi), after upgrading onnx.
stubs: install
	$(PY) tools/gen_es_stubs.py

clean:
	rm -rf $(VENV) $(FLOOR_VENV) build dist src/*.egg-info .pytest_cache .ruff_cache
