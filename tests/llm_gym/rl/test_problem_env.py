"""ProblemEnv: the cookbook's single-turn Q&A env and its reward formula."""

from __future__ import annotations

import asyncio
import time

import pytest

from llm_gym.model_input import ModelInput
from llm_gym.renderers import ChatMLRenderer, Message, RoleColonRenderer
from llm_gym.rl import ProblemEnv, ProblemGroupBuilder, do_group_rollout
from llm_gym.tokenizers import ByteTokenizer

TOK = ByteTokenizer()
IM_END, EOS = 260, 258


class AddEnv(ProblemEnv):
    """"a+b" → the sum, formatted as a bare integer."""

    def __init__(self, renderer, a=2, b=3, grader_delay_s: float = 0.0, **kwargs):
        super().__init__(renderer, **kwargs)
        self.a, self.b, self.grader_delay_s = a, b, grader_delay_s

    def get_question(self):
        return f"What is {self.a}+{self.b}?"

    def check_answer(self, sample_str):
        if self.grader_delay_s:  # a grader stuck on a pathological answer (pure Python)
            end = time.monotonic() + self.grader_delay_s
            while time.monotonic() < end:
                pass
        return sample_str.strip() == str(self.a + self.b)

    def check_format(self, sample_str):
        return sample_str.strip().lstrip("-").isdigit()

    def get_reference_answer(self):
        return str(self.a + self.b)


def _step(env, tokens):
    return asyncio.run(env.step(tokens))


@pytest.mark.parametrize(
    "reply,end,reward,fmt,correct",
    [
        ("5", [IM_END], 1.0, 1.0, 1.0),  # right, well formed
        ("6", [IM_END], 0.0, 1.0, 0.0),  # wrong, well formed
        ("5", [], 0.9, 0.0, 1.0),  # right but truncated (no stop): loses format_coef
        ("five", [IM_END], -0.1, 0.0, 0.0),  # fails check_format, wrong
        ("5", [EOS], 0.9, 0.0, 1.0),  # EOS is not the stop sequence: no format credit by default
    ],
)
def test_reward_formula_and_metrics(reply, end, reward, fmt, correct):
    env = AddEnv(ChatMLRenderer(TOK))
    result = _step(env, TOK.encode(reply) + end)
    assert result.reward == pytest.approx(reward)
    # grading is bounded by default, but its grader_timeout metric appears only on a timeout
    assert result.metrics == {"format": fmt, "correct": correct}
    unbounded = _step(AddEnv(ChatMLRenderer(TOK), grader_timeout_s=None), TOK.encode(reply) + end)
    assert unbounded.metrics == {"format": fmt, "correct": correct}  # the cookbook's metrics
    assert unbounded.reward == result.reward
    assert result.episode_done is True
    assert result.next_observation == ModelInput.empty()
    assert result.next_stop_condition == [IM_END, EOS]
    assert result.logs["reference"] == "5" and result.logs["response"] == reply


def test_format_coef_scales_the_penalty():
    env = AddEnv(ChatMLRenderer(TOK), format_coef=0.5)
    assert _step(env, TOK.encode("9")).reward == pytest.approx(-0.5)


def test_require_stop_sequence_for_format_is_the_cookbook_strict_default():
    assert AddEnv(ChatMLRenderer(TOK)).require_stop_sequence_for_format is True
    env = AddEnv(ChatMLRenderer(TOK))
    assert _step(env, TOK.encode("5") + [EOS]).metrics["format"] == 0.0
    assert _step(env, TOK.encode("5") + [IM_END]).metrics["format"] == 1.0
    lenient = AddEnv(ChatMLRenderer(TOK), require_stop_sequence_for_format=False)
    assert _step(lenient, TOK.encode("5") + [EOS]).metrics["format"] == 1.0  # any clean end
    assert _step(lenient, TOK.encode("5")).metrics["format"] == 0.0  # truncated: MALFORMED


def test_initial_observation_uses_convo_prefix_and_renderer():
    renderer = ChatMLRenderer(TOK)
    prefix = [Message(role="system", content="Answer with a number.")]
    env = AddEnv(renderer, convo_prefix=prefix)
    ob, stop = asyncio.run(env.initial_observation())
    expected = renderer.build_generation_prompt(prefix + [Message(role="user", content="What is 2+3?")])
    assert ob == expected
    assert stop == renderer.get_stop_sequences()
    assert env.get_reference_response() == "5"


def test_role_colon_problem_env():
    renderer = RoleColonRenderer(TOK)
    env = AddEnv(renderer)
    ob, stop = asyncio.run(env.initial_observation())
    assert TOK.decode(ob.to_ints()) == "<|bos|>User: What is 2+3?\n\nAssistant:"
    assert stop == ["\n\nUser:"]
    assert _step(env, TOK.encode(" 5\n\nUser:")).reward == 1.0
    assert _step(env, TOK.encode(" 5") + [EOS]).reward == pytest.approx(0.9)  # EOS, not the stop
    assert _step(env, TOK.encode(" 5\n\nUser:") + [EOS]).reward == pytest.approx(0.9)  # MALFORMED


def test_hanging_grader_gets_a_defined_reward_with_grader_timeout():
    env = AddEnv(ChatMLRenderer(TOK), grader_delay_s=30.0, grader_timeout_s=0.2)
    result = _step(env, TOK.encode("5") + [IM_END])
    assert result.metrics == {"format": 0.0, "correct": 0.0, "grader_timeout": 1.0}
    assert result.reward == pytest.approx(-0.1)


def test_grader_timeout_does_not_change_prompt_graders():
    env = AddEnv(ChatMLRenderer(TOK), grader_timeout_s=5.0)
    result = _step(env, TOK.encode("5") + [IM_END])
    assert result.reward == 1.0 and "grader_timeout" not in result.metrics


def test_grader_exception_propagates_through_the_thread():
    class Broken(AddEnv):
        def check_answer(self, sample_str):
            raise ZeroDivisionError("grader bug")

    with pytest.raises(ZeroDivisionError, match="grader bug"):
        _step(Broken(ChatMLRenderer(TOK), grader_timeout_s=5.0), TOK.encode("5"))
    with pytest.raises(ValueError, match="grader_timeout_s"):
        AddEnv(ChatMLRenderer(TOK), grader_timeout_s=0)


def test_problem_group_builder_rollout(scripted_policy):
    import functools

    renderer = ChatMLRenderer(TOK)
    builder = ProblemGroupBuilder(functools.partial(AddEnv, renderer, 1, 1), num_envs=3, dataset_name="add")
    policy = scripted_policy([TOK.encode("2") + [IM_END], TOK.encode("3") + [IM_END], TOK.encode("x")])
    group = asyncio.run(do_group_rollout(builder, policy))
    assert sorted(group.get_total_rewards()) == pytest.approx([-0.1, 0.0, 1.0])
    assert group.final_rewards_G == [0.0, 0.0, 0.0]
    assert [len(t.transitions) for t in group.trajectories_G] == [1, 1, 1]
    assert builder.logging_tags() == ["add"]
