"""The trainer's env path: `llm_gym.wrappers.source` (episodes straight from an id's `EnvSource`)
gives the episodes the Gymnasium path (`GymRLDataset` over `gym.make`) gives, and `llm-gym train`'s
setup (`trainers.grpo.fit.RunEnv`) builds the env once and takes its tokenizer and stops from it."""

from __future__ import annotations

import asyncio
import pickle
import zlib

import gymnasium as gym
import numpy as np
import pytest

import llm_gym
from llm_gym.completers import TokenCompleter, TokensWithLogprobs
from llm_gym.env_source import EnvSource
from llm_gym.registration import register_env
from llm_gym.rl import do_group_rollout
from llm_gym.rl.rollouts import RolloutLimits
from llm_gym.wrappers.grouping import GymRLDataset
from llm_gym.wrappers.source import (
    SourceEnvGroupBuilder,
    SourceRLDataset,
    env_source_for_id,
    is_source_id,
    rl_dataset,
)


class HashPolicy(TokenCompleter):
    """A scripted policy: the reply is a function of the observation tokens only (a number, a word
    or a letter, then the first stop token), so two paths showing the same observations get the
    same replies."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    async def __call__(self, model_input, stop, *, max_tokens=None):
        tokens = np.asarray(model_input.to_ints(), dtype=np.int64)
        rng = np.random.default_rng(zlib.crc32(tokens.tobytes()))
        text = [str(int(rng.integers(0, 120))), "yes", "A", "(1, 2)"][int(rng.integers(4))]
        ids = list(self.tokenizer.encode(text)) + [s for s in stop if isinstance(s, int)][:1]
        return TokensWithLogprobs(ids[:max_tokens] if max_tokens else ids, None)


def _episodes(dataset, batches: int = 2) -> list:
    """Everything a trainer reads of `batches` batches: each transition's observation, action,
    reward, done flag and metrics, and each group's final rewards and metrics."""
    tokenizer = llm_gym.load_tokenizer(None)

    async def run():
        out = []
        for i in range(batches):
            groups = await asyncio.gather(*[
                do_group_rollout(b, HashPolicy(tokenizer), limits=RolloutLimits(max_turns=12))
                for b in dataset.get_batch(i)])
            for g in groups:
                out.append((g.final_rewards_G, g.metrics_G))
                out += [(tr.ob.to_ints(), tr.ac.tokens, tr.reward, tr.episode_done,
                         sorted((k, float(v)) for k, v in tr.metrics.items()))
                        for t in g.trajectories_G for tr in t.transitions]
        return out

    return asyncio.run(run())


# Single-turn, multi-turn, tools, a group-reward judge, self-play, a game with an opponent.
PARITY_IDS = ["llm/Math-v0", "llm/GuessNumber-v0", "llm/Calculator-v0", "llm/PairwisePreference-v0",
              "llm/SelfPlayTicTacToe-v0", "llm/TicTacToe-v0", "llm/Wordle-v0"]


@pytest.mark.parametrize("env_id", PARITY_IDS)
@pytest.mark.parametrize("split", ["train", "test"])
def test_source_path_gives_the_gymnasium_paths_episodes(env_id, split):
    source_path = SourceRLDataset.from_id(env_id, batch_size=2, group_size=3, seed=5, split=split)
    gym_path = GymRLDataset(env_id, batch_size=2, group_size=3, seed=5, split=split)
    assert [b.seed for b in source_path.get_batch(3)] == [b.seed for b in gym_path.get_batch(3)]
    episodes = _episodes(source_path)
    assert len(episodes) > 4
    assert episodes == _episodes(gym_path)


@pytest.mark.parametrize("limit", [{"turn_limit": 2}, {"max_episode_steps": 3}, {"turn_limit": 4,
                                                                                  "max_episode_steps": 2}])
def test_turn_limits_end_episodes_as_textenv_and_timelimit_do(limit):
    source_path = SourceRLDataset.from_id("llm/GuessNumber-v0", 1, 3, seed=1, **limit)
    assert source_path.env.turn_limit == min(limit.values())
    episodes = _episodes(source_path, batches=1)
    assert episodes == _episodes(GymRLDataset("llm/GuessNumber-v0", 1, 3, seed=1, **limit), batches=1)
    dones = [e for e in episodes if len(e) == 5]
    assert len(dones) == 3 * min(limit.values()) and sum(e[3] for e in dones) == 3


