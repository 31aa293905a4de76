"""The Tinker cookbook's own unit tests, import-switched to llm_gym, as the oracle (issue 22).

The cookbook's sdist (the version installed in the cookbook venv: its tests match the API llm_gym
mirrors) is downloaded at test time into `~/.cache/llm-gym/cookbook-sdist/` (reused; offline and
not cached: skip, or fail under LLM_GYM_REQUIRE_COOKBOOK=1). Its unit tests for the modules llm_gym
mirrors (`IN_SCOPE`) run twice in subprocesses, with the hub offline:

1. verbatim, against the real cookbook: a test the cookbook itself does not pass here needs what
   this machine lacks (a hub tokenizer or image processor) and is out of scope, as are
   `EXCLUDED_FILES` / `EXCLUDED_TESTS` below (each with its reason);
2. after `cookbook_own_tests.switch_imports` (`tinker_cookbook.rl` -> `llm_gym.rl`, ...), against
   llm_gym. A file that fails to import after the switch counts every one of its tests as failed.

The pass rate over the in-scope tests must stay at or above `MIN_PASS_RATE`, the rate measured when
it was last raised; `LLM_GYM_COOKBOOK_OWN_TESTS_REPORT=path` writes every verdict there as JSON.
"""

from __future__ import annotations

import collections
import json
import os
from pathlib import Path

import pytest

from tests.conformance import cookbook_own_tests as own
from tests.conformance.conftest import require_cookbook

# Test files (below `tinker_cookbook/`) of the modules whose API llm_gym mirrors: the whole
# `rl/`, `renderers/` and `tool_use/` packages and these top-level modules.
IN_SCOPE_DIRS = ("rl/", "renderers/", "tool_use/", "preference/")
IN_SCOPE_FILES = (
    "completers_test.py", "exceptions_test.py", "model_info_test.py", "tokenizer_utils_test.py",
    "utils/logtree_test.py", "utils/misc_utils_test.py",
)

