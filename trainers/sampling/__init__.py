"""Sampling backends: the policy as a batched `TokenCompleter` that rollouts `await`.

Rollouts are plain coroutines that each `await policy(prompt, stop, max_tokens=...)`; a sampler
gathers the concurrent calls of one event loop into one batched generation and returns each call's
sampled tokens with their logprobs. `batching.BatchingCompleter` is that call-gathering half,
shared by both backends; `hf.HFSampler` generates with an in-process Hugging Face model (the
default, `--sampler hf`); `vllm.VLLMSampler` generates with a vLLM engine (`ColocateEngine`
in-process, `ServerEngine` for a vLLM server, see `vllm_server`; `--sampler vllm`), and
`vllm_backend` is the trainer's glue to it (one engine per run, a sampler per step, weight pushes
after every optimizer step). The backends are imported when their names are first used, so
`import trainers.sampling` imports neither torch nor vLLM.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the lazy names below are, for type checkers (no import at run time)
    from trainers.sampling.batching import BatchingCompleter
    from trainers.sampling.hf import HFSampler, SamplerStats
    from trainers.sampling.vllm import ColocateEngine, ServerEngine, VLLMSampler

__all__ = ["BatchingCompleter", "ColocateEngine", "HFSampler", "SamplerStats", "ServerEngine",
           "VLLMSampler"]

_HOMES = {
    "BatchingCompleter": "trainers.sampling.batching",
    "HFSampler": "trainers.sampling.hf",
    "SamplerStats": "trainers.sampling.hf",
    "VLLMSampler": "trainers.sampling.vllm",
    "ColocateEngine": "trainers.sampling.vllm",
    "ServerEngine": "trainers.sampling.vllm",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'trainers.sampling' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