def test_registered_time_limit_applies_and_minus_one_removes_it():
    register_env("srctest/ShortGuess-v0", "envs_catalog.games.guess_number:GuessNumberSource",
                 max_episode_steps=2)
    assert env_source_for_id("srctest/ShortGuess-v0").turn_limit == 2
    assert env_source_for_id("srctest/ShortGuess-v0", max_episode_steps=5).turn_limit == 5
    assert env_source_for_id("srctest/ShortGuess-v0", max_episode_steps=-1).turn_limit is None
    episodes = _episodes(SourceRLDataset.from_id("srctest/ShortGuess-v0", 1, 2, seed=0), 1)
    assert episodes == _episodes(GymRLDataset("srctest/ShortGuess-v0", 1, 2, seed=0), 1)


def test_env_source_for_id_builds_what_gym_make_builds():
    register_env("srctest/MathRoleColon-v0", "envs_catalog.math.arithmetic:MathSource",
                 renderer="role_colon", digits=1)
    env = env_source_for_id("srctest/MathRoleColon-v0", split="test", digits=2)
    made = gym.make("srctest/MathRoleColon-v0", split="test", digits=2).unwrapped
    assert type(env.source) is type(made.source) and env.source.split == "test"
    assert env.source.digits == made.source.digits == 2
    assert type(env.renderer) is type(made.renderer) and env.tokenizer is made.tokenizer
    assert env.stop_token_ids() == _expected_stops(made.renderer, made.tokenizer)
    with pytest.raises(TypeError, match="unexpected keyword argument 'digitz'.*Did you mean"):
        env_source_for_id("llm/Math-v0", digitz=3)
    with pytest.raises(ValueError, match="not a registered llm-gym TextEnv id"):
        env_source_for_id("CartPole-v1")
    with pytest.raises(ValueError, match="turn_limit must be a positive int"):
        env_source_for_id("llm/Math-v0", turn_limit=0)


def _expected_stops(renderer, tokenizer) -> list[int]:
    ints = [s for s in renderer.get_stop_sequences() if isinstance(s, int)]
    return ints + ([] if tokenizer.eos_token_id in ints else [tokenizer.eos_token_id])


def test_rl_dataset_takes_the_source_path_for_llm_gym_ids_only():
    assert is_source_id("llm/Math-v0") and is_source_id("llm_gym:llm/Math-v0")
    assert not is_source_id("CartPole-v1") and not is_source_id("llm/NoSuch-v0")
    assert not is_source_id(lambda: None)
    assert isinstance(rl_dataset("llm/Math-v0", 2, 2), SourceRLDataset)
    assert isinstance(rl_dataset("llm/Math-v0", 2, 2, split="test").get_batch(0)[0], SourceEnvGroupBuilder)
    assert isinstance(rl_dataset(lambda **kw: gym.make("llm/Math-v0", **kw), 2, 2), GymRLDataset)


def test_builders_pickle_and_release_their_episodes():
    from envs_catalog.math.arithmetic import MathSource

    closed = []

    class Closing(MathSource):
        def make_env(self, rng):
            env = super().make_env(rng)
            env.close = lambda: closed.append(env)
            return env

    source = Closing(renderer=llm_gym.get_renderer(None, llm_gym.load_tokenizer(None)))
    builder = SourceEnvGroupBuilder(source, 3, seed=7, env_id="x/Closing-v0")

    async def run():
        envs = await builder.make_envs()
        assert len({id(e) for e in envs}) == 3
        await builder.cleanup()
        return envs

    envs = asyncio.run(run())
    assert closed == list(envs) and builder.logging_tags() == ["x/Closing-v0"]
    math_builder = SourceRLDataset.from_id("llm/Math-v0", 1, 2, seed=3).get_batch(0)[0]
    copy = pickle.loads(pickle.dumps(math_builder))
    assert copy.seed == math_builder.seed and copy.group_size == 2
    with pytest.raises(ValueError, match="group_size"):
        SourceEnvGroupBuilder(source, 0, seed=0)
    with pytest.raises(TypeError, match="EnvSource"):
        SourceEnvGroupBuilder(object(), 2, seed=0)  # type: ignore[arg-type]
    with pytest.raises(IndexError):
        SourceRLDataset.from_id("llm/Math-v0", 1, 2, n_batches=3).get_batch(3)


