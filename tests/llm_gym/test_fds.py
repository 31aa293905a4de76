"""File descriptors do not grow with the number of envs (issue 8.1).

Each `TextEnv` used to own a private asyncio loop (3 fds); the default training pool then held
~1,400 fds and `llm-gym train` died with EMFILE under `ulimit -n 1024`. Now one loop per thread
drives every env's sync calls.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import llm_gym  # noqa: F401  (registers the catalog)
from llm_gym import GymEnvGroupBuilder
from llm_gym.wrappers.grouping import clear_env_pool

ROOT = Path(__file__).resolve().parents[2]


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_two_thousand_envs_add_fewer_than_20_fds():
    before = _open_fds()
    envs = [gym.make("llm/Math-v0") for _ in range(1000)]
    envs += [gym.make("llm/GuessNumber-v0") for _ in range(1000)]
    for i, env in enumerate(envs):
        obs, info = env.reset(seed=i)
        env.step(list(b"5") + [260])
    assert _open_fds() - before < 20
    for env in envs:
        env.close()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_a_default_sized_group_pool_adds_fewer_than_20_fds():
    import asyncio

    clear_env_pool()
    before = _open_fds()

    async def batch(offset: int):
        builders = [GymEnvGroupBuilder("llm/Math-v0", group_size=16, seed=offset + j)
                    for j in range(16)]
        for b in builders:
            for env in await b.make_envs():
                await env.initial_observation()
        for b in builders:
            await b.cleanup()  # back to the pool, alive

    for offset in (0, 100, 200):
        asyncio.run(batch(offset))
    assert _open_fds() - before < 20
    clear_env_pool()


@pytest.mark.slow
def test_default_sized_train_run_under_ulimit_256(tmp_path):
    """`llm-gym train` at the default group size x groups per batch (16 x 16), a few steps,
    under a soft and hard fd limit of 256."""

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    cmd = [sys.executable, "-m", "trainers.cli_train", "--steps", "2", "--no-sft",
           "--eval-problems", "16", "--eval-every", "0", "--output-dir", str(tmp_path),
           "--run-name", "fds", "--no-progress"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          preexec_fn=limit)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Too many open files" not in proc.stderr
    assert (tmp_path / "fds" / "summary.json").is_file()
