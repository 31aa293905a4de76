"""llm/Math-v0 and llm/MathMulti-v0: task generation, grading through the env, splits, knobs."""

from __future__ import annotations

import asyncio
import re

import numpy as np
import pytest

from envs_catalog.math.arithmetic import (
    MathMultiSource,
    MathSource,
    canonical_key,
    evaluate,
)
from llm_gym import get_renderer, load_tokenizer
from llm_gym.authoring import split_of

TOK = load_tokenizer()
CHATML = get_renderer("chatml", TOK)
IM_END = TOK.convert_tokens_to_ids("<|im_end|>")


def run_episode(env, response_tokens):
    async def go():
        ob, stop = await env.initial_observation()
        return ob, await env.step(response_tokens)

    return asyncio.run(go())


def user_text(ob) -> str:
    text = TOK.decode(ob.to_ints())
    return text.split("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0]


def reply(text: str) -> list[int]:
    return TOK.encode(text) + [IM_END]


def test_default_task_is_short_two_digit_addition_with_bare_reference():
    src = MathSource(renderer=CHATML)
    for seed in range(50):
        env = src.make_env(np.random.default_rng(seed))
        ob, _ = asyncio.run(env.initial_observation())
        question = user_text(ob)
        m = re.fullmatch(r"(\d\d)\+(\d\d)=", question)
        assert m, question
        assert env.get_reference_response() == str(int(m.group(1)) + int(m.group(2)))
        assert ob.length <= 40  # every prompt byte costs the tiny model compute


@pytest.mark.parametrize("source_cls", [MathSource, MathMultiSource])
@pytest.mark.parametrize("split", ["train", "test"])
def test_verifier_gold_scores_one_and_wrong_scores_zero(source_cls, split):
    src = source_cls(renderer=CHATML, split=split)
    for seed in range(100):
        env = src.make_env(np.random.default_rng(seed))
        _, gold = run_episode(env, reply(env.get_reference_response()))
        assert gold.reward == 1.0 and gold.episode_done
        assert gold.metrics["correct"] == 1.0 and gold.metrics["format"] == 1.0
        env = src.make_env(np.random.default_rng(seed))
        _, wrong = run_episode(env, reply(str(int(env.get_reference_answer()) + 1)))
        assert wrong.reward == 0.0 and wrong.metrics["correct"] == 0.0
        assert wrong.metrics["parse_error"] == 0.0


@pytest.mark.parametrize(
    "make_action,metric",
    [
        (lambda ans: reply(f"{ans} or {ans + 1}"), "parse_error"),
        (lambda ans: reply(" ".join(str(ans + k) for k in range(-3, 4))), "parse_error"),
        (lambda ans: reply(f"\\boxed{{{ans}}} \\boxed{{{ans + 1}}}"), "parse_error"),
        (lambda ans: reply(""), "parse_error"),
        (lambda ans: reply(f"{ans} " + "x" * 5000), "too_long"),
        (lambda ans: TOK.encode(str(ans))[:1] + [0xFF, 0xFE] + TOK.encode(str(ans))[1:] + [IM_END],
         "parse_error"),
    ],
)
def test_gaming_and_garbage_get_format_penalty_and_a_metric(make_action, metric):
    src = MathSource(renderer=CHATML)
    env = src.make_env(np.random.default_rng(7))
    _, result = run_episode(env, make_action(int(env.get_reference_answer())))
    assert result.reward == pytest.approx(-0.1)
    assert result.metrics["correct"] == 0.0 and result.metrics[metric] == 1.0


def test_out_of_vocab_and_truncated_actions_are_defined_rewards():
    src = MathSource(renderer=CHATML)
    env = src.make_env(np.random.default_rng(3))
    answer = env.get_reference_answer()
    _, oov = run_episode(env, TOK.encode(answer) + [10**9, -5, IM_END])
    assert oov.metrics["format"] == 0.0 and src.reward_range[0] <= oov.reward <= 1.0
    env = src.make_env(np.random.default_rng(3))
    _, truncated = run_episode(env, TOK.encode(answer))  # no end-of-turn: ran out of tokens
    assert truncated.metrics == {**truncated.metrics, "format": 0.0, "correct": 1.0}
    assert truncated.reward == pytest.approx(0.9)


def test_same_seed_same_task_different_seeds_varied():
    src = MathMultiSource(renderer=CHATML)
    q = lambda seed: user_text(asyncio.run(src.make_env(np.random.default_rng(seed)).initial_observation())[0])  # noqa: E731
    assert q(11) == q(11)
    assert len({q(seed) for seed in range(100)}) >= 95


def _keys(src, n):
    keys = set()
    for seed in range(n):
        env = src.make_env(np.random.default_rng(seed))
        question = env.get_question().rstrip("=")
        nums = [int(x) for x in re.findall(r"\d+", question)]
        ops = "".join(re.findall(r"[+\-*]", question))
        keys.add(canonical_key(nums, ops))
    return keys


@pytest.mark.parametrize("knobs", [{}, {"digits": 1}, {"operators": "+-*", "num_operands": 3}])
def test_train_and_test_splits_are_disjoint(knobs):
    train = _keys(MathSource(renderer=CHATML, split="train", **knobs), 400)
    test = _keys(MathSource(renderer=CHATML, split="test", **knobs), 200)
    assert train and test and not train & test
    assert all(split_of(k) == "test" for k in test)
    # commutative duplicates are one task: 12+34 and 34+12 share a split
    assert canonical_key([34, 12], "+") == canonical_key([12, 34], "+")


def test_evaluate_matches_python_precedence():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(2, 7))
        nums = rng.integers(0, 100, size=n).tolist()
        ops = "".join(rng.choice(list("+-*"), size=n - 1))
        expr = "".join(str(x) + op for x, op in zip(nums, ops)) + str(nums[-1])
        assert evaluate(nums, ops) == eval(expr)  # noqa: S307 - test oracle on digits/operators only


