"""Interpreter shutdown with live envs is silent: TextEnv's private event loops are closed by a
`weakref.finalize` (run at exit, before modules are torn down), not by a `__del__` that used to
meet half-destroyed `selectors`/`asyncio` modules and print "Exception ignored in ...".
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import gymnasium as gym
    import numpy
    import llm_gym
    import llm_gym.text_env
    from llm_gym import GymEnvGroupBuilder

    # Envs parked where module teardown reaches them late: other modules' globals, a cycle,
    # and the grouping wrapper's env pool.
    import gymnasium.core
    gymnasium.core._kept = gym.make("llm/Math-v0")  # torn down after selectors/asyncio
    gymnasium.core._kept.reset(seed=0)
    llm_gym.text_env._kept = gym.make("llm/Math-v0")
    llm_gym.text_env._kept.reset(seed=1)
    numpy._kept = [gym.make("llm/GuessNumber-v0") for _ in range(3)]
    for i, env in enumerate(numpy._kept):
        env.reset(seed=i)
        env.step(numpy.asarray(list(b"5") + [260]))
    cycle = {"env": gym.make("llm/Math-v0")}
    cycle["self"] = cycle
    cycle["env"].reset(seed=2)
    gym._kept_cycle = cycle

    async def group():
        builder = GymEnvGroupBuilder("llm/Math-v0", group_size=4, seed=3)
        envs = await builder.make_envs()
        for env in envs:
            await env.initial_observation()
        await builder.cleanup()  # -> the per-process pool, alive until exit
        live = GymEnvGroupBuilder("llm/Math-v0", group_size=2, seed=4)
        for env in await live.make_envs():  # never cleaned up
            await env.initial_observation()
        gym._kept_builder = live

    def run(coro):  # no module-level `import asyncio`: it changes the teardown order
        import asyncio
        asyncio.run(coro)

    run(group())
    closed = gym.make("llm/Math-v0")
    closed.reset(seed=5)
    closed.close()
    closed.close()  # twice is fine
    print("done")
    """
)


def test_exit_with_live_envs_prints_nothing_to_stderr():
    proc = subprocess.run(
        [sys.executable, "-W", "default", "-c", SCRIPT],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "done"
    assert proc.stderr == "", proc.stderr