# --- llm-gym train: the env is built once and asked for its tokenizer ----------------------------
@pytest.fixture
def count_builds(monkeypatch):
    counts = {"sources": 0, "gold": 0, "gym.make": 0}
    init = EnvSource.__init__

    def counting_init(self, *args, **kwargs):
        counts["sources"] += 1
        init(self, *args, **kwargs)

    import llm_gym.scripted as scripted

    play = scripted.aplay_scripted_episode

    async def counting_play(*args, **kwargs):
        counts["gold"] += 1
        return await play(*args, **kwargs)

    make = gym.make

    def counting_make(*args, **kwargs):
        counts["gym.make"] += 1
        return make(*args, **kwargs)

    monkeypatch.setattr(EnvSource, "__init__", counting_init)
    monkeypatch.setattr(scripted, "aplay_scripted_episode", counting_play)
    monkeypatch.setattr(gym, "make", counting_make)
    return counts


@pytest.mark.parametrize("env_id, gold", [("llm/Math-v0", 0), ("llm/GuessNumber-v0", 1)])
def test_train_setup_builds_the_env_once_per_split(count_builds, env_id, gold):
    """What `llm-gym train` does before model work -- validate, fit defaults, say the SFT source,
    validate again in `train` -- then the datasets, evaluations and tokenizer the trainer reads:
    one source per split, the gold episode played once, no `gym.make`."""
    from trainers.cli_train import config_and_explicit, sft_choice
    from trainers.grpo import trainer
    from trainers.grpo.fit import fit_to_env, run_env

    cfg, explicit = config_and_explicit(["--env", env_id, "--seed", "3"])
    cfg.validate()
    fit_to_env(cfg, explicit)
    cfg.validate(check_env=False)
    sft_choice(cfg)
    cfg.validate()  # train() validates again
    tok, stops = trainer.env_tokenizer_and_stops(cfg)
    train = trainer.make_dataset(cfg, "train", 2, 2, cfg.seed)
    test = trainer.make_dataset(cfg, "test", 4, 1, trainer.EVAL_SEED)
    assert run_env(cfg).source("train") is train.source
    assert count_builds == {"sources": 2, "gold": gold, "gym.make": 0}
    assert tok is train.tokenizer and test.source.split == "test"
    assert trainer.builder_single_turn(train.get_batch(0)[0]) == (env_id == "llm/Math-v0")
    cfg.env_kwargs = {"max_number": 50} if gold else {"digits": 1}  # another env: built anew
    cfg.validate()
    assert count_builds["sources"] == 4


def test_trainer_takes_tokenizer_and_stops_from_the_env_not_from_env_kwargs():
    from trainers.grpo.config import GRPOConfig
    from trainers.grpo.trainer import env_tokenizer_and_stops

    register_env("srctest/MathRoleColon2-v0", "envs_catalog.math.arithmetic:MathSource",
                 renderer="role_colon")
    made = gym.make("srctest/MathRoleColon2-v0").unwrapped
    tok, stops = env_tokenizer_and_stops(GRPOConfig(env="srctest/MathRoleColon2-v0"))
    assert tok is made.tokenizer and stops == _expected_stops(made.renderer, made.tokenizer)
    chatml_stops = env_tokenizer_and_stops(GRPOConfig())[1]
    assert stops != chatml_stops  # the registered renderer, not the default one


class EosEcho(gym.Env):
    """A third party's token env (no EnvSource): echo the observed token; its tokenizer has only an
    EOS id and it has no renderer."""

    def __init__(self):
        self.observation_space = gym.spaces.Sequence(gym.spaces.Discrete(16), stack=True)
        self.action_space = gym.spaces.Sequence(gym.spaces.Discrete(16), stack=True)
        self.tokenizer = type("Tok", (), {"eos_token_id": 15})()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._target = int(self.np_random.integers(0, 15))
        return np.array([self._target], dtype=np.int64), {}

    def step(self, action):
        reward = float(list(np.asarray(action)) == [self._target])
        return np.zeros(0, dtype=np.int64), reward, True, False, {}


def test_third_party_gymnasium_envs_keep_the_grouping_wrapper():
    from trainers.grpo.config import GRPOConfig
    from trainers.grpo.fit import RunEnv

    gym.register("srctest/EosEcho-v0", entry_point=EosEcho)
    env = RunEnv("srctest/EosEcho-v0", {})
    assert not env.from_source and env.source() is None
    assert env.check(seed=0) == "none"
    assert isinstance(env.dataset("train", 2, 2, 0), GymRLDataset)
    tok, stops = env.tokenizer_and_stops()
    assert tok.eos_token_id == 15 and stops == [15]
    GRPOConfig(env="srctest/EosEcho-v0", sft_steps=0).validate()