def test_knobs_shape_the_tasks():
    src = MathSource(renderer=CHATML, digits=3, operators="-", num_operands=3, allow_negative=False)
    for seed in range(50):
        env = src.make_env(np.random.default_rng(seed))
        assert re.fullmatch(r"\d{3}-\d{3}-\d{3}=", env.get_question())
        assert int(env.get_reference_answer()) >= 0
    negative = MathSource(renderer=CHATML, operators="-", allow_negative=True)
    answers = [int(negative.make_env(np.random.default_rng(s)).get_reference_answer()) for s in range(50)]
    assert min(answers) < 0
    question = MathSource(renderer=CHATML, prompt_style="question").make_env(np.random.default_rng(0))
    assert re.fullmatch(r"What is \d\d \+ \d\d\? Reply with just the number\.", question.get_question())
    multi = MathMultiSource(renderer=CHATML)
    questions = [multi.make_env(np.random.default_rng(s)).get_question() for s in range(50)]
    assert any("*" in q for q in questions) and any("-" in q for q in questions)
    assert all(len(re.findall(r"\d+", q)) == 4 for q in questions)


@pytest.mark.parametrize(
    "knobs,pattern",
    [
        ({"digits": 0}, r"digits must be in \[1, 18\], got 0"),
        ({"digits": "2"}, r"digits must be an integer"),
        ({"operators": "+/"}, r"operators must be .*'\+/'"),
        ({"operators": ""}, r"operators must be a non-empty"),
        ({"num_operands": 1}, r"num_operands must be in \[2, 8\], got 1"),
        ({"allow_negative": "yes"}, r"allow_negative must be one of \[True, False\], got 'yes'"),
        ({"prompt_style": "long"}, r"prompt_style must be one of"),
        ({"format_coef": 2.0}, r"format_coef must be in \[0.0, 1.0\], got 2.0"),
        ({"digts": 2}, r"unexpected keyword argument 'digts'; its knobs are .*Did you mean: 'digts' -> 'digits'"),
    ],
)
def test_bad_knobs_are_named(knobs, pattern):
    with pytest.raises((ValueError, TypeError), match=pattern):
        MathSource(renderer=CHATML, **knobs)


def test_bad_split_is_rejected():
    with pytest.raises(ValueError, match="split"):
        MathSource(renderer=CHATML, split="validation")


def test_role_colon_renderer_and_format_coef():
    rc = get_renderer("role_colon", TOK)
    src = MathSource(renderer=rc, format_coef=0.5)
    assert src.reward_range == (-0.5, 1.0)
    env = src.make_env(np.random.default_rng(0))
    ob, gold = run_episode(env, TOK.encode(" " + env.get_reference_response() + "\n\nUser:"))
    assert TOK.decode(ob.to_ints()).startswith("<|bos|>User:") and gold.reward == 1.0
    env = src.make_env(np.random.default_rng(0))
    _, bad = run_episode(env, TOK.encode(" no idea\n\nUser:"))
    assert bad.reward == pytest.approx(-0.5)


