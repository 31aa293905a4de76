"""`llm_gym.wrappers.from_text.FromText`: any string env (Gymnasium `Text` spaces, duck-typed objects,
async ones, chat-message observations) as a token env -- chat-rendered, multi-turn with the prefix
property, bad model output turned into a defined reward, seeds and global RNG handled, groupable,
`check_env` clean."""

from __future__ import annotations

import gc
import asyncio
import random
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.spaces import Text
from gymnasium.utils.env_checker import check_env

from llm_gym.tokenizers import ByteTokenizer
from llm_gym.wrappers import GymEnvGroupBuilder, TextActions
from llm_gym.wrappers.from_text import FromText, StringEnvSource

TOK = ByteTokenizer()
IM_END = 260


def say(text: str) -> list[int]:
    return TOK.encode(text) + [IM_END]


class GuessEnv(gym.Env):
    """Guess a number in 1..9 drawn from the Gymnasium seed; counts the actions it received."""

    observation_space = Text(200)
    action_space = Text(200)

    def __init__(self):
        self.actions: list[str] = []
        self.seeds: list[int | None] = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.seeds.append(seed)
        self.secret = int(self.np_random.integers(1, 10))
        self.turn = 0
        return "Guess my number (1-9).", {}

    def step(self, action):
        self.actions.append(action)
        self.turn += 1
        try:
            guess = int(action.strip())
        except ValueError:
            return "Reply with a number.", -0.1, False, self.turn >= 6, {}
        if guess == self.secret:
            return "", 1.0, True, False, {"tries": self.turn}
        return ("Higher." if guess < self.secret else "Lower."), 0.0, False, self.turn >= 6, {}


class GlobalRandomEnv:
    """A duck-typed env (no gymnasium.Env) that, like GEM and TextArena, draws from the global
    `random` and numpy generators and seeds them itself only when given a seed below 2**32."""

    def reset(self, seed=None):
        if seed is not None:
            if seed >= 2**32:
                raise ValueError("Seed must be between 0 and 2**32 - 1")
            random.seed(seed)
            np.random.seed(seed)
        self.history = [f"Start {random.randint(0, 10**6)} {np.random.randint(10**6)}."]
        return "\n".join(self.history), {}

    def step(self, action):
        self.history.append(f"You said {action!r}; now {random.randint(0, 10**6)}.")
        done = len(self.history) > 3
        return "\n".join(self.history), float(done), done, False, {"length": len(self.history)}


def _factory_guess(**kwargs):
    return FromText(GuessEnv(), **kwargs)


gym.register("test_from_text/Guess-v0", entry_point=_factory_guess)


def test_check_env_is_clean_and_spaces_are_tokens():
    env = gym.make("test_from_text/Guess-v0").unwrapped
    gc.collect()  # earlier tests' garbage: its ResourceWarnings are not this block's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env)
    assert [str(w.message) for w in caught] == []
    ob, info = env.reset(seed=0)
    assert env.observation_space.contains(ob) and "Guess my number" in info["text"]


def test_multi_turn_keeps_the_prefix_and_reports_continuation_metrics():
    env = FromText(GuessEnv())
    ob, _ = env.reset(seed=3)
    secret = env.string_env.secret
    for guess in (g for g in range(1, 10) if g != secret):
        action = say(str(guess))
        nxt, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
        assert list(nxt[: len(ob) + len(action)]) == list(ob) + action  # prefix property
        assert info["metrics"]["continuation/extended"] == 1.0 and reward == 0.0
        ob = nxt
    assert TOK.decode(list(ob)).count("Lower.") + TOK.decode(list(ob)).count("Higher.") >= 2  # short repeats kept
    env.reset(seed=3)
    *_, terminated, _, info = env.step(say(str(secret)))
    assert terminated and info["episode_metrics"]["return"] == 1.0 and info["metrics"]["env/tries"] == 1


@pytest.mark.parametrize("renderer", ["role_colon", "chat_template"])
def test_other_renderers_keep_the_prefix(renderer, hf_chat_tokenizer):
    tokenizer = hf_chat_tokenizer if renderer == "chat_template" else None
    env = FromText(GuessEnv(), tokenizer=tokenizer, renderer=renderer)
    ob, _ = env.reset(seed=1)
    stop = env.renderer.get_stop_sequences()
    tail = stop[:1] if isinstance(stop[0], int) else env.tokenizer.encode(stop[0], add_special_tokens=False)
    action = list(env.tokenizer.encode("0", add_special_tokens=False)) + list(tail)
    nxt, reward, terminated, *_ = env.step(action)
    assert not terminated and reward == 0.0
    assert list(nxt[: len(ob) + len(action)]) == list(ob) + action


