"""SFT warm start from gold scripted episodes (multi-turn envs without reference responses).

The examples must be the gold episode's own tokens -- observation and action tokens exactly as a
rollout sees them -- with loss weight 1 on exactly the action (sampled) tokens; the config must
accept a multi-turn env that has a gold case (and still refuse one with neither); the accuracy
check must work on multi-turn envs; `llm-gym train` must say what it chose and run end to end.
"""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from envs_catalog.tools.calculator import CalculatorSource  # noqa: E402
from llm_gym import get_renderer, load_tokenizer  # noqa: E402
from llm_gym.completers import TokensWithLogprobs  # noqa: E402
from llm_gym.model_input import ModelInput  # noqa: E402
from llm_gym.registration import register_env  # noqa: E402
from llm_gym.renderers import ToolCall  # noqa: E402
from llm_gym.renderers.tools import format_assistant_text  # noqa: E402
from llm_gym.rl.outcome import episode_correct  # noqa: E402
from llm_gym.rl.types import Trajectory, Transition, release_env  # noqa: E402
from llm_gym.scripted import ScriptedCase, reply_tokens, run_scripted_case  # noqa: E402
from trainers.grpo.config import ConfigError, GRPOConfig  # noqa: E402
from trainers.grpo.fit import (  # noqa: E402
    SFT_GOLD,
    SFT_NONE,
    SFT_REFERENCE,
    check_env_builds,
    first_gold_case,
)
from trainers.models import build_tiny_model  # noqa: E402
from trainers.sft import (  # noqa: E402
    gold_task_keys,
    sft_examples_from_gold,
    sft_warm_start,
    source_for_env,
    supervised_examples_from_trajectory,
)

TOK = load_tokenizer()


# --- test-only sources: Calculator with a gold case, and with none ---------------------------------
def _call(expression: str) -> str:
    call = ToolCall(function=ToolCall.FunctionBody(
        name="calculator", arguments=json.dumps({"expression": expression})))
    return format_assistant_text({"role": "assistant", "content": "", "tool_calls": [call]})


def _calculator_gold(env, ob: str) -> str:
    """Call the calculator once (on the answer itself: a number is an expression), then answer
    with what it printed: two turns, one tool observation in between."""
    tool_turns = [m for m in env.message_env.history if m.get("role") == "tool"]
    if tool_turns:
        return str(tool_turns[-1]["content"]).strip()
    return _call(str(env.answer))


class GoldCalculatorSource(CalculatorSource):
    def scripted_cases(self):
        return [
            ScriptedCase("wrong", "adversarial", lambda env, ob: "0", -1.0, 0.0),
            ScriptedCase("calculator, then its output", "gold", _calculator_gold, 0.95, 0.95),
        ]


class NoGoldCalculatorSource(CalculatorSource):
    def scripted_cases(self):
        return []


register_env("test/GoldCalculator-v0", "tests.trainers.test_sft_gold:GoldCalculatorSource")
register_env("test/NoGoldCalculator-v0", "tests.trainers.test_sft_gold:NoGoldCalculatorSource")
GOLD_CALC = "tests.trainers.test_sft_gold:test/GoldCalculator-v0"
NO_GOLD_CALC = "tests.trainers.test_sft_gold:test/NoGoldCalculator-v0"


def _source(env_id: str, renderer: str = "chatml", **knobs):
    return source_for_env(env_id, "train", renderer=renderer, **knobs)


def _gold_source_or_skip(env_id: str, renderer: str):
    source = _source(env_id, renderer)
    if first_gold_case(source) is None:
        pytest.skip(f"{env_id} declares no gold scripted case (yet)")
    return source