def test_cached_prompts_equal_a_fresh_render():
    src = MathSource(renderer=CHATML)
    assert src._table is not None  # the default task space is enumerated
    for seed in [0, 1, 0]:  # the second 0 hits the prompt cache
        env = src.make_env(np.random.default_rng(seed))
        ob, _ = asyncio.run(env.initial_observation())
        assert ob == CHATML.build_generation_prompt(env.conversation())
    big = MathMultiSource(renderer=CHATML)
    assert big._table is None  # sampled, not enumerated


def test_metrics_survive_grading_in_a_forked_worker():
    """When the bounded grader runs in a forked worker (a loaded machine ran out the in-thread
    budget; forced here), the cached grade lives in the child: the parent's metrics must still
    describe the response, not report a parse error for a correct answer."""
    source = MathSource(renderer=CHATML)
    env = source.make_env(np.random.default_rng(0))
    env.grader_isolation = "process"
    _ob, result = run_episode(env, reply(str(env.answer)))
    assert result.reward == 1.0
    assert result.metrics["parse_error"] == 0.0 and result.logs["answer_status"] == "ok"


def test_only_short_bare_integers_are_graded_without_the_watchdog(monkeypatch):
    """A bare integer takes grade_numeric's bare-integer path (a few C passes over it), so
    MathEnv grades it without arming the bounded grader's watchdog; every other reply, and every
    NumericEnv reply (its own grader), is graded under the bound. The rewards are the same."""
    from envs_catalog.math.fractions_env import FractionsSource
    from llm_gym.grading import bounded

    armed = []
    arm = bounded._watchdog.arm
    monkeypatch.setattr(bounded._watchdog, "arm", lambda budget: armed.append(budget) or arm(budget))
    env = MathSource(renderer=CHATML).make_env(np.random.default_rng(0))
    answer = str(env.answer)
    for text, bounded_grade, reward in [
        (answer, False, 1.0), (f"  {answer}\n", False, 1.0), (str(env.answer + 1), False, 0.0),
        (" " * 70 + answer, False, 1.0), ("9" * 19, True, 0.0), (f"\\boxed{{{answer}}}", True, 1.0),
        ("I am not sure.", True, -0.1),
    ]:
        armed.clear()
        env._graded = None
        _ob, result = run_episode(env, reply(text))
        assert (len(armed) == 1) is bounded_grade, text
        assert result.reward == reward, text
    frac = FractionsSource(renderer=CHATML).make_env(np.random.default_rng(0))
    armed.clear()
    run_episode(frac, reply(frac.reference))
    assert len(armed) == 1


def test_a_subclass_grader_stays_bounded_on_bare_integers():
    """A MathEnv subclass that grades its own way is bounded even for a bare integer: here a
    grader that would spin for 30 s (then give full credit) times out after 0.4 s instead: no
    credit, `grader_timeout` = 1."""
    import time

    from envs_catalog.math.arithmetic import MathEnv

    class HangingMathEnv(MathEnv):
        def _grade(self, content, well_formed):
            end = time.monotonic() + 30.0  # finite, so a broken bound fails instead of hanging
            while time.monotonic() < end:
                pass
            return 1.0, 1.0

    env = HangingMathEnv(CHATML, "2+3=", 5)
    env.grader_timeout_s = 0.4
    _ob, result = run_episode(env, reply("5"))
    assert result.reward == -0.1 and result.metrics["grader_timeout"] == 1.0


def test_a_reply_that_outruns_the_bound_is_not_graded_again_unbounded():
    """After a grading timeout `MathEnv.step` fills its answer metrics without grading the reply
    again in-process (that second grade would have no bound): the slow grader runs once, and the
    episode is scored as malformed with `answer_status` = "grader_timeout"."""
    import threading
    import time

    from envs_catalog.math.arithmetic import MathEnv

    calls = []
    lock = threading.Lock()

    class SlowNumericMathEnv(MathEnv):
        def _grade_numeric(self, response):
            with lock:
                calls.append(response)
            end = time.monotonic() + 2.0  # finite: a regression costs seconds, not a hang
            while time.monotonic() < end:
                pass
            return super()._grade_numeric(response)

    env = SlowNumericMathEnv(CHATML, "2+3=", 5)
    env.grader_timeout_s = 0.3
    _ob, result = run_episode(env, reply("5"))
    assert result.metrics["grader_timeout"] == 1.0 and result.reward == -0.1
    assert result.metrics["parse_error"] == 1.0 and result.metrics["too_long"] == 0.0
    assert result.logs["answer_status"] == "grader_timeout"
    assert len(calls) == 1
