"""TextEnv: the Gymnasium face of an EnvSource (reset/step contract, action validation, async,
rendering, determinism) and the TextActions wrapper, on small test sources."""

from __future__ import annotations

import gc
import asyncio
import os
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import llm_gym
from llm_gym.spaces import TokenSequence
from llm_gym.text_env import TextEnv, resolve_source
from llm_gym.tokenizers import ByteTokenizer
from llm_gym.wrappers import TextActions
from tests._gym_sources import AddSource, BuggySource, GroupBonusSource, SleepySource, TwoTurnSource

IM_END = 260


def answer(env: TextEnv, text: str) -> list[int]:
    return env.tokenizer.encode(text) + [IM_END]


def correct_answer(env: TextEnv) -> list[int]:
    problem = env.current_env
    return answer(env, str(problem.a + problem.b))


def test_reset_returns_prompt_tokens_and_info():
    env = TextEnv(AddSource)
    obs, info = env.reset(seed=3)
    assert isinstance(obs, np.ndarray) and obs.dtype == np.int64 and obs.ndim == 1
    assert obs in env.observation_space
    assert info["text"] == env.tokenizer.decode(obs.tolist())
    assert f"{env.current_env.a}+{env.current_env.b}=" in info["text"]
    assert info["stop_condition"] == env.renderer.get_stop_sequences()
    assert info["turn"] == 0
    assert isinstance(env.observation_space, TokenSequence)
    assert env.observation_space.vocab_size == ByteTokenizer().vocab_size


def test_source_as_string_and_names_for_tokenizer_and_renderer():
    env = TextEnv("tests._gym_sources:AddSource", tokenizer="byte", renderer="role_colon", high=3)
    obs, info = env.reset(seed=0)
    assert info["text"].startswith("<|bos|>User: ")  # role_colon prepends BOS, as the cookbook does
    assert env.source.high == 3 and isinstance(env.source, AddSource)
    assert info["stop_condition"] == ["\n\nUser:"]


@pytest.mark.parametrize(
    "bad, error",
    [("tests._gym_sources", ValueError), ("tests._gym_sources:Nope", ValueError), ("json:dumps", TypeError),
     (int, TypeError)],
)
def test_bad_source_names_the_problem(bad, error):
    with pytest.raises(error, match="source"):
        resolve_source(bad)


def test_unknown_knob_is_a_clear_error():
    with pytest.raises(TypeError, match="unexpected keyword argument 'digitz'"):
        TextEnv(AddSource, digitz=3)


def test_same_seed_same_episode_and_seeds_differ():
    env_a, env_b = TextEnv(AddSource), TextEnv(AddSource)
    prompts = set()
    for seed in range(8):
        obs_a, _ = env_a.reset(seed=seed)
        obs_b, _ = env_b.reset(seed=seed)
        assert obs_a.tolist() == obs_b.tolist()
        step_a = env_a.step(correct_answer(env_a))
        step_b = env_b.step(correct_answer(env_b))
        assert step_a[1] == step_b[1] == 1.0
        prompts.add(tuple(obs_a.tolist()))
    assert len(prompts) > 4  # different seeds give different tasks
    # An unseeded reset continues the seeded stream deterministically.
    env_a.reset(seed=11), env_b.reset(seed=11)
    assert env_a.reset()[0].tolist() == env_b.reset()[0].tolist()


def test_step_correct_and_wrong_answers():
    env = TextEnv(AddSource)
    env.reset(seed=1)
    obs, reward, terminated, truncated, info = env.step(correct_answer(env))
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert obs.dtype == np.int64 and obs.size == 0
    assert info["text"].endswith("<|im_end|>")
    assert info["metrics"] == {"format": 1.0, "correct": 1.0}
    assert info["episode_metrics"]["return"] == 1.0
    assert info["episode_metrics"]["turns"] == 1
    assert info["episode_metrics"]["correct"] == 1.0
    env.reset(seed=1)
    _, reward, *_ = env.step(answer(env, "nonsense"))
    assert reward == pytest.approx(-0.1)


def test_step_before_reset_and_after_end_raise_reset_needed():
    env = TextEnv(AddSource)
    with pytest.raises(gym.error.ResetNeeded, match="reset"):
        env.step([1, 2])
    env.reset(seed=0)
    env.step([IM_END])
    with pytest.raises(gym.error.ResetNeeded, match="reset"):
        env.step([IM_END])


