"""Tiny `EnvSource`s for the Gymnasium-face tests (TextEnv, registration, grouping, vector).

- `AddSource`: single-turn `ProblemEnv` "a+b=" with reward 1 for the right sum (range [-0.1, 1]).
- `TwoTurnSource`: asks for a word twice; reward 0.5 per turn when the reply is the word; the
  second observation extends the first (prefix property).
- `SleepySource`: like `AddSource` but its coroutines really suspend (`asyncio.sleep`).
- `BuggySource`: its episode raises on an action containing token 0 (an env bug).
- `GroupBonusSource`: `AddSource` with a group reward: 1 to the shortest correct response.
"""

from __future__ import annotations

import asyncio
from typing import Sequence

import numpy as np

from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.model_input import ModelInput
from llm_gym.renderers import Message, get_text_content
from llm_gym.rl import Env, ProblemEnv, StepResult, Trajectory


def _card(name: str, reward_range=(-0.1, 1.0), multi_turn: bool = False) -> EnvCard:
    return EnvCard(
        id=f"llmtest/{name}-v0",
        family="test",
        description="a test env",
        multi_turn=multi_turn,
        reward_range=reward_range,
        reward_meaning="1 if right",
        difficulty_knobs={"high": "largest operand (default 9)"},
        data_source="generated",
        license="Apache-2.0",
    )


class AddProblem(ProblemEnv):
    def __init__(self, renderer, a: int, b: int):
        super().__init__(renderer)
        self.a, self.b = a, b

    def get_question(self) -> str:
        return f"{self.a}+{self.b}="

    def check_answer(self, sample_str: str) -> bool:
        return sample_str.strip() == str(self.a + self.b)

    def check_format(self, sample_str: str) -> bool:
        return sample_str.strip().lstrip("-").isdigit()

    def get_reference_answer(self) -> str:
        return str(self.a + self.b)


class AddSource(EnvSource):
    card = _card("Add")

    def __init__(self, *, renderer, split: str = "train", high: int = 9, **knobs):
        super().__init__(renderer=renderer, split=split, **knobs)
        self.high = high

    def make_env(self, rng: np.random.Generator) -> Env:
        a, b = (int(x) for x in rng.integers(0, self.high + 1, size=2))
        if self.split == "test":  # a disjoint task set: test problems have a > high
            a += self.high + 1
        return AddProblem(self.renderer, a, b)


class TwoTurnEnv(Env):
    WORDS = ("apple", "pear", "plum", "fig")

    def __init__(self, renderer, word: str):
        self.renderer, self.word, self.turn = renderer, word, 0
        self.messages: list[Message] = [Message(role="user", content=f"Say {word}.")]

    async def initial_observation(self):
        return self.renderer.build_generation_prompt(self.messages), self.renderer.get_stop_sequences()

    async def step(self, action, *, extra=None) -> StepResult:
        message, _ = self.renderer.parse_response(action)
        self.turn += 1
        ok = get_text_content(message).strip() == self.word
        done = self.turn >= 2
        self.messages += [message, Message(role="user", content=f"Again: {self.word}.")]
        ob = ModelInput.empty() if done else self.renderer.build_generation_prompt(self.messages)
        return StepResult(0.5 * ok, done, ob, self.renderer.get_stop_sequences(), {"ok": float(ok)})


class TwoTurnSource(EnvSource):
    card = _card("TwoTurn", reward_range=(0.0, 1.0), multi_turn=True)

    def make_env(self, rng: np.random.Generator) -> Env:
        return TwoTurnEnv(self.renderer, TwoTurnEnv.WORDS[int(rng.integers(len(TwoTurnEnv.WORDS)))])


class SleepyProblem(AddProblem):
    async def initial_observation(self):
        await asyncio.sleep(0.001)
        return await super().initial_observation()

    async def step(self, action, *, extra=None):
        await asyncio.sleep(0.001)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, lambda: None)
        return await super().step(action, extra=extra)


class SleepySource(AddSource):
    card = _card("Sleepy")

    def make_env(self, rng):
        env = super().make_env(rng)
        return SleepyProblem(self.renderer, env.a, env.b)


class BuggyProblem(AddProblem):
    async def step(self, action, *, extra=None):
        if 0 in list(action):
            raise ZeroDivisionError("bug in the env")
        return await super().step(action, extra=extra)


class BuggySource(AddSource):
    card = _card("Buggy")

    def make_env(self, rng):
        env = super().make_env(rng)
        return BuggyProblem(self.renderer, env.a, env.b)


class GroupBonusSource(AddSource):
    card = _card("GroupBonus", reward_range=(-0.1, 2.0))

    async def compute_group_rewards(
        self, trajectory_group: list[Trajectory], env_group: Sequence[Env]
    ):
        assert all(isinstance(e, AddProblem) for e in env_group), env_group
        lengths = [len(t.transitions[0].ac.tokens) for t in trajectory_group]
        best = int(np.argmin(lengths))
        return [(1.0 if i == best else 0.0, {"bonus": float(i == best)}) for i in range(len(lengths))]


class UntilRightEnv(TwoTurnEnv):
    """Multi-turn: reward 1 and the end when the reply is the word, else 0 and ask again, for at
    most 3 turns -- so members of one group finish at different steps."""

    async def step(self, action, *, extra=None) -> StepResult:
        message, _ = self.renderer.parse_response(action)
        self.turn += 1
        ok = get_text_content(message).strip() == self.word
        done = ok or self.turn >= 3
        self.messages += [message, Message(role="user", content=f"Again: {self.word}.")]
        ob = ModelInput.empty() if done else self.renderer.build_generation_prompt(self.messages)
        return StepResult(float(ok), done, ob, self.renderer.get_stop_sequences(), {"ok": float(ok)})


class UntilRightSource(EnvSource):
    card = _card("UntilRight", reward_range=(0.0, 1.0), multi_turn=True)

    def make_env(self, rng: np.random.Generator) -> Env:
        return UntilRightEnv(self.renderer, TwoTurnEnv.WORDS[int(rng.integers(len(TwoTurnEnv.WORDS)))])