# --- the reference construction: step the env by hand ---------------------------------------------
async def _hand_played(source, case, seed: int):
    """(tokens, weights, return, replies) of `case` played on `source.make_env(default_rng(seed))`
    step by step: the first observation, then each action (weight 1) and each observation's new
    tokens (weight 0), checking on the way that every observation extends the previous context."""
    env = source.make_env(np.random.default_rng(seed))
    try:
        ob, stop = await env.initial_observation()
        tokens, weights, total, replies = list(ob.to_ints()), [0.0] * ob.length, 0.0, []
        while True:
            reply = case.reply(env, TOK.decode(ob.to_ints()))
            replies.append(reply)
            action = reply_tokens(source.renderer, reply, stop)
            tokens += action
            weights += [1.0] * len(action)
            result = await env.step(action)
            total += result.reward
            if result.episode_done:
                return tokens, weights, total, replies
            nxt = result.next_observation.to_ints()
            assert nxt[: len(tokens)] == tokens, "observation lost the prefix property"
            weights += [0.0] * (len(nxt) - len(tokens))
            tokens = list(nxt)
            ob, stop = result.next_observation, result.next_stop_condition
    finally:
        release_env(env)


CASES = [
    pytest.param(GOLD_CALC, "chatml", id="test-calculator-chatml"),
    pytest.param(GOLD_CALC, "role_colon", id="test-calculator-role_colon"),
    pytest.param("llm/GuessNumber-v0", "chatml", id="guess-number-chatml"),
    pytest.param("llm/GuessNumber-v0", "role_colon", id="guess-number-role_colon"),
    pytest.param("llm/Calculator-v0", "chatml", id="calculator-chatml"),
    pytest.param("llm/Mastermind-v0", "chatml", id="mastermind-chatml"),
]


@pytest.mark.parametrize("env_id, renderer", CASES)
def test_examples_are_the_gold_episodes_tokens_with_weight_on_exactly_the_actions(env_id, renderer):
    source = _gold_source_or_skip(env_id, renderer)
    case = first_gold_case(source)
    assert case.kind == "gold" and not case.knobs
    for seed in (0, 1, 2):
        tokens, weights, total, replies = asyncio.run(_hand_played(source, case, seed))
        examples = sft_examples_from_gold(source, 1, np.random.default_rng(seed))
        # a multi-turn episode with the prefix property is one example
        assert len(examples) == 1
        got_tokens, got_weights = examples[0]
        assert got_tokens == tokens
        assert got_weights == weights
        assert sum(weights) < len(weights)  # observation tokens are there, untrained
        # it is the episode `llm-gym check` plays: same replies, the case's promised return
        outcome = run_scripted_case(source, case, seed)
        assert outcome.replies == replies and outcome.ok
        assert total == pytest.approx(outcome.episode_return) == pytest.approx(case.low)
        assert len(replies) >= 2 or env_id == "llm/GuessNumber-v0"  # really multi-turn


def test_trajectory_to_examples_splits_where_the_prefix_breaks_and_drops_masked_turns():
    def tr(ob, ac, **metrics):
        return Transition(ModelInput.from_ints(ob), TokensWithLogprobs(ac, [0.0] * len(ac)), 0.0,
                          False, metrics)

    traj = Trajectory([
        tr([1, 2], [3, 4]),
        tr([1, 2, 3, 4, 5], [6], parse_error_masked=1.0),  # extends: same example, masked action
        tr([9], [10, 11]),  # a context reset: a second example
    ], ModelInput.empty())
    assert supervised_examples_from_trajectory(traj) == [
        ([1, 2, 3, 4, 5, 6], [0.0, 0.0, 1.0, 1.0, 0.0, 0.0]),
        ([9, 10, 11], [0.0, 1.0, 1.0]),
    ]


def test_gold_examples_are_reproducible_and_keep_validation_tasks_out():
    source = _source(GOLD_CALC)
    first = sft_examples_from_gold(source, 6, np.random.default_rng(3))
    assert first == sft_examples_from_gold(source, 6, np.random.default_rng(3))
    assert first != sft_examples_from_gold(source, 6, np.random.default_rng(4))
    held_out = gold_task_keys(source, 40, seed=5)
    assert len(held_out) == 40  # calculator tasks are told apart by their gold episodes
    examples = sft_examples_from_gold(source, 30, np.random.default_rng(5), exclude=held_out)
    assert not {(tuple(t),) for t, _ in examples} & held_out
    # the same generator without exclusion does draw validation tasks (the first one, here)
    plain = sft_examples_from_gold(source, 1, np.random.default_rng(5))
    assert {(tuple(plain[0][0]),)} <= held_out


