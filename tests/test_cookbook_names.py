"""The cookbook names an env author imports exist in llm_gym, torch-free (the differential checks
of their behaviour are in tests/conformance/test_cookbook_recipes.py, cookbook venv only)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest


def test_new_cookbook_modules_import_without_torch():
    code = (
        "import sys, json\n"
        "import llm_gym.tokenizer_utils as tu, llm_gym.exceptions as ex, llm_gym.rl.message_env as me\n"
        "import llm_gym.rl as rl\n"
        "names = {'tu': [n for n in tu.__all__ if not hasattr(tu, n)],\n"
        "         'ex': [n for n in ex.__all__ if not hasattr(ex, n)],\n"
        "         'me': [n for n in ['MessageEnv', 'MessageStepResult', 'EnvFromMessageEnv'] if not hasattr(rl, n)]}\n"
        "print(json.dumps({'missing': names, 'heavy': sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers'))}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"missing": {"tu": [], "ex": [], "me": []}, "heavy": []}, result


def test_get_tokenizer_is_local_and_registrable():
    from llm_gym.tokenizer_utils import get_tokenizer, register_tokenizer, unregister_tokenizer
    from llm_gym.tokenizers import ByteTokenizer

    assert isinstance(get_tokenizer("byte"), ByteTokenizer)
    sentinel = ByteTokenizer()
    register_tokenizer("Some/Hub-Model", lambda: sentinel)
    try:
        assert get_tokenizer("Some/Hub-Model") is sentinel
    finally:
        assert unregister_tokenizer("Some/Hub-Model") and not unregister_tokenizer("Some/Hub-Model")


def test_exceptions_keep_builtin_bases():
    from llm_gym.exceptions import ConfigurationError, DataFormatError, TinkerCookbookError

    assert issubclass(ConfigurationError, ValueError) and issubclass(DataFormatError, TinkerCookbookError)
    with pytest.raises(ValueError):
        raise ConfigurationError("bad renderer name")


def test_env_from_message_env_failed_parse_and_overflow():
    from llm_gym import ByteTokenizer, get_renderer
    from llm_gym.rl import EnvFromMessageEnv, MessageEnv, MessageStepResult

    renderer = get_renderer("role_colon", ByteTokenizer())

    class Echo(MessageEnv):
        async def initial_observation(self):
            return [{"role": "user", "content": "hi"}]

        async def step(self, message):
            return MessageStepResult(reward=1.0, episode_done=False,
                                     next_messages=[{"role": "user", "content": "x" * 200}])

    async def go():
        env = EnvFromMessageEnv(renderer, Echo(), failed_parse_reward=-2.0, max_trajectory_tokens=100)
        ob, stop = await env.initial_observation()
        bad = await env.step(list(b"no stop sequence"))
        good = await EnvFromMessageEnv(renderer, Echo(), max_trajectory_tokens=100).step(
            list(b"fine\n\nUser:"))
        return ob, bad, good

    ob, bad, good = asyncio.run(go())
    assert ob.length > 0
    assert (bad.reward, bad.episode_done, bad.metrics) == (-2.0, True, {"parse_error": 1.0, "stop/parse_error": 1.0})
    assert (good.reward, good.episode_done) == (-0.1, True)
    assert good.metrics == {"context_overflow": 1.0, "stop/context_overflow": 1.0}
