"""Bad training configs fail before any model work, with one line naming the field, the bad value
and the fix: a table of bad values for every field (through a config file or flags, then
`validate`), the good configs that must still pass, and a few runs of the real `llm-gym train` in a
subprocess (exit 2, one stderr line, no traceback, torch never imported)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envs_catalog.games.guess_number import GuessNumberSource
from trainers.cli_train import config_from_args
from trainers.grpo.config import ConfigError, GRPOConfig

ROOT = Path(__file__).resolve().parents[3]
NOT_CACHED = "llm-gym-tests/no-such-model"  # a hub id no HF cache holds

# (config keys as a parsed YAML/JSON file gives them, a regex the one-line error must match).
# Written to a JSON file and read with `--config`, so each case takes the CLI's path.
BAD_VALUES: list = [
    # --- types: every annotation (bools are not ints; an int field takes no float) -----------
    pytest.param({"steps": 2.5}, r"steps=2\.5 must be a whole number", id="steps-float"),
    pytest.param({"steps": "10"}, r"steps='10' must be a whole number; write it without quotes",
                 id="steps-str"),
    pytest.param({"steps": True}, r"steps=True must be a whole number", id="steps-bool"),
    pytest.param({"group_size": 4.0}, r"group_size=4\.0 must be a whole number; write 4",
                 id="group_size-float"),
    pytest.param({"eval_every": None}, r"eval_every=None must be a whole number$", id="int-null"),
    pytest.param({"max_turns": 2.5}, r"max_turns=2\.5 must be a whole number or null",
                 id="max_turns-float"),
    pytest.param({"lr": "fast"}, r"lr='fast' is not a number", id="lr-word"),
    pytest.param({"lr": True}, r"lr=True must be a number", id="lr-bool"),
    pytest.param({"temperature": [1.0]}, r"temperature=\[1\.0\] must be a number",
                 id="temperature-list"),
    pytest.param({"clip_eps_high": "big"}, r"clip_eps_high='big' is not a number",
                 id="clip_eps_high-word"),
    pytest.param({"bf16": "yes"}, r"bf16='yes' must be true or false", id="bf16-str"),
    pytest.param({"progress": 1}, r"progress=1 must be true or false", id="progress-int"),
    pytest.param({"resume": "true"}, r"resume='true' must be true or false", id="resume-str"),
    pytest.param({"overwrite": 1}, r"overwrite=1 must be true or false", id="overwrite-int"),
    pytest.param({"resume_override": 5}, r"resume_override=5 must be a string or null",
                 id="resume_override-int"),
    pytest.param({"env": 3}, r"env=3 must be a string", id="env-int"),
    pytest.param({"run_name": 123}, r"run_name=123 must be a string or null \(quote it",
                 id="run_name-int"),
    pytest.param({"output_dir": None}, r"output_dir=None must be a string", id="output_dir-null"),
    pytest.param({"wandb_project": 7}, r"wandb_project=7 must be a string or null",
                 id="wandb_project-int"),
    pytest.param({"advantage_scale": 1}, r"advantage_scale=1 must be a string or null",
                 id="advantage_scale-int"),
    pytest.param({"env_kwargs": [1, 2]}, r"env_kwargs=\[1, 2\] must be a mapping",
                 id="env_kwargs-list"),
    pytest.param({"env_kwargs": "digits=3"}, r"must be a mapping", id="env_kwargs-str"),
    pytest.param({"sft_target_band": 0.5}, r"sft_target_band=0\.5 must be a list of 2 numbers",
                 id="band-number"),
    pytest.param({"sft_target_band": [0.1]}, r"must be a list of 2 numbers", id="band-short"),
    pytest.param({"sft_target_band": [0.3, "high"]}, r"sft_target_band\[1\]='high' is not a number",
                 id="band-word"),
    # --- non-finite numbers (lr inf used to crash mid-run; temperature inf was accepted) ------
    pytest.param({"lr": math.inf}, r"lr=inf: must be a finite number > 0", id="lr-inf"),
    pytest.param({"lr": math.nan}, r"lr=nan: must be a finite number > 0", id="lr-nan"),
    pytest.param({"lr": "inf"}, r"lr=inf: must be a finite number > 0", id="lr-inf-str"),
    pytest.param({"lr": 0}, r"lr=0\.0: must be a finite number > 0", id="lr-zero"),
    pytest.param({"lr": -1e-4}, r"lr=-0\.0001: must be", id="lr-negative"),
    pytest.param({"sft_lr": math.inf}, r"sft_lr=inf: must be a finite number > 0", id="sft_lr-inf"),
    pytest.param({"sft_lr": 0}, r"sft_lr=0\.0", id="sft_lr-zero"),
    pytest.param({"temperature": math.inf}, r"temperature=inf: must be a finite number > 0",
                 id="temperature-inf"),
    pytest.param({"temperature": math.nan}, r"temperature=nan", id="temperature-nan"),
    pytest.param({"temperature": 0}, r"temperature=0\.0: .*training rollouts must sample",
                 id="temperature-zero"),
    pytest.param({"temperature": -0.5}, r"temperature=-0\.5", id="temperature-negative"),
    pytest.param({"kl_beta": math.inf}, r"kl_beta=inf: must be a finite number >= 0",
                 id="kl_beta-inf"),
    pytest.param({"max_grad_norm": math.inf}, r"max_grad_norm=inf: .*0 disables clipping",
                 id="max_grad_norm-inf"),
    pytest.param({"weight_decay": math.nan}, r"weight_decay=nan", id="weight_decay-nan"),
    pytest.param({"clip_eps": math.nan}, r"clip_eps=nan: must be in \[0, 1\)", id="clip_eps-nan"),
    pytest.param({"clip_eps_high": math.inf}, r"clip_eps_high=inf", id="clip_eps_high-inf"),
    pytest.param({"sft_target_band": [math.nan, 0.5]}, r"sft_target_band=\[nan, 0\.5\]",
                 id="band-nan"),
    # --- ranges -------------------------------------------------------------------------------
    pytest.param({"kl_beta": -0.1}, r"kl_beta=-0\.1: must be a finite number >= 0 \(0 disables",
                 id="kl_beta-negative"),
    pytest.param({"clip_eps": -0.1}, r"clip_eps=-0\.1: must be in \[0, 1\)", id="clip_eps-negative"),
    pytest.param({"clip_eps": 1.0}, r"clip_eps=1\.0: must be in \[0, 1\)", id="clip_eps-one"),
    pytest.param({"clip_eps_high": -0.1}, r"clip_eps_high=-0\.1: .*null uses clip_eps",
                 id="clip_eps_high-negative"),
    pytest.param({"dro_beta": -1}, r"dro_beta=-1\.0: must be a finite number >= 0",
                 id="dro_beta-negative"),
    pytest.param({"max_grad_norm": -1}, r"max_grad_norm=-1\.0", id="max_grad_norm-negative"),
    pytest.param({"weight_decay": -0.1}, r"weight_decay=-0\.1", id="weight_decay-negative"),
    pytest.param({"warmup_steps": 200}, r"warmup_steps=200 is longer than the run \(steps=120\).*"
                 r"warmup_steps <= 120", id="warmup-longer-than-run"),
    pytest.param({"warmup_steps": -1}, r"warmup_steps=-1 must be >= 0", id="warmup-negative"),
    pytest.param({"lora_r": 8, "lora_alpha": 0}, r"lora_alpha=0 with lora_r=8: .*must be > 0",
                 id="lora_alpha-zero"),
    pytest.param({"lora_r": 8, "lora_alpha": -16}, r"lora_alpha=-16", id="lora_alpha-negative"),
    pytest.param({"lora_r": -1}, r"lora_r=-1 must be >= 0", id="lora_r-negative"),
    pytest.param({"cpu_threads": -1}, r"cpu_threads=-1 must be >= 0", id="cpu_threads-negative"),
    pytest.param({"group_size": 1}, r"group_size=1: .*--group-size 2", id="group_size-one"),
    pytest.param({"groups_per_batch": 0}, r"groups_per_batch=0 must be >= 1", id="groups_per_batch"),
    pytest.param({"steps": 0}, r"steps=0 must be >= 1", id="steps-zero"),
    pytest.param({"max_tokens": 0}, r"max_tokens=0 must be >= 1", id="max_tokens-zero"),
    pytest.param({"micro_batch_size": 0}, r"micro_batch_size=0 must be >= 1", id="micro_batch"),
    pytest.param({"eval_problems": 0}, r"eval_problems=0 must be >= 1", id="eval_problems-zero"),
    pytest.param({"sft_batch_size": 0}, r"sft_batch_size=0 must be >= 1", id="sft_batch_size"),
    pytest.param({"sft_steps": -1}, r"sft_steps=-1 must be >= 0", id="sft_steps-negative"),
    pytest.param({"eval_every": -1}, r"eval_every=-1 must be >= 0", id="eval_every-negative"),
    pytest.param({"save_every": -1}, r"save_every=-1 must be >= 0", id="save_every-negative"),
    pytest.param({"max_turns": 0}, r"max_turns=0 must be >= 1, or null", id="max_turns-zero"),
    pytest.param({"seed": -1}, r"seed=-1 must be in \[0, 2\*\*31\)", id="seed-negative"),
    pytest.param({"seed": 2**40}, r"seed=1099511627776", id="seed-huge"),
    pytest.param({"sft_target_band": [0.6, 0.4]}, r"need 0 <= low <= high <= 1", id="band-reversed"),
    pytest.param({"sft_target_band": [0.2, 1.5]}, r"need 0 <= low <= high <= 1", id="band-above-1"),
    # --- choices --------------------------------------------------------------------------------
    pytest.param({"loss": "cipso"}, r"unknown loss 'cipso'.*Did you mean 'cispo'", id="loss"),
    pytest.param({"loss_reduction": "mean"}, r"unknown loss_reduction 'mean'; choose one of "
                 r"token_sum, seq_mean, token_mean", id="loss_reduction"),
    pytest.param({"advantage_scale": "std"}, r"unknown advantage_scale 'std'.*or null",
                 id="advantage_scale"),
    pytest.param({"lr_schedule": "exp"}, r"unknown lr_schedule 'exp'; choose one of constant",
                 id="lr_schedule"),
    pytest.param({"sampler": "vlm"}, r"unknown sampler 'vlm'.*Did you mean 'vllm'", id="sampler"),
    pytest.param({"sampler": "vllm"}, r"sampler='vllm' needs vLLM.*--sampler hf",
                 id="sampler-vllm-missing"),
    pytest.param({"device": "gpu"}, r"unknown device 'gpu'; choose one of auto, cpu, cuda",
                 id="device"),
    pytest.param({"env": " "}, r"env=' ' must not be empty", id="env-empty"),
    pytest.param({"output_dir": ""}, r"output_dir='' must not be empty", id="output_dir-empty"),
    # --- the model: only local checkpoints (the hub is offline) ---------------------------------
    pytest.param({"model": NOT_CACHED}, rf"model='{NOT_CACHED}' is neither a local checkpoint "
                 r"directory nor in the local Hugging Face cache.*--model tiny", id="model-hub-id"),
    pytest.param({"model": "./no/such/dir"}, r"model='./no/such/dir' is neither", id="model-path"),
    pytest.param({"model": "README.md"}, r"model='README.md' is a file", id="model-file"),
    # --- the env: registered, and it builds and resets with env_kwargs -----------------------
    pytest.param({"env": "llm/Mathh-v0"}, r"unknown environment id 'llm/Mathh-v0'\. Did you mean: "
                 r"'llm/Math-v0'", id="env-typo"),
    pytest.param({"env": "CartPol-v1"}, r"Did you mean: 'CartPole-v1'", id="env-typo-gymnasium"),
    pytest.param({"env": "CartPole-v1"}, r"env='CartPole-v1' has a Box observation space, not "
                 r"token sequences", id="env-not-text"),
    pytest.param({"env_kwargs": {"digitz": 3}}, r"env_kwargs: llm/Math-v0 has no knob 'digitz' "
                 r"\(did you mean 'digits'\?\); its knobs are digits, operators", id="knob-typo"),
    pytest.param({"env_kwargs": {"max_value": 99}}, r"has no knob 'max_value'; its knobs are",
                 id="knob-of-old-help"),
    pytest.param({"env_kwargs": {"digits": 99}}, r"env_kwargs=\{'digits': 99\}: llm/Math-v0 "
                 r"refused them: digits must be in \[1, 18\], got 99", id="knob-out-of-range"),
    pytest.param({"env_kwargs": {"digits": "3"}}, r"digits must be an integer in \[1, 18\], got '3'",
                 id="knob-wrong-type"),
    pytest.param({"env": "llm/GuessNumber-v0", "env_kwargs": {"max_number": 0}},
                 r"llm/GuessNumber-v0 refused them: max_number must be in", id="knob-guess-number"),
    pytest.param({"env": "llm/TicTacToe-v0", "env_kwargs": {"opponent": "perfect"}},
                 r"llm/TicTacToe-v0 refused them: .*opponent", id="knob-tictactoe"),
    pytest.param({"env_kwargs": {"renderer": "nope"}}, r"refused them: .*nope", id="env-renderer"),
    pytest.param({"env_kwargs": {"split": "test"}}, r"env_kwargs must not set 'split'",
                 id="env_kwargs-split"),
    pytest.param({"env_kwargs": {"seed": 1}}, r"env_kwargs must not set 'seed': set the config's seed",
                 id="env_kwargs-seed"),
]

# Config files whose text (not only values) matters: PyYAML's reading, syntax errors, layout.
BAD_FILES = [
    pytest.param("run.yaml", "steps: 2.5\n", r"steps=2\.5 must be a whole number", id="yaml-float"),
    pytest.param("run.yaml", "bf16: maybe\n", r"bf16='maybe' must be true or false", id="yaml-bool"),
    pytest.param("run.yaml", "lr: .nan\n", r"lr=nan: must be a finite", id="yaml-nan"),
    pytest.param("run.yaml", "temperature: .inf\n", r"temperature=inf: must be", id="yaml-inf"),
    pytest.param("run.yaml", "1: 2\n", r"config keys must be field names \(strings\)", id="yaml-key"),
    pytest.param("run.yaml", "grup_size: 8\n", r"did you mean 'group_size'", id="yaml-unknown-key"),
    pytest.param("run.yaml", "steps: [1\n", r"config file '.*run\.yaml' is not valid YAML: .* at "
                 r"line 2, column 1", id="yaml-syntax"),
    pytest.param("run.yaml", "- steps: 1\n", r"must hold a mapping of config keys .*got a list",
                 id="yaml-list"),
    pytest.param("run.json", "{steps: 1}", r"config file '.*run\.json' is not valid JSON: .* at "
                 r"line 1, column 2", id="json-syntax"),
    pytest.param("run.toml", "steps = 1\n", r"use a \.yaml, \.yml or \.json file", id="toml"),
]

BAD_FLAGS = [
    pytest.param(["--steps", "2.5"], r"argument --steps: invalid int value: '2\.5'.*--help",
                 id="flag-int"),
    pytest.param(["--stepz", "3"], r"unrecognized arguments: --stepz 3\. Did you mean '--steps'",
                 id="flag-unknown"),
    pytest.param(["--lr", "inf"], r"lr=inf: must be a finite number > 0", id="flag-lr-inf"),
    pytest.param(["--temperature", "nan"], r"temperature=nan", id="flag-temperature-nan"),
    pytest.param(["--env-kwargs", "{bad"], r"argument --env-kwargs: not valid JSON", id="flag-json"),
    pytest.param(["--env-kwargs", "[1]"], r"must be a JSON object", id="flag-json-list"),
    pytest.param(["--env-kwargs", '{"digitz": 3}'], r"has no knob 'digitz'", id="flag-knob"),
    pytest.param(["--env-kwargs", '{"digits": 0}'], r"digits must be in \[1, 18\], got 0",
                 id="flag-knob-value"),
    pytest.param(["--model", NOT_CACHED], r"is neither a local checkpoint directory",
                 id="flag-model"),
    pytest.param(["--config", "no/such/file.yaml"], r"config file 'no/such/file\.yaml' does not "
                 "exist", id="flag-missing-file"),
    pytest.param(["--warmup-steps", "10", "--steps", "5"], r"warmup_steps=10 is longer than the run",
                 id="flag-warmup"),
]


def _assert_one_config_error(argv: list[str], pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern) as exc:
        config_from_args(argv).validate()
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("values, pattern", BAD_VALUES)
def test_bad_value_is_one_config_error(values, pattern, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # "README.md" is a file here
    path = tmp_path / "run.json"
    path.write_text(json.dumps(values))  # json writes inf/nan as Infinity/NaN and reads them back
    _assert_one_config_error(["--config", str(path)], pattern)


@pytest.mark.parametrize("name, text, pattern", BAD_FILES)
def test_bad_config_file_is_one_config_error(name, text, pattern, tmp_path):
    path = tmp_path / name
    path.write_text(text)
    _assert_one_config_error(["--config", str(path)], pattern)


@pytest.mark.parametrize("argv, pattern", BAD_FLAGS)
def test_bad_flag_is_one_config_error(argv, pattern):
    _assert_one_config_error(argv, pattern)


def test_types_are_checked_for_directly_built_configs_too():
    with pytest.raises(ConfigError, match=r"steps=2\.5 must be a whole number"):
        GRPOConfig(steps=2.5).validate(check_env=False)
    with pytest.raises(ConfigError, match=r"lr='3e-4' must be a number"):  # no YAML conversion here
        GRPOConfig(lr="3e-4").validate(check_env=False)


def test_hub_id_that_is_not_cached_is_refused():
    from huggingface_hub import try_to_load_from_cache

    if isinstance(try_to_load_from_cache("gpt2", "config.json"), str):
        pytest.skip("gpt2 is in this machine's HF cache, so it is a valid --model here")
    with pytest.raises(ConfigError, match=r"model='gpt2' is neither .*huggingface-cli download gpt2"):
        GRPOConfig(model="gpt2").validate(check_env=False)


def test_model_directory_needs_a_config_json(tmp_path):
    with pytest.raises(ConfigError, match="a directory without a config.json"):
        GRPOConfig(model=str(tmp_path)).validate(check_env=False)
    (tmp_path / "config.json").write_text("{}")
    GRPOConfig(model=str(tmp_path)).validate(check_env=False)


# --- good configs still validate ------------------------------------------------------------------
def test_yaml_numbers_pyyaml_reads_as_strings_are_converted(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("lr: 3e-4\nsft_lr: 1e-3\nkl_beta: 0\nclip_eps_high: 1\n"
                    "sft_target_band: [0, 1]\n")
    cfg = config_from_args(["--config", str(path)])
    cfg.validate()
    assert (cfg.lr, cfg.sft_lr, cfg.kl_beta, cfg.clip_eps_high) == (3e-4, 1e-3, 0.0, 1.0)
    assert all(type(v) is float for v in (cfg.lr, cfg.kl_beta, cfg.clip_eps_high))
    assert cfg.sft_target_band == (0.0, 1.0)


@pytest.mark.parametrize("values", [
    {},
    {"warmup_steps": 120},  # the whole run warms up: allowed
    {"lora_r": 0, "lora_alpha": 0},  # LoRA off: lora_alpha is not used
    {"lora_r": 8, "lora_alpha": 16},
    {"clip_eps": 0.0, "kl_beta": 0.05, "max_grad_norm": 0, "weight_decay": 0.1, "dro_beta": 0},
    {"max_turns": None, "clip_eps_high": None, "advantage_scale": None, "run_name": "x"},
    {"env_kwargs": {"digits": 3, "renderer": "role_colon"}},
    {"env": "llm/TicTacToe-v0", "env_kwargs": {"illegal_reward": -0.5}, "sft_steps": 0},  # a knob not on the card
    {"env": "llm_gym:llm/Math-v0"},
])
def test_good_configs_validate(values):
    GRPOConfig.from_dict(values).validate()


def test_help_example_for_env_kwargs_names_a_real_knob_of_the_default_env():
    import re

    from trainers.grpo.config import field_docs

    example = re.search(r"`(\{.*?\})`", field_docs()["env_kwargs"]).group(1)
    GRPOConfig(env_kwargs=json.loads(example)).validate()


def test_validate_builds_the_env_without_torch():
    code = ("import sys; from trainers.grpo.config import GRPOConfig; "
            "GRPOConfig(env_kwargs={'digits': 3}).validate(); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


# --- the real command --------------------------------------------------------------------------
_CLI = ("import sys; from llm_gym.cli import main; rc = main(['train', *sys.argv[1:]]); "
        "print('torch imported' if 'torch' in sys.modules else 'torch not imported'); sys.exit(rc)")


@pytest.mark.parametrize("argv, message", [
    (["--env-kwargs", '{"digitz": 3}'], "did you mean 'digits'"),
    (["--model", NOT_CACHED], "is neither a local checkpoint directory"),
    (["--steps", "2.5"], "invalid int value"),
    (["--config", "{yaml}"], "lr=inf"),
])
def test_cli_exits_2_with_one_line_before_importing_torch(argv, message, tmp_path):
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("lr: .inf\n")
    argv = [a.replace("{yaml}", str(bad_yaml)) for a in argv]
    env = {**os.environ, "PYTHONWARNINGS": "default"}  # a warning would be a second line
    out = subprocess.run([sys.executable, "-c", _CLI, *argv, "--output-dir", str(tmp_path / "runs")],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert out.returncode == 2
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("llm-gym train: "), out.stderr
    assert message in lines[0] and "Traceback" not in out.stderr
    assert out.stdout.strip() == "torch not imported"
    assert not (tmp_path / "runs").exists()


class NoGoldGuessNumber(GuessNumberSource):
    """A multi-turn env with neither reference answers nor a gold scripted case."""

    def scripted_cases(self):
        return []


def test_sft_warm_start_on_a_multi_turn_env_without_a_gold_case_is_a_config_error():
    from llm_gym.registration import register_env
    from trainers.grpo.config import ConfigError, GRPOConfig

    register_env("test/NoGoldGuessNumber-v0", "tests.trainers.grpo.test_config_errors:NoGoldGuessNumber")
    env_id = "test/NoGoldGuessNumber-v0"
    assert GRPOConfig(env="llm/GuessNumber-v0", sft_steps=0).sft_source() == "none"
    with pytest.raises(ConfigError, match=r"no reference answers for the SFT warm start.*"
                                          r"no gold scripted case.*--no-sft"):
        GRPOConfig(env=env_id).validate()
    GRPOConfig(env=env_id, sft_steps=0).validate()  # RL only is fine


@pytest.mark.parametrize("env_id", ["llm/GuessNumber-v0", "llm/Calculator-v0"])
def test_sft_warm_start_on_a_multi_turn_env_with_a_gold_case_validates(env_id):
    import llm_gym
    from trainers.grpo.config import GRPOConfig
    from trainers.grpo.fit import SFT_GOLD, first_gold_case

    if first_gold_case(llm_gym.make(env_id, split="train").unwrapped.source) is None:
        pytest.skip(f"{env_id} declares no gold scripted case (yet)")
    cfg = GRPOConfig(env=env_id)
    cfg.validate()  # the default run, SFT on: gold scripted episodes are its examples
    assert cfg.sft_source() == SFT_GOLD
