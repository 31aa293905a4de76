"""Tinker-cookbook compatibility.

Always: llm-gym's seed API has the cookbook's shape (the field lists and signatures below were read
from tinker-cookbook 0.6.1's `tinker_cookbook/rl/types.py` and `completers.py`; when the cookbook is
installed the test compares against the installed package instead).
With `tinker_cookbook` installed (`pip install tinker-cookbook`; not part of `make test`, see
docs/adapters.md): the cookbook's own `do_group_rollout` runs llm-gym env groups with a local
`TokenCompleter` (no remote service) and gets the same rewards as llm-gym's rollouts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import os

import gymnasium as gym
import numpy as np
import pytest

from tests._adapter_helpers import ensure_catalog

ensure_catalog()

import llm_gym  # noqa: E402
from llm_gym import completers as our_completers  # noqa: E402
from llm_gym.rl import ProblemGroupBuilder, do_group_rollout  # noqa: E402
from llm_gym.rl import types as our_types  # noqa: E402
from llm_gym.adapters import tinker as adapter  # noqa: E402

# tinker-cookbook 0.6.1
COOKBOOK_FIELDS = {
    "StepResult": ["reward", "episode_done", "next_observation", "next_stop_condition", "metrics", "logs"],
    "Transition": ["ob", "ac", "reward", "episode_done", "metrics", "logs"],
    "Trajectory": ["transitions", "final_ob", "stop_reason"],
    "TrajectoryGroup": ["trajectories_G", "final_rewards_G", "metrics_G", "rollout_errors"],
    "TokensWithLogprobs": ["tokens", "maybe_logprobs", "stop_reason", "sequence_id",
                           "prompt_cache_hit_tokens"],
}
COOKBOOK_METHODS = {  # (class, method): (parameters as (name, kind), is coroutine)
    ("Env", "initial_observation"): ([("self", "POSITIONAL_OR_KEYWORD")], True),
    ("Env", "step"): ([("self", "POSITIONAL_OR_KEYWORD"), ("action", "POSITIONAL_OR_KEYWORD"),
                       ("extra", "KEYWORD_ONLY")], True),
    ("EnvGroupBuilder", "make_envs"): ([("self", "POSITIONAL_OR_KEYWORD")], True),
    ("EnvGroupBuilder", "compute_group_rewards"): (
        [("self", "POSITIONAL_OR_KEYWORD"), ("trajectory_group", "POSITIONAL_OR_KEYWORD"),
         ("env_group", "POSITIONAL_OR_KEYWORD")], True),
    ("EnvGroupBuilder", "cleanup"): ([("self", "POSITIONAL_OR_KEYWORD")], True),
    ("EnvGroupBuilder", "logging_tags"): ([("self", "POSITIONAL_OR_KEYWORD")], False),
    ("RLDataset", "get_batch"): ([("self", "POSITIONAL_OR_KEYWORD"), ("index", "POSITIONAL_OR_KEYWORD")], False),
    ("RLDataset", "__len__"): ([("self", "POSITIONAL_OR_KEYWORD")], False),
    ("TokenCompleter", "__call__"): (
        [("self", "POSITIONAL_OR_KEYWORD"), ("model_input", "POSITIONAL_OR_KEYWORD"),
         ("stop", "POSITIONAL_OR_KEYWORD"), ("max_tokens", "KEYWORD_ONLY")], True),
}


def _ours(name: str):
    return getattr(our_types, name, None) or getattr(our_completers, name)


def _expected_shapes():
    """The cookbook's shapes: from the installed package when present, else the 0.6.1 record."""
    if not adapter.cookbook_available():
        return COOKBOOK_FIELDS, COOKBOOK_METHODS
    from tinker_cookbook import completers
    from tinker_cookbook.rl import types

    def theirs(name):
        return getattr(types, name, None) or getattr(completers, name)

    fields = {n: [f.name for f in dataclasses.fields(theirs(n))] for n in COOKBOOK_FIELDS}
    methods = {}
    for cls, meth in COOKBOOK_METHODS:
        fn = getattr(theirs(cls), meth)
        methods[(cls, meth)] = (
            [(p.name, p.kind.name) for p in inspect.signature(fn).parameters.values()],
            inspect.iscoroutinefunction(fn),
        )
    return fields, methods


def test_seed_api_has_the_cookbooks_shape():
    fields, methods = _expected_shapes()
    for name, expected in fields.items():
        assert [f.name for f in dataclasses.fields(_ours(name))] == expected, name
    for (cls, meth), (params, is_coro) in methods.items():
        fn = getattr(_ours(cls), meth)
        ours = [(p.name, p.kind.name) for p in inspect.signature(fn).parameters.values()]
        assert ours == params, f"{cls}.{meth}"
        assert inspect.iscoroutinefunction(fn) == is_coro, f"{cls}.{meth}"
    # ModelInput answers to the cookbook's names.
    mi = llm_gym.ModelInput.from_ints([1, 2, 3])
    assert mi.length == 3 and mi.to_ints() == [1, 2, 3] and mi.chunks[0].tokens == [1, 2, 3]