def test_history_resent_each_turn_is_sent_once():
    env = FromText(GlobalRandomEnv())
    _, info = env.reset(seed=5)
    start = info["text"].split("user\n", 1)[1].split("<|im_end|>")[0]
    ob, *_ = env.step(say("hello"))
    text = TOK.decode(list(ob))
    assert text.count(start) == 1 and text.count("You said 'hello'") == 1
    ob, *_ = env.step(say("again"))
    text = TOK.decode(list(ob))
    assert text.count("You said 'hello'") == 1 and text.count("You said 'again'") == 1
    with_dupes = FromText(GlobalRandomEnv(), dedupe_history=False)
    with_dupes.reset(seed=5)
    with_dupes.step(say("hello"))
    ob, *_ = with_dupes.step(say("again"))
    assert TOK.decode(list(ob)).count("You said 'hello'") == 2


@pytest.mark.parametrize(
    "action, metric",
    [
        ([72, 105, 10**9, IM_END], "invalid_tokens"),  # out of vocabulary
        ([0xFF, 0xFE, IM_END], "invalid_utf8"),
        (TOK.encode("9" * 20_000) + [IM_END], "action_too_long"),
    ],
)
def test_bad_output_never_reaches_the_env_and_gets_the_invalid_reward(action, metric):
    inner = GuessEnv()
    env = FromText(inner, reward_range=(-0.1, 1.0))
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(action)
    assert terminated and reward == -0.1 == env.source.invalid_action_reward
    assert info["metrics"][metric] == 1.0 and info["metrics"]["invalid_action"] == 1.0
    assert inner.actions == []
    env.reset(seed=0)  # and the env is fine for the next episode
    assert env.step(say("5"))[1] in (0.0, 1.0)


def test_an_env_that_raises_on_a_reply_ends_the_episode_or_propagates():
    class Fragile(GuessEnv):
        def step(self, action):
            raise ValueError(f"invalid literal for int(): {action!r}")

    env = FromText(Fragile(), invalid_action_reward=-1.0)
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(say("zzz"))
    assert terminated and reward == -1.0 and info["metrics"]["env_error"] == 1.0
    assert "ValueError" in info["logs"]["reason"]
    strict = FromText(Fragile(), on_env_error="raise")
    strict.reset(seed=0)
    with pytest.raises(ValueError, match="invalid literal"):
        strict.step(say("zzz"))


def test_seeds_fit_32_bits_and_the_splits_use_disjoint_seeds():
    inner = GuessEnv()
    env = FromText(inner)
    for seed in (0, 2**40, 2**64 + 7):
        env.reset(seed=seed)
    test_inner = GuessEnv()
    test_env = FromText(test_inner, split="test")
    for seed in range(20):
        env.reset(seed=seed)
        test_env.reset(seed=seed)
    assert all(0 <= s < 2**32 for s in inner.seeds + test_inner.seeds)
    assert all(s % 2 == 0 for s in inner.seeds) and all(s % 2 == 1 for s in test_inner.seeds)
    FromText(GlobalRandomEnv()).reset(seed=2**63)  # an env that rejects seeds >= 2**32


def _episode(env, seed):
    first, _ = env.reset(seed=seed)
    out = [tuple(first)]
    for word in ("a", "b", "c"):
        ob, reward, terminated, *_ = env.step(say(word))
        out.append((tuple(ob), reward))
        if terminated:
            break
    return out


def test_same_seed_same_episode_with_global_rng_envs_interleaved():
    a, b = FromText(GlobalRandomEnv()), FromText(GlobalRandomEnv())
    alone = _episode(a, 11)
    assert _episode(a, 11) == alone and _episode(b, 12) != alone
    # interleave two episodes step by step: each still sees its own private random state
    a.reset(seed=11)
    b.reset(seed=12)
    got = [tuple(a.reset(seed=11)[0])]
    b.step(say("x"))
    for word in ("a", "b", "c"):
        ob, reward, terminated, *_ = a.step(say(word))
        random.random()  # the caller's use of the global generator does not leak in either
        got.append((tuple(ob), reward))
        if terminated:
            break
    assert got == alone
    state = random.getstate()
    _episode(a, 3)
    assert random.getstate() == state  # and the env never touched the caller's state


