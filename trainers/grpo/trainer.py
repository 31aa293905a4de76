"""The GRPO training loop: rollouts through `llm_gym`, group-centred advantages, a policy loss.

One step, top to bottom (docs/design.md, "Data flow of one training step"):

1. `dataset.get_batch(step)` gives this step's `EnvGroupBuilder`s (each rank takes its share);
2. every group is rolled out *concurrently* (`asyncio.gather` over `do_group_rollout`) against
   one `HFSampler`, which gathers the concurrent calls into batched generation;
3. `compute_advantages` centres returns within each group (per episode, or with `credit="turn"`
   each turn's return-to-go per turn index), `assemble_training_data` turns the trajectories into
   `Datum`s (sampled tokens mask 1, env/prompt tokens mask 0);
4. micro-batches of datums go through forward/backward with gradient accumulation; the sampling
   logprobs stored in the datums are the old policy's, so an on-policy step needs one forward only;
   a group's shared prompt is computed once per micro-batch and its KV cache expanded to the
   group's rows (`shared_prefix.py`, `GRPOConfig.share_prefix`);
5. clip, optimizer step, scheduler step; log, evaluate, checkpoint.

With `max_staleness` k > 0, step 1 instead takes a batch sampled ahead, in a background thread, by
the weights of step max(0, s - k) (`async_rollouts.py`; checkpoints hold the batches sampled
ahead, so resume stays exact); the loss's importance ratio uses the sampler's recorded logprobs,
so nothing changes in steps 2-5.

With `rollout_retries` N > 0, step 2 runs each group under `RetryOnFailure(N)` instead of
`FailFast`: a failed rollout (an env error, a lost Ray worker) is retried on a fresh env, a group
failing past its N retries is left out of the batch, and the step logs both counts.

`accelerate` places the model and runs data parallelism (DDP, gloo on CPU); the loss weights are
normalised over the *global* batch, so 1 process or N, one micro-batch or many, the gradient is
the same. `train(cfg)` returns the run summary also written to `<run_dir>/summary.json`.

The run directory belongs to one run (`run_dir.plan_run_dir`, decided before any model is built): a new
run into a directory that already holds one is refused unless `--overwrite`; `--resume` continues
from the newest intact checkpoint (`checkpoint.latest_intact_checkpoint`) only when the config
matches the run's `config.json` (fields named in `--resume-override` may change, and each resume is
recorded in `resumes.jsonl`; `config.json` is never rewritten), and a finished run resumes as a
no-op.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import json
import math
import random
import shlex
import time
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence, cast

import numpy as np
import torch

from llm_gym.rl import (
    Datum,
    EnvGroupBuilder,
    RetryOnFailure,
    RLDataset,
    RolloutResult,
    RolloutStrategy,
    StopReason,
    TrajectoryGroup,
    assemble_training_data,
    compute_advantages,
    do_group_rollout_and_filter_constant_reward,
    turn_rewards,
)
from llm_gym.rl.outcome import episode_correct
from llm_gym.rl.rollout_keys import group_key
from llm_gym.rl.rollouts import RolloutLimits
from trainers._trl_compat import (
    entropy_from_logits,
    nanstd,
    pad,
    selective_log_softmax,
    unwrap_model_for_generation,
)
from trainers.grpo.async_rollouts import AsyncRollouts, SampledBatch
from trainers.grpo.checkpoint import load_checkpoint, save_checkpoint
from trainers.grpo.config import ConfigError, GRPOConfig
from trainers.grpo.fit import fit_lr_to_warm_start
from trainers.grpo.logging import MetricsLogger, read_records
from trainers.grpo.run_dir import (
    SCHEDULE_FIELDS,
    clear_run_files,
    decided_on_main,
    plan_run_dir,
    record_resume,
    retune_optimizer,
)
from trainers.grpo.losses import LossParams, policy_loss, token_weights
from trainers.grpo.shared_prefix import (
    pack_micro_batches,
    plan_shared_prefix,
    prefix_key,
    shared_prefix_logits,
    split_by_tokens,
    supports_shared_prefix,
)

if TYPE_CHECKING:
    from llm_gym.rl.data_processing import AdvantageScale, Credit

EVAL_SEED = 1234  # evaluations of every run (any --seed) use the same held-out problems
MIN_EVAL_EPISODES = 100  # distinct held-out episodes below which an evaluation warns (issue 23)


# ------------------------------------------------------------------------------------------------
# Rollouts and evaluation
# ------------------------------------------------------------------------------------------------
async def _rollout_groups(builders, policy, limits, on_group_done=None,
                          strategy: RolloutStrategy | None = None,
                          dropped: list[int] | None = None) -> list[TrajectoryGroup]:
    async def one(index: int, builder):
        # The group's place in the batch keys its trajectories' sampling (llm_gym.rl.rollout_keys),
        # so the same seed gives the same rollouts however the sampler's batches were timed. A
        # retried rollout takes the group's next key (G, G + 1, ...): a stream of its own.
        group_key(index)
        # The cookbook's caller-side wrapper: a group the strategy drops comes back as None
        # (logged as a warning there) and is left out of the batch.
        group = await do_group_rollout_and_filter_constant_reward(
            policy, builder, max_tokens=None, temperature=None,
            do_remove_constant_reward_groups=False, strategy=strategy, limits=limits)
        if on_group_done is not None:
            on_group_done()
        return group

    groups = await asyncio.gather(*[one(i, b) for i, b in enumerate(builders)])
    if dropped is not None:
        dropped.extend(i for i, g in enumerate(groups) if g is None)
    return [g for g in groups if g is not None]


def rollout_groups(builders: Sequence, policy, limits: RolloutLimits | None = None,
                   on_group_done: Callable[[], None] | None = None,
                   strategy: RolloutStrategy | None = None,
                   dropped: list[int] | None = None) -> list[TrajectoryGroup]:
    """Roll out all groups concurrently, so the sampler sees them as one batch;
    `on_group_done()` is called as each group finishes (for a progress bar). `strategy` (None:
    `FailFast`) decides what a failed rollout does; the groups it drops are left out, and their
    indices in `builders` appended to `dropped` when given."""
    groups: list[TrajectoryGroup] = []

    async def main() -> None:
        # The result travels outside the task: asyncio.run reprs its main task when it restores
        # the SIGINT handler, and the repr of a task holding a batch of trajectories cost ~2 ms.
        groups.extend(await _rollout_groups(list(builders), policy, limits, on_group_done, strategy,
                                            dropped))

    asyncio.run(main())
    return groups


def rollout_strategy(cfg: GRPOConfig) -> RolloutStrategy | None:
    """The strategy of `cfg.rollout_retries`: None (the default `FailFast`) for 0, else
    `RetryOnFailure(max_retries=N)` with its trajectories in slot order (`_InSlotOrder`)."""
    if cfg.rollout_retries == 0:
        return None
    return _InSlotOrder(RetryOnFailure(max_retries=cfg.rollout_retries))


@dataclass(frozen=True)
class _InSlotOrder(RolloutStrategy):
    """`inner`'s group with its trajectories in the order their envs were made (the group's slots,
    then retries in the order they started), not in the order they finished (`RetryOnFailure`'s):
    which rollout finishes first depends on timing (a grader in a thread, a Ray worker's latency),
    and the order of a group's datums reaches the loss's float sums."""

    inner: RolloutStrategy

    @property
    def catches_group_errors(self) -> bool:
        return self.inner.catches_group_errors

    async def execute(self, env_group_builder, policy, limits=None) -> RolloutResult:
        made: list = []
        result = await self.inner.execute(_RecordedEnvs(env_group_builder, made), policy, limits=limits)
        slot = {id(env): i for i, env in enumerate(made)}
        order = sorted(range(len(result.envs)), key=lambda i: slot[id(result.envs[i])])
        return RolloutResult([result.trajectories[i] for i in order],
                             [result.envs[i] for i in order], result.errors)


class _RecordedEnvs(EnvGroupBuilder):
    """`builder`, whose `make_envs` also appends the envs it made to `made` (a strategy calls only
    `make_envs`; grading and cleanup go to `builder` itself)."""

    def __init__(self, builder: EnvGroupBuilder, made: list) -> None:
        self.builder, self.made = builder, made

    async def make_envs(self):
        envs = list(await self.builder.make_envs())
        self.made.extend(envs)
        return envs

    def logging_tags(self) -> list[str]:
        return self.builder.logging_tags()


def rollout_limits(cfg: GRPOConfig, sampler) -> RolloutLimits:
    """Each episode's bounds: `cfg.max_turns`, and the sampler's context window (the model's
    `max_position_embeddings`, or the vLLM engine's `max_model_len`) as the trajectory's token
    budget, so a multi-turn episode whose context grows past it ends there (`StopReason.MAX_TOKENS`,
    counted as `frac_context_full`) instead of running on positions the model never saw (HF) or
    crashing the step (vLLM refuses such a prompt)."""
    # max_turn_tokens: the budget the runner passes each call is min(turn cap, room left in the
    # window); without the turn cap it would be the whole room, overriding the sampler's max_tokens.
    return RolloutLimits(max_turns=cfg.max_turns, max_turn_tokens=cfg.max_tokens,
                         max_trajectory_tokens=getattr(sampler, "context_window", None))


def group_stats(groups: Sequence[TrajectoryGroup]) -> dict[str, float]:
    rewards = [r for g in groups for r in g.get_total_rewards()]
    correct = [episode_correct(t) for g in groups for t in g.trajectories_G]
    n_tokens = [sum(len(tr.ac.tokens) for tr in t.transitions) for g in groups for t in g.trajectories_G]
    # within-group reward spread (NaN-padded for groups that lost rollouts): 0 means no signal
    nan: Any = float("nan")  # TRL's `pad` annotates its fill as int; its torch.full takes any number
    rewards_PG = pad([torch.tensor(g.get_total_rewards(), dtype=torch.float32) for g in groups],
                     nan) if groups else torch.zeros(0, 1)
    std_P = nanstd(rewards_PG, dim=1) if len(groups) else torch.zeros(0)
    return {
        "group_std_sum": float(torch.nan_to_num(std_P).sum()),
        # equal rewards exactly, as the constant-group filter decides (a float32 std of eight equal
        # -0.8s is ~6e-8, which counted every constant group as mixed)
        "mixed_groups": float(sum(len(set(g.get_total_rewards())) > 1 for g in groups)),
        "groups": float(len(groups)),
        "reward_sum": float(sum(rewards)),
        "correct_sum": float(sum(correct)),
        "episodes": float(len(rewards)),
        "sampled_tokens": float(sum(n_tokens)),
        "context_full": float(sum(t.stop_reason == StopReason.MAX_TOKENS
                                  for g in groups for t in g.trajectories_G)),
        # failed rollouts retried (`rollout_retries`): under `RetryOnFailure` every error a group
        # that came back records was retried (an abandoned rollout's timeout is recorded twice)
        "retried": float(sum(e.error_type != "AbandonedRollout"
                             for g in groups for e in g.rollout_errors)),
    }


MAX_ENV_METRICS = 32  # keys per step in metrics.jsonl; an env reporting more keeps the first, sorted


def episode_metric_means(groups: Sequence[TrajectoryGroup]) -> dict[str, float]:
    """Means over this rank's episodes of each numeric metric the env reported on an episode's last
    step (its episode-level metrics: `tool_calls`, `used_tool`, `parse_error`, `stop/...`), logged as
    `env/<key>`; an episode without the key counts as 0. Rank-local (keys may differ by rank)."""
    finals = [t.transitions[-1].metrics for g in groups for t in g.trajectories_G if t.transitions]
    if not finals:
        return {}
    keys = sorted({k for m in finals for k, v in m.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool)})[:MAX_ENV_METRICS]
    return {f"env/{k}": float(sum(float(m.get(k, 0.0)) for m in finals) / len(finals)) for k in keys}


TURN_CREDIT_TURNS = 8  # `credit="turn"` logs turns 0..7 one by one and pools later ones


def turn_credit_sums(groups: Sequence[TrajectoryGroup], advantages_P: Sequence[np.ndarray]) -> np.ndarray:
    """[3, TURN_CREDIT_TURNS + 1] sums over this rank's trained (episode, turn) pairs, by turn
    index (turns from `TURN_CREDIT_TURNS` on share the last column): their count, their rewards
    (`turn_rewards`: a turn's own reward, the group reward on the last turn) and the absolute
    values of their advantages (`compute_advantages(credit="turn")`'s [G, T] arrays). Summed over
    ranks, `turn_credit_metrics` turns them into means."""
    sums = np.zeros((3, TURN_CREDIT_TURNS + 1))
    for group, adv_GT in zip(groups, advantages_P):
        for rewards_T, adv_T in zip(turn_rewards(group), adv_GT):
            column = np.minimum(np.arange(len(rewards_T)), TURN_CREDIT_TURNS)
            np.add.at(sums[0], column, 1.0)
            np.add.at(sums[1], column, rewards_T)
            np.add.at(sums[2], column, np.abs(np.asarray(adv_T, dtype=np.float64)[: len(rewards_T)]))
    return sums


def turn_credit_metrics(sums: np.ndarray) -> dict[str, float]:
    """`turn_credit/reward_mean/turn_<t>` and `turn_credit/advantage_abs_mean/turn_<t>` (t from 0,
    `turn_8plus` for the pooled later turns) from `turn_credit_sums`; a turn no episode reached
    logs nothing."""
    names = [f"turn_{t}" for t in range(TURN_CREDIT_TURNS)] + [f"turn_{TURN_CREDIT_TURNS}plus"]
    metrics: dict[str, float] = {}
    for column, name in enumerate(names):
        count = float(sums[0, column])
        if count > 0:
            metrics[f"turn_credit/reward_mean/{name}"] = float(sums[1, column]) / count
            metrics[f"turn_credit/advantage_abs_mean/{name}"] = float(sums[2, column]) / count
    return metrics


# ------------------------------------------------------------------------------------------------
# Data -> tensors
# ------------------------------------------------------------------------------------------------
@dataclass
class MicroBatch:
    input_ids: torch.Tensor  # [B, T]
    attention_mask: torch.Tensor  # [B, T]; [B, S + T] with a shared prefix
    target_tokens: torch.Tensor  # [B, T]
    sampling_logp: torch.Tensor  # [B, T]
    advantages: torch.Tensor  # [B, T]
    mask: torch.Tensor  # [B, T], 1 on sampled tokens only
    # Shared prefix (`shared_prefix.py`): the rows above are each datum's tail after its prefix.
    prefix_ids: torch.Tensor | None = None  # [C, S], the C distinct prefixes, right-padded
    prefix_of_row: torch.Tensor | None = None  # [B], which prefix each row continues
    position_ids: torch.Tensor | None = None  # [B, T], continuing from the prefix's length
    # Padding-free layout (`packed_tails.py`): the rows' N real tokens in one sequence.
    packed_ids: torch.Tensor | None = None  # [M]: the prefixes' tokens, then the rows'
    packed_positions: torch.Tensor | None = None  # [M]
    layout: Any = None  # packed_tails.PackedLayout


def collate(data: Sequence[Datum], pad_token_id: int, device: torch.device,
            share_prefix: bool = False, pack: bool = False) -> MicroBatch:
    """Right-pad datums into one micro-batch (as TRL's `pad` does); padding gets mask 0.

    With `share_prefix`, datums that start with the same untrained tokens (a group's prompt) get
    that prefix once in `prefix_ids` and their rows hold only the tokens after it, when that saves
    enough work (`shared_prefix.plan_shared_prefix`); otherwise the plain layout. With `pack`, the
    micro-batch also carries the padding-free layout of its rows (`packed_tails.py`), which
    `token_logprobs` uses where the model and the rows' sizes allow. Built with whole-array numpy
    operations (a per-row tensor loop cost ~50 ms for 256 rows)."""
    tokens = [d.model_input.to_ints() for d in data]
    plan = None
    if share_prefix:
        keys = [prefix_key(t, d.loss_fn_inputs["mask"]) for t, d in zip(tokens, data)]
        plan = plan_shared_prefix(tokens, keys)
    split = np.asarray(plan.split if plan is not None else [0] * len(data), dtype=np.int64)
    rows = _Ragged([len(t) for t in tokens], split)

    def field(values: Sequence, dtype, fill) -> torch.Tensor:
        return torch.from_numpy(rows.padded(values, dtype, fill)).to(device)

    mb = MicroBatch(
        input_ids=field(tokens, np.int64, pad_token_id),
        attention_mask=torch.from_numpy(rows.inside.astype(np.int64)).to(device),
        target_tokens=field([d.loss_fn_inputs["target_tokens"] for d in data], np.int64, 0),
        sampling_logp=field([d.loss_fn_inputs["logprobs"] for d in data], np.float32, 0),
        advantages=field([d.loss_fn_inputs["advantages"] for d in data], np.float32, 0),
        mask=field([d.loss_fn_inputs["mask"] for d in data], np.float32, 0),
    )
    prefixes = None
    if plan is not None:
        prefixes = _Ragged([len(p) for p in plan.prefixes], np.zeros(len(plan.prefixes), np.int64))
        of_row = np.asarray(plan.prefix_of_row, dtype=np.int64)
        mb.prefix_ids = torch.from_numpy(prefixes.padded(plan.prefixes, np.int64, pad_token_id)).to(device)
        mb.prefix_of_row = torch.from_numpy(of_row).to(device)
        mb.attention_mask = torch.from_numpy(np.concatenate(
            [prefixes.inside[of_row], rows.inside], axis=1).astype(np.int64)).to(device)
        mb.position_ids = torch.from_numpy(split[:, None] + np.arange(rows.width)).to(device)
    if pack:
        _add_packed_layout(mb, tokens, rows, plan, prefixes, device)
    return mb


class _Ragged:
    """Row r's entries `start[r] ..< length[r]` of ragged per-row sequences, as one flat array
    (`gather`) or right-padded to `[rows, width]` (`padded`); `slots` are the flat entries'
    positions in the padded layout, `inside` marks them."""

    def __init__(self, lengths: Sequence[int], start: np.ndarray) -> None:
        self.start = start
        self.lengths = np.asarray(lengths, dtype=np.int64) - start
        self.width = max(int(self.lengths.max()) if self.lengths.size else 0, 1)
        offsets = np.cumsum(self.lengths) - self.lengths
        self.row_of = np.repeat(np.arange(self.lengths.size), self.lengths)
        self.column = np.arange(int(self.lengths.sum())) - offsets[self.row_of]
        self.slots = self.row_of * self.width + self.column
        self.inside = np.arange(self.width)[None, :] < self.lengths[:, None]

    def gather(self, values: Sequence, dtype) -> np.ndarray:
        parts = [np.asarray(v, dtype=dtype)[s:] for v, s in zip(values, self.start.tolist())]
        return np.concatenate(parts) if parts else np.zeros(0, dtype)

    def padded(self, values: Sequence, dtype, fill) -> np.ndarray:
        out = np.full(self.lengths.size * self.width, fill, dtype=dtype)
        out[self.slots] = self.gather(values, dtype)
        return out.reshape(self.lengths.size, self.width)

    def causal(self) -> np.ndarray:
        """[rows, 1, query, key]: key at or before the query, inside the row."""
        cols = np.arange(self.width)
        return (cols[None, :] <= cols[:, None])[None, None] & self.inside[:, None, None, :]


def _add_packed_layout(mb: MicroBatch, tokens: list[list[int]], rows: _Ragged, plan,
                       prefixes: _Ragged | None, device: torch.device) -> None:
    """The padding-free layout of `packed_tails.py`: prefixes' tokens, then each row's own."""
    from trainers.grpo.packed_tails import PackedLayout

    def tensor(x: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(x)).to(device)

    layout = PackedLayout(rows=rows.lengths.size, width=rows.width, flat_index=tensor(rows.slots),
                          own_allowed=tensor(rows.causal()))
    ids = rows.gather(tokens, np.int64)
    positions = rows.start[rows.row_of] + rows.column
    if plan is not None:
        assert prefixes is not None  # `collate` builds the prefixes' layout with every plan
        of_row = np.asarray(plan.prefix_of_row, dtype=np.int64)
        groups = len(plan.prefixes)
        layout.prefixes, layout.prefix_width = groups, prefixes.width
        layout.prefix_index = tensor(prefixes.slots)
        layout.prefix_causal = tensor(prefixes.causal())
        layout.prefix_allowed = tensor(prefixes.inside[of_row][:, None, None, :])
        layout.prefix_of_row = tensor(of_row)
        n = layout.rows
        if n % groups == 0 and np.array_equal(of_row, np.repeat(np.arange(groups), n // groups)):
            layout.group_size = n // groups  # equal consecutive runs: no per-row key copies
        ids = np.concatenate([prefixes.gather(plan.prefixes, np.int64), ids])
        positions = np.concatenate([prefixes.column, positions])
    mb.packed_ids = tensor(ids)
    mb.packed_positions = tensor(positions)
    mb.layout = layout


def token_logprobs(model, mb: MicroBatch, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(log p(target) [B, T], logits [B, T, V] in float32; padding positions 0). The log-probs
    use logits divided by the sampling temperature, as the sampler did, so the ratio p/q compares
    the same distributions (the logits returned are the model's own). A micro-batch with a
    shared prefix runs it once and each row's tail against its KV cache; one with a packed layout
    that fits (`packed_tails.py`) feeds only real tokens."""
    logp, logits, flat = _token_logprobs(model, mb, temperature, trained_only=False)
    if flat is not None:  # packed [N, V]: scattered into the padded layout
        rows, width = mb.layout.rows, mb.layout.width
        logits = logits.new_zeros((rows * width, logits.shape[-1])).index_copy(0, flat, logits)
        logits = logits.view(rows, width, -1)
    return logp, logits


def _trained_entropy_sum(logits: torch.Tensor, flat, mb: MicroBatch, temperature: float):
    """Sum of the sampling distribution's entropy over the trained (mask 1) positions, from
    `_token_logprobs`' logits as they come: padded [B, T, V], or packed [N, V] (`flat` maps them
    into [B*T]) -- so the packed path never builds a padded [B, T, V] copy (1.2 GB in float32
    for 256 x 8 slots of a 151k vocabulary) just for this metric."""
    with torch.no_grad():
        sel = mb.mask.bool()
        if flat is not None:
            sel = sel.reshape(-1)[flat]
        return entropy_from_logits(logits.detach()[sel] / temperature).sum()


def _token_logprobs(model, mb: MicroBatch, temperature: float, trained_only: bool = True):
    """(log p [B, T], logits, flat): logits [B, T, V] with `flat` None, or the packed forward's
    [N, V] with `flat` their positions in the flattened [B*T]: the real tokens', or with
    `trained_only` just the trained (mask 1) ones' -- the loss, KL and entropy read nothing
    else, and log p is then 0 at the other positions."""
    if mb.layout is not None:
        from trainers.grpo import packed_tails

        config = packed_tails.base_model(model).config
        heads = int(getattr(config, "num_attention_heads", 1))
        prefix_width = 0 if mb.prefix_ids is None else int(mb.prefix_ids.shape[1])
        rows, width = mb.layout.rows, mb.layout.width
        trained = int(mb.mask.count_nonzero()) if trained_only else None
        if (packed_tails.supports_packing(model)
                and packed_tails.packed_fits(rows, width, prefix_width, heads)
                and packed_tails.packed_pays(config, rows, width, prefix_width,
                                             int(mb.layout.flat_index.numel()), trained)):
            try:
                logp, logits_N, flat = _packed_token_logprobs(model, mb, temperature, trained_only)
            except Exception as exc:  # noqa: BLE001 - only a model's first packed forward
                if not packed_tails.untested(model):  # once it has passed, errors are bugs
                    raise
                packed_tails.reject(model, f"{type(exc).__name__}: {exc}")
            else:
                if packed_tails.verified(model, logp.reshape(-1)[flat],
                                         lambda: _padded_token_logprobs(model, mb, temperature)[0]
                                         .reshape(-1)[flat]):
                    return logp, logits_N, flat
    return (*_padded_token_logprobs(model, mb, temperature), None)


def _packed_token_logprobs(model, mb: MicroBatch, temperature: float, trained_only: bool):
    """(log p [rows, width], logits [N, V] in float32, flat [N]): the real tokens, or with
    `trained_only` the trained ones (`_token_logprobs`)."""
    from trainers.grpo import packed_tails

    layout = mb.layout
    assert mb.packed_ids is not None and mb.packed_positions is not None  # set with every layout
    flat = layout.flat_index
    keep = None
    if trained_only:  # the row tokens whose log p the loss reads
        keep = mb.mask.reshape(-1)[flat].nonzero().squeeze(1)
        flat = flat[keep]
    logits_N = packed_tails.packed_logits(model, mb.packed_ids, mb.packed_positions, layout, keep).float()
    targets_N = mb.target_tokens.reshape(-1)[flat]
    # one row of N tokens: TRL's helper loops over rows, so [1, N, V] is one logsumexp call
    logp_N = selective_log_softmax(logits_N[None], targets_N[None], temperature=temperature)[0]
    rows, width = layout.rows, layout.width
    logp = logp_N.new_zeros(rows * width).index_copy(0, flat, logp_N).view(rows, width)
    return logp, logits_N, flat


def _padded_token_logprobs(model, mb: MicroBatch, temperature: float):
    if mb.prefix_ids is None:
        logits = model(input_ids=mb.input_ids, attention_mask=mb.attention_mask).logits
    else:
        assert mb.prefix_of_row is not None and mb.position_ids is not None  # set with prefix_ids
        logits = shared_prefix_logits(model, mb.prefix_ids, mb.prefix_of_row, mb.input_ids,
                                      mb.attention_mask, mb.position_ids)
    logits = logits.float()
    return selective_log_softmax(logits, mb.target_tokens, temperature=temperature), logits


# ------------------------------------------------------------------------------------------------
# One optimizer step's forward/backward over micro-batches
# ------------------------------------------------------------------------------------------------
def forward_backward(
    model,
    data: Sequence[Datum],
    cfg: GRPOConfig,
    accelerator,
    pad_token_id: int,
    ref_model=None,
) -> dict[str, float]:
    """Accumulate the gradient of this rank's share of the batch loss; return metrics.

    Every rank runs the same number of micro-batches (an empty one does a zero-loss forward) so
    DDP's gradient all-reduce always pairs up.
    """
    device = accelerator.device
    world = accelerator.num_processes
    params = LossParams(cfg.clip_eps_low, cfg.clip_eps_upper, cfg.dro_beta)
    share = cfg.share_prefix and supports_shared_prefix(model)
    micro = micro_batches(data, cfg.micro_batch_size, share, cfg.micro_batch_tokens)
    local = torch.tensor(
        [len(data), float(sum(d.loss_fn_inputs["mask"].sum() for d in data)), len(micro)],
        device=device, dtype=torch.float64)
    counts = accelerator.reduce(local.clone(), reduction="sum")
    n_micro = int(accelerator.reduce(local[2:].clone(), reduction="max").item()) if world > 1 else int(local[2])
    num_seqs, num_tokens = float(counts[0]), float(counts[1])

    sums = {k: torch.zeros((), device=device) for k in
            ("loss", "entropy_sum", "clip_frac_sum", "sampler_kl_sum", "kl_sum", "tokens")}
    for i in range(max(n_micro, 1)):
        chunk = micro[i] if i < len(micro) else []
        last = i == max(n_micro, 1) - 1
        sync = contextlib.nullcontext() if last or world == 1 else accelerator.no_sync(model)
        with sync, accelerator.autocast():
            if not chunk:  # this rank ran out of data: join the all-reduce with a zero gradient
                dummy = torch.full((1, 1), pad_token_id, dtype=torch.long, device=device)
                loss = model(input_ids=dummy).logits.sum() * 0.0
                accelerator.backward(loss)
                continue
            mb = collate(chunk, pad_token_id, device, share, pack=cfg.pack_rows)
            logp, logits, flat = _token_logprobs(model, mb, cfg.temperature)
            ref_logp = None
            if ref_model is not None:
                with torch.no_grad():
                    ref_logp = _token_logprobs(ref_model, mb, cfg.temperature)[0]
            weights = token_weights(mb.mask, cfg.loss_reduction, num_seqs, num_tokens, world)
            loss, stats = policy_loss(cfg.loss, logp, mb.sampling_logp, mb.advantages, mb.mask,
                                      weights, params, ref_logp, cfg.kl_beta)
            accelerator.backward(loss)
        with torch.no_grad():
            sums["entropy_sum"] += _trained_entropy_sum(logits, flat, mb, cfg.temperature)
            sums["loss"] += loss.detach() / world
            sums["tokens"] += mb.mask.sum()
            for k, v in stats.items():
                sums[k] += v
    packed = accelerator.reduce(torch.stack(list(sums.values())), reduction="sum")
    out = dict(zip(sums, packed.tolist()))  # the step's single host sync
    tokens = max(out["tokens"], 1.0)
    return {
        "loss": out["loss"],
        "entropy": out["entropy_sum"] / tokens,
        "clip_frac": out["clip_frac_sum"] / tokens,
        "sampler_kl": out["sampler_kl_sum"] / tokens,
        "kl": out["kl_sum"] / tokens,
        "trained_tokens": out["tokens"],
        "datums": num_seqs,
    }


def micro_batches(data: Sequence[Datum], size: int, share_prefix: bool,
                  max_tokens: int = 0) -> list[list[Datum]]:
    """This rank's micro-batches of at most `size` datums and (when `max_tokens` > 0) about
    `max_tokens` tokens (`shared_prefix.split_by_tokens`). With `share_prefix`, a group (a run of
    datums with the same untrained prefix) is not split across micro-batches where it fits in one,
    so its prompt is computed once."""
    tokens = [d.model_input.to_ints() for d in data]
    keys: Sequence[Any]
    if share_prefix:
        prefix_keys = [prefix_key(t, d.loss_fn_inputs["mask"]) for t, d in zip(tokens, data)]
        keys, shared = prefix_keys, [len(k) for k in prefix_keys]
        batches = pack_micro_batches(prefix_keys, size)
    else:
        keys = list(range(len(data)))  # nothing shared: every row costs its full length
        shared = [0] * len(keys)
        batches = [list(range(i, min(i + size, len(data)))) for i in range(0, len(data), size)]
    batches = split_by_tokens(batches, [len(t) for t in tokens], keys, shared, max_tokens)
    return [[data[i] for i in idx] for idx in batches]


# ------------------------------------------------------------------------------------------------
# Setup helpers
# ------------------------------------------------------------------------------------------------
def make_dataset(cfg: GRPOConfig, split: str, batch_size: int, group_size: int, seed: int) -> RLDataset:
    """`cfg.env`'s groups on `split` (`trainers.grpo.fit.RunEnv.dataset`): for an llm-gym id,
    episodes straight from the run's one `EnvSource` per split; for any other Gymnasium env,
    `GymRLDataset` over `gym.make`."""
    from trainers.grpo.fit import run_env

    return run_env(cfg).dataset(split, batch_size, group_size, seed)


def env_tokenizer_and_stops(cfg: GRPOConfig) -> tuple[Any, list[int]]:
    """The env's own tokenizer and the token ids that end a reply (its renderer's single-token stop
    sequences, then EOS), asked of the run's env (`RunEnv.tokenizer_and_stops`)."""
    from trainers.grpo.fit import run_env

    return run_env(cfg).tokenizer_and_stops()


@functools.lru_cache(maxsize=256)
def single_turn_env(env_id: str) -> bool:
    """True when the registered env's card says single-turn: its episodes never send a prompt that
    extends an earlier one, so the HF sampler need not keep KV caches for a next turn (copying
    every row's cache out of the batch cost ~10% of a single-turn step). False when unknown."""
    import gymnasium as gym

    try:
        from llm_gym.text_env import resolve_source

        source = gym.spec(env_id.rpartition(":")[2]).kwargs.get("source")
        card = resolve_source(source).card if source else None
    except Exception:  # noqa: BLE001 - unknown envs (bridges, third parties) keep the cache
        return False
    return card is not None and card.multi_turn is False


def builder_single_turn(builder) -> bool:
    """True for a group builder of a registered single-turn env (a `SourceEnvGroupBuilder`'s
    `env_id`, a `GymEnvGroupBuilder`'s id); False when unknown."""
    env_id = getattr(builder, "env_id", None) or getattr(builder, "env_id_or_factory", None)
    return isinstance(env_id, str) and single_turn_env(env_id)


def make_sampler(cfg: GRPOConfig, model, device, stop_ids, pad_id, temperature: float,
                 seed: int, max_batch_size: int, multi_turn: bool = True):
    if cfg.sampler == "vllm":
        from trainers.sampling import vllm_backend

        # The run's one engine (built on first use); its weights are brought up to date first.
        return vllm_backend.make_sampler(cfg, model, stop_ids, temperature, seed, max_batch_size)
    from trainers.sampling.hf import HFSampler

    return HFSampler(model, temperature=temperature, max_tokens=cfg.max_tokens,
                     stop_token_ids=stop_ids, pad_token_id=pad_id,
                     max_batch_size=max_batch_size, device=device, seed=seed,
                     reuse_kv=cfg.kv_reuse and multi_turn)


class BatchProgress:
    """A progress bar of episodes that advances a sampler batch at a time.

    Batched rollouts finish their episodes in bursts: every episode of a single-turn batch ends
    when its one generation does. Counted one by one, the first episode of a burst shows a rate of
    one episode per batch time and an ETA of (episodes left) x (batch time). Here finished
    episodes (`episode_done`) wait until the sampler starts its next batch (the batcher's
    `before_batch` hook) or the rollouts end (`flush`), and reach the bar together, so its rate and
    ETA are per batch; the postfix names the batch running. A policy without the hook (not a
    `trainers.sampling.batching.BatchingCompleter`) advances the bar per episode.
    """

    def __init__(self, bar, policy) -> None:
        self.bar = bar
        self.pending = 0
        self.batches = 0
        self.coalesce = hasattr(policy, "before_batch")
        if self.coalesce:
            policy.before_batch = self._batch_starts

    def episode_done(self, episodes: int = 1) -> None:
        self.pending += episodes
        if not self.coalesce:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.bar.update(self.pending)
            self.pending = 0

    def _batch_starts(self) -> None:
        self.flush()
        self.batches += 1
        self.bar.set_postfix_str(f"batch {self.batches}")


def wilson_interval(successes: float, n: float, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion (`successes` of `n`; z=1.96: 95%): unlike the
    normal approximation it stays inside [0, 1] and is not empty at 0 or n successes. (0, 1)
    for n = 0."""
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (max(0.0, centre - half), min(1.0, centre + half))


def eval_task_keys(builders: Sequence, groups: Sequence[TrajectoryGroup]) -> list[str]:
    """The held-out task of each evaluated episode, to count the distinct ones (`builders`: those
    whose groups were played, in the order of `groups`): for an llm-gym source's groups,
    `llm_gym.checks.task_identity` of the episode each group's seed draws (its declared `task_key`,
    else its state); for any other env, the first observation's tokens."""
    from llm_gym.checks import task_identity
    from llm_gym.rl.types import release_env
    from llm_gym.text_env import seeded_np_random
    from llm_gym.wrappers.source import SourceEnvGroupBuilder

    if builders and all(isinstance(b, SourceEnvGroupBuilder) and isinstance(b.seed, int)
                        for b in builders):
        keys = []
        for b in builders:
            env = b.source.make_env(seeded_np_random(b.seed)[0])
            keys.append(task_identity(b.source, env))
            release_env(env)
        return keys
    return [",".join(map(str, t.transitions[0].ob.to_ints())) for g in groups
            for t in g.trajectories_G if t.transitions]


def evaluate(cfg: GRPOConfig, model, accelerator, stop_ids, pad_id, n_problems: int | None = None,
             desc: str = "eval") -> dict[str, Any]:
    """Greedy accuracy and mean reward on `n_problems` held-out (`split="test"`) problems (one
    episode each); ranks split the problems and the counts are summed. Also `accuracy_ci95`, the
    95% Wilson score interval of the accuracy over the episodes (iid draws of held-out tasks),
    and `distinct_episodes`, how many different held-out tasks they played (`eval_task_keys`):
    fewer than `MIN_EVAL_EPISODES` makes the accuracy a statement about a handful of tasks. With
    `cfg.progress` the main process shows a bar of its episodes, labelled `desc`, advanced as
    each sampler batch finishes them (`BatchProgress`)."""
    from accelerate.utils import gather_object
    from tqdm.auto import tqdm

    n = n_problems or cfg.eval_problems
    builders = list(make_dataset(cfg, "test", n, 1, EVAL_SEED).get_batch(0))
    builders = builders[accelerator.process_index::accelerator.num_processes]
    show = cfg.progress and accelerator.is_main_process
    bar = tqdm(total=len(builders), desc=desc, unit="episode", leave=False, disable=not show,
               dynamic_ncols=True)
    with unwrap_model_for_generation(model, accelerator) as policy_model:
        was_training = policy_model.training
        policy_model.eval()
        sampler = make_sampler(cfg, policy_model, accelerator.device, stop_ids, pad_id, 0.0,
                               EVAL_SEED, max(len(builders), 1),
                               multi_turn=not single_turn_env(cfg.env))
        progress = BatchProgress(bar, sampler) if show else None
        dropped: list[int] = []
        groups = rollout_groups(builders, sampler, rollout_limits(cfg, sampler),
                                on_group_done=progress.episode_done if progress else None,
                                strategy=rollout_strategy(cfg), dropped=dropped)
        if progress is not None:
            progress.flush()
        policy_model.train(was_training)
    bar.close()
    s = group_stats(groups)
    t = accelerator.reduce(torch.tensor([s["correct_sum"], s["reward_sum"], s["episodes"]],
                                        device=accelerator.device, dtype=torch.float64), "sum")
    correct, reward, episodes = t.tolist()
    # Only the episodes played count: a group the retry strategy dropped is no evaluated task.
    gone = set(dropped)
    played = [b for i, b in enumerate(builders) if i not in gone]
    distinct = len(set(gather_object(eval_task_keys(played, groups))))
    return {"accuracy": correct / max(episodes, 1), "reward": reward / max(episodes, 1),
            "problems": int(episodes), "accuracy_ci95": list(wilson_interval(correct, episodes)),
            "distinct_episodes": distinct}


def eval_metrics(ev: dict[str, Any]) -> dict[str, Any]:
    """An evaluation's logged metrics: `eval/accuracy`, `eval/reward` and, when it has them, the
    interval's ends `eval/accuracy_ci95_low` / `_high` and `eval/distinct_episodes`."""
    out = {"eval/accuracy": ev["accuracy"], "eval/reward": ev["reward"]}
    if "accuracy_ci95" in ev:
        out["eval/accuracy_ci95_low"], out["eval/accuracy_ci95_high"] = ev["accuracy_ci95"]
    if "distinct_episodes" in ev:
        out["eval/distinct_episodes"] = ev["distinct_episodes"]
    return out


def few_eval_episodes_message(env_id: str, distinct: int, problems: int) -> str:
    """The one-line warning of an evaluation that covered fewer than `MIN_EVAL_EPISODES`
    distinct held-out episodes."""
    return (f"the held-out evaluation of {env_id} covered only {distinct} distinct episodes "
            f"({problems} problems), fewer than {MIN_EVAL_EPISODES}: its accuracy describes a "
            f"handful of tasks; raise --eval-problems or widen the env's test split "
            f"(--env-kwargs; `llm-gym check {env_id} --only split` counts it)")


def empty_steps_hint(sft_steps: int) -> str:
    """What to change when steps train on no datum (`sft_steps`: the run's SFT warm start)."""
    sft = ("an SFT warm start (--sft-steps N rather than --no-sft)" if sft_steps == 0
           else "a longer SFT warm start (more --sft-steps)")
    return (f"try {sft}, easier env settings (--env-kwargs), or a larger --group-size, so that "
            "some group's episodes get different rewards")


def dropped_groups_hint(rollout_retries: int) -> str:
    """What to change when every group of a step was dropped after its rollout retries."""
    return (f"the env's errors are logged as warnings: fix them, or raise --rollout-retries (now "
            f"{rollout_retries}) if they are rare")


def end_of_run_empty_steps(empty_steps: int, dropped_steps: int, cfg: GRPOConfig) -> str:
    """The line a run ends with when `empty_steps` of its steps trained on no datum,
    `dropped_steps` of them because every group was dropped after its rollout retries: each
    cause with its count and what to change."""
    causes = []
    if empty_steps > dropped_steps:
        causes.append(f"{empty_steps - dropped_steps} because no group had episodes with different "
                      f"rewards: {empty_steps_hint(cfg.sft_steps)}")
    if dropped_steps:
        causes.append(f"{dropped_steps} because every group was dropped, its rollouts failing past "
                      f"their retries: {dropped_groups_hint(cfg.rollout_retries)}")
    return f"{empty_steps} of {cfg.steps} GRPO steps trained on no datum; " + "; ".join(causes)


def empty_steps_message(empty_steps: int, step: int, groups: int, mixed_groups: int,
                        hint: str, groups_dropped: int = 0) -> str:
    """The warning of a run's first step that trained on no datum (`step`, 1-based; `groups`
    and `mixed_groups`: its rolled-out groups, and those whose rewards differ; `groups_dropped`:
    those its rollout retries could not save): why, how many such steps so far, and what to
    change (`hint`)."""
    if groups == 0 and groups_dropped > 0:
        why = (f"each of its {groups_dropped} groups was dropped, its rollouts failing past their "
               "retries (--rollout-retries)")
    elif groups == 0:
        why = "no group came back from its rollouts"
    elif mixed_groups == 0:
        why = (f"each of its {groups} groups gave all its episodes the same reward, so no episode "
               "had an advantage to learn from (such groups are dropped)")
    else:
        why = f"its {groups} groups gave no training datum"
    return (f"GRPO step {step} trained on no datum: {why}. {empty_steps} of {step} steps so far "
            f"trained on nothing (metric `empty_steps`; the run's total is printed at its end); "
            f"{hint}.")


def lr_lambda(cfg: GRPOConfig):
    def f(step: int) -> float:
        if cfg.warmup_steps and step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        progress = (step - cfg.warmup_steps) / max(cfg.steps - cfg.warmup_steps, 1)
        if cfg.lr_schedule == "linear":
            return max(0.0, 1.0 - progress)
        if cfg.lr_schedule == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))
        return 1.0
    return f


def step_seed(seed: int, step: int, rank: int) -> int:
    """The sampler seed of one (run seed, step, rank): resuming at a step reproduces its samples
    without saving sampler state."""
    return (seed * 1_000_003 + step * 7_919 + rank * 104_729) % 2**31


def seed_everything(seed: int) -> None:
    # Library code may still touch global RNGs (dropout, HF init); seed them too.
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def make_accelerator(cfg: GRPOConfig):
    from accelerate import Accelerator

    cpu = cfg.device == "cpu" or (cfg.device == "auto" and not torch.cuda.is_available())
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device='cuda' but torch sees no CUDA GPU; use --device cpu or auto")
    # AcceleratorState is a process-wide singleton that refuses a second, different precision; a
    # new run in the same process (tests, notebooks) starts from a fresh one. The process group
    # (PartialState) is kept, so this is safe under `accelerate launch`.
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=False)
    return Accelerator(cpu=cpu, mixed_precision="bf16" if cfg.bf16 else "no")


# ------------------------------------------------------------------------------------------------
# The run
# ------------------------------------------------------------------------------------------------
def train(cfg: GRPOConfig, dataset: RLDataset | None = None) -> dict[str, Any]:
    """Run SFT warm start (optional) + GRPO as configured; return (and write) the summary.

    `dataset` replaces the registered env's train split (any `RLDataset`); evaluation still uses
    `cfg.env`'s test split. Torch's CPU thread count is restored on return, and with
    `max_staleness` > 0 the rollout thread is joined however the run ends (error, Ctrl-C).
    """
    threads = torch.get_num_threads()
    try:
        with contextlib.ExitStack() as cleanup:
            return _train(cfg, dataset, cleanup)
    finally:
        torch.set_num_threads(threads)
        if cfg.sampler == "vllm":  # the run's engine (and its KV cache) ends with the run
            from trainers.sampling import vllm_backend

            vllm_backend.close_engine()


def _train(cfg: GRPOConfig, dataset: RLDataset | None, cleanup: contextlib.ExitStack) -> dict[str, Any]:
    t_start = time.monotonic()
    cfg.validate(check_env=dataset is None)
    _quiet_libraries()
    accelerator = make_accelerator(cfg)
    is_main = accelerator.is_main_process
    run_dir = cfg.run_dir
    # Before any model work: whose run directory is this, and where does this run start?
    plan = decided_on_main(accelerator, lambda: plan_run_dir(cfg))
    if plan.finished is not None:
        if is_main:
            print(f"--resume: {run_dir} already finished its {cfg.steps} steps; nothing to do "
                  f"(summary: {run_dir / 'summary.json'}). To train it further, pass a larger "
                  "--steps with --resume-override steps")
        return plan.finished
    seed_everything(cfg.seed + accelerator.process_index)

    # --- model, tokenizer, reference ---------------------------------------------------------
    from trainers.models import check_tokenizer_agreement, check_vocab_compat, load_policy, resolve_model

    env_tok, stop_ids = env_tokenizer_and_stops(cfg)
    model_path = resolve_model(cfg.model, seed=cfg.seed)
    model, model_tok = load_policy(model_path, device=accelerator.device,
                                   dtype=torch.float32)
    check_vocab_compat(model, env_tok)
    check_tokenizer_agreement(model_tok, env_tok, cfg.model)
    set_cpu_threads(cfg, model, accelerator)
    pad_id = int(getattr(env_tok, "pad_token_id", None) or 0)

    ckpt = plan.checkpoint
    if is_main:
        if plan.clear:  # --overwrite: nothing of the old run may remain next to the new one
            clear_run_files(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        if ckpt is None:  # a new run: config.json is written once, never rewritten on resume
            (run_dir / "config.json").write_text(json.dumps(cfg.to_dict(), indent=2, default=str))
    setup_seconds = time.monotonic() - t_start

    # --- SFT warm start (skipped when resuming: the checkpoint already holds the weights) -----
    summary: dict[str, Any] = {"env": cfg.env, "model": cfg.model, "loss": cfg.loss, "seed": cfg.seed}
    warned_few_episodes = False

    def run_eval(desc: str) -> dict[str, Any]:
        """`evaluate`, warning (once a run) when it covered few distinct held-out episodes."""
        nonlocal warned_few_episodes
        ev = evaluate(cfg, model, accelerator, stop_ids, pad_id, desc=desc)
        distinct = ev.get("distinct_episodes")
        if is_main and not warned_few_episodes and distinct is not None \
                and distinct < MIN_EVAL_EPISODES:
            warned_few_episodes = True
            from tqdm.auto import tqdm as _tqdm

            with _tqdm.external_write_mode():  # on its own line, not over a progress bar
                warnings.warn(few_eval_episodes_message(cfg.env, distinct, ev["problems"]))
        return ev

    before_rl: dict[str, Any] | None = None
    if ckpt is None:
        if cfg.sft_steps > 0:
            summary["eval_before_sft"] = run_eval("eval before SFT")["accuracy"]
            summary.update(run_sft(cfg, model, accelerator))
        before_rl = run_eval("eval before RL")
        summary["eval_before_rl"] = before_rl["accuracy"]
        if "accuracy_ci95" in before_rl:
            summary["eval_before_rl_ci95"] = before_rl["accuracy_ci95"]
        # Before the optimizer and its schedule are built: they take the fitted lr.
        lr_note = fit_lr_to_warm_start(cfg, before_rl["accuracy"])
        if lr_note is not None:
            summary["fitted_lr"] = cfg.lr  # checkpointed with the summary: resume keeps it
            if is_main:
                print(f"Fitted to the warm start (set --lr to override): {lr_note}", flush=True)
    # The handover: SFT's last gradient must not be applied by RL's fresh optimizer.
    model.zero_grad(set_to_none=True)

    if cfg.lora_r > 0:
        model = wrap_lora(model, cfg)
    ref_model = None
    if cfg.kl_beta > 0:
        ref_model = copy.deepcopy(model).eval().requires_grad_(False)

    # Not `fused=True` (2.5x faster on the tiny preset): the fused kernel does not bump the
    # parameters' version counters, which the vLLM weight push and the HF sampler's KV reuse read
    # to tell that the weights moved (torch 2.13).
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.lr,
                                  weight_decay=cfg.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg))
    start_step = 0
    dataset_state = None  # a stateful dataset's (a curriculum's level) state, from the checkpoint
    # The run's time over all of its segments (each invocation counted up to its last checkpoint;
    # work lost after it is counted once, when redone), so a resumed run's summary reports the whole
    # run, not its last segment. wall_seconds is everything after setup (evals, SFT, RL, saves);
    # setup_seconds is model loading and the run-directory checks.
    clock = {"wall_seconds": 0.0, "rl_seconds": 0.0, "setup_seconds": 0.0, "segments": 0}
    already_finished = False
    in_flight: list[SampledBatch] = []  # batches a max_staleness > 0 run had sampled ahead
    if ckpt is not None:
        state = load_checkpoint(ckpt, model, optimizer, scheduler)
        start_step = int(state["extra"]["next_data_index"])
        summary.update(state["extra"].get("summary", {}))
        if "lr" in plan.overrides:  # the user's new lr replaces the one fitted to the warm start
            summary.pop("fitted_lr", None)
        elif "fitted_lr" in summary:  # the lr this run trains with (retune_optimizer reads it)
            cfg.lr = float(summary["fitted_lr"])
        clock.update(state["extra"].get("clock", {}))
        # the final checkpoint was written but summary.json was not: only the summary is missing
        already_finished = bool(state["extra"].get("finished")) and start_step >= cfg.steps
        if ref_model is not None and "ref_model" in state["extra"]:
            ref_model.load_state_dict(state["extra"]["ref_model"])
        dataset_state = state["extra"].get("dataset")
        in_flight = [SampledBatch.from_state(b) for b in state["extra"].get("async_batches", [])]
        if SCHEDULE_FIELDS & set(plan.overrides):
            retune_optimizer(optimizer, scheduler, cfg)
        if is_main:
            record_resume(run_dir, ckpt, start_step, plan.overrides)
            changed = "".join(f"; {k}: {json.dumps(old)} -> {json.dumps(new)}"
                              for k, (old, new) in plan.overrides.items())
            print(f"resumed from {ckpt} at step {start_step}{changed}")
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    dataset = dataset or make_dataset(cfg, "train", cfg.groups_per_batch, cfg.group_size, cfg.seed)
    load_dataset_state = getattr(dataset, "load_state_dict", None)
    if dataset_state is not None and callable(load_dataset_state):
        load_dataset_state(dataset_state)  # e.g. CurriculumRLDataset: the level it had reached
    logger = MetricsLogger(run_dir, enabled=is_main, tensorboard=cfg.tensorboard,
                           wandb_project=cfg.wandb_project, config=cfg.to_dict(),
                           resume_step=start_step if ckpt is not None else None)
    if before_rl is not None:
        logger.log(0, {k: v for k, v in eval_metrics(before_rl).items() if k != "eval/reward"})
    # Held-out accuracy shown beside the training accuracy on the bar: the latest evaluation
    # (before RL, or the last one before the checkpoint a resumed run starts from).
    last_eval = summary.get("eval_before_rl")
    if ckpt is not None and is_main:
        evals = [r["eval/accuracy"] for r in read_records(logger.path)
                 if isinstance(r.get("eval/accuracy"), (int, float))]
        last_eval = evals[-1] if evals else last_eval
    # Steps that trained on no datum (over the whole run: a resumed run continues the count)
    empty_steps = int(summary.get("empty_steps", 0))
    warned_empty: set[bool] = set()  # the causes warned about (True: every group was dropped)

    # --- RL ---------------------------------------------------------------------------------
    from tqdm.auto import tqdm

    bar = tqdm(range(start_step, cfg.steps), initial=start_step, total=cfg.steps,
               disable=not (is_main and cfg.progress), desc="GRPO", dynamic_ncols=True)
    t_rl = time.monotonic()

    def elapsed() -> dict[str, float]:
        now = time.monotonic()
        return {"wall_seconds": clock["wall_seconds"] + now - t_start - setup_seconds,
                "rl_seconds": clock["rl_seconds"] + now - t_rl,
                "setup_seconds": clock["setup_seconds"] + setup_seconds,
                "segments": clock["segments"] + 1}

    def step_rollouts(step: int, policy_model) -> tuple[list, Any]:
        """This rank's group builders of `step` and a sampler over `policy_model` seeded for the
        step (`step_seed`): the same batch whichever thread samples it, given the same weights."""
        builders = list(dataset.get_batch(step))[accelerator.process_index::accelerator.num_processes]
        sampler = make_sampler(cfg, policy_model, accelerator.device, stop_ids, pad_id,
                               cfg.temperature,
                               seed=step_seed(cfg.seed, step, accelerator.process_index),
                               max_batch_size=max(len(builders) * cfg.group_size, 1),
                               multi_turn=not all(map(builder_single_turn, builders)))
        return builders, sampler

    # rollout_workers > 0: env groups run in Ray actors; the builders' originals stay here for
    # what the trainer reads off them (single-turn or not), the proxies are rolled out.
    workers = None
    if cfg.rollout_workers > 0:
        from trainers.rollout_workers import RayRolloutWorkers, check_ray_available

        check_ray_available()
        workers = cleanup.enter_context(RayRolloutWorkers(cfg.rollout_workers, cfg.ray_address))

    def on_workers(builders: list) -> list:
        return builders if workers is None else workers.wrap(builders)

    strategy = rollout_strategy(cfg)

    async def sample_ahead(step: int, snapshot) -> tuple[list[TrajectoryGroup], int]:
        builders, sampler = step_rollouts(step, snapshot)
        groups = await _rollout_groups(builders, sampler, rollout_limits(cfg, sampler),
                                       strategy=strategy)
        return groups, len(builders) - len(groups)

    # max_staleness > 0: later steps' batches are sampled in a background thread while a step
    # trains (`async_rollouts.py`); 0 keeps the synchronous loop.
    rollouts = None
    if cfg.max_staleness > 0:
        check_async_supported(cfg, accelerator)
        # `train`'s exit stack closes it (cancels and joins) however the run ends
        rollouts = cleanup.enter_context(AsyncRollouts(
            sample_ahead, cfg.max_staleness, floor=start_step, end_step=cfg.steps, ready=in_flight))
        rollouts.policy_updated(accelerator.unwrap_model(model), start_step)

    step_metrics: dict[str, Any] = {}
    for step in bar:
        t0, cpu0 = time.monotonic(), time.process_time()
        optimizer.zero_grad(set_to_none=True)  # this step's gradient only
        # 1. rollouts: all of this rank's groups at once, so the sampler batches them
        async_metrics: dict[str, float] = {}
        if rollouts is None:  # sampled now, by the weights this step trains
            with unwrap_model_for_generation(model, accelerator) as policy_model:
                builders, sampler = step_rollouts(step, policy_model)
                groups = rollout_groups(on_workers(builders), sampler, rollout_limits(cfg, sampler),
                                        strategy=strategy)
            t_sample = time.monotonic() - t0
            groups_dropped = len(builders) - len(groups)
        else:  # sampled ahead by an older version (at most max_staleness steps old)
            batch = rollouts.take(step)
            groups, t_sample, async_metrics = batch.groups, batch.sample_seconds, batch.metrics
            groups_dropped = batch.groups_dropped
        stats = group_stats(groups)
        env_metrics = episode_metric_means(groups)

        # 2. advantages and datums
        if cfg.remove_constant_reward_groups:  # zero advantage everywhere: nothing to learn
            groups = [g for g in groups if len(set(g.get_total_rewards())) > 1]
        # GRPOConfig checked advantage_scale and credit against ADVANTAGE_SCALES and CREDITS (the
        # AdvantageScale and Credit literals)
        advantages = compute_advantages(groups, cfg.loss, cast("AdvantageScale | None", cfg.advantage_scale),
                                        credit=cast("Credit", cfg.credit))
        data, _ = assemble_training_data(groups, advantages)
        turn_sums = turn_credit_sums(groups, advantages) if cfg.credit == "turn" else None

        # 3. forward/backward over micro-batches, then one optimizer step
        fb = forward_backward(model, data, cfg, accelerator, pad_id, ref_model)
        grad_norm = accelerator.clip_grad_norm_(
            model.parameters(), cfg.max_grad_norm if cfg.max_grad_norm > 0 else float("inf"))
        # accelerate returns None only on its DeepSpeed path without a norm, where float() failed as well
        assert grad_norm is not None, "accelerator.clip_grad_norm_ returned no gradient norm"
        if fb["datums"] == 0:  # an empty batch (a global count, so every rank agrees): its
            optimizer.zero_grad(set_to_none=True)  # gradient is all zeros, on which Adam's
        optimizer.step()  # momentum would still move every weight; AdamW skips grad-less ones
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        if cfg.sampler == "vllm":  # the engine samples the next step: give it the new weights
            from trainers.sampling import vllm_backend

            vllm_backend.sync_weights(cfg, accelerator.unwrap_model(model))
        done = step + 1  # the weights are now version `done`
        checkpoint_due = bool(cfg.save_every) and done % cfg.save_every == 0 and done < cfg.steps
        if rollouts is not None and not checkpoint_due:  # start sampling from the new version
            rollouts.policy_updated(accelerator.unwrap_model(model), done)

        # 4. metrics
        totals = cast(torch.Tensor, accelerator.reduce(torch.tensor(
            [stats["reward_sum"], stats["correct_sum"], stats["episodes"], stats["sampled_tokens"],
             stats["group_std_sum"], stats["mixed_groups"], stats["groups"], stats["context_full"],
             groups_dropped, stats["retried"]],
            dtype=torch.float64, device=accelerator.device), "sum")).tolist()
        turn_metrics: dict[str, float] = {}
        if turn_sums is not None:  # every rank has the same config, so all of them reduce here
            turn_metrics = turn_credit_metrics(cast(torch.Tensor, accelerator.reduce(
                torch.from_numpy(turn_sums).to(accelerator.device), "sum")).cpu().numpy())
        step_seconds = time.monotonic() - t0
        step_metrics = {
            "reward": totals[0] / max(totals[2], 1), "correct": totals[1] / max(totals[2], 1),
            **fb, "grad_norm": float(grad_norm), "lr": scheduler.get_last_lr()[0],
            "group_reward_std": totals[4] / max(totals[6], 1),
            "frac_mixed_groups": totals[5] / max(totals[6], 1),
            "frac_context_full": totals[7] / max(totals[2], 1),
            "sampled_tokens": totals[3], "tokens_per_s": totals[3] / max(t_sample, 1e-9),
            "sample_seconds": t_sample, "step_seconds": step_seconds,
            # this process's CPU time (all its threads): on a shared machine, what the step cost
            # apart from waiting for a core
            "step_cpu_seconds": time.process_time() - cpu0,
            **env_metrics, **turn_metrics, **async_metrics,
        }
        if cfg.rollout_retries > 0:  # 0: an error stops the run, so both would always be 0
            step_metrics["rollouts/groups_dropped"] = totals[8]
            step_metrics["rollouts/retried"] = totals[9]
        if fb["datums"] == 0:
            empty_steps += 1
            # warned once a run for each cause: every group dropped, or nothing to learn from
            all_dropped = totals[6] == 0 and totals[8] > 0
            if all_dropped:
                summary["empty_steps_dropped"] = int(summary.get("empty_steps_dropped", 0)) + 1
            if is_main and all_dropped not in warned_empty:
                warned_empty.add(all_dropped)
                hint = dropped_groups_hint(cfg.rollout_retries) if all_dropped \
                    else empty_steps_hint(cfg.sft_steps)
                message = empty_steps_message(empty_steps, done, int(totals[6]), int(totals[5]),
                                              hint, groups_dropped=int(totals[8]))
                with tqdm.external_write_mode():  # the warning on its own line, not over the bar
                    warnings.warn(message)
        summary["empty_steps"] = empty_steps  # checkpointed with the summary: resume continues it
        step_metrics["empty_steps"] = empty_steps
        if cfg.eval_every and done % cfg.eval_every == 0 and done < cfg.steps:
            ev = run_eval(f"eval at step {done}")
            step_metrics.update(eval_metrics(ev))
            last_eval = ev["accuracy"]
        logger.log(done, step_metrics)
        eval_postfix: dict[str, Any] = {} if last_eval is None else {"eval": f"{last_eval:.2f}"}
        bar.set_postfix(reward=f"{step_metrics['reward']:.2f}", acc=f"{step_metrics['correct']:.2f}",
                        **eval_postfix, loss=f"{fb['loss']:.3f}")
        if checkpoint_due:
            # With max_staleness > 0 the batches sampled ahead are finished and saved with it, and
            # the new version's batch starts only after it: the dataset state saved is the one
            # that batch's `get_batch` finds, as in an uninterrupted run.
            ahead = rollouts.drain() if rollouts is not None else None
            _save(cfg, accelerator, model, optimizer, scheduler, ref_model, done, summary,
                  elapsed(), dataset=dataset, in_flight=ahead)
            if rollouts is not None:
                rollouts.policy_updated(accelerator.unwrap_model(model), done)
    bar.close()
    if rollouts is not None:
        rollouts.close()  # every batch was taken: the thread ends here

    # --- final eval, checkpoint, summary ------------------------------------------------------
    if not already_finished:
        ev = run_eval("final eval")
        summary.update({
            "eval_after_rl": ev["accuracy"], "eval_after_rl_reward": ev["reward"],
            "eval_problems": ev["problems"], "steps": cfg.steps,
            "final_train_reward": step_metrics.get("reward"),
        })
        if "accuracy_ci95" in ev:
            summary["eval_after_rl_ci95"] = ev["accuracy_ci95"]
        if "distinct_episodes" in ev:
            summary["eval_distinct_episodes"] = ev["distinct_episodes"]
        logger.log(cfg.steps, eval_metrics(ev))
        summary.update(elapsed())
        _save(cfg, accelerator, model, optimizer, scheduler, ref_model, cfg.steps, summary,
              {k: summary[k] for k in clock}, finished=True, dataset=dataset)
    summary.update(elapsed())  # wall/rl/setup seconds and segments of the whole run (`clock`)
    if is_main:
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
        if summary.get("empty_steps"):
            print(end_of_run_empty_steps(summary["empty_steps"], summary.get("empty_steps_dropped", 0),
                                         cfg))
        print(f"run finished: results in {run_dir} (summary.json, metrics.jsonl, checkpoints/); "
              f"plot the curves with: llm-gym plot {shlex.quote(str(run_dir))}")
    logger.close()
    accelerator.wait_for_everyone()
    return summary


def check_async_supported(cfg: GRPOConfig, accelerator) -> None:
    """Raise `ConfigError` where `max_staleness` > 0 cannot run: the pipeline samples with a copy
    of the whole policy in one process (`async_rollouts.py`), so not under multi-process
    `accelerate launch` nor DeepSpeed/FSDP (sharded weights); the vLLM sampler is refused by
    `GRPOConfig.validate`."""
    from accelerate.utils import DistributedType

    if accelerator.num_processes > 1:
        raise ConfigError(
            f"max_staleness={cfg.max_staleness} runs in one process, but this run has "
            f"{accelerator.num_processes}: launch it without `accelerate launch` (one process), or "
            "pass --max-staleness 0 for multi-process training")
    if accelerator.distributed_type in (DistributedType.DEEPSPEED, DistributedType.FSDP):
        raise ConfigError(
            f"max_staleness={cfg.max_staleness} samples from a full copy of the weights, which "
            f"{accelerator.distributed_type.value} shards: pass --max-staleness 0, or train "
            "without DeepSpeed/FSDP")


def set_cpu_threads(cfg: GRPOConfig, model, accelerator) -> None:
    if accelerator.device.type != "cpu":
        return
    if cfg.cpu_threads > 0:
        torch.set_num_threads(cfg.cpu_threads)
    elif sum(p.numel() for p in model.parameters()) < 50_000_000:
        torch.set_num_threads(1)


def _quiet_libraries() -> None:
    """No per-save progress bars or deprecation chatter from HF inside the training loop."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)


def _save(cfg, accelerator, model, optimizer, scheduler, ref_model, step, summary, clock,
          finished: bool = False, dataset: Any = None,
          in_flight: Sequence[SampledBatch] | None = None) -> None:
    """Checkpoint `step` (main process). `clock`: the run's time so far, summed over segments;
    `finished`: the final checkpoint, written after the final evaluation; `dataset`: saved with
    its `state_dict()` when it has one (a curriculum's level and pending outcomes), which resume
    restores; `in_flight`: the batches a `max_staleness` > 0 run has sampled for later steps
    (`AsyncRollouts.drain`), which resume trains on instead of sampling them again."""
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        extra = {"next_data_index": step, "summary": dict(summary), "clock": dict(clock),
                 "finished": finished}
        if ref_model is not None:
            extra["ref_model"] = ref_model.state_dict()
        if callable(getattr(dataset, "state_dict", None)):
            extra["dataset"] = dataset.state_dict()
        if in_flight:
            extra["async_batches"] = [batch.state() for batch in in_flight]
        save_checkpoint(cfg.run_dir, step, accelerator.unwrap_model(model), optimizer, scheduler, extra)
    accelerator.wait_for_everyone()


def run_sft(cfg: GRPOConfig, model, accelerator) -> dict[str, Any]:
    """Cold start: `trainers.sft.sft_warm_start` on the env's reference responses, or its gold
    scripted episodes where it has no reference responses (train split),
    stopped as soon as validation accuracy enters `cfg.sft_target_band`. Every rank runs the same
    seeded SFT, so all ranks enter RL with identical weights."""
    from trainers.grpo.fit import run_env
    from trainers.sft import sft_warm_start

    result = sft_warm_start(
        model, env_id=cfg.env, env_kwargs=cfg.env_kwargs, source=run_env(cfg).source("train"),
        max_steps=cfg.sft_steps,
        batch_size=cfg.sft_batch_size, lr=cfg.sft_lr,
        target_band=cast("tuple[float, float]", tuple(cfg.sft_target_band)),  # GRPOConfig checked: 2 long
        eval_max_tokens=cfg.max_tokens, seed=cfg.seed, device=accelerator.device,
        progress=cfg.progress and accelerator.is_main_process,
        eval_problems=min(cfg.eval_problems, 128),  # the validation checks: no larger than the evals
    )
    return {"sft_example_source": result.example_source, "sft_gold_case": result.gold_case,
            "sft_steps_run": result.steps, "sft_stopped_reason": result.stopped_reason,
            "sft_val_accuracy": result.accuracy, "sft_seconds": result.seconds,
            "sft_eval_history": [list(x) for x in result.eval_history]}


def wrap_lora(model, cfg: GRPOConfig):
    """PEFT LoRA adapters on every linear layer; only the adapters train."""
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, target_modules="all-linear",
                      lora_dropout=0.0, bias="none")
    return get_peft_model(model, lora)
