# ptm: the commands a new user needs. Works on a fresh machine with only Python 3.11:
# uv is bootstrapped into .tools/ with pip when it is not on PATH.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# Offline and local-only settings (why each one: docs/STACK.md): no hub retries, no
# telemetry, every cache inside the project.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export DO_NOT_TRACK := 1
export TOKENIZERS_PARALLELISM := false
export HF_HOME := $(CURDIR)/.cache/huggingface
export UV_PYTHON_DOWNLOADS := never
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS := 90
export PREFECT_HOME := $(CURDIR)/.cache/prefect
export PREFECT_LOCAL_STORAGE_PATH := $(CURDIR)/.cache/prefect/storage
export PYSTOW_HOME := $(CURDIR)/.cache/pystow
export DASK_TEMPORARY_DIRECTORY := $(CURDIR)/.cache/dask
export PTM_CACHE_DIR := $(CURDIR)/.cache/ptm

UV := $(shell command -v uv 2>/dev/null || echo $(CURDIR)/.tools/bin/uv)
RUN := $(UV) run --frozen
# `setup` syncs the environment first; the fresh-clone test (tests/flows/test_fresh_clone.py)
# sets SETUP= and RUN= to run this Makefile's demo with the test's own interpreter.
SETUP := setup
# pytest-xdist workers for `make test` (one per core on a 2-core CI machine; tests/conftest.py
# gives each worker its share of torch threads). TEST_WORKERS=0 runs in one process.
TEST_WORKERS := 2
# Extra arguments for `ptm demo` (Hydra overrides), e.g. DEMO_ARGS="trainer.max_steps=20".
DEMO_ARGS :=
# Every folder the settings above point at. Prefect creates only the last level of
# PREFECT_HOME, so on a fresh clone (no .cache/) its database cannot be opened.
CACHE_DIRS := $(PREFECT_HOME) $(PREFECT_LOCAL_STORAGE_PATH) $(HF_HOME) $(PYSTOW_HOME) \
	$(DASK_TEMPORARY_DIRECTORY) $(PTM_CACHE_DIR)

.PHONY: help setup dirs demo test test-stress test-readme-slow docs lint format bench clean

help:
	@echo "make demo   set up and run the demo flow (link entities, TransE, ERNIE-THU, report)"
	@echo "make test   set up and run the whole test suite"
	@echo "make test-stress   run the trust suite's long cases (bad inputs, kill -9s, writers)"
	@echo "make test-readme-slow   run the README's and docs' slow blocks (pre-training presets)"
	@echo "make docs   build the docs site into site/ (mkdocs build --strict)"
	@echo "make lint   ruff (lint + format check) and mypy on the packages"
	@echo "make bench  ptm vs transformers, side by side (writes benchmarks/results/)"

$(CURDIR)/.tools/bin/uv:
	@echo "uv not found: installing it into .tools/ with pip"
	python3 -m venv $(CURDIR)/.tools
	$(CURDIR)/.tools/bin/python -m pip install --quiet --disable-pip-version-check uv

setup: $(UV)
	$(UV) sync --frozen --compile-bytecode

dirs:
	@mkdir -p $(CACHE_DIRS)

demo: $(SETUP) dirs
	$(RUN) ptm demo --output-dir runs/demo $(DEMO_ARGS)

test: $(SETUP) dirs
	$(RUN) pytest -q -n $(TEST_WORKERS) --dist loadfile

# The trust suite's long cases (bad inputs, kill -9 + resume, concurrent writers): minutes.
test-stress: $(SETUP) dirs
	$(RUN) pytest -q -n $(TEST_WORKERS) --dist loadfile -m stress

# The README and docs blocks marked `<!-- runnable slow -->` (pre-training presets; minutes each),
# which `make test` leaves out (tests/docs/conftest.py).
test-readme-slow: $(SETUP) dirs
	PTM_README_SLOW=1 $(RUN) pytest -q tests/docs -m readme_slow

lint: setup
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	$(RUN) mypy packages/core/src/ptm_core packages/classic/src/ptm_classic packages/knowledge/src/ptm_knowledge packages/multilingual/src/ptm_multilingual packages/multimodal/src/ptm_multimodal packages/text/src/ptm_text flows

# The docs site (mkdocs.yml): guides from docs/, the reference and results pages generated
# from the code (tools/docs_site/). `make test` builds it too (tests/docs/test_site.py).
# NO_MKDOCS_2_WARNING: Material's banner about MkDocs 2, which ptm does not use.
docs: $(SETUP) dirs
	NO_MKDOCS_2_WARNING=1 $(RUN) mkdocs build --strict

bench: $(SETUP) dirs
	$(RUN) python -m benchmarks.run

format: setup
	$(RUN) ruff check --fix .
	$(RUN) ruff format .

clean:
	rm -rf runs .pytest_cache .mypy_cache .ruff_cache