def test_a_gold_case_that_misses_its_promise_is_refused():
    class Broken(CalculatorSource):
        def scripted_cases(self):
            return [ScriptedCase("says 0", "gold", lambda env, ob: "0", 1.0, 1.0)]

    source = Broken(renderer=get_renderer("chatml", TOK))
    with pytest.raises(ValueError, match="gold case 'says 0' scored 0.0 .*outside"):
        sft_examples_from_gold(source, 2, np.random.default_rng(0))


# --- "solved" for multi-turn episodes -------------------------------------------------------------
def _traj(rewards, metrics):
    return Trajectory([
        Transition(ModelInput.from_ints([1]), TokensWithLogprobs([2], [0.0]), r, i == len(rewards) - 1, m)
        for i, (r, m) in enumerate(zip(rewards, metrics))
    ], ModelInput.empty())


def test_solved_is_the_correct_metric_at_full_credit_else_a_positive_return():
    # the tool envs: a correct answer after a tool call returns 0.95 < max 1.0, and is solved
    assert episode_correct(_traj([0.95], [{"correct": 1.0}])) == 1.0
    assert episode_correct(_traj([1.0], [{"correct": 0.0}])) == 0.0
    # a partial score (text tasks report their score as `correct`) is not solved
    assert episode_correct(_traj([0.5], [{"correct": 0.5}])) == 0.0
    # the metric may be reported before the last turn: the last turn reporting it counts
    assert episode_correct(_traj([0.0, 0.0], [{"correct": 1.0}, {}])) == 1.0
    assert episode_correct(_traj([0.0, 1.0], [{"correct": 1.0}, {"correct": 0.0}])) == 0.0
    # games without the metric: solved when the return is positive (a win after an invalid turn
    # included); a draw (0) or a loss is not
    assert episode_correct(_traj([-0.1, 0.0, 1.0], [{}, {}, {}])) == 1.0
    assert episode_correct(_traj([0.0, 0.0, 1.0], [{}, {}, {}])) == 1.0
    assert episode_correct(_traj([0.0, 0.0], [{}, {}])) == 0.0
    assert episode_correct(_traj([-0.1, -1.0], [{}, {}])) == 0.0
    assert episode_correct(_traj([], [])) == 0.0


def test_gold_episodes_count_as_solved():
    source = _source(GOLD_CALC)
    case = first_gold_case(source)
    from trainers.sft import play_gold_episode

    for seed in range(3):
        env = source.make_env(np.random.default_rng(seed))
        traj = asyncio.run(play_gold_episode(source, case, env))
        ret = sum(t.reward for t in traj.transitions)
        assert ret < source.reward_range[1]  # the tool call's cost: not the env's max ...
        assert episode_correct(traj) == 1.0  # ... but correct


# --- the config check and what `llm-gym train` prints --------------------------------------------
def test_config_accepts_a_multi_turn_env_with_a_gold_case_and_refuses_one_without():
    cfg = GRPOConfig(env=GOLD_CALC)
    cfg.validate()  # the default run (SFT on) is no longer refused
    assert cfg.sft_source() == SFT_GOLD
    assert check_env_builds(GOLD_CALC, {}, needs_references=True) == SFT_GOLD
    with pytest.raises(ConfigError, match=r"no reference answers for the SFT warm start.*"
                                          r"no gold scripted case.*--no-sft"):
        GRPOConfig(env=NO_GOLD_CALC).validate()
    GRPOConfig(env=NO_GOLD_CALC, sft_steps=0).validate()  # RL only is fine
    assert GRPOConfig(env=NO_GOLD_CALC, sft_steps=0).sft_source() == SFT_NONE
    math_cfg = GRPOConfig()
    math_cfg.validate()
    assert math_cfg.sft_source() == SFT_REFERENCE  # single-turn envs keep their references


