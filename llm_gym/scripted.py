"""Scripted cases: the gold and adversarial episodes an environment's card promises scores for.

An `EnvSource` lists `ScriptedCase`s in `scripted_cases()`: a name, a kind ("gold": the reference
or a solver, which must score the maximum; "adversarial": a hedge, a format-only reply, an invalid
move, a parser trick — which must get no false credit), a `reply` function and the range the
episode return must fall in. `reply(env, observation_text)` is an oracle policy: it may read the
task off the seed-API `env` it plays (`env.answer`, a board, ...) and the decoded text of the
latest observation, and returns the assistant's reply as text. `run_scripted_case` plays one
episode with it through the seed API — each reply encoded exactly as the renderer would have
sampled it (its end of turn included) — and returns the `ScriptedOutcome`.

`llm-gym check` runs every declared case on several seeds and both splits; the family tests run
them too, so a card's promise is a test. Nothing here knows a trainer exists.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Literal

import numpy as np

from llm_gym.completers import TokenCompleter, TokensWithLogprobs
from llm_gym.model_input import ModelInput
from llm_gym.renderers.base import Message, Renderer
from llm_gym.rl.rollouts import do_single_rollout
from llm_gym.rl.types import Env, StopCondition, Trajectory, release_env

if TYPE_CHECKING:
    from llm_gym.env_source import EnvSource

CaseKind = Literal["gold", "adversarial"]
# The first argument is the seed-API env of the case's own source (a `CountdownEnv`, a board game's
# env, ...), whose task attributes the reply reads: `Any`, since a `Callable[[Env, str], str]` would
# demand replies that accept every `Env`.
ReplyFn = Callable[[Any, str], str]


@dataclass(frozen=True)
class ScriptedCase:
    """One scripted policy and the episode return it must get (`low <= return <= high`, with
    1e-6 slack). `knobs` overrides the source's defaults for this case (a gold solver that needs
    a small board, say). `max_turns` bounds the episode (a safety net for a looping script)."""

    name: str
    kind: CaseKind
    reply: ReplyFn
    low: float
    high: float
    note: str = ""
    knobs: dict[str, Any] = field(default_factory=dict)
    max_turns: int = 64

    def __post_init__(self) -> None:
        if self.kind not in ("gold", "adversarial"):
            raise ValueError(f"ScriptedCase.kind must be 'gold' or 'adversarial', got {self.kind!r}")
        if not self.low <= self.high:
            raise ValueError(f"ScriptedCase {self.name!r}: low {self.low} > high {self.high}")


@dataclass(frozen=True)
class ScriptedOutcome:
    case: str
    seed: int
    split: str
    episode_return: float
    turns: int
    replies: list[str]
    ok: bool  # the return is inside the case's range


def reply_tokens(renderer: Renderer, text: str, stop: StopCondition | None = None) -> list[int]:
    """The tokens a policy samples to say `text` as one assistant turn under `renderer`: the
    trained part of a one-turn supervised example (its end of turn, or role_colon's stop overlap,
    included), cut where the first of `stop` (default: the renderer's stop sequences) ends, as
    a sampler stops."""
    messages = [Message(role="user", content="."), Message(role="assistant", content=text)]
    tokens, weights = renderer.build_supervised_example(messages)
    ids = [t for t, w in zip(tokens.to_ints(), weights) if w > 0]
    return _cut_at_first_stop(renderer, ids, renderer.get_stop_sequences() if stop is None else stop)


def _cut_at_first_stop(renderer: Renderer, ids: list[int], stops: StopCondition) -> list[int]:
    """`ids` up to and including the first of `stops`, as a sampler would return them (a tool
    call ends at `</tool_call>` under role_colon, before the turn's own delimiter)."""
    if not stops:
        return ids
    if isinstance(stops[0], int):
        for i, t in enumerate(ids):
            if t in stops:
                return ids[: i + 1]
        return ids
    decode = renderer.tokenizer.decode

    def stopped(k: int) -> bool:  # monotone in k: a longer prefix keeps a stop it contains
        text = decode(ids[:k])
        return any(s in text for s in stops)

    if not stopped(len(ids)):
        return ids
    low, high = 1, len(ids)  # the shortest prefix that contains a stop, by bisection
    while low < high:
        mid = (low + high) // 2
        if stopped(mid):
            high = mid
        else:
            low = mid + 1
    return ids[:low]


class _ScriptedCompleter(TokenCompleter):
    def __init__(self, renderer: Renderer, env: Env, reply: ReplyFn, max_turns: int) -> None:
        self.renderer, self.env, self.reply, self.max_turns = renderer, env, reply, max_turns
        self.replies: list[str] = []

    async def __call__(
        self, model_input: ModelInput, stop: StopCondition, *, max_tokens: int | None = None
    ) -> TokensWithLogprobs:
        if len(self.replies) >= self.max_turns:
            raise RuntimeError(f"scripted reply ran past {self.max_turns} turns")
        text = self.renderer.tokenizer.decode(model_input.to_ints())
        reply = self.reply(self.env, text)
        if not isinstance(reply, str):
            raise TypeError(f"a scripted reply must return str, got {type(reply).__name__}")
        self.replies.append(reply)
        tokens = reply_tokens(self.renderer, reply, stop)  # the env's own stop condition
        return TokensWithLogprobs(tokens, [0.0] * len(tokens))


async def aplay_scripted_episode(
    source: EnvSource, case: ScriptedCase, env: Env
) -> tuple[Trajectory, list[str]]:
    """Play `case` on `env` (one of `source`'s episodes) through the seed API; return the whole
    `Trajectory` and the replies said. The env is released afterwards (`release_env`)."""
    policy = _ScriptedCompleter(source.renderer, env, case.reply, case.max_turns)
    try:
        trajectory = await do_single_rollout(policy, env)
    finally:
        release_env(env)
    return trajectory, policy.replies


async def arun_scripted_case(
    source: EnvSource, case: ScriptedCase, seed: int
) -> ScriptedOutcome:
    """Play `case` on the task `source.make_env(np.random.default_rng(seed))` draws."""
    env = source.make_env(np.random.default_rng(seed))
    trajectory, replies = await aplay_scripted_episode(source, case, env)
    ret = float(sum(t.reward for t in trajectory.transitions))
    ok = case.low - 1e-6 <= ret <= case.high + 1e-6
    return ScriptedOutcome(case.name, seed, source.split, ret, len(trajectory.transitions),
                           replies, ok)


def run_scripted_case(source: EnvSource, case: ScriptedCase, seed: int) -> ScriptedOutcome:
    """Synchronous `arun_scripted_case` (runs its own event loop)."""
    return asyncio.run(arun_scripted_case(source, case, seed))


def case_source(
    source_cls: type[EnvSource], case: ScriptedCase, renderer: Renderer, split: str = "train",
    **knobs: Any,
) -> EnvSource:
    """The source a case runs on: `source_cls` with `knobs`, then the case's own knobs."""
    return source_cls(renderer=renderer, split=split, **{**knobs, **case.knobs})


__all__ = [
    "ScriptedCase", "ScriptedOutcome", "reply_tokens", "run_scripted_case", "arun_scripted_case",
    "aplay_scripted_episode",
    "case_source",
]
