# kvsim top-level Makefile.  Two commands matter:  `make demo`  and  `make test`.
# Both depend on `setup` (venv + editable install with every extra) and `build`
# (incremental C builds); re-running rebuilds nothing that is up to date.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.kvsim-installed

.PHONY: all setup build demo test test-fast test-slow lint bench clean

all: build

setup: $(STAMP)

$(STAMP): pyproject.toml setup.py
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test,plots,notebooks,dask]'
	@touch $@

build: setup
	@$(MAKE) -s -C c_ref
	@$(MAKE) -s -C sim/_engine

demo: build
	$(VENV)/bin/kvsim experiment demo --out experiments/results/demo

test: build
	$(MAKE) -s -C c_ref test-sanitize
	$(MAKE) -s -C sim/_engine test-sanitize
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q

test-slow: build
	$(PY) -m pytest -q -m slow

lint: setup
	$(VENV)/bin/ruff check .

clean:
	$(MAKE) -C c_ref clean
	$(MAKE) -C sim/_engine clean
	rm -rf build *.egg-info
