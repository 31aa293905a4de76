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
`llm_gym.bridges.GEM`). The card's `example_episode` is two moves of the game from a fixed seed,
played when the card is first read (kept in `RECORDED_EXAMPLES` for the Sokoban ids, whose reset
takes seconds).
"""

from __future__ import annotations

from typing import Any

from llm_gym.bridges import GEM
from llm_gym.bridges._example import EXAMPLE_SEED, LazyCard, from_text_knobs, play_example
from llm_gym.env_source import EnvCard
from llm_gym.renderers import Renderer
from llm_gym.wrappers.from_text import StringEnvSource, _PrivateGlobalRNG

__all__ = ["GemEnv", "GemSource", "gem_card"]

FORMAT_ERROR_REWARD = -0.1  # gem.utils.constants.LanguageGameReward.format_error_reward


class GemEnv:
    """A GEM env whose observations carry GEM's `info["suffix"]` (the prompt for the next move)."""

    def __init__(self, gem_id: str, **gem_kwargs: Any) -> None:
        import gem  # note: `import gem` calls logging.basicConfig(level=INFO)

        self.gem_id = gem_id
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
        return self._with_suffix(obs, info), float(reward), terminated, truncated, info


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
            **from_text_knobs(
                invalid_action_reward="reward for a reply that never reaches the game "
                "(out-of-vocabulary ids, invalid UTF-8, over max_action_chars) or that GEM raised "
                f"on (default {FORMAT_ERROR_REWARD}, GEM's format-error reward)",
            ),
        },
        data_source=f"gem-llm {GEM.version} (generated from the seed)",
        license=GEM.license,
    )


class GemSource(StringEnvSource):
    """Episodes of one GEM env (`gem_id`, e.g. "game:GuessTheNumber-v0-easy") through `FromText`."""

    card = LazyCard(gem_card("gem/<Game>-v0-<level>", "game:<Game>-v0-<level>"))

    def __init__(self, *, renderer: Renderer, split: str = "train", gem_id: str,
                 gem_kwargs: dict[str, Any] | None = None, **options: Any) -> None:
        if gem_kwargs is not None and not isinstance(gem_kwargs, dict):
            raise TypeError(f"gem_kwargs must be a dict, got {type(gem_kwargs).__name__}")
        self.card = gem_card("gem/" + gem_id.removeprefix("game:"), gem_id)
        self.gem_id = gem_id
        self.gem_kwargs = dict(gem_kwargs or {})
        options.setdefault("reward_range", (FORMAT_ERROR_REWARD, 1.0))
        super().__init__(renderer=renderer, split=split, **options)

    def make_string_env(self) -> GemEnv:
        return GemEnv(self.gem_id, **self.gem_kwargs)

    def fixed_task_reason(self) -> str | None:
        return FIXED_TASKS.get(self.gem_id)

    def no_gold_reason(self) -> str | None:
        return ("GEM's games ship no solver and no reference moves to script a winning game "
                "from; tests/llm_gym/bridges/test_bridges_gem.py checks the translation against GEM itself")

    # --- the card's example: two of GEM's own random actions from a fixed seed ------------------
    def _example_key(self) -> tuple:
        return ("gem", self.gem_id, repr(sorted(self.gem_kwargs.items())), self.system_prompt)

    def _example_episode(self) -> list[dict[str, str]]:
        recorded = RECORDED_EXAMPLES.get(self.gem_id)
        if recorded is not None and not self.gem_kwargs:
            return _with_system(recorded, self.system_prompt)
        with _PrivateGlobalRNG(EXAMPLE_SEED).active():
            env = GemEnv(self.gem_id, **self.gem_kwargs)  # not one of the source's pooled envs
            first, _ = env.reset(seed=EXAMPLE_SEED)
            return play_example(env, first, _random_action, system_prompt=self.system_prompt)


_HANOI = ("GEM's Tower of Hanoi starts every episode from the same tower (every disk on the "
          "first peg; the level sets how many, gem/TowerofHanoi-v0-random draws it)")
FIXED_TASKS = {  # GEM ids whose every episode is the same task, by GEM's design
    "game:TowerofHanoi-v0-easy": _HANOI,
    "game:TowerofHanoi-v0-hard": _HANOI,
}

