"""Every registered multi-turn env on real tokenizers (Qwen3, Mistral tekken, DeepSeek, Llama-3
style), through `renderer="chat_template"` and the default renderer, all built offline.

For each tokenizer x multi-turn env: `check_env` is clean; in every rollout each observation keeps
the prefix property or its step reports `continuation/new_datum`; a trajectory becomes 1 + (number
of new_datum turns) datums; and when the policy samples the template's own tokens, each turn's
prompt is exactly `tokenizer.apply_chat_template(conversation, add_generation_prompt=True)`.
Qwen3's own template (it strips `<think>` from earlier turns) shows both fallbacks.
"""

from __future__ import annotations

import gc
import asyncio
import importlib
import re
import warnings

import gymnasium as gym
import numpy as np
import pytest

from tests._fast import sampled
from gymnasium.utils.env_checker import check_env

import llm_gym  # noqa: F401  (registers the catalog)
from envs_catalog import ENV_SPECS
from llm_gym.completers import TokenCompleter, TokensWithLogprobs
from llm_gym.model_input import ModelInput
from llm_gym.renderers import ChatTemplateRenderer
from llm_gym.renderers.continuation import METRIC_KEYS, Continuation
from llm_gym.rl import do_single_rollout, trajectory_to_data
from tests._adapter_helpers import ensure_catalog
from tests._real_tokenizers import QWEN3_THINKING_TEMPLATE, TOKENIZERS

ensure_catalog()


def _source_class(spec):
    module, name = spec["source"].split(":")
    return getattr(importlib.import_module(module), name)


# The tool family's episodes (tools declared in the prompt, tool turns) have their own real-tokenizer
# tests in tests/envs_catalog/tools/test_tool_envs.py; these tests play the games' conversations.
MULTI_TURN = [spec for spec in ENV_SPECS
              if _source_class(spec).card.multi_turn and _source_class(spec).card.family != "tools"]
MULTI_TURN_IDS = [spec["id"] for spec in MULTI_TURN]
MODE_OF = {key: mode for mode, key in METRIC_KEYS.items()}
SEEDS = range(6)
# every (real tokenizer, multi-turn id) pair: a sample in make test, all of them in make test-all
PAIRS = [(name, env_id) for name in TOKENIZERS for env_id in MULTI_TURN_IDS]


def template_ids(tok, messages, **kwargs) -> list[int]:
    out = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, **kwargs)
    return list(out["input_ids"] if hasattr(out, "keys") else out)


class GamePolicy(TokenCompleter):
    """Plays the catalog's games from the observation text: bisects GuessNumber, takes the first
    free cell in TicTacToe, one stone from heap 1 in Nim, answers "5" elsewhere. `split=True`
    encodes each character on its own (a valid but non-canonical tokenization); `think` prefixes a
    reasoning block."""

    def __init__(self, renderer, *, split: bool = False, think: bool = False):
        self.renderer, self.split, self.think = renderer, split, think
        self.tok = renderer.tokenizer
        self.end = renderer.get_stop_sequences()[0]
        self.lo, self.hi, self.last = 1, None, None

    def reply(self, text: str) -> str:
        boards = re.findall(r"([1-9XO])\|([1-9XO])\|([1-9XO])\n([1-9XO])\|([1-9XO])\|([1-9XO])\n"
                            r"([1-9XO])\|([1-9XO])\|([1-9XO])", text)
        if boards:
            cell = next(c for c in boards[-1] if c.isdigit())
            return f"My move: {cell}" if self.split else cell
        top = re.findall(r"from (\d+) to (\d+)", text)
        if top:
            if self.hi is None:
                self.lo, self.hi = int(top[0][0]), int(top[0][1])
            tail = text[-80:]
            if self.last is not None:
                if "Higher" in tail:
                    self.lo = self.last + 1
                elif "Lower" in tail:
                    self.hi = self.last - 1
            self.last = (self.lo + max(self.lo, self.hi)) // 2
            return f"My guess is {self.last}" if self.split else str(self.last)
        if re.search(r"\bheaps?\b", text, re.IGNORECASE):  # Nim: take one stone from heap 1
            return "Move: 1 1" if self.split else "1 1"
        return "My move: 5" if self.split else "5"  # several characters, so `split` differs

    def tokens(self, reply: str) -> list[int]:
        text = f"<think>\nI will reason briefly.\n</think>\n\n{reply}" if self.think else reply
        if self.split:
            return [t for ch in text for t in self.tok.encode(ch, add_special_tokens=False)] + [self.end]
        return list(self.tok.encode(text, add_special_tokens=False)) + [self.end]

    async def __call__(self, model_input, stop, *, max_tokens=None):
        text = self.tok.decode(model_input.to_ints(), skip_special_tokens=False)
        tokens = self.tokens(self.reply(text))
        return TokensWithLogprobs(tokens, [-0.5] * len(tokens))


