# memlab — `make run` and `make test` do all the set-up on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# A CPU build of PyTorch for the `minilm` extra. Installed before the extras so
# that the extra's range (torch>=2.1) is already satisfied and pip pulls no
# multi-GB CUDA build. Override, e.g. TORCH="torch==2.13.0 --index-url ...".
TORCH ?= torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: install run test bench lint demo clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet $(TORCH)
	$(BIN)/pip install --quiet -e '.[all]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/memlab run

demo: $(STAMP)
	$(BIN)/memlab demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python -m benchmarks.bench_memory
	$(BIN)/python -m benchmarks.bench_embed

lint: $(STAMP)
	$(BIN)/ruff check memlab tests benchmarks
	$(BIN)/ruff format --check memlab tests benchmarks
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
