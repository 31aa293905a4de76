"""Glue between llm-gym's seed API and the Tinker cookbook (`tinker_cookbook`).

llm-gym's `llm_gym.rl` mirrors the cookbook's `tinker_cookbook.rl.types` (names, fields, method
signatures and semantics), so llm-gym envs and `EnvGroupBuilder`s run unchanged under the
cookbook's own rollout code (`tinker_cookbook.rl.rollouts.do_group_rollout`) with any cookbook
`TokenCompleter`: the cookbook only reads `ob.length`, calls `env.step(tokens, extra=...)` and
passes observations to the policy. What differs is the observation type: ours is
`llm_gym.ModelInput`, the cookbook's is `tinker.ModelInput`. A local policy does not care; a policy
backed by the Tinker sampling service (`TinkerTokenCompleter`) needs real `tinker.ModelInput`s.
This module converts in both directions:

- `to_tinker_model_input` / `from_tinker_model_input`: the two `ModelInput` types.
- `CookbookEnv`, `CookbookEnvGroupBuilder`: present llm-gym envs/groups with `tinker.ModelInput`
  observations (for cookbook training loops that sample from the Tinker service).
- `CookbookPolicy`: a cookbook `TokenCompleter` (e.g. `TinkerTokenCompleter`) usable as an llm-gym
  `TokenCompleter` in `llm_gym.rl.do_group_rollout` and our trainer's rollouts.

Importing this module needs neither `tinker` nor `tinker_cookbook`; the conversions import `tinker`
on first use and say how to install it when it is missing.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from llm_gym.completers import StopCondition, TokenCompleter, TokensWithLogprobs
from llm_gym.model_input import ModelInput
from llm_gym.rl.types import (
    Action,
    ActionExtra,
    Env,
    EnvGroupBuilder,
    InitialObservationOverflow,
    Metrics,
    StepResult,
    Trajectory,
)

__all__ = [
    "CookbookEnv",
    "CookbookEnvGroupBuilder",
    "CookbookPolicy",
    "cookbook_available",
    "from_tinker_model_input",
    "to_tinker_model_input",
]

INSTALL_HINT = "pip install tinker-cookbook  (or the llm-gym extra that includes it)"


def cookbook_available() -> bool:
    """Whether `tinker` and `tinker_cookbook` can be imported here."""
    try:
        import tinker  # noqa: F401
        import tinker_cookbook  # noqa: F401  # pyright: ignore[reportMissingImports]  (.venv-cookbook)
    except ImportError:
        return False
    return True


def _tinker() -> Any:
    try:
        import tinker
    except ImportError as exc:
        raise ImportError(
            f"converting to Tinker types needs the `tinker` package, which is not installed: "
            f"{INSTALL_HINT}. llm-gym envs run under the cookbook's rollouts without it when the "
            "policy is local."
        ) from exc
    return tinker


def to_tinker_model_input(model_input: Any) -> Any:
    """An llm-gym `ModelInput` (or a list of token ids) as a `tinker.ModelInput`; a
    `tinker.ModelInput` is returned as is."""
    tinker = _tinker()
    if isinstance(model_input, tinker.ModelInput):
        return model_input
    if isinstance(model_input, ModelInput):
        return tinker.ModelInput.from_ints(model_input.to_ints())
    return tinker.ModelInput.from_ints([int(t) for t in model_input])


def from_tinker_model_input(model_input: Any) -> ModelInput:
    """A `tinker.ModelInput` (text chunks only) as an llm-gym `ModelInput`."""
    if isinstance(model_input, ModelInput):
        return model_input
    to_ints: Callable[[], Sequence[int]] | None = getattr(model_input, "to_ints", None)
    if not callable(to_ints):
        raise TypeError(f"expected a tinker.ModelInput, got {type(model_input).__name__}")
    try:
        return ModelInput.from_ints(to_ints())
    except ValueError as exc:  # tinker raises for image chunks
        raise ValueError(
            "llm-gym is text-only: this tinker.ModelInput has non-text chunks (images)"
        ) from exc


class CookbookEnv(Env):
    """An llm-gym `Env` whose observations are `tinker.ModelInput`s (the cookbook's type).
    Actions, rewards, metrics and logs pass through unchanged; `inner` is the wrapped env."""

    def __init__(self, inner: Env) -> None:
        self.inner = inner

    async def initial_observation(self) -> tuple[Any, StopCondition]:
        first = await self.inner.initial_observation()
        if isinstance(first, InitialObservationOverflow):  # not converted (it never was)
            raise TypeError("CookbookEnv: the wrapped env's prompt is over its token budget "
                            "(InitialObservationOverflow), which is not converted to the cookbook's")
        ob, stop = first
        return to_tinker_model_input(ob), stop

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        result = await self.inner.step(action, extra=extra)
        result.next_observation = to_tinker_model_input(result.next_observation)
        return result


class CookbookEnvGroupBuilder(EnvGroupBuilder):
    """Wraps an llm-gym `EnvGroupBuilder` so its envs speak `tinker.ModelInput`. Group rewards,
    cleanup and logging tags are the inner builder's (it sees its own envs). Picklable when the
    inner builder is."""

    def __init__(self, inner: EnvGroupBuilder) -> None:
        self.inner = inner

    async def make_envs(self) -> Sequence[Env]:
        return [CookbookEnv(env) for env in await self.inner.make_envs()]

    async def compute_group_rewards(
        self, trajectory_group: list[Trajectory], env_group: Sequence[Env]
    ) -> list[tuple[float, Metrics]]:
        inner_envs = [e.inner if isinstance(e, CookbookEnv) else e for e in env_group]
        return await self.inner.compute_group_rewards(trajectory_group, inner_envs)

    async def cleanup(self) -> None:
        await self.inner.cleanup()

    def logging_tags(self) -> list[str]:
        return self.inner.logging_tags()


class CookbookPolicy(TokenCompleter):
    """A cookbook `TokenCompleter` (e.g. `tinker_cookbook.completers.TinkerTokenCompleter`) as an
    llm-gym `TokenCompleter`: observations go in as `tinker.ModelInput`, sampled tokens come back
    as llm-gym `TokensWithLogprobs`."""

    def __init__(self, completer: Any) -> None:
        self.completer = completer

    async def __call__(
        self, model_input: ModelInput, stop: StopCondition, *, max_tokens: int | None = None
    ) -> TokensWithLogprobs:
        out = await self.completer(to_tinker_model_input(model_input), stop, max_tokens=max_tokens)
        stop_reason = getattr(out, "stop_reason", "stop")
        return TokensWithLogprobs(
            tokens=[int(t) for t in out.tokens],
            maybe_logprobs=None if out.maybe_logprobs is None else [float(x) for x in out.maybe_logprobs],
            stop_reason="length" if str(stop_reason) == "length" else "stop",
        )
