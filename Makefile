# Two entry points for a fresh machine: `make run` (the main job) and `make test`.
# Each installs what it needs into a local virtualenv first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test bench lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,pipeline]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/metaquorum dev --nodes 3 --sim

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python bench/controller.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
