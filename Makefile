# make test  — create .venv if missing, install everything, run the whole test suite
# make train — same setup, then `llm-gym train` (tiny model, llm/Math-v0, SFT warm start + GRPO)
#
# Torch: on a machine without an NVIDIA GPU we install the CPU build first (TORCH_CPU_SPEC), so the
# plain `torch` requirement of the [train] extra never pulls a multi-GB CUDA build. With a GPU
# (nvidia-smi present) the [train] extra's `torch` comes from PyPI with CUDA. Override with
# `make TORCH_SPEC='torch==X' ...`; add an index with TORCH_PIP_ARGS='--index-url ...'.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
TORCH_CPU_SPEC ?= torch==2.13.0
TORCH_PIP_ARGS ?=
HAS_GPU := $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo 1)
TORCH_SPEC ?= $(if $(HAS_GPU),torch,$(TORCH_CPU_SPEC))
PYTEST_ARGS ?=
TRAIN_ARGS ?=

.PHONY: test test-cookbook train install bench bench-env clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q $(TORCH_PIP_ARGS) "$(TORCH_SPEC)"
	$(PIP) install -q -e ".[train,dev]"
	touch $@

install: $(VENV)/.installed

test: $(VENV)/.installed
	$(PY) -m pytest -q -n 2 $(PYTEST_ARGS)
	$(MAKE) test-cookbook

# The Tinker cookbook's own rollout code running our envs. It pins transformers<=5.5.4 (older than
# the [train] extra's), so it gets a venv of its own with only the env library and the cookbook.
COOKBOOK_VENV ?= .venv-cookbook
$(COOKBOOK_VENV)/.installed: pyproject.toml
	test -x $(COOKBOOK_VENV)/bin/python || $(PYTHON) -m venv $(COOKBOOK_VENV)
	$(COOKBOOK_VENV)/bin/python -m pip install -q --upgrade pip
	$(COOKBOOK_VENV)/bin/python -m pip install -q $(TORCH_PIP_ARGS) "$(TORCH_SPEC)"
	$(COOKBOOK_VENV)/bin/python -m pip install -q -e ".[cookbook]" pytest
	touch $@

test-cookbook: $(COOKBOOK_VENV)/.installed
	LLM_GYM_REQUIRE_COOKBOOK=1 $(COOKBOOK_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/test_adapter_tinker.py tests/conformance

train: $(VENV)/.installed
	$(VENV)/bin/llm-gym train $(TRAIN_ARGS)

$(VENV)/.bench-installed: $(VENV)/.installed
	$(PIP) install -q -e ".[bench]"
	touch $@

bench-env: $(VENV)/.bench-installed
	$(PY) benchmarks/env_throughput.py

bench: bench-env
	$(PY) benchmarks/trainer_vs_trl.py

clean:
	rm -rf $(VENV) $(COOKBOOK_VENV) runs .pytest_cache
