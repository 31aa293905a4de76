"""Whether an episode was solved: `episode_correct(trajectory)`, the one definition of "correct".

Every accuracy llm-gym reports counts episodes with this function: the trainer's per-step `correct`
and its held-out `eval/accuracy`, and the SFT warm start's validation accuracy, whose band stops
the warm start (so the number that stopped SFT and the number the run reports are one measure).
It reads only a `Trajectory`'s transitions (their rewards and metrics), so it works for any env,
catalog or not, and needs no torch. Envs say "solved" through their `correct` metric (`ProblemEnv`
reports it on its one step; the tool and code envs on their final step); the return is only the
fallback for envs that report none.
"""

from __future__ import annotations

from llm_gym.rl.types import Trajectory

__all__ = ["episode_correct"]

# A `correct` metric this close to 1 is full credit (a score summed from fractions may round).
_FULL_CREDIT = 1.0 - 1e-9


def episode_correct(trajectory: Trajectory) -> float:
    """1.0 when the episode was solved, else 0.0.

    - The env's `correct` metric decides when any transition reports one: the value of the last
      transition that does (an env may report it before its final turn) must be full credit,
      >= 1. A partial score is not solved: text tasks report their score in [0, 1] as `correct`,
      and their reward (not this function) carries the partial credit.
    - Where no transition reports `correct` (games, bridged string envs), the episode is solved
      when its return, the sum of its transition rewards, is > 0: a won game scores +1 less any
      per-turn penalties, a lost or drawn one 0 or less.
    - An episode with no transitions is not solved.

    Group rewards (`EnvGroupBuilder.compute_group_rewards`: self-play, pairwise judging) are not
    part of a trajectory and do not count; an env whose outcome is decided there should report
    `correct` on its episodes.
    """
    flags = [t.metrics["correct"] for t in trajectory.transitions if "correct" in t.metrics]
    if flags:
        return float(float(flags[-1]) >= _FULL_CREDIT)
    return float(sum(t.reward for t in trajectory.transitions) > 0)
