"""What a catalog family hands the Gymnasium face: an `EnvSource` and its `EnvCard`.

A family is written once against the seed API. Its `EnvSource` draws a task from a numpy
`Generator` (and nothing else, so seeding is exact) and returns a fresh seed-API `Env` for it; the
Gymnasium `TextEnv` drives that `Env` through `reset`/`step`, and the grouping wrapper asks the
source for group rewards. The `EnvCard` is the family's documentation in data: the catalog page is
generated from cards.
"""

from __future__ import annotations

import difflib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from llm_gym.renderers.base import Renderer
from llm_gym.rl.types import Env, Metrics, Trajectory

SPLITS = ("train", "test")


@dataclass(frozen=True)
class EnvCard:
    """An environment's card (see docs/writing-an-env.md, "The card")."""

    id: str  # "llm/Name-vN"
    family: str  # "math", "games", ...
    description: str  # one paragraph
    multi_turn: bool
    reward_range: tuple[float, float]
    reward_meaning: str
    difficulty_knobs: dict[str, str]  # knob name -> what it does (with its default)
    data_source: str
    license: str
    example_episode: list[dict[str, str]] = field(default_factory=list)  # chat messages
    # What a reply is, for the adversarial audit (llm_gym.checks.adversarial): "one answer" (it
    # commits to one answer, read under llm_gym.grading's policy), "program", "exact text" (the
    # whole reply is the answer verbatim, as a program's predicted output), or "free text" (the
    # reply is the product, as in instruction following).
    answer_form: str = "one answer"
    # The answer contract in one line (llm_gym.grading.contracts): what an answer is and how it
    # is declared, e.g. "integer (IntegerAnswer): an 'Answer:' line, \\boxed{} or the last line".
    # The env's `answer_contract` object is the source of truth; this line is its card entry.
    answer_contract: str = ""
    # Non-empty when the env's reward is known to be gameable and cannot be made safe by its
    # contract (a judge a policy can sway): the measured rate and the classes, shown by
    # `llm-gym check` and in the catalog. Empty means none is known.
    known_hackable: str = ""


class EnvSource(ABC):
    """Produces seed-API episodes for one registered id.

    Subclasses set `card`, accept their difficulty knobs as keyword arguments (JSON-serialisable
    values, validated with a clear error), and implement `make_env`. `split` selects disjoint
    train/test task sets ("test" is the held-out split for evaluation).
    """

    card: EnvCard

    def __init__(self, *, renderer: Renderer, split: str = "train", **knobs: Any) -> None:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        if knobs:
            raise TypeError(_unknown_options_message(type(self), sorted(knobs)))
        self.renderer = renderer
        self.split = split

    @abstractmethod
    def make_env(self, rng: np.random.Generator) -> Env:
        """A fresh single-use `Env` on a task drawn from `rng` (the only randomness allowed).
        The same generator state must give the same task and the same env behaviour."""

    async def compute_group_rewards(
        self, trajectory_group: list[Trajectory], env_group: Sequence[Env]
    ) -> list[tuple[float, Metrics]]:
        """Group-level rewards for G episodes on the same task; zero unless the family has group
        logic (pairwise judging, self-play)."""
        return [(0.0, {}) for _ in trajectory_group]

    def scripted_cases(self) -> list[Any]:
        """The gold and adversarial `llm_gym.scripted.ScriptedCase`s the card promises scores
        for (run by `llm-gym check` and the family's tests); none by default."""
        return []

    def no_gold_reason(self) -> str | None:
        """Why no gold scripted case can exist for this source, when that is so: a bridged
        library's env that ships neither reference answers nor a solver. `llm-gym check` then
        skips its scripted row with this reason instead of failing it; None (the default) means
        gold cases are expected. A catalog env always has a reference or a solver."""
        return None

    def fixed_task_reason(self) -> str | None:
        """Why every seed plays the same task, when that is the env's design: a bridged game
        whose start its knobs fix (a Tower of Hanoi of n disks, always on the first peg).
        `llm-gym check` then skips its "the task depends on the seed" test and its split row
        with this reason; None (the default) means seeds must give different tasks."""
        return None

    def small_held_out_reason(self) -> str | None:
        """Why this multi-turn source's test split, at these knobs, may hold fewer than the 100
        distinct episodes a held-out evaluation needs, when that is a deliberate trade-off (each
        task is expensive to build, say) and a knob widens it. `llm-gym check`'s split row then
        reports the count as a warning with this reason instead of failing; None (the default)
        means a native multi-turn env's defaults must give at least 100."""
        return None

    def hash_seed_reason(self) -> str | None:
        """Why episodes may depend on the interpreter's string hash seed (`PYTHONHASHSEED`),
        when a bridged library's generator is at fault (it draws from an unordered set of
        strings). `llm-gym check` runs its determinism processes with different hash seeds; when
        they disagree and this is declared, it reruns one with the same hash seed and, if the
        episodes then agree, skips with this reason instead of failing. None (the default): a
        catalog env never depends on it."""
        return None

    def task_key(self, env: Any) -> Any:
        """Optional: a canonical, JSON-able key of the task `env` (one of this source's episodes)
        plays -- a secret, a puzzle id, an opponent seed. `llm-gym check` compares these keys
        across the train and test splits; None (the default) lets it read the episode's state."""
        return None

    @property
    def reward_range(self) -> tuple[float, float]:
        return self.card.reward_range


def _unknown_options_message(cls: type[EnvSource], unknown: list[str]) -> str:
    """Python's own wording for a bad keyword (`X.__init__() got an unexpected keyword argument
    'name'`), naming the first unknown option as Python does, then the rest, a close match and the
    knobs. Libraries that retry `gym.make` without an optional keyword recognise the Python
    wording (torchrl's `GymEnv` drops `frameskip` when the error contains `unexpected keyword
    argument 'frameskip'`), so keep it."""
    knobs = sorted(getattr(getattr(cls, "card", None), "difficulty_knobs", None) or {})
    message = f"{cls.__name__}.__init__() got an unexpected keyword argument {unknown[0]!r}"
    if len(unknown) > 1:
        message += f" (unknown options: {unknown})"
    card_id = getattr(getattr(cls, "card", None), "id", None)
    message += f"; its knobs are {knobs}" if knobs else "; it has no knobs"
    if card_id:
        message += f" (options of gym.make({card_id!r}, ...))"
    guesses = [
        f"{name!r} -> {close[0]!r}"
        for name in unknown
        if (close := difflib.get_close_matches(name, knobs, n=1, cutoff=0.6))
    ]
    if guesses:
        message += f". Did you mean: {', '.join(guesses)}?"
    return message