def rollout(source, seed, policy):
    env = source.make_env(np.random.default_rng(seed))
    traj = asyncio.run(do_single_rollout(policy, env))
    return env, traj


def check_trajectory(env, traj, tok, template_kwargs=None, expect=None) -> list[str]:
    """Asserts the prefix / datum / template contract on one trajectory; returns its modes."""
    modes = []
    messages = env._messages  # the env's conversation (built once the game goes on)
    stops = set(env.renderer.get_stop_sequences())
    for t, (before, after) in enumerate(zip(traj.transitions, traj.transitions[1:])):
        hot = [MODE_OF[k] for k, v in before.metrics.items() if k in MODE_OF and v == 1.0]
        assert len(hot) == 1 and sum(before.metrics[k] for k in MODE_OF) == 1.0, before.metrics
        modes.append(hot[0])
        prefix = before.ob.to_ints() + list(before.ac.tokens)
        kept = after.ob.to_ints()[: len(prefix)] == prefix
        assert kept == (hot[0] != "new_datum"), (hot[0], kept)
        if hot[0] == "appended" and before.ac.tokens[-1] in stops:
            # what follows the sampled turn is the template's own rendering of the new turn: the
            # tokens after the assistant's end-of-turn id in a fresh rendering
            new = after.ob.to_ints()[len(prefix):]
            fresh = template_ids(tok, messages[: 3 + 2 * t], **(template_kwargs or {}))
            assert new and fresh[len(fresh) - len(new):] == new
            assert fresh[len(fresh) - len(new) - 1] in stops
    assert "continuation/extended" not in traj.transitions[-1].metrics  # the last step ends the game
    assert len(trajectory_to_data(traj, 1.0)) == 1 + modes.count("new_datum")
    if expect is not None:
        assert all(mode == expect for mode in modes), modes
    # each turn's prompt against the template, where the turn kept the template's rendering
    if messages:
        fresh_so_far = True
        for t, transition in enumerate(traj.transitions):
            if t > 0:
                fresh_so_far = fresh_so_far and modes[t - 1] in ("extended", "new_datum")
            if fresh_so_far:
                assert transition.ob.to_ints() == template_ids(tok, messages[: 1 + 2 * t], **(template_kwargs or {}))
    return modes


@pytest.mark.parametrize("name, env_id", sampled(PAIRS, 8, label="-".join))  # all in test-all
def test_check_env_is_clean_with_the_default_renderer(real_tokenizers, name, env_id):
    path, tok = real_tokenizers(name)
    env = gym.make(env_id, tokenizer=path)
    assert isinstance(env.unwrapped.renderer, ChatTemplateRenderer)  # the default for a template
    gc.collect()  # earlier tests' garbage: its ResourceWarnings are not this block's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(gym.make(env_id, tokenizer=path, renderer="chat_template").unwrapped)
    assert [str(w.message) for w in caught] == []
    # a step that continues the game reports its continuation mode
    obs, _ = env.reset(seed=0)
    assert obs.tolist() == template_ids(tok, _first_messages(env.unwrapped.current_env))
    renderer = env.unwrapped.renderer
    policy = GamePolicy(renderer)
    action = policy.tokens(policy.reply(tok.decode(obs.tolist())))
    obs2, _, terminated, truncated, info = env.step(np.asarray(action))
    if not (terminated or truncated):
        assert info["metrics"]["continuation/extended"] == 1.0
        assert obs2[: len(obs) + len(action)].tolist() == obs.tolist() + action


def _first_messages(env):
    """The env's first user message (GuessNumber builds its conversation lazily)."""
    return env._messages[:1] or env._intro_messages()


@pytest.mark.parametrize("name, env_id", sampled(PAIRS, 8, label="-".join))  # all in test-all
def test_rollouts_keep_the_prefix_and_match_the_template(real_tokenizers, name, env_id):
    path, tok = real_tokenizers(name)
    spec = next(s for s in MULTI_TURN if s["id"] == env_id)
    renderer = ChatTemplateRenderer(tok)
    source = _source_class(spec)(renderer=renderer, **spec.get("kwargs", {}))
    turns = 0
    for seed in SEEDS:
        env, traj = rollout(source, seed, GamePolicy(renderer))
        # the template's own tokens: every turn extends and equals apply_chat_template
        turns += len(check_trajectory(env, traj, tok, expect="extended"))
    assert turns > 0  # some games went on past their first move
    # "My guess is 7" one character per token: valid ids, not the canonical tokenization, so the
    # template's tokens for the new turn are appended after the sampled ones: still one datum
    split = GamePolicy(renderer, split=True)
    assert split.tokens("My move: 5") != GamePolicy(renderer).tokens("My move: 5")
    appended = 0
    for seed in SEEDS:
        env, traj = rollout(source, seed, GamePolicy(renderer, split=True))
        modes = check_trajectory(env, traj, tok, expect="appended")
        appended += len(modes)
    assert appended > 0


