"""From trajectory groups to training data: advantages, per-token datums, filtering.

`compute_advantages` centres each group's returns on the group mean, optionally dividing by a
standard deviation; `trajectory_to_data` turns a trajectory into one `Datum` per run of
observations that extend each other (the prefix property), with environment tokens masked out and
sampled tokens carrying the trajectory's advantage and their sampling logprobs;
`assemble_training_data` does that for a whole batch. Everything here is numpy: the trainer makes
tensors.

Credit assignment: by default (`credit="episode"`, as in the cookbook) every sampled token of a
trajectory carries one advantage, its centred total return. `credit="turn"` keeps the per-turn
rewards (`turn_rewards`) instead: turn t's tokens carry the turn's return-to-go (rewards of turns
t and later) centred on the mean over the group's trajectories that reached turn t, so a turn is
credited only with what followed it.

As in the cookbook, an action without logprobs (`maybe_logprobs=None`) or whose logprob count
differs from its token count raises ValueError.

Provenance (cookbook 0.6): when every action of a datum carries the sampler's `sequence_id`
(`TokensWithLogprobs.sequence_id`, set by `TinkerTokenCompleter` from a Tinker sampling client),
`trajectory_to_data` records where each token came from: `Datum.model_input_spans` tile the input
tokens and `Datum.loss_fn_input_spans` tile the targets, each a run of `PromptProvenanceSpan`
(positions of a request's prompt) and `SampledProvenanceSpan` (a sequence's sampled tokens).
Local samplers give no `sequence_id`, so their datums carry none (both fields None).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Literal, Sequence, Union

import numpy as np

from llm_gym.model_input import ModelInput
from llm_gym.rl.types import PARSE_ERROR_MASKED_METRIC_KEY, Trajectory, TrajectoryGroup

logger = logging.getLogger(__name__)

LOSS_FNS = ("importance_sampling", "ppo", "cispo", "dro", "grpo", "cross_entropy")
AdvantageScale = Literal["none", "group_std", "batch_std"]
Credit = Literal["episode", "turn"]
CREDITS: tuple[Credit, ...] = ("episode", "turn")
# Which std scaling each loss uses unless told otherwise. GRPO (Shao et al.) divides by the group's
# std; the cookbook's importance_sampling/ppo/cispo/dro use plain centred returns (Dr. GRPO showed
# the std division biases towards too-easy and too-hard groups).
DEFAULT_SCALE: dict[str, AdvantageScale] = {
    "importance_sampling": "none",
    "ppo": "none",
    "cispo": "none",
    "dro": "none",
    "grpo": "group_std",
    "cross_entropy": "none",
}


class TensorData(np.ndarray):
    """A `loss_fn_inputs` value: a numpy array that also answers to the names of tinker's
    `TensorData` (`to_torch()`, `to_numpy()`, `tolist()`), so code written against the cookbook's
    `datum.loss_fn_inputs["advantages"].to_torch()` keeps working. torch is imported only when
    `to_torch` is called: `llm_gym` itself stays torch-free."""

    def to_numpy(self) -> np.ndarray:
        return self.view(np.ndarray)

    def to_torch(self):
        import torch  # lazy: only a trainer that asks for tensors pays for torch

        return torch.from_numpy(np.ascontiguousarray(self.view(np.ndarray)))


@dataclass(frozen=True, kw_only=True, eq=False)
class _Span:
    """A run of `length` consecutive tokens of sequence `sequence_id`, starting at `offset`.

    Equal to (and hashed like) the `tinker` class of the same name with the same fields, so code
    that compares a datum's spans with `tinker.PromptProvenanceSpan(...)` after the import switch
    keeps working; llm_gym itself never imports tinker."""

    sequence_id: str
    offset: int = 0
    length: int

    def __post_init__(self) -> None:
        name = type(self).__name__
        if self.length < 0:
            raise ValueError(f"{name}.length must be >= 0, got {self.length}")
        if not self.sequence_id:
            raise ValueError(f"{name}.sequence_id must be non-empty")
        if self.offset < 0:
            raise ValueError(f"{name}.offset must be >= 0, got {self.offset}")

    def __eq__(self, other) -> bool:
        kind = type(other)
        if not (kind is type(self) or (kind.__name__ == type(self).__name__
                                       and kind.__module__.split(".")[0] == "tinker")):
            return NotImplemented
        return (self.sequence_id, self.offset, self.length) == (other.sequence_id, other.offset, other.length)

    def __hash__(self) -> int:
        return hash((self.sequence_id, self.offset, self.length))


@dataclass(frozen=True, kw_only=True, eq=False)
class PromptProvenanceSpan(_Span):
    """Datum positions that were positions `[offset, offset + length)` of the prompt of the
    sampling request that returned sequence `sequence_id` (tinker's `PromptProvenanceSpan`)."""


@dataclass(frozen=True, kw_only=True, eq=False)
class SampledProvenanceSpan(_Span):
    """Datum positions that are positions `[offset, offset + length)` of the tokens sampled as
    sequence `sequence_id` (tinker's `SampledProvenanceSpan`)."""


ProvenanceSpan = Union[PromptProvenanceSpan, SampledProvenanceSpan]


def _is_span(span) -> bool:
    return isinstance(span, _Span) or (
        type(span).__name__ in ("PromptProvenanceSpan", "SampledProvenanceSpan")
        and type(span).__module__.split(".")[0] == "tinker"
    )


def _check_spans(name: str, spans, expected_length: int | None = None) -> None:
    if spans is None:
        return
    for span in spans:
        if not _is_span(span):
            raise TypeError(f"{name} entries must be PromptProvenanceSpan or SampledProvenanceSpan, "
                            f"got {type(span).__name__}")
    if expected_length is not None and (total := sum(span.length for span in spans)) != expected_length:
        raise ValueError(f"with_provenance {name} spans cover {total} positions but the field has "
                         f"{expected_length}; the runs must tile it exactly")


@dataclass
class Datum:
    """One training sequence. `model_input` holds the input tokens (all but the last);
    `loss_fn_inputs` holds per-position arrays of the same length: `target_tokens` (next tokens),
    `logprobs` (sampling logprobs, 0 where not sampled), `advantages`, and `mask` (1 on sampled
    tokens). SFT datums carry `target_tokens` and `weights`.

    `model_input_spans` / `loss_fn_input_spans` (both or neither; attach them with
    `with_provenance`) record where the input tokens and the targets came from: consecutive
    `PromptProvenanceSpan` / `SampledProvenanceSpan` runs whose lengths sum to the field's length."""

    model_input: ModelInput
    loss_fn_inputs: dict[str, np.ndarray] = field(default_factory=dict)
    model_input_spans: list[ProvenanceSpan] | None = None
    loss_fn_input_spans: list[ProvenanceSpan] | None = None

    def __post_init__(self) -> None:
        n = self.model_input.length
        for key, arr in self.loss_fn_inputs.items():
            if len(arr) != n:
                raise ValueError(f"Datum: loss_fn_inputs[{key!r}] has length {len(arr)}, input has {n}")
            if not isinstance(arr, TensorData):  # a view: no copy
                self.loss_fn_inputs[key] = np.asarray(arr).view(TensorData)
        _check_spans("model_input_spans", self.model_input_spans)
        _check_spans("loss_fn_input_spans", self.loss_fn_input_spans)
        if (self.model_input_spans is None) != (self.loss_fn_input_spans is None):
            raise ValueError("Datum: provenance comes as a pair: set both model_input_spans and "
                             "loss_fn_input_spans, or neither")

    def with_provenance(self, model_input: list[ProvenanceSpan],
                        loss_fn_inputs: list[ProvenanceSpan]) -> "Datum":
        """A copy carrying provenance: `model_input` spans tile the input tokens, `loss_fn_inputs`
        spans tile `loss_fn_inputs["target_tokens"]` (ValueError when the lengths do not add up)."""
        _check_spans("model_input", model_input, self.model_input.length)
        targets = self.loss_fn_inputs.get("target_tokens")
        _check_spans("loss_fn_inputs", loss_fn_inputs,
                     len(targets) if targets is not None and np.ndim(targets) == 1 else None)
        return dataclasses.replace(self, model_input_spans=list(model_input),
                                   loss_fn_input_spans=list(loss_fn_inputs))


def compute_advantages(
    trajectory_groups_P: Sequence[TrajectoryGroup],
    loss_fn: str = "importance_sampling",
    scale: AdvantageScale | None = None,
    eps: float = 1e-6,
    credit: Credit = "episode",
) -> list[np.ndarray]:
    """Group-centred advantages, one float32 array per group.

    `scale`: "none" (returns minus the group mean), "group_std" (also divide by each group's
    std + eps), "batch_std" (divide by the std of all centred advantages in the batch + eps).
    When `scale` is None the loss's default in `DEFAULT_SCALE` is used.

    `credit="episode"` (the default): a group's array has shape [G], trajectory i's total return
    (`get_total_rewards`) minus the group's mean. `credit="turn"`: shape [G, T], T the group's
    most turns (transitions); entry [i, t] is trajectory i's return-to-go from turn t,
    R[i, t] = sum of `turn_rewards` over turns k >= t (the group reward counts as its last
    turn's), minus the mean of R[j, t] over the group's trajectories j that reached turn t. The
    scales apply per turn index the same way: "group_std" divides turn t's entries by the std of
    those R[j, t], "batch_std" by the std of every (trajectory, turn) entry of the batch. A turn
    index only one trajectory reached gets advantage 0, as a group of one does: nothing to compare
    it with. Entries past a trajectory's last turn are 0 padding. Turn 0's return-to-go is the
    total return, so single-turn groups get exactly the episode advantages (as a [G, 1] array).
    This is the per-step group baseline of GiGPO (Feng et al., 2025, "Group-in-Group Policy
    Optimization for LLM Agent Training") simplified to group steps by turn index rather than by
    identical environment state, without a discount.
    """
    if loss_fn not in DEFAULT_SCALE:
        raise ValueError(f"unknown loss_fn {loss_fn!r}; choose one of {list(DEFAULT_SCALE)}")
    scale = DEFAULT_SCALE[loss_fn] if scale is None else scale
    if scale not in ("none", "group_std", "batch_std"):
        raise ValueError(f"unknown advantage scale {scale!r}; use 'none', 'group_std' or 'batch_std'")
    if credit not in CREDITS:
        raise ValueError(f"unknown credit {credit!r}; use 'episode' (one advantage per trajectory) "
                         "or 'turn' (one per turn, from its return-to-go)")
    if credit == "turn":
        return _turn_advantages(trajectory_groups_P, scale, eps)
    advantages_P: list[np.ndarray] = []
    for group in trajectory_groups_P:
        rewards_G = np.asarray(group.get_total_rewards(), dtype=np.float64)
        adv_G = rewards_G - rewards_G.mean() if len(rewards_G) else rewards_G
        if scale == "group_std" and len(adv_G) > 1:
            adv_G = adv_G / (rewards_G.std(ddof=1) + eps)
        advantages_P.append(adv_G)
    if scale == "batch_std":
        flat = np.concatenate(advantages_P) if advantages_P else np.zeros(0)
        std = flat.std(ddof=1) if len(flat) > 1 else 0.0
        advantages_P = [a / (std + eps) for a in advantages_P]
    return [a.astype(np.float32) for a in advantages_P]


def turn_rewards(group: TrajectoryGroup) -> list[np.ndarray]:
    """Each trajectory's rewards by turn: one float64 entry per transition, with its group reward
    (`final_rewards_G`) added to its last turn, so a trajectory's entries sum to its
    `get_total_rewards()` entry. A trajectory without transitions has no turns (an empty array)."""
    rewards_G: list[np.ndarray] = []
    for traj, final in zip(group.trajectories_G, group.final_rewards_G):
        rewards_T = np.asarray([t.reward for t in traj.transitions], dtype=np.float64)
        if len(rewards_T):
            rewards_T[-1] += final
        rewards_G.append(rewards_T)
    return rewards_G


def _turn_advantages(
    trajectory_groups_P: Sequence[TrajectoryGroup], scale: AdvantageScale, eps: float
) -> list[np.ndarray]:
    """`compute_advantages(credit="turn")`: per group a [G, T] array (see there)."""
    advantages_P: list[np.ndarray] = []
    reached_P: list[np.ndarray] = []  # [G, T]: trajectory i has a turn t
    for group in trajectory_groups_P:
        rewards_G = turn_rewards(group)
        n_turns = max((len(r) for r in rewards_G), default=0)
        returns_GT = np.zeros((len(rewards_G), n_turns))
        reached_GT = np.zeros((len(rewards_G), n_turns), dtype=bool)
        for i, rewards_T in enumerate(rewards_G):
            returns_GT[i, : len(rewards_T)] = np.cumsum(rewards_T[::-1])[::-1]
            reached_GT[i, : len(rewards_T)] = True
        adv_GT = np.zeros_like(returns_GT)
        for t in range(n_turns):
            returns_t = returns_GT[reached_GT[:, t], t]
            adv_t = returns_t - returns_t.mean()
            if scale == "group_std" and len(adv_t) > 1:
                adv_t = adv_t / (returns_t.std(ddof=1) + eps)
            adv_GT[reached_GT[:, t], t] = adv_t
        advantages_P.append(adv_GT)
        reached_P.append(reached_GT)
    if scale == "batch_std":
        flat = np.concatenate([a[r] for a, r in zip(advantages_P, reached_P)] or [np.zeros(0)])
        std = flat.std(ddof=1) if len(flat) > 1 else 0.0
        advantages_P = [a / (std + eps) for a in advantages_P]
    return [a.astype(np.float32) for a in advantages_P]


def _drop_first_position(spans: list[ProvenanceSpan]) -> list[ProvenanceSpan]:
    """The same runs without the sequence's first position."""
    first, rest = spans[0], spans[1:]
    if first.length == 1:
        return rest
    return [dataclasses.replace(first, offset=first.offset + 1, length=first.length - 1), *rest]


def _drop_last_position(spans: list[ProvenanceSpan]) -> list[ProvenanceSpan]:
    """The same runs without the sequence's last position."""
    last, rest = spans[-1], spans[:-1]
    if last.length == 1:
        return rest
    return [*rest, dataclasses.replace(last, length=last.length - 1)]


def _datum_from_sequence(
    tokens: list[int], logprobs: list[float], advantages: list[float], mask: list[float],
    spans: list[ProvenanceSpan] | None = None,
) -> Datum:
    # Position t predicts token t+1, so every per-token array drops its first element.
    datum = Datum(
        model_input=ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": np.asarray(tokens[1:], dtype=np.int64),
            "logprobs": np.asarray(logprobs[1:], dtype=np.float32),
            "advantages": np.asarray(advantages[1:], dtype=np.float32),
            "mask": np.asarray(mask[1:], dtype=np.float32),
        },
    )
    if not spans:
        return datum
    # The input drops the sequence's last token and the targets its first. A datum whose targets
    # hold no sampled token gets no provenance (the Tinker backend rejects such spans).
    target_spans = _drop_first_position(spans)
    if not any(isinstance(span, SampledProvenanceSpan) for span in target_spans):
        return datum
    return datum.with_provenance(model_input=_drop_last_position(spans), loss_fn_inputs=target_spans)


