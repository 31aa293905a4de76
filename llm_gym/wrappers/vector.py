"""`GroupAdvantages`: GRPO groups on the Gymnasium side, for vector-env training loops.

A vector env of `B * G` sub-envs is read as B groups of G consecutive sub-envs. Every episode of a
group's members with the same index (the k-th episode of each member) is reset with the same
seed, so the G members face the same task, round after round; when all G have finished their k-th
episode, each gets its group-centred advantage (episode return minus the group's mean return,
computed by `llm_gym.rl.compute_advantages`) in `info["group_advantage"]`.

Why the wrapper resets sub-envs itself: Gymnasium's own autoreset reseeds nothing, so members
whose episodes end at different steps would drift onto different tasks. The wrapper therefore
needs the inner vector env in `AutoresetMode.DISABLED` and performs a SAME_STEP-style autoreset
with the right seed; outwardly it behaves as `AutoresetMode.SAME_STEP` -- the recommended mode for
LLM rollouts, where the observation returned with a finished episode is already the next prompt
and no step is wasted on a dummy action.
"""

from __future__ import annotations

from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper
from gymnasium.vector.utils import iterate

from llm_gym.model_input import ModelInput
from llm_gym.rl.data_processing import compute_advantages
from llm_gym.rl.types import Trajectory, TrajectoryGroup

__all__ = ["GroupAdvantages"]


def _info_of(vector_info: dict[str, Any], i: int) -> dict[str, Any]:
    """Sub-env `i`'s entries of a batched vector info (the inverse of `VectorEnv._add_info`)."""
    out: dict[str, Any] = {}
    for key, value in vector_info.items():
        if key.startswith("_") and key[1:] in vector_info:
            continue
        mask = vector_info.get(f"_{key}")
        if mask is not None and not mask[i]:
            continue
        if isinstance(value, dict):
            out[key] = _info_of(value, i)
        else:  # a base-case array of num_envs entries
            item = value[i]
            out[key] = item.item() if isinstance(item, np.generic) else item
    return out


def _check_group_size(group_size: Any) -> None:
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 2:
        raise ValueError(
            f"group_size must be an int >= 2, got {group_size!r}: advantages are centred within a "
            "group, so a group of one always gets advantage 0 and learns nothing"
        )


