# Sluicegate: `make run` and `make test` work on a bare machine (no Docker needed).
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: run test up down reset install interpreted lint typecheck unit integration drills bench clean

$(BIN)/.installed: pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,faust]'
	@touch $@

# The admission core compiled with mypyc (sluicegate/native.py says which modules and why):
# the script rebuilds it when a source changed and does nothing otherwise; where no C compiler
# is installed the core runs interpreted.
install: $(BIN)/.installed
	@$(BIN)/python scripts/compile_core.py

# Remove the compiled core (for a debugger, or to compare); `make install` builds it again.
interpreted:
	@test ! -x $(BIN)/python || $(BIN)/python scripts/compile_core.py --clean

up: install
	@bash scripts/kafka/kafka.sh up
	@bash scripts/pg.sh up
	@$(BIN)/sluicegate topics ensure

down:
	@bash scripts/kafka/kafka.sh down
	@bash scripts/pg.sh down

reset:
	@bash scripts/kafka/kafka.sh reset
	@bash scripts/pg.sh reset

run: up
	@bash scripts/demo.sh

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy

unit: install
	$(BIN)/python -m pytest -q tests/unit $(PYTEST_ARGS)

integration: up
	$(BIN)/python -m pytest -q tests/integration $(PYTEST_ARGS)

drills: up
	$(BIN)/python -m pytest -q tests/drills $(PYTEST_ARGS)

# The core's unit tests run twice: first against its Python source (as it runs where nothing
# is compiled), then everything against the core as built.
INTERPRETED_TESTS := tests/unit/test_core_*.py tests/unit/test_admission_*.py \
	tests/unit/test_ingest_*.py tests/unit/test_native_core.py tests/unit/test_binary_reader.py

# Most tests wait on the broker, not the CPU: the suite runs on TEST_WORKERS pytest-xdist
# workers side by side, each test under its own topic prefix, group and schema. The tests that
# stop the broker or PostgreSQL (marked exclusive, tests/support/alone.py) run alone after.
TEST_WORKERS ?= 4
test: up lint typecheck
	$(BIN)/python -m pytest -q -p no:cacheprovider -p tests.support.interpreted $(INTERPRETED_TESTS)
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --durations=20 \
		-m "not exclusive" tests $(PYTEST_ARGS)
	@# Exit status 5 is "no test selected": PYTEST_ARGS=-k ... chose none of the exclusive ones.
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=5 -m exclusive tests $(PYTEST_ARGS) \
		|| test $$? -eq 5

# Not part of `make test`: about 16 minutes on 2 cores (README, "Benchmarks"); writes docs/benchmarks.md and .png.
$(BIN)/.bench-installed: pyproject.toml $(BIN)/.installed
	$(BIN)/pip install -q -e '.[dev,faust,bench]'
	@touch $@

bench: up $(BIN)/.bench-installed
	$(BIN)/python -m bench.run

clean: interpreted
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache var/build
