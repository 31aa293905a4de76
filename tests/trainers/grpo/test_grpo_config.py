"""GRPOConfig: documented fields, file + flag precedence, and bad configs that fail at start with a
message saying what to change."""

from __future__ import annotations

import dataclasses
import json

import pytest

from trainers.cli_train import config_from_args
from trainers.grpo.config import ConfigError, GRPOConfig, field_docs


def test_every_field_is_documented_where_declared():
    docs = field_docs()
    missing = [f.name for f in dataclasses.fields(GRPOConfig) if not docs.get(f.name)]
    assert missing == []


def test_defaults_validate():
    GRPOConfig().validate()


def test_group_size_one_is_rejected_with_the_fix():
    with pytest.raises(ConfigError, match=r"group_size=1.*--group-size 2"):
        GRPOConfig(group_size=1).validate()


def test_unknown_env_suggests_close_matches():
    with pytest.raises(ConfigError, match=r"unknown environment id 'llm/Mathh-v0'.*'llm/Math-v0'"):
        GRPOConfig(env="llm/Mathh-v0").validate()


def test_unknown_loss_lists_the_choices():
    with pytest.raises(ConfigError, match=r"unknown loss 'cipso'.*Did you mean 'cispo'"):
        GRPOConfig(loss="cipso").validate(check_env=False)
    with pytest.raises(ConfigError, match="loss_reduction"):
        GRPOConfig(loss_reduction="mean").validate(check_env=False)


@pytest.mark.parametrize("bad", [{"temperature": 0.0}, {"steps": 0}, {"lr_schedule": "exp"},
                                 {"sft_target_band": (0.6, 0.4)}, {"micro_batch_size": 0}])
def test_other_bad_values(bad):
    with pytest.raises(ConfigError):
        GRPOConfig(**bad).validate(check_env=False)


def test_file_then_flags_precedence(tmp_path):
    yaml_file = tmp_path / "run.yaml"
    yaml_file.write_text("group_size: 4\nsteps: 7\nenv_kwargs: {digits: 1}\nsft_target_band: [0.3, 0.5]\n")
    cfg = config_from_args(["--config", str(yaml_file), "--steps", "3", "--loss", "ppo"])
    assert (cfg.group_size, cfg.steps, cfg.loss) == (4, 3, "ppo")  # file, flag, flag
    assert cfg.env_kwargs == {"digits": 1} and cfg.sft_target_band == (0.3, 0.5)
    json_file = tmp_path / "run.json"
    json_file.write_text(json.dumps({"lr": 1e-4, "kl_beta": 0.1}))
    cfg = config_from_args(["--config", str(json_file), "--no-sft", "--env-kwargs", '{"digits": 3}'])
    assert (cfg.lr, cfg.kl_beta, cfg.sft_steps, cfg.env_kwargs) == (1e-4, 0.1, 0, {"digits": 3})


def test_unknown_key_in_file_suggests_the_field(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("grup_size: 8\n")
    with pytest.raises(ConfigError, match="did you mean 'group_size'"):
        config_from_args(["--config", str(f)])


def test_example_configs_load_and_validate():
    from pathlib import Path

    files = sorted((Path(__file__).resolve().parents[3] / "configs").glob("*.yaml"))
    assert files, "configs/ should hold example YAML files"
    for f in files:
        GRPOConfig.from_file(f).validate()


def test_model_with_too_small_vocab_fails_before_training(tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    from trainers.grpo.trainer import train
    from trainers.models import byte_hf_tokenizer

    small = LlamaForCausalLM(LlamaConfig(vocab_size=200, hidden_size=16, intermediate_size=32,
                                         num_hidden_layers=1, num_attention_heads=2,
                                         num_key_value_heads=2))
    small.save_pretrained(tmp_path / "small")
    byte_hf_tokenizer().save_pretrained(tmp_path / "small")
    cfg = GRPOConfig(model=str(tmp_path / "small"), output_dir=str(tmp_path / "runs"),
                     progress=False)
    with pytest.raises(ValueError, match=r"200 embedding rows.*261"):
        train(cfg)
    assert not (tmp_path / "runs").exists()  # failed before writing anything


def test_vllm_backend_without_vllm_says_how_to_install_it():
    import importlib.util

    from trainers.sampling import vllm_backend

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here (tests/vllm covers the backend)")
    with pytest.raises(ImportError, match="vllm"):
        vllm_backend.get_engine(GRPOConfig(sampler="vllm"))