# Files of the in-scope packages that test something out of scope, with the reason.
_MODEL_SPECIFIC = "model-specific renderer: its tests load that model's hub tokenizer"
EXCLUDED_FILES = {
    "renderers/deepseek_v3_test.py": _MODEL_SPECIFIC,
    "renderers/deepseek_v4_1_test.py": _MODEL_SPECIFIC,
    "renderers/glm5_3_test.py": _MODEL_SPECIFIC,
    "renderers/gpt_oss_test.py": _MODEL_SPECIFIC,
    "renderers/kimi_k2_test.py": _MODEL_SPECIFIC,
    "renderers/kimi_k25_test.py": _MODEL_SPECIFIC + " (its tokenizer-free tests check Kimi's TypeScript tool syntax)",
    "renderers/kimi_k26_test.py": _MODEL_SPECIFIC,
    "renderers/kimi_k2_tool_declaration_test.py": _MODEL_SPECIFIC,
    "renderers/kimi_k31_pro_test.py": _MODEL_SPECIFIC,
    "renderers/nemotron3_test.py": _MODEL_SPECIFIC + " (its tokenizer-free tests check Nemotron's XML tool syntax)",
    "renderers/nemotron3_5_super_test.py": _MODEL_SPECIFIC + " and image processor",
    "renderers/qwen3_test.py": _MODEL_SPECIFIC,
    "renderers/qwen3_8_test.py": _MODEL_SPECIFIC,
    "renderers/qwen3_concurrency_test.py": _MODEL_SPECIFIC,
    "renderers/qwen3_tool_declaration_test.py": _MODEL_SPECIFIC,
    "renderers/tool_calling_test.py": "per-model tool-call formats checked against hub chat templates",
    "renderers/renderers_test.py": "per-model renderers against hub chat templates; the rest formats images",
    "renderers/image_token_count_test.py": "images (vision-language models' image processors)",
    "renderers/tml_v0_test.py": "the tml renderer (tml_renderers package: audio/image parts)",
    "renderers/tml_renderers_adapter_test.py": "the tml renderer (tml_renderers package)",
    "renderers/renderer_pickle_test.py": "pickles renderers built from hub tokenizers",
    "renderers/role_colon_test.py": "its fixture loads the Qwen/Qwen3.5-9B-Base hub tokenizer",
    "rl/problem_env_test.py": "its fixture loads the Qwen/Qwen3.5-9B hub tokenizer",
    "rl/rollout_logging_test.py": "the training loop's rollout logging (rl.train's store), not the env API",
    "rl/train_test.py": "the chz training loop against the hosted service",
    "rl/async_training_test.py": "the chz training loop (async off-policy) against the hosted service",
    "rl/async_drain_exports_test.py": "the chz training loop",
    "rl/async_final_eval_test.py": "the chz training loop",
    "rl/sync_final_eval_test.py": "the chz training loop",
    "rl/max_steps_test.py": "the chz training loop",
    "rl/stream_minibatch_shutdown_test.py": "the chz training loop",
    "rl/constant_batch_cost_test.py": "the training loop's billing (hosted service cost metrics)",
    "rl/cost_metrics_test.py": "the training loop's billing (hosted service cost metrics)",
    "rl/discarded_group_cost_test.py": "the training loop's billing (hosted service cost metrics)",
    "rl/kl_scoring_test.py": "KL scoring through the hosted service's sampling client",
    "rl/metric_util_test.py": "RLTestSetEvaluator, the training loop's evaluator over the hosted service's sampling "
        "client (a SamplingClientEvaluator), reporting in the cookbook's eval.benchmarks.BenchmarkResult "
        "(asserted with isinstance against that class; llm_gym has neither)",
    "rl/shutdown_test.py": "the chz training loop's shutdown helpers (imports rl.train)",
    "renderers/parsing_test.py": "imports 7 model-specific renderer modules (qwen3, deepseek_v3, gpt_oss, kimi_k2, "
        "...) at module level, which llm_gym does not have (built from their hub tokenizers; files above)",
}
# Single tests of otherwise in-scope files, with the reason.
EXCLUDED_TESTS = {
    "rl/builder_pickle_test.py::TestProblemGroupBuilderPickle": "builds a renderer from a hub tokenizer",
    "rl/builder_pickle_test.py::TestRolloutTask": "builds a renderer from a hub tokenizer",
    "rl/rollout_presets_test.py::TestTrainerDefaultResolution":
        "resolves through rl.train.Config (the chz training loop)",
    "rl/termination_reward_test.py::TestTrainerWiring": "inspects rl.train's call sites (the chz training loop)",
    "exceptions_test.py::test_sandbox_terminated_error_is_sandbox_error":
        "checks tinker_cookbook.sandbox's own class (not mirrored: llm_gym.sandbox is ours) against llm_gym's "
        "SandboxError",
}

# The measured pass rate (passed / in scope), less ~2 points for tests that may flip with load;
# raise it when it rises. tinker-cookbook 0.5.8: 200 / 462 before the module map of issue 22, then
# 416 / 437 (95.2%). 0.6.1: 443 / 465 (95.3%); the rest: model_info's recommended renderer names
# (19: llm_gym returns only a renderer it can build, else ConfigurationError, by design) and
# utils.misc_utils.dict_mean skipping None values (3, new in 0.6). The issue asks for 0.95.
MIN_PASS_RATE = 0.93


def _in_scope_files(sdist: Path) -> list[str]:
    return [
        f for f in own.sdist_test_files(sdist)
        if (f.startswith(IN_SCOPE_DIRS) or f in IN_SCOPE_FILES) and f not in EXCLUDED_FILES
    ]


def _excluded(test_id: str) -> bool:
    return any(test_id == t or test_id.startswith(t + "::") or test_id.startswith(t + "[")
               for t in EXCLUDED_TESTS)


