"""The cookbook's module map in llm_gym: names at the cookbook's paths, and their behaviour.

`llm_gym.tool_use` (the cookbook's `tool_use` package), `renderers.base.Utf8TokenDecoder` /
`_longest_matching_suffix_prefix` (streaming), `rl.rollouts._do_group_rollout_and_filter_
constant_reward_impl`, and `Datum.loss_fn_inputs` values with tinker's `TensorData` methods.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

import numpy as np
import pytest

from llm_gym import ModelInput
from llm_gym.completers import TokenCompleter, TokensWithLogprobs
from llm_gym.renderers.base import ImagePart, Utf8TokenDecoder, _longest_matching_suffix_prefix
from llm_gym.rl.data_processing import Datum, TensorData
from llm_gym.rl.rollouts import _do_group_rollout_and_filter_constant_reward_impl
from llm_gym.rl.types import Env, EnvGroupBuilder, StepResult


def test_tool_use_package_has_the_cookbooks_paths():
    import llm_gym.rl.tool_env as tool_env
    import llm_gym.tools as tools
    from llm_gym import tool_use
    from llm_gym.tool_use import agent_tool_message_env, types
    from llm_gym.tool_use import tools as tool_use_tools

    assert tool_use.build_agent_tool_env is tool_env.build_agent_tool_env
    assert agent_tool_message_env.AgentToolMessageEnv is tool_env.AgentToolMessageEnv
    assert tool_use_tools.tool is tools.tool and tool_use.simple_tool_result is tools.simple_tool_result
    assert types.ToolResult is tools.ToolResult
    assert set(tool_use.__all__) >= {"tool", "simple_tool_result", "build_agent_tool_env", "ToolSpec"}


def test_tool_decorator_from_tool_use_runs():
    from llm_gym.tool_use import ToolInput, tool

    @tool
    def add(a: int, b: int) -> str:
        """Add two numbers.

        Args:
            a: first
            b: second
        """
        return str(a + b)

    result = asyncio.run(add.run(ToolInput(arguments={"a": 2, "b": 3}, call_id="c1")))
    assert result.messages[0]["content"] == "5"


class _ByteTokenizer:
    """Token = one byte; decoding a split UTF-8 character gives U+FFFD, as HF tokenizers do."""

    def decode(self, tokens):
        return bytes(tokens).decode("utf-8", errors="replace")


def test_utf8_decoder_holds_back_a_split_character():
    euro = list("€".encode())  # 3 bytes
    decoder = Utf8TokenDecoder(_ByteTokenizer())
    assert decoder.decode(list(b"ab") + euro[:1]) == "ab"
    assert decoder.decode(euro[1:2]) is None  # still inside the character
    assert decoder.decode(euro[2:] + list(b"c")) == "€c"
    assert decoder.flush() == ""


def test_utf8_decoder_flush_returns_a_dangling_tail():
    decoder = Utf8TokenDecoder(_ByteTokenizer())
    assert decoder.decode(list("é".encode())[:1]) is None
    assert decoder.flush() == "\ufffd"


def test_utf8_decoder_holds_a_bounded_tail_of_bytes_that_never_make_a_character():
    decoder = Utf8TokenDecoder(_ByteTokenizer(), max_held_tokens=4)
    emitted = [decoder.decode([0xFF]) for _ in range(50)]
    assert len(decoder._held) <= 4
    assert sum(out.count("\ufffd") for out in emitted if out) == 50 - len(decoder._held)
    assert decoder.decode(list(b"ok")) is not None and decoder.flush() == ""


@pytest.mark.parametrize("text,tag,expected", [
    ("hello", "<think>", 0), ("hello<", "<think>", 1), ("hello<th", "<think>", 3),
    ("hello<thx", "<think>", 0), ("<think", "<think>", 6), ("", "<think>", 0),
])
def test_longest_matching_suffix_prefix(text, tag, expected):
    assert _longest_matching_suffix_prefix(text, tag) == expected


def test_image_part_is_the_cookbooks_shape():
    part: ImagePart = {"type": "image", "image": "https://example.com/a.png"}
    assert ImagePart.__annotations__.keys() == {"type", "image"} and part["type"] == "image"


def test_datum_values_are_tensor_data_without_copies():
    adv = np.array([0.5, -1.0], dtype=np.float32)
    datum = Datum(ModelInput.from_ints([1, 2]), {"advantages": adv, "mask": [1.0, 0.0]})
    value = datum.loss_fn_inputs["advantages"]
    assert isinstance(value, TensorData) and np.shares_memory(value, adv)
    assert value.tolist() == [0.5, -1.0]
    assert type(value.to_numpy()) is np.ndarray
    assert datum.loss_fn_inputs["mask"].tolist() == [1.0, 0.0]


def test_tensor_data_to_torch():
    torch = pytest.importorskip("torch")
    datum = Datum(ModelInput.from_ints([1, 2, 3]), {"target_tokens": np.array([4, 5, 6], dtype=np.int64)})
    tensor = datum.loss_fn_inputs["target_tokens"].to_torch()
    assert isinstance(tensor, torch.Tensor) and tensor.dtype == torch.int64
    assert tensor.tolist() == [4, 5, 6]


def test_import_llm_gym_stays_torch_free():
    code = ("import sys, llm_gym, llm_gym.tool_use, llm_gym.rl, llm_gym.rl.data_processing; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


class _OneStepEnv(Env):
    def __init__(self, reward: float) -> None:
        self.reward = reward

    async def initial_observation(self):
        return ModelInput.from_ints([1, 2]), [0]

    async def step(self, action, *, extra=None):
        return StepResult(reward=self.reward, episode_done=True, next_observation=ModelInput.empty(),
                          next_stop_condition=[0])


class _Group(EnvGroupBuilder):
    def __init__(self, rewards):
        self.rewards = rewards

    async def make_envs(self):
        return [_OneStepEnv(r) for r in self.rewards]


class _CountingPolicy(TokenCompleter):
    def __init__(self):
        self.max_tokens_seen = []

    async def __call__(self, model_input, stop, *, max_tokens=None):
        self.max_tokens_seen.append(max_tokens)
        return TokensWithLogprobs(tokens=[7, 0], maybe_logprobs=[-0.1, -0.2])


def test_group_rollout_impl_filters_constant_groups_and_caps_tokens():
    policy = _CountingPolicy()
    run = _do_group_rollout_and_filter_constant_reward_impl
    group = asyncio.run(run(policy, _Group([1.0, 0.0]), max_tokens=5, temperature=1.0,
                            do_remove_constant_reward_groups=True))
    assert group is not None and group.get_total_rewards() == [1.0, 0.0]
    assert policy.max_tokens_seen and all(m is not None and m <= 5 for m in policy.max_tokens_seen)
    assert asyncio.run(run(policy, _Group([1.0, 1.0]), max_tokens=5, temperature=1.0,
                           do_remove_constant_reward_groups=True)) is None