@pytest.mark.parametrize(
    "action",
    [
        [],
        np.zeros(0, dtype=np.int64),
        [10_000_000, -5, 1 << 40],  # out of vocabulary
        [0xFF, 0xFE, IM_END],  # invalid UTF-8
        list(np.random.default_rng(0).integers(0, 261, 20_000)),  # huge
        np.array([52, 50, IM_END], dtype=np.int32),
        (52, 50, IM_END),
        [1 << 70],  # beyond int64: still model output
    ],
)
def test_bad_model_output_gets_a_defined_reward(action):
    env = TextEnv(AddSource)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(action)
    lo, hi = env.reward_range
    assert lo <= reward <= hi and terminated
    n_invalid = sum(1 for t in list(action) if not 0 <= int(t) < env.vocab_size)
    assert info["invalid_tokens"] == n_invalid
    if n_invalid:
        assert info["metrics"]["format"] == 0.0


@pytest.mark.parametrize(
    "action",
    ["12", b"12", [1.0, 2.0], np.array([1.5]), [[1, 2]], np.zeros((2, 2), dtype=np.int64), 12, None, [True, False]],
)
def test_wrong_action_types_raise_type_error(action):
    env = TextEnv(AddSource)
    env.reset(seed=0)
    with pytest.raises(TypeError, match="token"):
        env.step(action)
    # The episode is still running: a proper action works afterwards.
    assert env.step(correct_answer(env))[1] == 1.0


def test_multi_turn_episode_metrics_render_and_turn_limit():
    env = TextEnv(TwoTurnSource, render_mode="ansi")
    obs, info = env.reset(seed=2)
    word = env.current_env.word
    obs2, r1, term1, trunc1, info1 = env.step(answer(env, word))
    assert (r1, term1, trunc1) == (0.5, False, False)
    assert obs2.tolist()[: len(obs)] == obs.tolist()  # prefix property kept
    assert info1["turn"] == 1 and "episode_metrics" not in info1
    _, r2, term2, trunc2, info2 = env.step(answer(env, "wrong"))
    assert (r2, term2, trunc2) == (0.0, True, False)
    assert info2["episode_metrics"] == {"ok": 0.5, "return": 0.5, "turns": 2, "truncated": 0.0}
    text = env.render()
    assert text.count(f"Say {word}.") == 1 and f"Again: {word}." in text
    assert text.count(word + "<|im_end|>") == 1 and "wrong<|im_end|>" in text

    limited = TextEnv(TwoTurnSource, turn_limit=1)
    limited.reset(seed=2)
    _, _, terminated, truncated, info = limited.step(answer(limited, "x"))
    assert (terminated, truncated) == (False, True)
    assert info["episode_metrics"]["truncated"] == 1.0
    with pytest.raises(gym.error.ResetNeeded):
        limited.step([IM_END])
    assert TextEnv(AddSource).render() is None
    with pytest.raises(ValueError, match="render_mode"):
        TextEnv(AddSource, render_mode="human")


def test_suspending_coroutines_fall_back_to_the_thread_loop():
    from llm_gym.text_env import thread_loop

    fast, sleepy = TextEnv(AddSource), TextEnv(SleepySource)
    for seed in range(3):
        assert fast.reset(seed=seed)[0].tolist() == sleepy.reset(seed=seed)[0].tolist()
        assert sleepy.step(correct_answer(sleepy))[1] == 1.0
    loop = thread_loop()
    other = TextEnv(SleepySource)
    other.reset(seed=9)
    sleepy.close()
    other.close()
    assert thread_loop() is loop and not loop.is_closed()  # one loop per thread, shared, kept


def test_each_thread_has_its_own_loop_closed_when_the_thread_ends():
    import threading

    from llm_gym.text_env import thread_loop

    seen = []

    def work():
        env = TextEnv(SleepySource)
        env.reset(seed=1)
        assert env.step(correct_answer(env))[1] == 1.0
        seen.append(thread_loop())

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    import gc

    gc.collect()
    assert seen[0] is not thread_loop()
    assert seen[0].is_closed()  # released with its thread: no fds left behind