@pytest.fixture(scope="module")
def sdist() -> Path:
    require_cookbook()
    version = own.installed_cookbook_version()
    try:
        return own.fetch_sdist(version)
    except own.SdistUnavailable as e:
        if os.environ.get("LLM_GYM_REQUIRE_COOKBOOK") == "1":
            pytest.fail(f"the cookbook's sdist is needed for its own tests: {e}")
        pytest.skip(f"tinker-cookbook {version}'s sdist is neither cached in "
                    f"{own.default_cache_dir()} nor downloadable: {e}")


def test_switch_imports_is_the_users_switch():
    """The switch rewrites the mirrored modules, the tests' helpers and tinker's ModelInput, and
    leaves the rest of the cookbook (and tinker's service types) alone."""
    src = "\n".join([
        "import tinker",
        "from tinker import SamplingParams, ModelInput",
        "from tinker_cookbook.rl.types import Env",
        "from tinker_cookbook import model_info, checkpoint_utils",
        "from tinker_cookbook.renderers.testing_utils import extract_token_ids",
        "from tinker_cookbook.utils.deprecation import warn_deprecated",
        'mock.patch("tinker_cookbook.rl.rollouts.do_single_rollout")',
        "x = tinker.ModelInput.from_ints([1]); c = tinker.SamplingClient",
        "from tinker_cookbook.rl_extra import y",
    ])
    assert own.switch_imports(src).split("\n") == [
        "import tinker; import llm_gym.model_input",
        "from tinker import SamplingParams; from llm_gym.model_input import ModelInput",
        "from llm_gym.rl.types import Env",
        "from tinker_cookbook import checkpoint_utils; from llm_gym import model_info",
        "from cookbook_tests.renderers.testing_utils import extract_token_ids",
        "from tinker_cookbook.utils.deprecation import warn_deprecated",
        'mock.patch("llm_gym.rl.rollouts.do_single_rollout")',
        "x = llm_gym.model_input.ModelInput.from_ints([1]); c = tinker.SamplingClient",
        "from tinker_cookbook.rl_extra import y",
    ]


def test_cookbook_own_tests_pass_on_llm_gym(sdist: Path, tmp_path: Path):
    files = _in_scope_files(sdist)
    deselect = list(EXCLUDED_TESTS)
    own.extract_tests(sdist, tmp_path / "cookbook", files, switch=False)
    oracle = own.run_tests(tmp_path / "cookbook", deselect)
    in_scope = sorted(t for t, o in oracle.outcomes.items() if o == "passed" and not _excluded(t))
    assert len(in_scope) > 100, oracle.output[-3000:]  # the oracle ran: a broken run is not a pass

    own.extract_tests(sdist, tmp_path / "llm_gym", files)
    ours = own.run_tests(tmp_path / "llm_gym", deselect)
    verdicts = ours.verdicts(in_scope)
    passed = [t for t, o in verdicts.items() if o == "passed"]
    rate = len(passed) / len(in_scope)

    by_file = collections.defaultdict(collections.Counter)
    for test_id, outcome in verdicts.items():
        by_file[test_id.split("::")[0]][outcome] += 1
    summary = "\n".join(f"  {f}: {dict(c)}" for f, c in sorted(by_file.items()))
    if path := os.environ.get("LLM_GYM_COOKBOOK_OWN_TESTS_REPORT"):
        Path(path).write_text(json.dumps(
            {"version": own.installed_cookbook_version(), "in_scope": len(in_scope),
             "passed": len(passed), "verdicts": verdicts}, indent=1))
    print(f"cookbook {own.installed_cookbook_version()} own tests on llm_gym: "
          f"{len(passed)}/{len(in_scope)} passed ({rate:.1%})\n{summary}")
    assert rate >= MIN_PASS_RATE, (
        f"{len(passed)}/{len(in_scope)} ({rate:.1%}) of the cookbook's in-scope tests pass on "
        f"llm_gym, below the {MIN_PASS_RATE:.1%} reached before:\n{summary}\n{ours.output[-6000:]}"
    )
