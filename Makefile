# kvsim top-level Makefile.  Two commands matter:  `make demo`  and  `make test`.
# Both depend on `setup` (venv + editable install with every extra) and `build`
# (incremental C builds); re-running rebuilds nothing that is up to date.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.kvsim-installed

.PHONY: all setup sysdeps build demo test test-slow test-dist lint bench clean notebooks \
        notebooks-run docs fuzz

all: build

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test]'
	@touch $@

# The system packages the tests need (clang and libFuzzer for fuzz/, redis-tools): installed
# with apt-get as root, else one line saying what to install (tools/sysdeps.sh).
sysdeps:
	@tools/sysdeps.sh

build: setup
	@$(MAKE) -s -C c_ref
	@$(MAKE) -s -C sim/_engine
	@$(MAKE) -s -C sim/_calibrate

# The headline study at small scale: one key row of every seed (upstream PR figure, simulated
# speedup per preset, native speedup here); `experiment run` prints the table (also in
# experiments/results/headline/headline.md), with a line above it on how to calibrate when
# this machine's `local` is not calibrated.
demo: sysdeps build
	$(VENV)/bin/kvsim experiment run headline --scale small -o experiments/results

# Deterministic: the `ci` Hypothesis profile (conftest.py) draws the same examples every run.
# pytest runs on PYTEST_WORKERS processes (pytest-xdist; 2, what CI has), a test file on one
# worker (--dist loadfile): a module fixture (an experiment run, a server) is made once; the
# 30 slowest tests are listed at the end (--durations=30).
PYTEST_WORKERS ?= 2
test: sysdeps build
	$(MAKE) -s -C c_ref test-sanitize
	$(MAKE) -s -C sim/_engine test-sanitize
	$(MAKE) -s -C sim/_calibrate test-sanitize
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --durations=30
	$(PY) -m pytest -q -m slow kvsim/tests/test_dist.py
	$(PY) fuzz/run.py --replay
	$(PY) fuzz/run.py --runs $(FUZZ_SMOKE_RUNS) --seed 1 --seconds 120

# Every test, the long runs too, with Hypothesis exploring from a fresh seed; the seed is
# printed first, and `make test-slow HYPOTHESIS_SEED=N` replays a run.
HYPOTHESIS_SEED ?= $(shell od -An -N4 -tu4 /dev/urandom | tr -d ' ')
test-slow: sysdeps build
	@echo "hypothesis seed $(HYPOTHESIS_SEED) (replay: make test-slow HYPOTHESIS_SEED=$(HYPOTHESIS_SEED))"
	KVSIM_HYPOTHESIS_PROFILE=explore $(PY) -m pytest -q -m "slow or not slow" --durations=30 --hypothesis-seed=$(HYPOTHESIS_SEED)

# The distribution as a user gets it: sdist -> wheel -> fresh venv -> kvsim outside the clone.
test-dist: build
	$(PY) -m pytest -q -m slow kvsim/tests/test_dist.py

# c_ref's native benchmarks -> results/c_ref-bench.json (BENCH_ARGS="--scale 0.25" etc.;
# see bench/cref_variants.py, `python -m bench cref --help`).
bench: build
	$(MAKE) -C c_ref bench PYTHON=$(abspath $(PY)) BENCH_ARGS="$(BENCH_ARGS)"

# JupyterLab on notebooks/ (installs the `notebooks` extra into the venv first).
notebooks: build
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test,notebooks]'
	cd notebooks && ../$(VENV)/bin/jupyter lab
# Every notebook executed headless into NOTEBOOKS_OUT (the executed copies and their data;
# nothing is written outside it): `kvsim notebooks run`.
NOTEBOOKS_OUT ?= experiments/results/notebooks-run
notebooks-run: build
	$(VENV)/bin/kvsim notebooks run -o $(NOTEBOOKS_OUT)

# The documentation site (docs/, mkdocs.yml) on http://127.0.0.1:8000 (installs the `docs`
# extra); `make test` builds it with --strict (docs/tests).
docs: build
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test,docs]'
	$(VENV)/bin/mkdocs serve -a 127.0.0.1:8000

# Coverage-guided fuzzing of every parser of untrusted input (fuzz/README.md): each target
# for FUZZ_SECONDS, and on until it has run FUZZ_MIN_EXECS inputs; one line per target, the
# summary in results/fuzz.json.  `make test` replays the committed corpora and runs
# FUZZ_SMOKE_RUNS inputs of each target from a fixed seed (the same inputs every run).
FUZZ_SECONDS ?= 60
FUZZ_MIN_EXECS ?= 100000
FUZZ_SMOKE_RUNS ?= 1000
fuzz: build
	$(PY) fuzz/run.py --seconds $(FUZZ_SECONDS) --min-execs $(FUZZ_MIN_EXECS) \
	    --result results/fuzz.json

lint: setup
	$(VENV)/bin/ruff check .

clean:
	$(MAKE) -C c_ref clean
	$(MAKE) -C sim/_engine clean
	$(MAKE) -C sim/_calibrate clean
	$(MAKE) -C fuzz clean
	rm -rf build dist *.egg-info