def test_conversion_without_tinker_names_the_install():
    if adapter.cookbook_available():
        pytest.skip("tinker is installed here")
    with pytest.raises(ImportError, match="pip install tinker-cookbook"):
        adapter.to_tinker_model_input(llm_gym.ModelInput.from_ints([1]))


# --- with the real cookbook ---------------------------------------------------------------


def _math_group(seed: int, size: int) -> ProblemGroupBuilder:
    source = gym.make("llm/Math-v0").unwrapped.source
    return ProblemGroupBuilder(
        env_thunk=functools.partial(source.make_env, np.random.default_rng(seed)), num_envs=size
    )


def _local_policy(base):
    """A local cookbook TokenCompleter: answers the Math prompt it sees, wrongly for odd calls."""

    class ScriptedCompleter(base):
        def __init__(self) -> None:
            self.observation_types: list[type] = []
            self.calls = 0

        async def __call__(self, model_input, stop, *, max_tokens=None):
            from tinker_cookbook.completers import TokensWithLogprobs

            self.observation_types.append(type(model_input))
            text = bytes(t for t in model_input.to_ints() if t < 256).decode()
            a, b = text.split("user\n")[1].split("=")[0].split("+")
            answer = int(a) + int(b) + (self.calls % 2)
            self.calls += 1
            tokens = list(str(answer).encode()) + [int(stop[0])]
            return TokensWithLogprobs(tokens=tokens, maybe_logprobs=[-0.5] * len(tokens))

    return ScriptedCompleter()


def _require_cookbook() -> None:
    """Skip without tinker-cookbook, except in `make test-cookbook`'s venv, which sets
    LLM_GYM_REQUIRE_COOKBOOK=1 so a broken install fails instead of skipping silently."""
    if os.environ.get("LLM_GYM_REQUIRE_COOKBOOK") == "1":
        import tinker_cookbook  # noqa: F401
    else:
        pytest.importorskip("tinker_cookbook")


def test_cookbook_do_group_rollout_runs_llm_gym_groups():
    _require_cookbook()
    import tinker
    from tinker_cookbook.completers import TokenCompleter
    from tinker_cookbook.rl.rollouts import do_group_rollout as cookbook_rollout

    policy = _local_policy(TokenCompleter)
    group = asyncio.run(cookbook_rollout(_math_group(7, 4), policy))
    assert group.get_total_rewards() == [1.0, 0.0, 1.0, 0.0]
    assert [t.transitions[0].metrics["correct"] for t in group.trajectories_G] == [1.0, 0.0, 1.0, 0.0]
    # llm-gym's ModelInput (a renderer may hand out its private subclass that also carries the
    # prompt's text; it compares, hashes and pickles as a ModelInput)
    assert len(policy.observation_types) == 4
    assert all(issubclass(t, llm_gym.ModelInput) for t in policy.observation_types)

    # Same group through llm-gym's rollouts: same rewards.
    ours = asyncio.run(do_group_rollout(_math_group(7, 4), _local_policy(our_completers.TokenCompleter)))
    assert ours.get_total_rewards() == group.get_total_rewards()

    # Wrapped for Tinker-service policies: observations become real tinker.ModelInputs.
    policy = _local_policy(TokenCompleter)
    wrapped = adapter.CookbookEnvGroupBuilder(_math_group(7, 2))
    group = asyncio.run(cookbook_rollout(wrapped, policy))
    assert policy.observation_types == [tinker.ModelInput] * 2
    assert group.get_total_rewards() == [1.0, 0.0]

    # The Gymnasium grouping wrapper's builders run under the cookbook too.
    gym_group = llm_gym.GymEnvGroupBuilder("llm/Math-v0", group_size=2, seed=11)
    group = asyncio.run(cookbook_rollout(gym_group, _local_policy(TokenCompleter)))
    assert group.get_total_rewards() == [1.0, 0.0]


def test_cookbook_policy_drives_llm_gym_rollouts():
    _require_cookbook()
    import tinker
    from tinker_cookbook.completers import TokenCompleter

    inner = _local_policy(TokenCompleter)
    group = asyncio.run(do_group_rollout(_math_group(3, 2), adapter.CookbookPolicy(inner)))
    assert inner.observation_types == [tinker.ModelInput] * 2
    assert group.get_total_rewards() == [1.0, 0.0]
    ac = group.trajectories_G[0].transitions[0].ac
    assert isinstance(ac, our_completers.TokensWithLogprobs) and ac.maybe_logprobs[0] == -0.5
    mi = llm_gym.ModelInput.from_ints([5, 6])
    assert adapter.from_tinker_model_input(adapter.to_tinker_model_input(mi)) == mi
