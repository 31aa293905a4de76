"""Differential conformance of the rollout strategies: the same fault-injecting group run through
the cookbook's `do_group_rollout` (and `do_group_rollout_and_filter_constant_reward`) and ours.

The group is written once against each library's own `Env` / `EnvGroupBuilder` / `StepResult`
(and observation type). Faults are injected per make_envs() call and slot: a rollout that raises,
`make_envs` that raises, a grader (`compute_group_rewards`) that raises, a group that ends below
`MinViableGroup`'s floor. Each env sleeps a slot-specific time before answering, so completion
order is deterministic (no timing is asserted). For each case the test compares what each side
returns or raises, the order of the trajectories (by the env's tag), the rewards and the
`RolloutError` records. The cases where we deliberately differ are asserted as such, with the
reason (see `llm_gym/rl/rollout_strategy.py`'s table).
"""

from __future__ import annotations

import asyncio

import pytest

from tests.conformance.conftest import require_cookbook


class Lib:
    """One library's names, so the fault-injecting group is written once."""

    def __init__(self, name: str) -> None:
        self.name = name
        if name == "cookbook":
            require_cookbook()
            import tinker
            from tinker_cookbook import completers, exceptions
            from tinker_cookbook.rl import rollout_strategy, rollouts, types

            self.ModelInput = tinker.ModelInput
        else:
            from llm_gym import completers, exceptions
            from llm_gym.model_input import ModelInput
            from llm_gym.rl import rollout_strategy, rollouts, types

            self.ModelInput = ModelInput
        self.completers, self.exceptions = completers, exceptions
        self.strategies, self.rollouts, self.types = rollout_strategy, rollouts, types


def make_group(lib: Lib, plan: dict, *, make_envs_failures: int = 0, grader_fails: bool = False,
               group_size: int = 4):
    """A builder whose make_envs() call k (0-based) returns `group_size` one-step envs; env
    (k, slot) fails with "boom k/slot" when `(k, slot)` is in `plan` (value "raise"), after
    sleeping `0.01 * (group_size - slot)` s (so, without faults, slots finish last-first).
    Its tag (the step reward) is `10 * k + slot`."""
    t = lib.types

    class FaultyEnv(t.Env):
        def __init__(self, call: int, slot: int) -> None:
            self.call, self.slot = call, slot

        async def initial_observation(self):
            return lib.ModelInput.from_ints([1, 2, 3]), [0]

        async def step(self, action, *, extra=None):
            await asyncio.sleep(0.01 * (group_size - self.slot))
            if plan.get((self.call, self.slot)) == "raise":
                raise RuntimeError(f"boom {self.call}/{self.slot}")
            return t.StepResult(reward=float(10 * self.call + self.slot), episode_done=True,
                                next_observation=lib.ModelInput.empty(), next_stop_condition=[0])

    class FaultyBuilder(t.EnvGroupBuilder):
        def __init__(self) -> None:
            self.calls = 0
            self.make_failures_left = make_envs_failures
            self.cleanups = 0

        async def make_envs(self):
            if self.make_failures_left > 0:
                self.make_failures_left -= 1
                raise ConnectionError("sandbox down")
            call, self.calls = self.calls, self.calls + 1
            return [FaultyEnv(call, slot) for slot in range(group_size)]

        async def compute_group_rewards(self, trajectory_group, env_group):
            if grader_fails:
                raise ValueError("grader down")
            return [(0.0, {}) for _ in trajectory_group]

        async def cleanup(self):
            self.cleanups += 1

        def logging_tags(self):
            return ["faulty"]

    return FaultyBuilder()


def make_policy(lib: Lib):
    completers = lib.completers

    class Seven(completers.TokenCompleter):
        async def __call__(self, model_input, stop, **_):
            return completers.TokensWithLogprobs([7], [-0.5])

    return Seven()


def strategy(lib: Lib, kind: str, **kwargs):
    return getattr(lib.strategies, kind)(**kwargs)


def outcome(lib: Lib, builder, kind: str | None, **kwargs):
    """("group", tags in order, errors) or ("raised", exception class name, message)."""
    policy = make_policy(lib)
    strat = None if kind is None else strategy(lib, kind, **kwargs)
    try:
        group = asyncio.run(lib.rollouts.do_group_rollout(builder, policy, strategy=strat))
    except Exception as exc:  # noqa: BLE001 - the outcome under comparison
        return ("raised", type(exc).__name__, str(exc))
    tags = [t.transitions[0].reward for t in group.trajectories_G]
    errors = [(e.error_type, e.error_message) for e in group.rollout_errors]
    return ("group", tags, errors)


def both(case: dict, kind: str | None, **kwargs):
    sides = {}
    for name in ("cookbook", "llm_gym"):
        lib = Lib(name)
        builder = make_group(lib, **case)
        sides[name] = (outcome(lib, builder, kind, **kwargs), builder.calls, builder.cleanups)
    return sides["cookbook"], sides["llm_gym"]


