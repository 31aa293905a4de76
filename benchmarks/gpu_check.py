"""The GPU check of issue 24 item 5: `llm-gym train` in bf16 on CUDA, measured in one short script.

Three runs of the real CLI, each in its own process, each bounded by `--stage-timeout` seconds:

1. `tiny-fp32` and 2. `tiny-bf16`: the README's default command (`llm-gym train`: llm/Math-v0, the
   ~1M-parameter byte-level preset, SFT warm start then 120 GRPO steps) with `--device cuda`, without
   and with `--bf16`: does bf16 mixed precision learn as fp32 does (held-out accuracy before/after RL,
   95% intervals), and what a step costs on a GPU for a model this small (launch-bound).
2. `qwen3-0.6b-bf16`: a Qwen3-0.6B-shaped model (28 layers, hidden 1024, the real Qwen3 BPE built
   offline, tied embeddings; *random* weights, since no checkpoint can be downloaded) trained a few
   GRPO steps in bf16 with no SFT. Its rewards are all 0, so the run keeps constant groups
   (`--no-remove-constant-reward-groups`) to put every sampled token through the training forward and
   backward: it measures seconds per step, sampled and trained tokens per second, peak GPU memory and
   the bf16 sampler/trainer disagreement (`sampler_kl`), not learning.

Prepared here, run on the device machine (`device` tool; see BENCHMARKS.md, "GPU check", for the
command that carries the wheels and the Qwen3 tokenizer). `--small` shrinks everything so the same
path can be dry-run on a CPU (`--device cpu --small`). Writes `<out>/gpu_check.json` and one log per
stage.

    python benchmarks/gpu_check.py --out OUT --tokenizer .gpu/qwen3 [--device cuda] [--small]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# The CLI in a child process that prints its peak CUDA memory on the way out.
_PROGRAM = ("import atexit, sys, torch\n"
            "def _peak():\n"
            "    if torch.cuda.is_available():\n"
            "        print('peak_cuda_memory_gib', torch.cuda.max_memory_allocated() / 2**30, flush=True)\n"
            "atexit.register(_peak)\n"
            "from llm_gym.cli import main\n"
            "sys.exit(main())\n")
CLI = [sys.executable, "-c", _PROGRAM, "train"]


def _environment(device: str) -> dict:
    import torch
    import transformers

    info = {"python": sys.version.split()[0], "torch": torch.__version__,
            "transformers": transformers.__version__, "device": device}
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name(0)
        info["cuda"] = torch.version.cuda
        info["bf16_supported"] = torch.cuda.is_bf16_supported()
    return info


def _build_qwen3_shaped(model_dir: Path, tokenizer_dir: Path, small: bool) -> dict:
    """A Qwen3-0.6B-shaped causal LM with random weights (seed 0) and the real Qwen3 tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen3Config

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    shape: dict[str, Any] = dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=128)
    if small:
        shape = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, head_dim=16)
    config = Qwen3Config(vocab_size=151936, max_position_embeddings=4096, tie_word_embeddings=True,
                         bos_token_id=None,
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, **shape)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(str(model_dir))
    tok.save_pretrained(str(model_dir))
    return {"parameters": sum(p.numel() for p in model.parameters()), **shape}