def test_train_says_what_the_warm_start_learns_from():
    from trainers.cli_train import sft_choice

    line = sft_choice(GRPOConfig(env=GOLD_CALC))
    assert line.startswith("SFT source: gold scripted episodes (case 'calculator, then its output'")
    # the gold tool call is far longer than the default 8 tokens a turn: say so
    assert "pass --max-tokens" in line
    assert "--max-tokens" not in sft_choice(GRPOConfig(env=GOLD_CALC, max_tokens=200))
    assert sft_choice(GRPOConfig()).startswith("SFT source: reference responses")
    assert sft_choice(GRPOConfig(env=NO_GOLD_CALC, sft_steps=0)).startswith("SFT source: none")


# --- the warm start itself -----------------------------------------------------------------------
@pytest.fixture(autouse=True)
def _one_cpu_thread():
    """The tiny model's matmuls are too small to split; on a shared CPU extra threads only spin
    (the trainer's `cpu_threads=0` picks 1 for it too)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _tiny():
    model, _ = build_tiny_model(seed=0)
    return model


def test_warm_start_picks_gold_episodes_for_a_multi_turn_env_and_references_otherwise():
    torch.manual_seed(0)
    model = _tiny()
    result = sft_warm_start(model, env_id=GOLD_CALC, max_steps=2, batch_size=1, num_examples=3,
                            target_band=None, lr=3e-3)
    assert result.example_source == SFT_GOLD and result.gold_case == "calculator, then its output"
    assert result.num_examples == 3 and result.steps == 2
    assert result.longest_action_tokens > 40  # a whole <tool_call> block is one trained run
    assert all(np.isfinite(result.losses))
    ref = sft_warm_start(_tiny(), env_id="llm/Math-v0", max_steps=1, batch_size=2,
                         num_examples=2, target_band=None)
    assert ref.example_source == SFT_REFERENCE and ref.gold_case is None
    with pytest.raises(TypeError, match="no reference responses.*no gold scripted case"):
        sft_warm_start(_tiny(), env_id=NO_GOLD_CALC, max_steps=1, target_band=None)


def test_warm_start_with_validation_on_a_multi_turn_env():
    """The accuracy check runs multi-turn episodes; a split too small to hold the validation tasks
    out (the classic GuessNumber with 6 numbers) is reported as overlap rather than refused."""
    env_id = "llm/GuessNumber-v0"
    knobs = {"max_number": 6, "max_turns": 3, "range_starts": 1}
    if first_gold_case(_source(env_id, **knobs)) is None:
        env_id, knobs = GOLD_CALC, {"max_turns": 2}
    result = sft_warm_start(_tiny(), env_id=env_id, env_kwargs=knobs, max_steps=2, batch_size=2,
                            num_examples=6, eval_problems=30, eval_every=1, eval_max_tokens=4,
                            target_band=(0.99, 1.0))
    assert result.example_source == SFT_GOLD
    assert [step for step, _ in result.eval_history] == [0, 1, 2]
    assert all(0.0 <= acc <= 1.0 for _, acc in result.eval_history)
    if env_id == "llm/GuessNumber-v0":
        assert result.validation_overlap > 0


# --- end to end ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_two_step_train_run_with_sft_on_gold_calculator_episodes(tmp_path, capsys):
    from trainers.cli_train import train_main

    env_id = "llm/Calculator-v0"
    if first_gold_case(_source(env_id)) is None:
        env_id = GOLD_CALC  # the catalog's Calculator has no gold case yet: the test-only one
    rc = train_main([
        "--env", env_id, "--env-kwargs", '{"max_turns": 2}', "--steps", "2",
        "--sft-steps", "2", "--sft-batch-size", "2", "--eval-problems", "2", "--group-size", "2",
        "--groups-per-batch", "1", "--max-tokens", "8", "--micro-batch-size", "4",
        "--output-dir", str(tmp_path), "--run-name", "gold", "--no-progress",
    ])
    out = capsys.readouterr().out
    assert rc == 0
    assert "SFT source: gold scripted episodes (case " in out
    summary = json.loads((tmp_path / "gold" / "summary.json").read_text())
    assert summary["steps"] == 2
    assert summary["sft_steps_run"] == 2 and summary["sft_stopped_reason"] == "max_steps"
    assert [step for step, _ in summary["sft_eval_history"]] == [0, 2]
    assert "eval_before_sft" in summary and "eval_after_rl" in summary
