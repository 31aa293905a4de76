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
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers'))\n"
        "print(json.dumps({'missing': names, 'heavy': heavy}))"
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


def test_recipe_support_modules_import_without_torch():
    """The names twenty_questions and rl/preference_envs import exist, and cost no heavy import."""
    code = (
        "import sys, json\n"
        "import llm_gym, llm_gym.model_info as mi, llm_gym.completers as c\n"
        "from llm_gym.utils import logtree, logtree_formatters as lf, misc_utils as mu\n"
        "from llm_gym.preference import preference_datasets as pd, types as pt\n"
        "want = {mi: ['get_recommended_renderer_name', 'get_recommended_renderer_names', 'get_model_attributes'],\n"
        "        c: ['TinkerMessageCompleter'], lf: ['ConversationFormatter'], mu: ['safezip'],\n"
        "        logtree: ['log_text', 'log_formatter', 'scope_header', 'scope_header_decorator', 'init_trace'],\n"
        "        pd: ['ComparisonDatasetBuilder'], pt: ['Comparison', 'LabeledComparison', 'PreferenceModel']}\n"
        "missing = [m.__name__ + '.' + n for m, ns in want.items() for n in ns if not hasattr(m, n)]\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'datasets'))\n"
        "lazy = ('llm_gym.utils', 'llm_gym.preference', 'llm_gym.model_info')\n"
        "eager = sorted(m for m in sys.modules if m.startswith(lazy))\n"
        "print(json.dumps({'missing': missing, 'heavy': heavy, 'eager': eager}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["missing"] == [] and result["heavy"] == [], result
    # and `import llm_gym` alone does not pull them in
    out = subprocess.run([sys.executable, "-c", "import sys, llm_gym; print(sorted(m for m in sys.modules if "
                          "m.startswith(('llm_gym.utils', 'llm_gym.preference', 'llm_gym.model_info'))))"],
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_recommended_renderer_name_maps_to_ours_or_says_why():
    from llm_gym.exceptions import ConfigurationError
    from llm_gym.model_info import get_recommended_renderer_name, get_recommended_renderer_names
    from llm_gym.renderers import register_renderer, unregister_renderer

    assert get_recommended_renderer_name("meta-llama/Llama-3.2-1B") == "role_colon"
    assert get_recommended_renderer_name("Qwen/Qwen3-8B-Base:some-checkpoint") == "role_colon"
    assert get_recommended_renderer_names("Qwen/Qwen3-8B") == ["qwen3", "qwen3_disable_thinking"]
    with pytest.raises(ConfigurationError, match=r"'qwen3'.*register_renderer"):
        get_recommended_renderer_name("Qwen/Qwen3-8B")
    register_renderer("qwen3_disable_thinking", lambda tok, ip: None)
    try:  # a registered renderer counts as one we have
        assert get_recommended_renderer_name("Qwen/Qwen3-8B") == "qwen3_disable_thinking"
    finally:
        unregister_renderer("qwen3_disable_thinking")
    with pytest.raises(KeyError, match="Did you mean"):  # also a ConfigurationError
        get_recommended_renderer_name("Qwen/Qwen3-9B")
    with pytest.raises(ValueError, match="org/model"):
        get_recommended_renderer_name("gpt2")


def test_tinker_message_completer_uses_a_sampling_client_or_fails_clearly():
    from types import SimpleNamespace

    from llm_gym import ByteTokenizer, get_renderer
    from llm_gym.completers import TinkerMessageCompleter

    renderer = get_renderer("role_colon", ByteTokenizer())
    seen = {}

    class FakeSamplingClient:  # the tinker.SamplingClient interface
        async def sample_async(self, model_input, num_samples, sampling_params):
            seen.update(prompt=list(model_input.to_ints()), n=num_samples, params=sampling_params)
            return SimpleNamespace(sequences=[SimpleNamespace(tokens=list(b"yes\n\nUser:"))])

    completer = TinkerMessageCompleter(FakeSamplingClient(), renderer, max_tokens=5, temperature=0.5)
    messages = [{"role": "user", "content": "Is it a dog?"}]
    reply = asyncio.run(completer(messages))
    assert reply == {"role": "assistant", "content": "yes"}
    assert seen["prompt"] == list(renderer.build_generation_prompt(messages).to_ints()) and seen["n"] == 1
    params = seen["params"]
    assert (params.temperature, params.max_tokens, params.stop) == (0.5, 5, renderer.get_stop_sequences())

    unusable = TinkerMessageCompleter(sampling_client=None, renderer=renderer, max_tokens=5)  # no error yet
    with pytest.raises(TypeError, match="SamplingClient interface"):
        asyncio.run(unusable(messages))


def test_logtree_is_a_no_op_outside_a_trace_and_records_inside(tmp_path):
    from llm_gym.utils import logtree
    from llm_gym.utils.logtree_formatters import ConversationFormatter

    @logtree.scope_header_decorator
    async def score():
        with logtree.scope_header("Prompt"):
            logtree.log_formatter(ConversationFormatter(messages=[{"role": "user", "content": "a<b"}]))
        logtree.log_text("done")
        return 3

    assert asyncio.run(score()) == 3  # no trace: nothing recorded, no error
    path = tmp_path / "trace.html"
    with logtree.init_trace("Rollouts", path=path) as trace:
        assert asyncio.run(score()) == 3
        with logtree.scope_disable():
            logtree.log_text("hidden")
    page = path.read_text()
    assert "<h2 class=\"lt-h2\">score</h2>" in page and "<h3 class=\"lt-h3\">Prompt</h3>" in page
    assert "a&lt;b" in page and "done" in page and "hidden" not in page and ".lt-conversation" in page
    data = trace.to_dict()["root"]
    assert data["children"][1]["tag"] == "section"
    assert '"messages": [{"role": "user", "content": "a<b"}]' in json.dumps(data)


def test_preference_types_and_safezip():
    from llm_gym.preference import Comparison, ComparisonDatasetBuilder, LabeledComparison, PreferenceModel
    from llm_gym.utils.misc_utils import safezip

    c = Comparison([{"role": "user", "content": "q"}], [{"role": "assistant", "content": "a"}],
                   [{"role": "assistant", "content": "b"}])
    assert c.swap().completion_A == c.completion_B and c.swap().swap() == c
    assert LabeledComparison(c, "A").swap() == LabeledComparison(c.swap(), "B")
    assert LabeledComparison(c, "Tie").swap().label == "Tie"
    with pytest.raises(NotImplementedError):
        asyncio.run(PreferenceModel()(c))

    class Rows(ComparisonDatasetBuilder):
        def get_train_and_test_datasets(self):
            return [{"label": "A"}, {"label": None}], None

        def example_to_labeled_comparison(self, example):
            return None if example["label"] is None else LabeledComparison(c, example["label"])

    try:  # where chz is installed the base is a chz class, and chz wants subclasses decorated
        import chz
    except ImportError:
        pass
    else:
        Rows = chz.chz(Rows)
        assert Rows(swap=True).swap is True

    assert Rows().get_labeled_comparisons() == ([LabeledComparison(c, "A")], None) and Rows().swap is False
    assert list(safezip([1, 2], "ab")) == [(1, "a"), (2, "b")]
    with pytest.raises(ValueError):
        list(safezip([1, 2], "a"))


def test_interleaved_module_imports_without_torch():
    code = (
        "import sys, json\n"
        "from llm_gym.rl.interleaved import InterleavedRLDatasetBuilder\n"
        "from llm_gym.rl.types import RLDatasetBuilder\n"
        "print(json.dumps({'builder': issubclass(InterleavedRLDatasetBuilder, RLDatasetBuilder),\n"
        "                  'heavy': sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers'))}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"builder": True, "heavy": []}


def test_interleaved_builder_blends_whole_groups_deterministically():
    from llm_gym.rl.interleaved import InterleavedRLDatasetBuilder
    from llm_gym.rl.types import RLDataset, RLDatasetBuilder

    class Letters(RLDataset):
        def __init__(self, letter, batches):
            self.letter, self.batches = letter, batches

        def get_batch(self, index):
            return [f"{self.letter}{index}.{k}" for k in range(2)]

        def __len__(self):
            return self.batches

    class Source(RLDatasetBuilder):
        def __init__(self, letter, batches):
            self.letter, self.batches = letter, batches

        async def __call__(self):
            return Letters(self.letter, self.batches), Letters("test", 1)

    def blend(seed, total_batches=None):
        builder = InterleavedRLDatasetBuilder(sources=[Source("a", 10), Source("b", 2)], weights=[3, 1],
                                              groups_per_batch=4, total_batches=total_batches, seed=seed)
        train, test = asyncio.run(builder())
        assert test is None
        return [list(train.get_batch(i)) for i in range(len(train))]

    natural = blend(seed=1)
    assert len(natural) == 4  # source b's 4 groups at an expected 1 slot per batch
    assert blend(seed=1) == natural and blend(seed=2) != natural
    slots = [g for batch in blend(seed=1, total_batches=40) for g in batch]
    assert len(slots) == 160 and 0.15 < sum(g.startswith("b") for g in slots) / 160 < 0.35
    assert {g for g in slots if g.startswith("b")} == {"b0.0", "b0.1", "b1.0", "b1.1"}  # cycled
    with pytest.raises(ValueError, match="weights must be positive"):
        asyncio.run(InterleavedRLDatasetBuilder(sources=[Source("a", 1)], weights=[0], groups_per_batch=1)())