def _run_stage(name: str, args: list[str], out: Path, runs: Path, timeout: float) -> dict:
    """One `llm-gym train` run; its log goes to `out`, its run directory (checkpoints: GBs for the
    0.6B model) to `runs`, and its summary and every metrics record into the returned dict."""
    run_dir = runs / name
    shutil.rmtree(run_dir, ignore_errors=True)
    cmd = CLI + args + ["--output-dir", str(runs), "--run-name", name, "--no-progress", "--overwrite"]
    start = time.perf_counter()
    with open(out / f"{name}.log", "w") as log:
        log.write(" ".join(cmd) + "\n")
        log.flush()
        try:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    result: dict = {"args": args, "rc": rc, "wall_s": round(time.perf_counter() - start, 1)}
    summary = run_dir / "summary.json"
    if summary.is_file():
        s = json.loads(summary.read_text())
        result["summary"] = {k: v for k, v in s.items() if not k.endswith("_history")}
    records = []
    metrics = run_dir / "metrics.jsonl"
    if metrics.is_file():
        for line in metrics.read_text().splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    steps = [r for r in records if "step_seconds" in r]
    if steps:
        body = steps[1:] or steps  # step 1 pays CUDA/allocator warm-up
        mean = lambda key: float(f"{sum(r.get(key, 0.0) for r in body) / len(body):.4g}")  # noqa: E731
        result["steps_logged"] = len(steps)
        result["first_step_s"] = round(steps[0]["step_seconds"], 3)
        for key in ("step_seconds", "sample_seconds", "tokens_per_s", "sampled_tokens", "trained_tokens",
                    "sampler_kl", "grad_norm", "reward"):
            result[f"mean_{key}_after_first"] = mean(key)
    result["records"] = records
    for line in (out / f"{name}.log").read_text().splitlines():
        if line.startswith("peak_cuda_memory_gib"):
            result["peak_cuda_memory_gib"] = round(float(line.split()[1]), 2)
    print(json.dumps({name: {k: v for k, v in result.items() if k != "records"}}, default=str), flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tokenizer", type=Path, required=True, help="a saved Qwen3 tokenizer dir")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--small", action="store_true", help="dry run: tiny shapes and few steps")
    parser.add_argument("--stage-timeout", type=float, default=170.0)
    parser.add_argument("--stages", default="qwen3-0.6b-bf16,tiny-bf16,tiny-fp32",
                        help="comma-separated, run in this order")
    opts = parser.parse_args()
    opts.out.mkdir(parents=True, exist_ok=True)
    scratch = Path(os.environ.get("TMPDIR", "/tmp")) / "llm_gym_gpu_check"
    runs = scratch / "runs"
    report: dict = {"environment": _environment(opts.device), "stages": {}}
    dump = lambda: (opts.out / "gpu_check.json").write_text(json.dumps(report, indent=1, default=str))  # noqa: E731
    dump()

    tiny_steps = ["--steps", "6", "--sft-steps", "20", "--eval-problems", "20"] if opts.small else []
    for name in opts.stages.split(","):
        if name in ("tiny-fp32", "tiny-bf16"):
            precision = "--bf16" if name == "tiny-bf16" else "--no-bf16"
            report["stages"][name] = _run_stage(
                name, ["--device", opts.device, "--seed", "0", precision, *tiny_steps], opts.out,
                runs, opts.stage_timeout)
        elif name.startswith("qwen3-0.6b-bf16"):  # "-kN": with --max-staleness N
            model_dir = scratch / "qwen3-0.6b-shaped"
            shutil.rmtree(model_dir, ignore_errors=True)
            t0 = time.perf_counter()
            shape = _build_qwen3_shaped(model_dir, opts.tokenizer, opts.small)
            report["qwen3_shape"] = {**shape, "build_s": round(time.perf_counter() - t0, 1)}
            report["stages"][name] = _run_stage(name, [
                "--device", opts.device, "--bf16", "--seed", "0", "--model", str(model_dir),
                "--env-kwargs", json.dumps({"tokenizer": str(model_dir)}), "--no-sft",
                "--steps", "2" if opts.small else "6", "--group-size", "8", "--groups-per-batch", "8",
                "--max-tokens", "64", "--no-remove-constant-reward-groups",
                "--eval-problems", "16" if opts.small else "64",
                "--max-staleness", name.rpartition("-k")[2] if "-k" in name else "0",
            ], opts.out, runs, opts.stage_timeout)
        else:
            parser.error(f"unknown stage {name!r}; choose from tiny-fp32, tiny-bf16, qwen3-0.6b-bf16, "
                         "qwen3-0.6b-bf16-k1 (--max-staleness 1), ...")
        dump()
    print(json.dumps({k: v for k, v in report.items() if k != "stages"}, indent=1, default=str))


if __name__ == "__main__":
    main()
