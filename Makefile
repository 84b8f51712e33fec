# memlab — `make run` and `make test` do all the set-up on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# A CPU build of PyTorch for the `minilm` extra. Installed before the extras so
# that the extra's range (torch>=2.1) is already satisfied and pip pulls no
# multi-GB CUDA build. Override, e.g. TORCH="torch==2.13.0 --index-url ...".
TORCH ?= torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: install run test bench lint demo clean baseline gate docs reliability

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

# The CI gate's baseline: the default experiment on the shipped transcripts. Regenerate it
# (and commit results/baseline) when a change to the transcripts or the default config,
# or a deliberate change of behaviour, makes `make gate` report a different experiment.
BASELINE ?= results/baseline
baseline: $(STAMP)
	rm -rf $(BASELINE).new
	$(BIN)/memlab run hydra.run.dir=$(BASELINE).new progress=false
	rm -rf $(BASELINE).new/.hydra $(BASELINE).new/*.parquet $(BASELINE).new/memlab.log
	rm -rf $(BASELINE).new/probes.csv $(BASELINE).new/turns.csv
	rm -rf $(BASELINE) && mv $(BASELINE).new $(BASELINE)

# The default experiment, gated against the baseline (exit 1: a metric regressed).
gate: $(STAMP)
	rm -rf results/runs/gate
	$(BIN)/memlab run hydra.run.dir=results/runs/gate progress=false report.charts=false
	$(BIN)/memlab gate --baseline $(BASELINE)/summary.csv results/runs/gate

# The reliability suite (not part of `make test`): SIGKILL trials, a corruption matrix,
# concurrent writers with a compactor, 10,000 adversarial scopes on every store, prompt
# injection, bad arguments, a full disk, laundering. Prints a table and writes
# results/reliability/summary.csv; exit 1 if a check failed. RELIABILITY="--quick" for
# a one-minute version.
RELIABILITY ?=
reliability: $(STAMP)
	$(BIN)/python -m memlab.reliability $(RELIABILITY)

# The store scale run (memlab bench store) includes 1M records per scope: the memory and
# SQLite cells took ~65 min on 2 busy cores (before the two -int8 cells: memory and
# memory-int8 took 15 min together on a quiet machine), pgvector's HNSW build of 1.5M rows takes
# hours there (docs/benchmarks.md). A quicker pass:
# make bench BENCH_STORE_SIZES=1000,10000,100000
BENCH_STORE_SIZES ?= 1000,10000,100000,1000000
BENCH_STORE_BACKENDS ?= memory,memory-bits,memory-int8,sqlite,sqlite-bits,sqlite-int8,pgvector

bench: $(STAMP)
	$(BIN)/python -m benchmarks.bench_memory
	$(BIN)/python -m benchmarks.bench_embed
	$(BIN)/python -m benchmarks.bench_reader
	$(BIN)/python -m benchmarks.bench_layers
	$(BIN)/python -m benchmarks.supersession --no-transcripts --cost 10000
	$(BIN)/memlab bench store --sizes $(BENCH_STORE_SIZES) --backends $(BENCH_STORE_BACKENDS)

# The documentation site (mkdocs.yml, docs/) into site/, git-ignored. --strict turns
# every warning (a broken link or anchor, a page missing from the nav, an API object
# that does not resolve) into a failure. Preview with: $(BIN)/mkdocs serve
docs: $(STAMP)
	$(BIN)/mkdocs build --strict

lint: $(STAMP)
	$(BIN)/ruff check memlab tests benchmarks
	$(BIN)/ruff format --check memlab tests benchmarks
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