def _sampled_logprobs(ac) -> list[float]:
    """The action's per-token sampling logprobs. Missing logprobs (`maybe_logprobs=None`) or a
    list whose length differs from the action's raise, as the cookbook's checks do: the trainer
    uses them as the old policy's logprobs, so zeros would silently skew every importance ratio."""
    logprobs = getattr(ac, "maybe_logprobs", None)
    if logprobs is None:
        raise ValueError(
            "trajectory_to_data: an action has no logprobs (maybe_logprobs=None); training data "
            "needs the sampling logprob of every sampled token -- have the policy return them"
        )
    if len(logprobs) != len(ac.tokens):
        raise ValueError(
            f"trajectory_to_data: an action has {len(ac.tokens)} tokens but {len(logprobs)} "
            "logprobs; pass one logprob per sampled token"
        )
    return list(logprobs)


def trajectory_to_data(
    traj: Trajectory, traj_advantage: float | Sequence[float] | np.ndarray,
    include_provenance: bool = True,
) -> list[Datum]:
    """One datum per maximal run of transitions whose observation extends the previous context.

    If each observation starts with the previous observation + action (multi-turn chat), the whole
    trajectory is one datum; an observation that does not (a context reset) starts a new datum.
    Observation tokens get mask 0 and advantage 0; sampled tokens mask 1, the trajectory's
    advantage, and their sampling logprobs. An action without logprobs, or whose logprob count
    differs from its token count, raises ValueError, as in the cookbook. A turn whose metrics
    carry `parse_error_masked >= 1` (`PARSE_ERROR_MASKED_METRIC_KEY`, set by envs that mask
    unparseable turns) gets mask 0 and advantage 0 on its sampled tokens too, as in the cookbook.

    `traj_advantage` is one number for every turn, or one per turn (a row of
    `compute_advantages(credit="turn")`): turn t's sampled tokens get entry t, entries past the
    last turn are ignored (padding), and fewer entries than turns raise ValueError.

    `include_provenance` (default True, as in the cookbook): record each datum's provenance spans
    (`Datum.with_provenance`): a turn's new observation tokens are positions of its sampling
    request's prompt, its action tokens that request's sampled sequence. A datum gets them only
    when every turn with tokens in it has a `sequence_id` and at least one target is sampled.
    """
    advantages_T = np.asarray(traj_advantage, dtype=np.float64)
    if advantages_T.ndim == 0:
        advantages_T = np.full(len(traj.transitions), float(advantages_T))
    elif advantages_T.ndim != 1 or len(advantages_T) < len(traj.transitions):
        raise ValueError(
            f"trajectory_to_data: per-turn advantages of shape {advantages_T.shape} for a "
            f"trajectory of {len(traj.transitions)} turns; pass one number, or a 1-D array "
            "with an entry per turn (a row of compute_advantages(credit='turn'))"
        )
    data: list[Datum] = []
    seq: list[int] = []
    logprobs: list[float] = []
    advantages: list[float] = []
    mask: list[float] = []
    spans: list[ProvenanceSpan] | None = [] if include_provenance else None
    for turn, transition in enumerate(traj.transitions):
        advantage = float(advantages_T[turn])
        ob = transition.ob.to_ints()
        if seq and len(ob) >= len(seq) and ob[: len(seq)] == seq:
            delta = ob[len(seq):]
        else:
            if len(seq) > 1:
                data.append(_datum_from_sequence(seq, logprobs, advantages, mask, spans))
            seq, logprobs, advantages, mask = [], [], [], []
            spans = [] if include_provenance else None
            delta = ob
        ac = transition.ac
        ac_logprobs = _sampled_logprobs(ac)
        # A turn with no tokens (a rollout that stopped before its first turn) needs no id.
        sequence_id = getattr(ac, "sequence_id", None)
        if sequence_id is None and (delta or ac.tokens):
            spans = None
        if spans is not None and sequence_id is not None:
            if delta:  # the new observation tokens end this request's prompt
                spans.append(PromptProvenanceSpan(sequence_id=sequence_id, offset=len(seq), length=len(delta)))
            if ac.tokens:
                spans.append(SampledProvenanceSpan(sequence_id=sequence_id, length=len(ac.tokens)))
        masked = float(transition.metrics.get(PARSE_ERROR_MASKED_METRIC_KEY, 0.0)) >= 1.0
        seq += delta + list(ac.tokens)
        logprobs += [0.0] * len(delta) + list(ac_logprobs)
        advantages += [0.0] * len(delta) + [0.0 if masked else advantage] * len(ac.tokens)
        mask += [0.0] * len(delta) + [0.0 if masked else 1.0] * len(ac.tokens)
    if len(seq) > 1:
        data.append(_datum_from_sequence(seq, logprobs, advantages, mask, spans))
    return data


