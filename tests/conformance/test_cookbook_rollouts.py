"""Differential conformance of the rollout strategies: the same fault-injecting group run through
the cookbook's `do_group_rollout` (and `do_group_rollout_and_filter_constant_reward`) and ours.

The group is written once against each library's own `Env` / `EnvGroupBuilder` / `StepResult`
(and observation type). Faults are injected per make_envs() call and slot: a rollout that raises,
`make_envs` that raises, a grader (`compute_group_rewards`) that raises, a group that ends below
`MinViableGroup`'s floor. Each env sleeps a slot-specific time before answering, on an event loop
whose clock is virtual (`run`: time moves only while every task waits), so completion order is
fixed by the sleeps alone, however loaded the machine (no timing is asserted). For each case the
test compares what each side returns or raises, the order of the trajectories (by the env's tag),
the rewards and the `RolloutError` records. The cases where we deliberately differ are asserted as
such, with the reason (see `llm_gym/rl/rollout_strategy.py`'s list of deliberate differences).
"""

from __future__ import annotations

import asyncio

import pytest

from tests.conformance.conftest import require_cookbook


class _VirtualClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose `time()` advances only when nothing is ready to run: a wait for the
    next timer jumps the clock to it instead of sleeping. Timers fire in deadline order and every
    task started in the same step starts at the same instant, so which of two sleeping envs
    finishes first never depends on the machine's load."""

    def __init__(self) -> None:
        super().__init__()
        self._now = 0.0
        select = self._selector.select

        def virtual_select(timeout=None):
            events = select(0)
            if not events and timeout is not None and timeout > 0:
                self._now += timeout
            return events if events or timeout is not None else select(None)

        self._selector.select = virtual_select

    def time(self) -> float:
        return self._now


