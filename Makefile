# Two entry points for a fresh machine: `make run` (the main job) and `make test`.
# Each installs what it needs into a local virtualenv first: `run` the core
# package only (a voter, the CLI and the simulator), `test` everything (the
# dev tools and the pipeline extra: Spark, Arrow, matplotlib). Each has its
# own stamp, so either may come first and each re-installs only when
# pyproject.toml changes. `test` runs two pytest-xdist workers, a test module
# at a time on each (--dist loadfile: a module's shared voter, Spark session
# or image build stays in one process), then the tests marked `alone` by
# themselves: each loads both cores for minutes (the pipeline at 2,000,000
# records), which made timing-sensitive modules running beside it fail
# (docs/decisions.md 168). Its summary line is the last; a failure in the
# first stage stops there.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CORE_STAMP := $(VENV)/.installed-core
ALL_STAMP := $(VENV)/.installed-all

.PHONY: run test bench clean bytecode

$(BIN)/pip:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(CORE_STAMP): pyproject.toml | $(BIN)/pip
	$(BIN)/pip install --quiet -e .
	touch $@

# Everything holds the core too: its stamp is renewed with this one.
$(ALL_STAMP): pyproject.toml | $(BIN)/pip
	$(BIN)/pip install --quiet -e '.[dev,pipeline]'
	touch $@ $(CORE_STAMP)

# Every voter, worker and orderer process imports these packages. Compiled
# once here, they load from __pycache__ even where PYTHONDONTWRITEBYTECODE is
# set (as on CI machines), instead of being compiled again by each process:
# about 0.15 s of CPU per process start (docs/decisions.md 131).
PACKAGES := metadata_records controller quorum api voter metaquorum brokers pipeline
bytecode: $(CORE_STAMP)
	$(BIN)/python -m compileall -q $(PACKAGES) >/dev/null

run: $(CORE_STAMP) bytecode
	$(BIN)/metaquorum dev --nodes 3 --sim

test: $(ALL_STAMP) bytecode
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pytest -n 2 --dist loadfile -m 'not alone'
	$(BIN)/pytest -m alone

bench: $(CORE_STAMP)
	$(BIN)/python bench/controller.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