_MOVES = {  # candidate moves per game, in the \\boxed{} format its prompt asks for
    "FifteenPuzzle": [f"\\boxed{{{d}}}" for d in ("up", "down", "left", "right")],
    "TowerofHanoi": [f"\\boxed{{{a} {b}}}" for a in "ABC" for b in "ABC" if a != b],
    "Sudoku": [f"\\boxed{{{r} {c} {v}}}" for r in range(1, 10) for c in range(1, 10)
               for v in range(1, 10)],
}
_MAX_MOVE_TRIALS = 48


def _random_action(env: GemEnv, turn: int) -> str:
    """A move for the card's example: GEM's own random action (as the bridge's tests play; its
    Crosswords action's stray brackets removed, a bare one boxed) or, when that would end the
    game, the first of the game's candidate moves that does not (each tried on a copy)."""
    import copy
    import random
    import re

    try:
        first = env.env.sample_random_action()
    except NotImplementedError:
        first = "\\boxed{1}"
    first = re.sub(r"\\boxed\{\[(.*)\]\}", r"\\boxed{\1}", first)
    if "\\boxed{" not in first:
        first = f"\\boxed{{{first}}}"
    game = env.gem_id.split(":", 1)[-1].split("-v", 1)[0]
    moves = list(_MOVES.get(game, []))
    random.shuffle(moves)  # the global generator: FromText's private, seeded copy
    for move in [first] + moves[:_MAX_MOVE_TRIALS]:
        trial = copy.deepcopy(env.env)
        try:
            _obs, reward, terminated, truncated, _info = trial.step(move)
        except Exception:
            continue
        if not (terminated or truncated) and float(reward) >= 0:
            return move
    return first


def _with_system(episode: list[dict[str, str]], system_prompt: str | None) -> list[dict[str, str]]:
    return ([{"role": "system", "content": system_prompt}] if system_prompt else []) + [
        dict(m) for m in episode]


# Games whose reset takes from seconds to minutes (Sokoban room generation): their example was
# played once with `GemSource._example_episode`'s procedure (seed 0, GEM's random actions) and is
# kept here, so that reading the card costs nothing; tests/llm_gym/bridges/test_bridges_gem.py replays it
# (LLM_GYM_ALL_BRIDGE_IDS=1) to check it is still what the pinned gem-llm plays.
RECORDED_EXAMPLES: dict[str, list[dict[str, str]]] = {'game:Sokoban-v0-hard': [{'role': 'user',
                           'content': 'You are solving the Sokoban puzzle. You are the player and '
                                      'you need to push all boxes to targets.\n'
                                      'When you are right next to a box, you can push it by moving '
                                      'in the same direction.\n'
                                      'You cannot push a box through a wall or another box, and '
                                      'you cannot pull a box.\n'
                                      'you have to complete the puzzle within 50 turns.\n'
                                      'On the board, objects are represented as:\n'
                                      "- The player (you) appears as 'P'\n"
                                      '[... 191 characters left out ...]\n'
                                      'the command in \\boxed{}.\n'
                                      'For example: \\boxed{right} to move right.\n'
                                      'Use logic and deduction to push all boxes onto the target '
                                      'positions!\n'
                                      'Here is the current board layout:\n'
                                      '# # # # # # # #\n'
                                      '# # # # # # # #\n'
                                      '# # # # P # # #\n'
                                      '# _ _ _ X _ _ #\n'
                                      '# _ X O _ X _ #\n'
                                      '# _ O _ O _ _ #\n'
                                      '# _ X _ O _ _ #\n'
                                      '# # # # # # # #\n'
                                      '\n'
                                      'Enter your move.'},
                          {'role': 'assistant', 'content': '\\boxed{right}'},
                          {'role': 'user',
                           'content': 'At turn 1, you cannot move right - you would collide with '
                                      'wall or other boxes!\n'
                                      'Here is the current board layout:\n'
                                      '# # # # # # # #\n'
                                      '# # # # # # # #\n'
                                      '# # # # P # # #\n'
                                      '# _ _ _ X _ _ #\n'
                                      '# _ X O _ X _ #\n'
                                      '# _ O _ O _ _ #\n'
                                      '# _ X _ O _ _ #\n'
                                      '# # # # # # # #\n'
                                      '\n'
                                      'Enter your move.'},
                          {'role': 'assistant', 'content': '\\boxed{up}'}],
 }