def wrapped(lib: Lib, builder, kind: str, monkeypatch, remove_constant: bool = False, **kwargs):
    """`do_group_rollout_and_filter_constant_reward`'s result: "None", "group" or the raised type.
    The cookbook's version builds a `TinkerTokenCompleter` from its sampling client; here the
    "client" is the scripted policy itself."""
    if lib.name == "cookbook":
        monkeypatch.setattr(lib.rollouts, "TinkerTokenCompleter",
                            lambda client, max_tokens, temperature: client)
    try:
        group = asyncio.run(lib.rollouts.do_group_rollout_and_filter_constant_reward(
            make_policy(lib), builder, 16, 1.0, remove_constant,
            strategy=strategy(lib, kind, **kwargs)))
    except Exception as exc:  # noqa: BLE001
        return type(exc).__name__
    return "None" if group is None else "group"


CASES = {
    "no_faults": ({"plan": {}}, "RetryOnFailure", {}),
    "rollout_raises_once_retried": ({"plan": {(0, 1): "raise"}}, "RetryOnFailure", {"max_retries": 1}),
    "retry_budget_exhausted": ({"plan": {(0, 1): "raise", (1, 0): "raise"}}, "RetryOnFailure",
                               {"max_retries": 1}),
    "retry_budget_zero": ({"plan": {(0, 3): "raise"}}, "RetryOnFailure", {"max_retries": 0}),
    "fail_fast_rollout_raises": ({"plan": {(0, 2): "raise"}}, "FailFast", {}),
    "fail_fast_default_strategy": ({"plan": {(0, 2): "raise"}}, None, {}),
    "make_envs_always_fails_retry": ({"plan": {}, "make_envs_failures": 99}, "RetryOnFailure", {}),
    "make_envs_always_fails_mvg": ({"plan": {}, "make_envs_failures": 99}, "MinViableGroup", {}),
    "make_envs_fails_failfast": ({"plan": {}, "make_envs_failures": 1}, "FailFast", {}),
    "grader_fails_retry": ({"plan": {}, "grader_fails": True}, "RetryOnFailure", {}),
    "grader_fails_mvg": ({"plan": {}, "grader_fails": True}, "MinViableGroup", {}),
    # the floor: default ceil(0.75 * 4) = 3
    "mvg_default_floor_partial_group": ({"plan": {(0, 0): "raise"}}, "MinViableGroup", {"max_retries": 0}),
    "mvg_below_floor": ({"plan": {(0, 0): "raise", (0, 1): "raise"}}, "MinViableGroup",
                        {"max_retries": 0}),
    "mvg_explicit_floor": ({"plan": {(0, 0): "raise", (0, 1): "raise"}}, "MinViableGroup",
                           {"min_successful": 2, "max_retries": 0}),
    # slot 3 fails first (fastest): below the floor, retried on make_envs()[0] of a fresh group
    "mvg_retries_below_floor": ({"plan": {(0, 3): "raise"}}, "MinViableGroup", {}),
    # slot 0 fails last (slowest): the floor of 3 is already met, so it is not retried
    "mvg_no_retry_once_floor_met": ({"plan": {(0, 0): "raise"}}, "MinViableGroup", {}),
    "mvg_retries_run_out": ({"plan": {(0, 3): "raise", (0, 2): "raise", (1, 0): "raise",
                                      (2, 0): "raise"}}, "MinViableGroup", {"max_retries": 2}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_do_group_rollout_returns_or_raises_the_same(name):
    case, kind, kwargs = CASES[name]
    (ref, ref_calls, ref_cleanups), (ours, our_calls, our_cleanups) = both(case, kind, **kwargs)
    if ref[0] == "raised" and ref[1] == "AllTrajectoriesFailedError":
        # same class name, each library's own exception type; messages are worded alike
        assert ours[:2] == ref[:2], (ref, ours)
        assert "below the minimum viable group size" in ours[2]
    else:
        assert ours == ref, f"cookbook: {ref}\nllm_gym: {ours}"
    assert our_calls == ref_calls  # the same make_envs() calls: one per retry, [0] of each
    assert ref_cleanups == our_cleanups == 1


def test_make_envs_failure_is_retried_by_us_and_raised_by_the_cookbook():
    """Deliberate difference: a transient make_envs() failure costs a retry with us (within
    max_retries); the cookbook lets the first one propagate (and its wrapper drops the group)."""
    case = {"plan": {}, "make_envs_failures": 1}
    ref, ours = both(case, "RetryOnFailure", max_retries=1)
    assert ref[0] == ("raised", "ConnectionError", "sandbox down")
    assert ours[0] == ("group", [3.0, 2.0, 1.0, 0.0], [("ConnectionError", "sandbox down")])


WRAPPED = {
    "rollout_budget": ({"plan": {(0, 1): "raise", (1, 0): "raise"}}, "RetryOnFailure", {"max_retries": 1}),
    "make_envs_retry": ({"plan": {}, "make_envs_failures": 99}, "RetryOnFailure", {}),
    "make_envs_mvg": ({"plan": {}, "make_envs_failures": 99}, "MinViableGroup", {}),
    "grader_retry": ({"plan": {}, "grader_fails": True}, "RetryOnFailure", {}),
    "grader_failfast": ({"plan": {}, "grader_fails": True}, "FailFast", {}),
    "rollout_failfast": ({"plan": {(0, 2): "raise"}}, "FailFast", {}),
    "below_floor": ({"plan": {(0, 0): "raise", (0, 1): "raise"}}, "MinViableGroup", {"max_retries": 0}),
    "partial_group": ({"plan": {(0, 0): "raise"}}, "MinViableGroup", {"max_retries": 0}),
    "clean": ({"plan": {}}, "RetryOnFailure", {}),
}


@pytest.mark.parametrize("name", sorted(WRAPPED))
@pytest.mark.parametrize("remove_constant", [False, True])
def test_wrapper_skips_the_same_groups(name, remove_constant, monkeypatch):
    case, kind, kwargs = WRAPPED[name]
    results = {}
    for side in ("cookbook", "llm_gym"):
        lib = Lib(side)
        results[side] = wrapped(lib, make_group(lib, **case), kind, monkeypatch,
                                remove_constant=remove_constant, **kwargs)
    assert results["llm_gym"] == results["cookbook"], results


def test_min_viable_group_defaults_match():
    ref, ours = Lib("cookbook").strategies.MinViableGroup(), Lib("llm_gym").strategies.MinViableGroup()
    fields = ("min_successful", "max_retries", "per_rollout_timeout")
    assert [getattr(ours, f) for f in fields] == [getattr(ref, f) for f in fields]
    ref_r, ours_r = Lib("cookbook").strategies.RetryOnFailure(), Lib("llm_gym").strategies.RetryOnFailure()
    assert (ours_r.max_retries, ours_r.per_rollout_timeout) == (ref_r.max_retries, ref_r.per_rollout_timeout)
    for name in ("FailFast", "RetryOnFailure", "MinViableGroup"):
        assert (getattr(Lib("llm_gym").strategies, name)().catches_group_errors
                == getattr(Lib("cookbook").strategies, name)().catches_group_errors)


def test_truncated_turns_are_counted_alike():
    """`num_truncations_max_turn_tokens`: turns stopped at the per-turn cap ("length") that the
    env continued past, on the last transition (absent when zero)."""
    stops = ["length", "stop", "length", "length"]
    metrics = {}
    for side in ("cookbook", "llm_gym"):
        lib = Lib(side)
        t, completers = lib.types, lib.completers

        class ThreeTurns(t.Env):
            def __init__(self):
                self.turn = 0

            async def initial_observation(self):
                return lib.ModelInput.from_ints([1]), [0]

            async def step(self, action, *, extra=None):
                self.turn += 1
                done = self.turn >= 4
                return t.StepResult(reward=0.0, episode_done=done, next_stop_condition=[0],
                                    next_observation=lib.ModelInput.from_ints([1] + [7] * self.turn),
                                    metrics={"turn": float(self.turn)})

        class Scripted(completers.TokenCompleter):
            def __init__(self):
                self.left = list(stops)

            async def __call__(self, model_input, stop, **_):
                return completers.TokensWithLogprobs([7], [-0.5], stop_reason=self.left.pop(0))

        traj = asyncio.run(lib.rollouts.do_single_rollout(Scripted(), ThreeTurns()))
        metrics[side] = [dict(tr.metrics) for tr in traj.transitions]
    assert metrics["llm_gym"] == metrics["cookbook"]
    assert metrics["llm_gym"][-1]["num_truncations_max_turn_tokens"] == 2.0


def test_parse_error_masked_turn_is_masked_alike():
    """A transition with `metrics["parse_error_masked"] >= 1` gets mask 0 and advantage 0."""
    import numpy as np

    out = {}
    for side in ("cookbook", "llm_gym"):
        lib = Lib(side)
        t, tw = lib.types, lib.completers.TokensWithLogprobs
        if side == "cookbook":
            from tinker_cookbook.rl.data_processing import trajectory_to_data
        else:
            from llm_gym.rl.data_processing import trajectory_to_data
        mi = lib.ModelInput.from_ints
        transitions = [
            t.Transition(ob=mi([1, 2]), ac=tw([3, 4], [-0.1, -0.2]), reward=0.0, episode_done=False,
                         metrics={t.PARSE_ERROR_MASKED_METRIC_KEY: 1.0}),
            t.Transition(ob=mi([1, 2, 3, 4, 5]), ac=tw([6], [-0.3]), reward=1.0, episode_done=False,
                         metrics={t.PARSE_ERROR_MASKED_METRIC_KEY: 0.5}),
            t.Transition(ob=mi([1, 2, 3, 4, 5, 6, 8]), ac=tw([9], [-0.4]), reward=1.0,
                         episode_done=True),
        ]
        (datum,) = trajectory_to_data(t.Trajectory(transitions=transitions, final_ob=mi([])), 2.0)
        out[side] = {k: np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, dtype=float).tolist()
                     for k, v in datum.loss_fn_inputs.items()}
    assert out["llm_gym"] == out["cookbook"]
    assert out["llm_gym"]["mask"] == [0, 0, 0, 0, 1, 0, 1]  # targets 2 3 4 5 6 8 9
    assert out["llm_gym"]["advantages"] == [0, 0, 0, 0, 2, 0, 2]