def assemble_training_data(
    trajectory_groups_P: Sequence[TrajectoryGroup], advantages_P: Sequence[np.ndarray],
    include_provenance: bool = True,
) -> tuple[list[Datum], list[dict[str, int]]]:
    """All datums of a batch, with `{"group_idx", "traj_idx"}` metadata per datum
    (`include_provenance` is passed to `trajectory_to_data`). `advantages_P` holds per group one
    entry per trajectory: a number, or a per-turn row (`compute_advantages(credit="turn")`)."""
    if len(trajectory_groups_P) != len(advantages_P):
        raise ValueError(
            f"{len(trajectory_groups_P)} groups but {len(advantages_P)} advantage arrays"
        )
    data_D: list[Datum] = []
    metadata_D: list[dict[str, int]] = []
    for i_group, (group, adv_G) in enumerate(zip(trajectory_groups_P, advantages_P)):
        if len(adv_G) != len(group.trajectories_G):
            raise ValueError(
                f"group {i_group}: {len(group.trajectories_G)} trajectories, {len(adv_G)} advantages"
            )
        for i_traj, (traj, adv) in enumerate(zip(group.trajectories_G, adv_G)):
            new = trajectory_to_data(traj, adv if np.ndim(adv) else float(adv),
                                     include_provenance=include_provenance)
            data_D += new
            metadata_D += [{"group_idx": i_group, "traj_idx": i_traj} for _ in new]
    return data_D, metadata_D


def remove_constant_reward_groups(
    trajectory_groups_P: Sequence[TrajectoryGroup],
) -> list[TrajectoryGroup]:
    """Drop groups whose returns are all equal (their centred advantages are all zero). If every
    group is constant, keep the first one so downstream code never sees an empty batch."""
    kept = [g for g in trajectory_groups_P if len(set(g.get_total_rewards())) > 1]
    if not kept and trajectory_groups_P:
        logger.warning("every group has constant reward: this batch carries no policy gradient")
        return list(trajectory_groups_P[:1])
    return kept