def run(coro):
    """`asyncio.run` on a `_VirtualClockLoop` (for the sleeping fault-injection groups; the
    limit tests measure real time, which the rollout code reads too)."""
    with asyncio.Runner(loop_factory=_VirtualClockLoop) as runner:
        return runner.run(coro)


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
        group = run(lib.rollouts.do_group_rollout(builder, policy, strategy=strat))
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
        group = run(lib.rollouts.do_group_rollout_and_filter_constant_reward(
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


@pytest.mark.parametrize("case", ["prefix", "reset", "missing_id", "empty_turn", "no_sampled_target", "disabled"])
def test_provenance_spans_alike(case):
    """Cookbook 0.6: `trajectory_to_data` records where each token came from when every turn has
    the sampler's `sequence_id`; the same trajectories give the same spans (compared as
    (kind, sequence id, offset, length)) and the same datums on both sides."""
    import inspect

    import numpy as np

    require_cookbook()
    from tinker_cookbook.rl.data_processing import trajectory_to_data as cb_to_data

    if "include_provenance" not in inspect.signature(cb_to_data).parameters:
        pytest.skip("the installed tinker-cookbook records no provenance (added in 0.6)")

    def turns(case):
        if case == "prefix":  # one datum; turn b's prompt extends a's prompt + action
            return [([1, 2, 3], [4, 5], "a"), ([1, 2, 3, 4, 5, 6, 7], [8, 9, 10], "b"),
                    ([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], [11], "c")]
        if case == "reset":  # a prompt that does not extend the context starts a second datum
            return [([1, 2], [3], "a"), ([9, 9, 9], [4, 5], "b"), ([7], [8], "c")]
        if case == "missing_id":  # the second datum has a turn without an id: no spans for it
            return [([1, 2], [3], "a"), ([5, 6], [7], "b"), ([5, 6, 7, 8], [9], None)]
        if case == "empty_turn":  # a turn with no tokens needs no id
            return [([1, 2], [3], "a"), ([], [], None)]
        if case == "no_sampled_target":
            return [([1, 2, 3], [], "a")]
        return [([1, 2], [3, 4], "a")]

    def spans(spans_):
        return None if spans_ is None else [(type(s).__name__, s.sequence_id, s.offset, s.length) for s in spans_]

    out = {}
    for side in ("cookbook", "llm_gym"):
        lib = Lib(side)
        t, tw = lib.types, lib.completers.TokensWithLogprobs
        if side == "cookbook":
            to_data = cb_to_data
        else:
            from llm_gym.rl.data_processing import trajectory_to_data as to_data
        mi = lib.ModelInput.from_ints
        transitions = [
            t.Transition(ob=mi(ob), ac=tw(tokens=ac, maybe_logprobs=[-0.5] * len(ac), sequence_id=sid),
                         reward=0.0, episode_done=False)
            for ob, ac, sid in turns(case)
        ]
        traj = t.Trajectory(transitions=transitions, final_ob=mi([]))
        data = to_data(traj, 1.0, include_provenance=case != "disabled")
        out[side] = [(list(d.model_input.to_ints()), spans(d.model_input_spans), spans(d.loss_fn_input_spans),
                      {k: np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, dtype=float).tolist()
                       for k, v in d.loss_fn_inputs.items()})
                     for d in data]
    assert out["llm_gym"] == out["cookbook"]
    has_spans = [d[1] is not None for d in out["llm_gym"]]
    assert has_spans == {"prefix": [True], "reset": [True, True, True], "missing_id": [True, False],
                         "empty_turn": [True], "no_sampled_target": [False], "disabled": [False]}[case]


def _limits_module(side: str):
    if side == "cookbook":
        from tinker_cookbook.rl import rollout_limits, rollout_presets, rollout_runner
    else:
        from llm_gym.rl import rollout_limits, rollout_presets, rollout_runner
    return rollout_limits, rollout_presets, rollout_runner


def _counting_env(lib: Lib, turns: int, rollout_limits=None, overflow: bool = False):
    """An env whose observation grows by 3 tokens a turn; step reward 1.0; ends after `turns`."""
    t = lib.types

    class Growing(t.Env):
        def __init__(self):
            self.turn = 0
            if rollout_limits is not None:
                self.rollout_limits = rollout_limits

        async def initial_observation(self):
            if overflow:
                return t.InitialObservationOverflow(
                    reward=-1.0, metrics={"stop/max_tokens": 1.0}, logs={"why": "long"})
            return lib.ModelInput.from_ints([1, 2, 3]), [0]

        async def step(self, action, *, extra=None):
            self.turn += 1
            return t.StepResult(reward=1.0, episode_done=self.turn >= turns, next_stop_condition=[0],
                                next_observation=lib.ModelInput.from_ints([1] * (3 + 3 * self.turn)),
                                metrics={"turn": float(self.turn)})

    return Growing()


def _recording_policy(lib: Lib, seen: list):
    completers = lib.completers

    class TwoTokens(completers.TokenCompleter):
        async def __call__(self, model_input, stop, max_tokens=None, **_):
            seen.append(max_tokens)
            return completers.TokensWithLogprobs([7, 7], [-0.5, -0.5])

    return TwoTokens()


LIMIT_CASES = {
    "max_turns": {"max_turns": 2},
    "max_trajectory_tokens": {"max_trajectory_tokens": 10},
    "max_trajectory_tokens_room_of_one": {"max_trajectory_tokens": 7},
    "max_sampled_tokens": {"max_sampled_tokens": 5},
    "max_turn_tokens": {"max_turn_tokens": 3},
    "both_budgets_trajectory_wins": {"max_trajectory_tokens": 7, "max_sampled_tokens": 3},
    "unlimited": {},
}


@pytest.mark.parametrize("case", sorted(LIMIT_CASES))
def test_run_rollout_enforces_limits_alike(case):
    """`run_rollout(policy, env, limits=RolloutLimits(...))`: same stop reason, transitions,
    per-call `max_tokens` budgets, terminal flags and metrics (incl. `stop/<reason>`)."""
    out = {}
    for side in ("cookbook", "llm_gym"):
        lib = Lib(side)
        limits_mod, _, runner = _limits_module(side)
        seen: list = []
        traj = asyncio.run(runner.run_rollout(
            _recording_policy(lib, seen), _counting_env(lib, turns=4),
            limits=limits_mod.RolloutLimits(**LIMIT_CASES[case])))
        out[side] = (traj.stop_reason, seen, [(tr.reward, tr.episode_done, dict(tr.metrics))
                                              for tr in traj.transitions], traj.final_ob.length)
    assert out["llm_gym"] == out["cookbook"]


def test_env_rollout_limits_attribute_and_termination_clamp_alike():
    """An env advertising `rollout_limits` is bounded by `do_group_rollout`'s loop on both
    sides, and `termination=TerminationRewardPolicy(zero_reward_on_limit=True)` clamps the
    limit-stopped members' totals to <= 0 (grade, then clamp) while the finished one keeps its."""
    out = {}
    for side in ("cookbook", "llm_gym"):
        lib = Lib(side)
        limits_mod, _, _ = _limits_module(side)
        t = lib.types

        class Builder(t.EnvGroupBuilder):
            async def make_envs(self):
                return [_counting_env(lib, turns=1, rollout_limits=limits_mod.RolloutLimits(max_turns=2)),
                        _counting_env(lib, turns=4, rollout_limits=limits_mod.RolloutLimits(max_turns=2))]

            async def compute_group_rewards(self, trajectory_group, env_group):
                return [(0.5, {"graded": 1.0}) for _ in trajectory_group]

        policy = _recording_policy(lib, [])
        group = asyncio.run(lib.rollouts.do_group_rollout(
            Builder(), policy, None, limits_mod.TerminationRewardPolicy(zero_reward_on_limit=True)))
        out[side] = ([tr.stop_reason for tr in group.trajectories_G], group.final_rewards_G,
                     group.metrics_G, group.get_total_rewards())
    assert out["llm_gym"] == out["cookbook"]
    assert out["llm_gym"][3] == [1.5, 0.0]


def test_skip_grading_on_timeout_alike():
    """Every member timed out under skip_grading_on_timeout: the grader is not called."""
    out = {}
    for side in ("cookbook", "llm_gym"):
        lib = Lib(side)
        limits_mod, _, _ = _limits_module(side)
        t = lib.types
        calls = []

        class Slow(t.Env):
            rollout_limits = limits_mod.RolloutLimits(rollout_timeout_seconds=0.05)

            async def initial_observation(self):
                return lib.ModelInput.from_ints([1]), [0]

            async def step(self, action, *, extra=None):
                await asyncio.sleep(0.2)
                return t.StepResult(reward=1.0, episode_done=False, next_stop_condition=[0],
                                    next_observation=lib.ModelInput.from_ints([1, 7]))

        class Builder(t.EnvGroupBuilder):
            async def make_envs(self):
                return [Slow(), Slow()]

            async def compute_group_rewards(self, trajectory_group, env_group):
                calls.append(1)
                return [(1.0, {}) for _ in trajectory_group]

        policy = _recording_policy(lib, [])
        termination = limits_mod.TerminationRewardPolicy(zero_reward_on_limit=True,
                                                         skip_grading_on_timeout=True)
        group = asyncio.run(lib.rollouts.do_group_rollout(Builder(), policy, None, termination))
        out[side] = ([tr.stop_reason for tr in group.trajectories_G], group.final_rewards_G, calls)
    assert out["llm_gym"] == out["cookbook"]
    assert out["llm_gym"] == (["rollout_timeout", "rollout_timeout"], [0.0, 0.0], [])


def test_initial_observation_overflow_alike():
    """`InitialObservationOverflow` from `initial_observation`: one synthetic transition with the
    overflow reward, the stop reason from its metric, no training data."""
    out = {}
    for side in ("cookbook", "llm_gym"):
        lib = Lib(side)
        if side == "cookbook":
            from tinker_cookbook.rl.data_processing import trajectory_to_data
        else:
            from llm_gym.rl.data_processing import trajectory_to_data
        traj = asyncio.run(lib.rollouts.do_single_rollout(
            _recording_policy(lib, []), _counting_env(lib, turns=3, overflow=True)))
        out[side] = (traj.stop_reason, [(tr.ob.length, list(tr.ac.tokens), tr.reward, tr.episode_done,
                                         dict(tr.metrics), dict(tr.logs)) for tr in traj.transitions],
                     len(trajectory_to_data(traj, 1.0)))
    assert out["llm_gym"] == out["cookbook"]
    assert out["llm_gym"][0] == "max_tokens"


def _fields(obj) -> dict:
    import dataclasses

    if dataclasses.is_dataclass(obj):
        names = [f.name for f in dataclasses.fields(obj)]
    else:  # chz
        names = [n.removeprefix("X_") for n in type(obj).__chz_fields__]
    return {n: (_fields(getattr(obj, n)) if hasattr(getattr(obj, n), "__chz_fields__")
                or dataclasses.is_dataclass(getattr(obj, n)) else getattr(obj, n)) for n in names}


@pytest.mark.parametrize("preset", ["simple", "agentic"])
def test_rollout_presets_match(preset):
    """`rollout_presets.simple()` / `agentic()` and the classes' defaults carry the same values."""
    values = {side: _fields(getattr(_limits_module(side)[1], preset)()) for side in ("cookbook", "llm_gym")}
    assert values["llm_gym"] == values["cookbook"]
    for cls in ("RolloutLimits", "ParseErrorPolicy", "TerminationRewardPolicy"):
        cb, ours = (getattr(_limits_module(s)[0], cls)() for s in ("cookbook", "llm_gym"))
        assert _fields(ours) == _fields(cb), cls
    for model in ("thinkingmachines/Inkling-1:peft:131072", "Qwen/Qwen3-8B"):
        cb, ours = (_limits_module(s)[1] for s in ("cookbook", "llm_gym"))
        assert _fields(ours.default_rollout_config_for_model(model)) == _fields(
            cb.default_rollout_config_for_model(model))
        assert (type(ours.default_rollout_strategy_for_model(model)).__name__
                == type(cb.default_rollout_strategy_for_model(model)).__name__)


def test_bad_logprobs_in_training_data():
    """Mismatched logprob/token counts raise on both sides (the cookbook asserts, we raise
    ValueError); so does `maybe_logprobs=None`."""
    from tinker_cookbook.rl.data_processing import trajectory_to_data as cb_to_data

    from llm_gym.rl.data_processing import trajectory_to_data as our_to_data

    class Ac:  # the cookbook's TokensWithLogprobs does not check lengths; ours does, so duck-type
        def __init__(self, tokens, logprobs):
            self.tokens, self.maybe_logprobs, self.stop_reason = tokens, logprobs, "stop"
            self.sequence_id, self.prompt_cache_hit_tokens = None, 0  # cookbook 0.6's fields

        @property
        def logprobs(self):
            if self.maybe_logprobs is None:
                raise ValueError("Logprobs are not available")
            return self.maybe_logprobs

    for side, to_data, exc in (("cookbook", cb_to_data, (AssertionError, ValueError)),
                               ("llm_gym", our_to_data, ValueError)):
        lib = Lib(side)
        t = lib.types
        bad = t.Transition(ob=lib.ModelInput.from_ints([1, 2]), ac=Ac([3, 4], [-0.1]), reward=1.0,
                           episode_done=True)
        with pytest.raises(exc):
            to_data(t.Trajectory(transitions=[bad], final_ob=lib.ModelInput.empty()), 1.0)
        missing = t.Transition(ob=lib.ModelInput.from_ints([1, 2]), ac=Ac([3, 4], None), reward=1.0,
                               episode_done=True)
        traj = t.Trajectory(transitions=[missing], final_ob=lib.ModelInput.empty())
        with pytest.raises(ValueError, match="not available" if side == "cookbook" else "no logprobs"):
            to_data(traj, 1.0)
