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


# --- model_info: the cookbook's newer model families ------------------------------------------

def test_model_info_knows_the_newer_families_and_untabled_inkling_ids():
    from llm_gym.model_info import get_model_attributes, get_recommended_renderer_names

    glm = get_model_attributes("zai-org/GLM-5.3-Flash:peft:262144")
    assert (glm.version_str, glm.size_str, glm.is_chat) == ("5.3", "320B-A18B", True)
    assert get_recommended_renderer_names("zai-org/GLM-5.3")[0] == "glm5_3_max_reasoning"
    lightning = get_recommended_renderer_names("nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16")
    assert lightning[0] == "nemotron3_ultra" and "nemotron3_ultra_medium_thinking" not in lightning
    assert get_model_attributes("nvidia/NVIDIA-Nemotron-3.5-Super-VL-120B-A12B-BF16").is_vl
    assert get_recommended_renderer_names("deepseek-ai/DeepSeek-V4.1-Flash-1017")[0] == "deepseekv4_1"
    small = get_model_attributes("thinkingmachines/Inkling-Small")
    assert (small.size_str, small.is_vl, small.is_audio_in) == ("276B-A12B", True, True)
    future = get_model_attributes("thinkingmachines/Inkling-9")  # not tabled: prefix defaults
    assert (future.version_str, future.recommended_renderers) == ("Inkling-9", ("tml_v0",))
    with pytest.raises(KeyError):
        get_model_attributes("thinkingmachines/Other")


# --- tokenizer_utils: the cookbook's loading rules, local only ---------------------------------

def test_get_hf_tokenizer_applies_trust_remote_code_rules(monkeypatch):
    pytest.importorskip("transformers")
    from unittest import mock

    from llm_gym import tokenizer_utils

    calls = []
    fake = mock.MagicMock()
    fake.from_pretrained.side_effect = lambda name, **kw: calls.append((name, kw)) or f"tok:{name}"
    monkeypatch.setattr("transformers.models.auto.tokenization_auto.AutoTokenizer", fake)
    monkeypatch.setattr(tokenizer_utils, "_hub_offline", lambda: True)
    tokenizer_utils._get_hf_tokenizer.cache_clear()
    try:
        monkeypatch.setenv("HF_TRUST_REMOTE_CODE", "yes")
        assert tokenizer_utils.get_tokenizer("org/a:ckpt") == "tok:org/a"
        monkeypatch.setenv("HF_TRUST_REMOTE_CODE", "0")
        tokenizer_utils.get_tokenizer("org/b")
        tokenizer_utils.get_tokenizer("nvidia/NVIDIA-Nemotron-3.5-Super-VL-120B-A12B-BF16")
        monkeypatch.setattr(tokenizer_utils, "_hub_offline", lambda: False)
        tokenizer_utils.get_tokenizer("org/c")  # hub online: never download anyway
    finally:
        tokenizer_utils._get_hf_tokenizer.cache_clear()
    assert calls == [
        ("org/a", {"trust_remote_code": True}),
        ("org/b", {}),
        ("nvidia/NVIDIA-Nemotron-3.5-Super-VL-120B-A12B-BF16", {"trust_remote_code": False}),
        ("org/c", {"local_files_only": True}),
    ]
    assert tokenizer_utils.get_tokenizer("byte").decode([104, 105]) == "hi"


def test_tml_renderers_source_dir_is_used_or_rolled_back(monkeypatch, tmp_path):
    from llm_gym import tokenizer_utils

    (tmp_path / "tml_renderers").mkdir()
    monkeypatch.setenv("TML_RENDERERS_SOURCE_DIR", str(tmp_path))
    monkeypatch.setattr(tokenizer_utils.importlib.util, "find_spec", lambda name: None)
    before = list(sys.path)
    with pytest.raises(ModuleNotFoundError, match="TML_RENDERERS_SOURCE_DIR"):
        tokenizer_utils.ensure_tml_renderers_importable()
    assert sys.path == before
    # found once the folder is on sys.path: the folder stays there
    monkeypatch.setattr(tokenizer_utils.importlib.util, "find_spec",
                        lambda name: object() if str(tmp_path) in sys.path else None)
    try:
        tokenizer_utils.ensure_tml_renderers_importable()
        assert sys.path[0] == str(tmp_path)
    finally:
        sys.path[:] = before


# --- tool envs: model defaults, reserved modes, multimodal results -----------------------------

def _tool_env(**kwargs):
    from llm_gym.renderers import get_renderer
    from llm_gym.tool_use import build_agent_tool_env
    from llm_gym.tokenizers import load_tokenizer

    async def reward(history):
        return 0.0, {}

    return build_agent_tool_env(get_renderer("role_colon", load_tokenizer("byte")), [],
                                [{"role": "user", "content": "hi"}], reward, **kwargs)