@pytest.mark.parametrize("fallback", ["append", "new_datum"])
def test_qwen3_thinking_template_falls_back(real_tokenizers, fallback):
    path, tok = real_tokenizers("qwen3")
    kwargs = {"chat_template": QWEN3_THINKING_TEMPLATE}
    renderer = ChatTemplateRenderer(tok, chat_template_kwargs=kwargs)
    assert not renderer.has_extension_property
    assert ChatTemplateRenderer(tok).has_extension_property  # Qwen2.5's ChatML template keeps it
    spec = next(s for s in MULTI_TURN if s["id"] == "llm/GuessNumber-v0")
    source = _source_class(spec)(renderer=renderer, **spec["kwargs"])
    source.continuation = Continuation(renderer, fallback=fallback)
    expect = "appended" if fallback == "append" else "new_datum"
    turns = 0
    for seed in SEEDS:
        env, traj = rollout(source, seed, GamePolicy(renderer, think=True))
        modes = check_trajectory(env, traj, tok, template_kwargs=kwargs, expect=expect)
        turns += len(modes)
        if fallback == "append" and modes:
            # the sampled reasoning stays in the context; the template would have dropped it
            last = tok.decode(traj.transitions[-1].ob.to_ints())
            assert last.count("I will reason briefly.") == len(modes)
            assert tok.decode(template_ids(tok, env._messages, **kwargs)).count("I will reason") == 0
        if fallback == "new_datum":
            assert len(trajectory_to_data(traj, 1.0)) == len(traj.transitions)
    assert turns > 0


def test_mistral_template_moves_the_system_prompt_and_the_continuation_appends(real_tokenizers):
    path, tok = real_tokenizers("mistral_tekken")
    renderer = ChatTemplateRenderer(tok)
    assert not renderer.has_extension_property  # the system prompt moves to the last user turn
    cont = Continuation(renderer)
    messages = [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Pick one."}]
    ob = cont.first(messages)
    assert ob.to_ints() == template_ids(tok, messages)
    action = list(tok.encode("7", add_special_tokens=False)) + [tok.eos_token_id]
    messages += [{"role": "assistant", "content": "7"}, {"role": "user", "content": "Another."}]
    step = cont.next(ob, action, messages)
    assert step.mode == "appended"
    ids = step.observation.to_ints()
    assert ids[: ob.length + len(action)] == ob.to_ints() + action
    assert tok.decode(ids[ob.length + len(action):]) == "[INST]Be terse.\n\nAnother.[/INST]"
    # without a system prompt the same template extends, token for token
    plain = messages[1:]
    step = cont.next(cont.first(plain[:1]), action, plain)
    assert step.mode == "extended" and step.observation.to_ints() == template_ids(tok, plain)


def test_a_conversation_opened_by_the_assistant(real_tokenizers):
    # transformers refuses to render an empty conversation, so the history before the first turn
    # has no prompt to compare with: a disagreeing turn falls back to a fresh rendering
    path, tok = real_tokenizers("llama3_bpe")
    cont = Continuation(ChatTemplateRenderer(tok))
    messages = [{"role": "assistant", "content": "Hello there"}, {"role": "user", "content": "Hi."}]
    action = [t for ch in "Hello there" for t in tok.encode(ch, add_special_tokens=False)]
    step = cont.next(ModelInput.empty(), action + [tok.eos_token_id], messages)
    assert step.mode == "new_datum" and step.observation.to_ints() == template_ids(tok, messages)
    # a template that cannot render the conversation at all says so (not model output)
    path, tok = real_tokenizers("mistral_tekken")
    with pytest.raises(Exception, match="must start with a user message"):
        Continuation(ChatTemplateRenderer(tok)).next(ModelInput.empty(), [1], messages)


@pytest.mark.parametrize("env_id", ["llm/Wordle-v0", "llm/GuessNumber-v0"])
def test_random_token_replies_never_crash_a_strict_template(real_tokenizers, env_id):
    """Mistral's template refuses an assistant turn with empty content, which ~2% of random token
    replies parse to: the continuation renders it as a blank turn and starts a new datum."""
    path, _ = real_tokenizers("mistral_tekken")
    env = gym.make(env_id, tokenizer=path, renderer="chat_template").unwrapped
    blank_turns = 0
    for seed in range(300):
        env.reset(seed=seed)
        env.action_space.seed(seed)
        action = env.action_space.sample()
        _, reward, terminated, truncated, info = env.step(action)
        assert np.isfinite(reward)
        message, _ = env.renderer.parse_response(list(action))
        if not message["content"] and not terminated and not truncated:
            blank_turns += 1
            assert info["metrics"]["continuation/new_datum"] == 1.0
    assert blank_turns > 0  # the case this test is about occurred