_FORKED_CHILD_DROPS_ITS_LOOP = """
import asyncio, gc, os, time
from llm_gym.text_env import run_coroutine

async def nap():
    await asyncio.sleep(0.01)

async def threaded():  # wakes the loop from the executor's thread
    await asyncio.to_thread(time.sleep, 0.2)
    return "woke"

run_coroutine(nap())  # the thread's shared loop exists and is idle
pid = os.fork()
if pid == 0:  # the child makes a loop of its own and lets go of the inherited one
    run_coroutine(nap())
    gc.collect()
    os._exit(0)
os.waitpid(pid, 0)
print(run_coroutine(threaded()))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_never_unregisters_the_parents_loop():
    """A forked child's inherited loop shares the parent's epoll set; asyncio closes an unclosed
    loop when it is collected, which removed the parent's self-pipe from the set, and the parent's
    next `to_thread` await never woke (a hang seen in the test suite). Run in a subprocess so a
    regression fails by timeout instead of hanging the suite."""
    proc = subprocess.run([sys.executable, "-c", _FORKED_CHILD_DROPS_ITS_LOOP], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "woke"


def test_sync_step_inside_a_running_event_loop():
    async def main():
        env = TextEnv(SleepySource)
        env.reset(seed=0)  # suspends: finished on the thread's env loop in a helper thread
        return env.step(correct_answer(env))[1]

    assert asyncio.run(main()) == 1.0


def test_areset_astep_match_the_sync_episode():
    async def episode(env, seed):
        obs, info = await env.areset(seed=seed)
        result = await env.astep(correct_answer(env))
        return obs.tolist(), info["text"], result[1:4]

    for source in (AddSource, SleepySource):
        env = TextEnv(source)
        got = asyncio.run(episode(env, 5))
        obs, info = env.reset(seed=5)
        step = env.step(correct_answer(env))
        assert got == (obs.tolist(), info["text"], step[1:4])


def test_env_bug_propagates_with_a_note_and_ends_the_episode():
    env = TextEnv(BuggySource)
    env.reset(seed=0)
    with pytest.raises(ZeroDivisionError) as excinfo:
        env.step([0, IM_END])
    assert any("call reset()" in note for note in excinfo.value.__notes__)
    assert env.env_errors == 1
    with pytest.raises(gym.error.ResetNeeded):
        env.step([IM_END])
    env.reset(seed=0)
    assert env.step(correct_answer(env))[1] == 1.0


def test_compute_group_rewards_delegates_to_the_source():
    from llm_gym.completers import TokensWithLogprobs
    from llm_gym.model_input import ModelInput
    from llm_gym.rl import Trajectory, Transition

    env = TextEnv(GroupBonusSource)
    envs, trajs = [], []
    for n in (3, 1, 2):
        env.reset(seed=0)
        envs.append(env.current_env)
        ac = TokensWithLogprobs([IM_END] * n, None)
        trajs.append(Trajectory([Transition(ModelInput.empty(), ac, 0.0, True)], ModelInput.empty()))
    rewards = asyncio.run(env.compute_group_rewards(trajs, envs))
    assert [r for r, _ in rewards] == [0.0, 1.0, 0.0]


def test_check_env_on_a_test_source_has_no_warnings():
    llm_gym.register_env("llmtest/TwoTurn-v0", "tests._gym_sources:TwoTurnSource")
    env = gym.make("llmtest/TwoTurn-v0")
    gc.collect()  # earlier tests' garbage: its ResourceWarnings are not this block's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    assert [str(w.message) for w in caught] == []
    assert gym.spec("llmtest/TwoTurn-v0").to_json()


def test_text_actions_wrapper_drives_the_same_env():
    env = TextActions(TextEnv(AddSource))
    assert "1+2=" in env.observation_space and 5 not in env.action_space
    obs, info = env.reset(seed=4)
    problem = env.unwrapped.current_env
    assert isinstance(obs, str) and f"{problem.a}+{problem.b}=" in obs
    assert info["observation_tokens"].dtype == np.int64
    assert env.encode_action("7").tolist() == [ord("7"), IM_END]  # the stop token is appended
    _, reward, terminated, _, info = env.step(str(problem.a + problem.b))
    assert (reward, terminated) == (1.0, True)
    with pytest.raises(TypeError, match="str"):
        env.reset(seed=4) and env.step([1, 2])

    # A text stop sequence (role_colon) ends the action with that text's tokens.
    colon = TextActions(TextEnv(AddSource, renderer="role_colon"))
    colon.reset(seed=4)
    assert colon.encode_action("7").tolist() == list(b"7\n\nUser:")
    problem = colon.unwrapped.current_env
    assert colon.step(str(problem.a + problem.b))[1] == 1.0
