# The two commands of the README's quick start, and a few conveniences.
#   make demo   set up .venv/ (first time only) and run the main job
#   make test   set up .venv/ (first time only) and run the whole test suite
# Needs Python 3.11+, a C++ compiler and make. Icarus Verilog is optional: its tests skip without it.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# Parallel test workers; each model builds once, in its own locked directory (see sim/runner.py).
# --maxschedchunk 1: a worker takes one test at a time, in the order of tb/conftest.py (longest
# first), so the long tests start at once, on different workers, instead of queueing on one.
JOBS   ?= auto

.PHONY: setup demo test quick flows coverage lint lint-py synth verilog clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is needed, found " + sys.version.split()[0])'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip==24.3.1
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/scin allreduce --endpoints 4 --dtype fp16 --size 64KiB

test: $(STAMP)
	$(BIN)/pytest -n $(JOBS) --maxschedchunk 1 -q -m "not flow" --durations=25

# The edit loop's tier: every test but those marked slow (tb/conftest.py: the system simulations,
# the slowest proofs); under 10 minutes on 2 cores.
quick: $(STAMP)
	$(BIN)/pytest -n $(JOBS) --maxschedchunk 1 -q -m "not slow and not flow" --durations=10

# The whole-flow checks make test leaves out (tests marked flow: the ECP5 place and route through
# `scin build`, the timing budget of the two slowest datapath blocks through `scin timing`): about
# 25 minutes of one core.
flows: $(STAMP)
	$(BIN)/pytest -n $(JOBS) --maxschedchunk 1 -q -m flow --durations=10

# Line and toggle coverage of hdl/ (docs/VERIFICATION.md): the suite on Verilator with coverage
# models (SCIN_COVERAGE=1, built and cached apart from the normal ones), then the report,
# docs/COVERAGE.md. Icarus has no coverage, so its half is left out. The data of an earlier run is
# removed first: the report is of this run only. Narrow it with COVERAGE_TESTS=tb/system/test_system.py.
COVERAGE_TESTS ?=
coverage: $(STAMP)
	rm -rf $${SCIN_BUILD_DIR:-.build}/coverage
	SCIN_COVERAGE=1 $(BIN)/pytest -n $(JOBS) --maxschedchunk 1 -q -k "not icarus" $(COVERAGE_TESTS)
	$(BIN)/scin coverage --doc --collected-by 'make coverage$(if $(COVERAGE_TESTS), COVERAGE_TESTS="$(COVERAGE_TESTS)")'

lint: $(STAMP) lint-py
	$(BIN)/scin lint

# The Python linter, as configured in pyproject.toml ([tool.ruff]); tb/tools/test_ruff.py runs the same.
lint-py: $(STAMP)
	$(BIN)/ruff check .

synth: $(STAMP)
	$(BIN)/scin synth --target xcup

verilog: $(STAMP)
	$(BIN)/scin verilog --out out/verilog

clean:
	rm -rf .build out
