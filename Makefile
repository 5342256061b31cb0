# Two commands on a fresh machine:  `make demo`  and  `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install demo test lint format bench clean

# torch is pinned first: the CPU wheel 2.13.0 is on these machines, and an unpinned
# torch would pull a multi-GB CUDA build when gpytorch/botorch ask for it.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[dev,dask,bench]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/prolas fit data/airline.csv --out prolas-out/airline --force --horizon 24
	@echo "report: prolas-out/airline/report.md (fit.png, components.png, convergence.png);" \
	      "forecast: prolas-out/airline/forecast.csv and forecast.png"

# the suite on TEST_WORKERS processes (pytest-xdist; 0 = in this process): 480-609 s on
# two (three runs) against 861 s in one on a 2-core machine
TEST_WORKERS ?= 2

test: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --durations=15

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: install
	$(BIN)/python benchmarks/scripts/core.py

clean:
	rm -rf $(VENV) prolas-out .pytest_cache .ruff_cache