def test_build_agent_tool_env_resolves_the_model_default_config():
    from llm_gym.rl.rollout_presets import agentic, simple

    inkling = _tool_env(model_name="thinkingmachines/Inkling:peft:131072")
    assert inkling.rollout_limits == agentic().limits and inkling.terminate_on_length is False
    assert inkling.message_env.max_turns == agentic().limits.max_turns
    other = _tool_env(model_name="Qwen/Qwen3-8B")
    assert other.message_env.max_turns == 5 and other.terminate_on_length is True
    explicit = _tool_env(model_name="thinkingmachines/Inkling", rollout_config=simple())
    assert explicit.message_env.max_turns == 5  # an explicit config wins over the model default


def test_concurrent_safe_tool_execution_is_reserved():
    from llm_gym.tool_use import AgentToolMessageEnv

    async def reward(history):
        return 0.0, {}

    with pytest.raises(NotImplementedError, match="concurrent_safe"):
        AgentToolMessageEnv([], [], 5, reward, tool_execution="concurrent_safe")


def test_simple_tool_result_keeps_metadata_and_logs_images_as_placeholders():
    from llm_gym.rl.tool_env import _content_for_log
    from llm_gym.tool_use import simple_tool_result

    class FakeImage:
        size, mode = (4, 3), "RGB"

    parts = [{"type": "text", "text": "shot"}, {"type": "image", "image": FakeImage()},
             {"type": "image", "image": "http://x/y.png"}]
    result = simple_tool_result(parts, call_id="c1", metadata={"source": "browser"})
    assert result.metadata == {"source": "browser"} and result.messages[0]["content"] == parts
    assert _content_for_log(parts) == "shot\n<image>Image(4x3, RGB)</image>\n<image>http://x/y.png</image>"


# --- rollout runner: the between-turns deadline is hook-clearable ------------------------------

def test_a_hook_that_clears_the_between_turns_timeout_lets_the_episode_finish():
    import time

    from llm_gym.rl.rollout_limits import RolloutLimits
    from llm_gym.rl.rollout_runner import RolloutHooks, run_rollout

    class SlowEnv(Env):
        steps = 0

        async def initial_observation(self):
            return ModelInput.from_ints([1]), []

        async def step(self, action):
            time.sleep(0.05)  # blocks: the deadline passes between turns
            self.steps += 1
            return StepResult(1.0, self.steps >= 2, ModelInput.from_ints([1]), [])

    class Policy(TokenCompleter):
        async def __call__(self, ob, stop, *, max_tokens=None):
            return TokensWithLogprobs([7], [0.0])

    class Clear(RolloutHooks):
        seen: list[str] = []

        async def on_stop_reason(self, reason, state):
            self.seen.append(reason)
            return None if reason == "rollout_timeout" else reason

    hooks = Clear()
    traj = asyncio.run(run_rollout(Policy(), SlowEnv(), limits=RolloutLimits(rollout_timeout_seconds=0.02),
                                   hooks=hooks))
    assert hooks.seen[0] == "rollout_timeout" and len(traj.transitions) == 2
    timed_out = asyncio.run(run_rollout(Policy(), SlowEnv(), limits=RolloutLimits(rollout_timeout_seconds=0.02)))
    assert timed_out.stop_reason == "rollout_timeout" and len(timed_out.transitions) == 1


# --- play_w_env: a person types the actions ----------------------------------------------------

def test_play_env_rolls_out_typed_actions(monkeypatch, capsys):
    import inspect

    from llm_gym.rl.play_w_env import ManualPolicy, play_env
    from llm_gym.tokenizers import load_tokenizer

    typed = iter(["ab", "", ""])  # multiline: two blank lines end the action
    monkeypatch.setattr("builtins.input", lambda prompt="": next(typed))

    class EchoEnv(Env):
        async def initial_observation(self):
            return ModelInput.from_ints(list(b"say")), []

        async def step(self, action):
            return StepResult(float(bytes(action) == b"ab"), True, ModelInput.empty(), [])

    traj = asyncio.run(play_env(EchoEnv(), load_tokenizer("byte")))
    assert traj.transitions[0].ac.tokens == list(b"ab") and traj.transitions[0].reward == 1.0
    out = capsys.readouterr().out
    assert "say" in out and "Total reward: 1.0" in out
    param = inspect.signature(ManualPolicy.__call__).parameters["max_tokens"]
    assert param.kind is inspect.Parameter.KEYWORD_ONLY and param.default is None
