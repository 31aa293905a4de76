"""The `llm-gym` command: torch-free dispatch, help, errors that say what to change, and `plot`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from llm_gym import cli


def test_cli_import_is_torch_free():
    code = ("import sys, llm_gym.cli; bad = [m for m in ('torch', 'transformers', 'trl', "
            "'trainers.grpo.trainer') if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_commands_resolve_lazily_to_callables():
    assert {"train", "plot"} <= set(cli.COMMANDS)
    for name in cli.COMMANDS:
        assert callable(cli.resolve(name))


def test_help_and_unknown_command(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "train" in out and "plot" in out
    assert cli.main(["trian"]) == 2
    assert "Did you mean 'train'" in capsys.readouterr().err


def test_dispatch_still_works_after_the_list_command_ran(capsys):
    # Running `llm-gym list` imports the submodule llm_gym.cli.list, which then shadows the
    # builtin `list` in the package's namespace: the dispatcher must not depend on that builtin.
    assert cli.main(["list", "NoSuchIdAtAll"]) == 0
    assert isinstance(cli.list, type(cli))
    assert cli.main(["trian"]) == 2
    assert "Did you mean 'train'" in capsys.readouterr().err
    assert cli.main(["--help"]) == 0


@pytest.mark.parametrize("argv, message", [
    (["--group-size", "1"], "--group-size 2"),
    (["--env", "llm/Mat-v0"], "llm/Math-v0"),
    (["--loss", "ppo2"], "unknown loss 'ppo2'"),
])
def test_train_bad_config_exits_2_with_the_fix(argv, message, capsys, tmp_path):
    assert cli.main(["train", *argv, "--output-dir", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing was started


def test_train_help_lists_the_flags(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["train", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--env", "--env-kwargs", "--model", "--group-size", "--groups-per-batch",
                 "--max-tokens", "--steps", "--lr", "--loss", "--output-dir", "--seed", "--resume",
                 "--config", "--eval-every", "--save-every", "--temperature", "--micro-batch-size",
                 "--kl-beta", "--sft-steps", "--no-sft", "--bf16", "--lora-r"):
        assert flag in out, flag


def test_plot_writes_a_png(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    lines = [{"step": 0, "eval/accuracy": 0.4}]
    lines += [{"step": i, "reward": 0.3 + i / 50, "correct": 0.3 + i / 50, "loss": 0.1}
              for i in range(1, 11)]
    lines += [{"step": 10, "eval/accuracy": 0.6}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    (run / "summary.json").write_text(json.dumps({"env": "llm/Math-v0", "eval_before_rl": 0.4,
                                                  "eval_after_rl": 0.6}))
    out = tmp_path / "curve.png"
    assert cli.main(["plot", str(run), "--out", str(out)]) == 0
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    assert cli.main(["plot", str(tmp_path / "missing")]) == 2


def test_plot_fits_its_title_and_negative_rewards(tmp_path):
    from trainers.cli_train import _run_figure

    run = tmp_path / ("TicTacToe-v0-importance_sampling-seed0-" + "a-very-long-run-name-" * 4)
    run.mkdir()
    lines = [{"step": i, "reward": -1.0 if i % 3 else 1.0, "correct": i / 10} for i in range(1, 11)]
    lines += [{"step": 10, "eval/accuracy": 0.5}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    (run / "summary.json").write_text(json.dumps({"env": "llm/TicTacToe-v0", "eval_before_rl": 0.1,
                                                  "eval_after_rl": 0.5}))
    fig = _run_figure(run)
    ax = fig.axes[0]
    low, high = ax.get_ylim()
    assert low < -1.0 and high > 1.0  # every reward is inside the plot, with a margin
    fig.canvas.draw()
    title = ax.title.get_window_extent(fig.canvas.get_renderer())
    assert title.x0 >= 0 and title.x1 <= fig.bbox.width and title.y1 <= fig.bbox.height
    assert ax.title.get_text().count("\n") == 1 and "0.10 → 0.50" in ax.title.get_text()
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_train_argparse_errors_are_one_line(capsys):
    assert cli.main(["train", "--steps", "2.5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("llm-gym train: argument --steps")


# --- defaults fitted to the env ------------------------------------------------------------------
def _fitted(argv):
    from trainers.cli_train import config_and_explicit
    from trainers.grpo.fit import fit_to_env

    cfg, explicit = config_and_explicit(argv)
    return cfg, fit_to_env(cfg, explicit)


def test_the_default_run_keeps_its_tuned_defaults():
    cfg, notes = _fitted([])
    assert notes == [] and cfg.max_tokens == 8 and cfg.loss_reduction == "token_sum"


def test_max_tokens_covers_the_envs_longest_reference_answer():
    from llm_gym.scripted import reply_tokens
    from trainers.grpo.fit import reply_need

    need, why, multi_turn = reply_need("llm/Countdown-v0", {})
    assert need > 8 and "reference answers" in why and not multi_turn
    cfg, notes = _fitted(["--env", "llm/Countdown-v0"])
    assert need + 4 <= cfg.max_tokens <= need + 4 + 8 + need // 4
    assert cfg.loss_reduction == "token_mean"
    assert any(n.startswith(f"max_tokens={cfg.max_tokens} (") for n in notes)
    # A reference answer measured directly fits in the fitted budget.
    import llm_gym
    env = llm_gym.make("llm/Countdown-v0", split="train")
    env.reset(seed=3)
    answer = env.unwrapped.current_env.get_reference_response()
    assert len(reply_tokens(env.unwrapped.source.renderer, answer)) <= cfg.max_tokens
    env.close()


def test_fields_the_user_set_are_never_fitted(tmp_path):
    cfg, notes = _fitted(["--env", "llm/Countdown-v0", "--max-tokens", "8",
                          "--loss-reduction", "token_sum"])
    assert notes == [] and cfg.max_tokens == 8 and cfg.loss_reduction == "token_sum"
    config = tmp_path / "c.yaml"
    config.write_text("env: llm/Countdown-v0\nmax_tokens: 40\n")
    cfg, notes = _fitted(["--config", str(config)])
    assert cfg.max_tokens == 40 and cfg.loss_reduction == "token_mean"  # only the unset one moved


def test_multi_turn_envs_get_a_mean_reduction_and_gold_turn_budget():
    cfg, notes = _fitted(["--env", "llm/GuessNumber-v0", "--no-sft"])
    assert cfg.loss_reduction == "token_mean"
    assert any("multi-turn" in n for n in notes)
    cfg, notes = _fitted(["--env", "llm/Calculator-v0"])  # a ~97-token gold tool call
    assert cfg.max_tokens >= 97 and any("gold episode" in n for n in notes)


@pytest.mark.slow
def test_train_prints_what_it_fitted(tmp_path, capsys):
    assert cli.main(["train", "--env", "llm/Countdown-v0", "--no-sft", "--steps", "1",
                     "--group-size", "2", "--groups-per-batch", "1", "--eval-problems", "1",
                     "--output-dir", str(tmp_path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("Defaults fitted to llm/Countdown-v0"))
    assert "max_tokens=" in line and "loss_reduction=token_mean" in line
    config = json.loads(next(tmp_path.glob("*/config.json")).read_text())
    assert config["loss_reduction"] == "token_mean" and config["max_tokens"] > 8