def test_groupable_all_envs_of_a_group_face_the_same_task():
    builder = GymEnvGroupBuilder(_factory_guess, group_size=4, seed=2**62)
    envs = asyncio.run(builder.make_envs())
    firsts = [asyncio.run(e.initial_observation())[0].to_ints() for e in envs]
    secrets = {e.gym_env.string_env.secret for e in envs}
    assert len(secrets) == 1 and all(f == firsts[0] for f in firsts)


def test_duck_typed_envs_without_seed_argument_async_and_chat_messages():
    class NoSeed:
        def reset(self):
            return f"n={random.randint(0, 10**9)}", {}

        def step(self, action):
            return "", 1.0, True, False, {}

    env = FromText(NoSeed)  # a class: made on demand
    assert env.reset(seed=4)[1]["text"] == env.reset(seed=4)[1]["text"]  # seeded global state

    class Async:
        async def reset(self, seed=None):
            await asyncio.sleep(0)
            return [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}], {}

        async def step(self, action):
            await asyncio.sleep(0)
            return [{"role": "user", "content": f"got {action}"}], 0.5, False, False, {}

    env = FromText(Async())
    _, info = env.reset(seed=0)
    assert "<|im_start|>system\nBe brief." in info["text"] and "user\nHi?" in info["text"]
    ob, reward, terminated, _, _ = env.step(say("yo"))
    assert reward == 0.5 and not terminated and "got yo" in TOK.decode(list(ob))


def test_one_env_object_plays_one_episode_at_a_time():
    source = StringEnvSource(renderer=FromText(GuessEnv()).renderer, env=GuessEnv())
    rng = np.random.default_rng(0)
    first, second = source.make_env(rng), source.make_env(rng)
    asyncio.run(first.initial_observation())
    asyncio.run(second.initial_observation())  # takes the env over
    with pytest.raises(RuntimeError, match="taken over"):
        asyncio.run(first.step(say("1")))
    assert asyncio.run(second.step(say("1"))).reward in (0.0, 1.0)
    factory_source = StringEnvSource(renderer=source.renderer, env_factory=GuessEnv)
    a, b = factory_source.make_env(rng), factory_source.make_env(rng)
    asyncio.run(a.initial_observation())
    asyncio.run(b.initial_observation())
    assert a.string_env is not b.string_env  # concurrent episodes get their own envs
    asyncio.run(a.step(say("1")))


def test_errors_point_at_the_wrapper():
    with pytest.raises(TypeError, match="FromText"):
        TextActions(GuessEnv(), tokenizer=TOK)
    builder = GymEnvGroupBuilder(GlobalRandomEnv, group_size=2, seed=0)
    with pytest.raises(TypeError, match="FromText"):
        asyncio.run(builder.make_envs())
    with pytest.raises(TypeError, match="reset"):
        FromText(object())
    weird = type("Weird", (), {"reset": lambda self, seed=None: (42, {}),
                               "step": lambda self, a: ("", 0.0, True, False, {})})
    env = FromText(weird())
    with pytest.raises(TypeError, match="observation_to_text"):
        env.reset(seed=0)


def test_abandoned_episodes_free_their_env():
    made = []

    def factory():
        made.append(GuessEnv())
        return made[-1]

    env = FromText(factory)
    for seed in range(20):  # reset mid-episode, as a TimeLimit truncation does
        env.reset(seed=seed)
        env.step(say("0"))
    assert len(made) == 1 and len(env.source._owners) <= 1


def test_a_reply_that_extends_the_previous_one_is_not_mistaken_for_history():
    class Hints:
        def reset(self, seed=None):
            self.n = 0
            return "Find the word.", {}

        def step(self, action):
            self.n += 1
            return "Wrong." + " Try again." * (self.n - 1), 0.0, self.n >= 3, False, {}

    env = FromText(Hints())
    env.reset(seed=0)
    env.step(say("a"))
    ob, *_ = env.step(say("b"))
    assert "<|im_start|>user\nWrong. Try again.<|im_end|>" in TOK.decode(list(ob))
