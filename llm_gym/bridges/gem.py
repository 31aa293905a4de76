"""GEM (gem-llm) environments as llm-gym envs: `gem/<GEM id without "game:">` (`GemSource`).

GEM envs already have the string-env face (`reset(seed) -> (text, info)`, `step(text) -> (text,
reward, terminated, truncated, info)`), so a GEM id becomes `FromText` over `gem.make(gem_id)`;
the only translation is `GemEnv`, which appends the `info["suffix"]` GEM's own observation
wrapper would add ("Enter your next guess.") to each observation. Seeds: `FromText` hands GEM seeds
below 2**32 (GEM seeds numpy's legacy generator, which raises on larger ones) and runs each call on
a private copy of the global `random` / `numpy.random` state that GEM's games draw from. Rewards
are GEM's (success 1, a format error -0.1, most other steps 0); a reply that never reaches the env
scores GEM's format-error reward, -0.1. GEM's `rg:` ids are the reasoning-gym datasets, bridged
directly as `rg/<name>-v0`; its math, code, QA and eval ids download datasets at run time (and
the code ones run model-written code outside any sandbox), so they are not registered (see
`llm_gym.bridges.GEM`).
"""

from __future__ import annotations

from typing import Any

from llm_gym.bridges import GEM
from llm_gym.env_source import EnvCard
from llm_gym.renderers import Renderer
from llm_gym.wrappers.from_text import StringEnvSource

__all__ = ["GemEnv", "GemSource", "gem_card"]

FORMAT_ERROR_REWARD = -0.1  # gem.utils.constants.LanguageGameReward.format_error_reward


class GemEnv:
    """A GEM env whose observations carry GEM's `info["suffix"]` (the prompt for the next move)."""

    def __init__(self, gem_id: str, **gem_kwargs: Any) -> None:
        import gem  # note: `import gem` calls logging.basicConfig(level=INFO)

        self.env = gem.make(gem_id, **gem_kwargs)

    @staticmethod
    def _with_suffix(obs: Any, info: dict) -> Any:
        suffix = info.get("suffix") if isinstance(info, dict) else None
        if isinstance(obs, str) and isinstance(suffix, str) and suffix:
            return f"{obs}\n{suffix}" if obs else suffix
        return obs

    def reset(self, seed: int | None = None) -> tuple[Any, dict]:
        obs, info = self.env.reset(seed=seed)
        return self._with_suffix(obs, info), info

    def step(self, action: str) -> tuple[Any, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._with_suffix(obs, info), reward, terminated, truncated, info


def gem_card(env_id: str, gem_id: str) -> EnvCard:
    return EnvCard(
        id=env_id,
        family="gem",
        description=(
            f"GEM's `{gem_id}`, multi-turn: the game's instructions are the first user turn, each "
            "later observation (with GEM's prompt for the next move) a new one; moves go in "
            "\\boxed{...} as GEM asks."
        ),
        multi_turn=True,
        reward_range=(FORMAT_ERROR_REWARD, 1.0),
        reward_meaning="GEM's per-step reward (1 for solving, partial credit where the game gives "
        "it, -0.1 for a move GEM cannot parse, which ends the game); -0.1 for a reply that never "
        "reached the env",
        difficulty_knobs={
            "gem_kwargs": "keyword arguments for gem.make (the game's own options, e.g. max_turns) "
            "(default {})",
            "system_prompt": "a system message before the game's instructions (default None)",
            "max_context_tokens": "end the game when the conversation would get longer (default 32768)",
        },
        data_source=f"gem-llm {GEM.version} (generated from the seed)",
        license=GEM.license,
    )


class GemSource(StringEnvSource):
    """Episodes of one GEM env (`gem_id`, e.g. "game:GuessTheNumber-v0-easy") through `FromText`."""

    def __init__(self, *, renderer: Renderer, split: str = "train", gem_id: str,
                 gem_kwargs: dict[str, Any] | None = None, **options: Any) -> None:
        self.card = gem_card("gem/" + gem_id.removeprefix("game:"), gem_id)
        self.gem_id = gem_id
        self.gem_kwargs = dict(gem_kwargs or {})
        options.setdefault("reward_range", (FORMAT_ERROR_REWARD, 1.0))
        super().__init__(renderer=renderer, split=split, **options)

    def make_string_env(self) -> GemEnv:
        return GemEnv(self.gem_id, **self.gem_kwargs)