class GroupAdvantages(VectorWrapper):
    """Group-centred advantages for `num_envs = batch_size * group_size` sub-envs.

    Args:
        env: a vector env over token envs, made with
            `vector_kwargs={"autoreset_mode": gymnasium.vector.AutoresetMode.DISABLED}` (or use
            `GroupAdvantages.make`). Its `num_envs` must be a multiple of `group_size`.
        group_size: G >= 2; sub-envs `b*G .. b*G+G-1` form group `b`.
        scale: advantage scaling, as in `llm_gym.rl.compute_advantages`: `"none"` (return minus
            group mean, the default) or `"group_std"` (also divide by the group's std).

    `reset(seed=s)` derives each group's per-episode seeds from `SeedSequence(s)`; `seed=None`
    draws fresh entropy the first time and continues the stream afterwards. A list of seeds is
    rejected (groups need derived seeds).

    `step(actions)` returns SAME_STEP-autoreset results: a finished sub-env's observation is the
    next episode's prompt, its last step is in `info["final_obs"]` / `info["final_info"]`. When a
    group's k-th episodes have all finished, the step at which the last one finishes carries, for
    each of the G members, `info["group_advantage"]` (float64), `info["group_return"]` (the
    episode's return) and `info["group_episode"]` (k, the member's episode index since reset),
    with masks `info["_group_advantage"]` etc. For single-turn envs all members finish together,
    so the advantage arrives with the episode's own final step.
    """

    def __init__(
        self,
        env: VectorEnv,
        group_size: int,
        scale: Literal["none", "group_std"] = "none",
    ) -> None:
        super().__init__(env)
        _check_group_size(group_size)
        if env.num_envs % group_size:
            raise ValueError(
                f"num_envs={env.num_envs} is not a multiple of group_size={group_size}; make the "
                f"vector env with num_envs = batch_size * group_size"
            )
        mode = env.metadata.get("autoreset_mode")
        if mode != AutoresetMode.DISABLED:
            raise ValueError(
                f"GroupAdvantages resets sub-envs itself (with per-group seeds), so the inner vector "
                f"env must have autoreset_mode=AutoresetMode.DISABLED, got {mode}; make it with "
                "gym.make_vec(id, num_envs=B*G, vector_kwargs={'autoreset_mode': "
                "gymnasium.vector.AutoresetMode.DISABLED}) or GroupAdvantages.make(id, B, G)"
            )
        if scale not in ("none", "group_std"):
            raise ValueError(f"scale must be 'none' or 'group_std', got {scale!r}")
        self.group_size = group_size
        self.batch_size = env.num_envs // group_size
        self.scale: Literal["none", "group_std"] = scale
        self.metadata = {**env.metadata, "autoreset_mode": AutoresetMode.SAME_STEP}
        self._entropy: int | None = None
        self._epoch = 0
        self._returns = np.zeros(self.num_envs, dtype=np.float64)
        self._episode = np.zeros(self.num_envs, dtype=np.int64)
        self._pending: dict[tuple[int, int], np.ndarray] = {}

    @classmethod
    def make(
        cls,
        env_id: str,
        batch_size: int,
        group_size: int,
        vectorization_mode: str = "sync",
        vector_kwargs: dict[str, Any] | None = None,
        scale: Literal["none", "group_std"] = "none",
        **env_kwargs: Any,
    ) -> "GroupAdvantages":
        """`gym.make_vec(env_id, num_envs=batch_size*group_size, ...)` wrapped in GroupAdvantages
        (async mode defaults to `shared_memory=False`, which token sequences need)."""
        _check_group_size(group_size)  # before building any sub-env
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(
                f"batch_size must be a positive int (groups per batch), got {batch_size!r}"
            )
        vector_kwargs = dict(vector_kwargs or {})
        vector_kwargs["autoreset_mode"] = AutoresetMode.DISABLED
        if vectorization_mode == "async":
            vector_kwargs.setdefault("shared_memory", False)
        vec = gym.make_vec(
            env_id,
            num_envs=batch_size * group_size,
            vectorization_mode=vectorization_mode,
            vector_kwargs=vector_kwargs,
            **env_kwargs,
        )
        return cls(vec, group_size, scale=scale)

    def episode_seed(self, group: int, episode: int) -> int:
        """The reset seed of episode `episode` of every member of group `group` (this epoch)."""
        if self._entropy is None:
            raise gym.error.ResetNeeded("call reset() before asking for episode seeds")
        seq = np.random.SeedSequence(self._entropy, spawn_key=(self._epoch, group, episode))
        return int(seq.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(
                f"GroupAdvantages.reset takes one int seed (each group's seeds derive from it), got {seed!r}"
            )
        if seed is not None:
            self._entropy, self._epoch = int(seed), 0
        elif self._entropy is None:
            entropy = np.random.SeedSequence().entropy  # an int when none was given
            assert isinstance(entropy, int)
            self._entropy, self._epoch = entropy, 0
        else:
            self._epoch += 1
        self._returns[:] = 0.0
        self._episode[:] = 0
        self._pending.clear()
        seeds = [self.episode_seed(i // self.group_size, 0) for i in range(self.num_envs)]
        # gymnasium annotates VectorEnv.reset's seed as one int; its vector envs take a list.
        return self.env.reset(seed=seeds, options=options)  # pyright: ignore[reportArgumentType]

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        if self._entropy is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        obs, rewards, terminations, truncations, info = self.env.step(actions)
        self._returns += rewards
        done = np.logical_or(terminations, truncations)
        if not done.any():
            return obs, rewards, terminations, truncations, info

        G = self.group_size
        step_obs = list(iterate(self.env.observation_space, obs))
        seeds: list[int | None] = [None] * self.num_envs
        finished: list[tuple[int, np.ndarray, int]] = []  # (group, returns_G, episode)
        for i in np.flatnonzero(done):
            group, member, k = i // G, i % G, int(self._episode[i])
            returns_G = self._pending.setdefault((group, k), np.full(G, np.nan))
            returns_G[member] = self._returns[i]
            if not np.isnan(returns_G).any():
                finished.append((group, self._pending.pop((group, k)), k))
            self._returns[i] = 0.0
            self._episode[i] += 1
            seeds[i] = self.episode_seed(group, k + 1)
        new_obs, reset_info = self.env.reset(  # a list of seeds: see reset()
            seed=seeds, options={"reset_mask": done})  # pyright: ignore[reportArgumentType]

        out: dict[str, Any] = {}
        for i in range(self.num_envs):
            if done[i]:
                out = self._add_info(
                    out, {"final_obs": step_obs[i], "final_info": _info_of(info, i)}, i
                )
                out = self._add_info(out, _info_of(reset_info, i), i)
            else:
                out = self._add_info(out, _info_of(info, i), i)
        for group, returns_G, k in finished:
            advantages_G = self._advantages(returns_G)
            for member in range(G):
                out = self._add_info(
                    out,
                    {
                        "group_advantage": float(advantages_G[member]),
                        "group_return": float(returns_G[member]),
                        "group_episode": k,
                    },
                    group * G + member,
                )
        return new_obs, rewards, terminations, truncations, out

    def _advantages(self, returns_G: np.ndarray) -> np.ndarray:
        # The episode returns as a TrajectoryGroup of empty trajectories, so the trainer's own
        # advantage code (and its scaling options) does the centring.
        G = len(returns_G)
        group = TrajectoryGroup(
            [Trajectory([], ModelInput.empty()) for _ in range(G)],
            [float(r) for r in returns_G],
            [{} for _ in range(G)],
        )
        return compute_advantages([group], scale=self.scale)[0].astype(np.float64)
