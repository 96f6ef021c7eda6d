# ptm: the commands a new user needs. Works on a fresh machine with only Python 3.11:
# uv is bootstrapped into .tools/ with pip when it is not on PATH.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# Offline and local-only settings (see ../shared/STACK.md): no hub retries, no telemetry,
# every cache inside the project.
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

UV := $(shell command -v uv 2>/dev/null || echo $(CURDIR)/.tools/bin/uv)
RUN := $(UV) run --frozen

.PHONY: help setup demo test test-fast lint format bench clean

help:
	@echo "make demo   set up and run the demo flow (link entities, TransE, ERNIE-THU, report)"
	@echo "make test   set up and run the whole test suite"
	@echo "make lint   ruff (lint + format check) and mypy on the packages"
	@echo "make bench  ptm vs transformers, side by side (writes benchmarks/results/)"

$(CURDIR)/.tools/bin/uv:
	@echo "uv not found: installing it into .tools/ with pip"
	python3 -m venv $(CURDIR)/.tools
	$(CURDIR)/.tools/bin/python -m pip install --quiet --disable-pip-version-check uv

setup: $(UV)
	$(UV) sync --frozen --compile-bytecode

demo: setup
	$(RUN) ptm demo --output-dir runs/demo

test: setup
	$(RUN) pytest -q

lint: setup
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	$(RUN) mypy packages/core/src/ptm_core packages/knowledge/src/ptm_knowledge packages/multilingual/src/ptm_multilingual packages/multimodal/src/ptm_multimodal flows

bench: setup
	$(RUN) python -m benchmarks.run

format: setup
	$(RUN) ruff check --fix .
	$(RUN) ruff format .

clean:
	rm -rf runs .pytest_cache .mypy_cache .ruff_cache
