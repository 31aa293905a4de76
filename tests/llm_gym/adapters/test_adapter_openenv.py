"""OpenEnv adapter: llm-gym envs served by OpenEnv's own FastAPI server (uvicorn on 127.0.0.1, a
random port) and played through OpenEnv's own clients (the WebSocket `EnvClient` session, typed
and generic) by scripted policies; rewards must equal what our Gymnasium env gives for the same
texts."""

from __future__ import annotations

import asyncio
import importlib
import os
import re
import threading

import gymnasium as gym
import numpy as np
import pytest

if os.environ.get("LLM_GYM_REQUIRE_ADAPTERS") == "1":  # make test-adapters: a broken install fails
    importlib.import_module("openenv.core")
else:
    pytest.importorskip("openenv.core", reason="needs openenv-core 0.3 (make test-adapters)")

from tests._adapter_helpers import ensure_catalog  # noqa: E402

ensure_catalog()

from llm_gym.adapters import openenv as adapter  # noqa: E402
from llm_gym.adapters._common import text_to_action  # noqa: E402

MATH = "llm/Math-v0"
GUESS = "llm/GuessNumber-v0"


def gym_return(env_id: str, task_seed: int, moves, **knobs) -> float:
    """Our Gymnasium env's return for these (text, truncated) moves on the task's seed."""
    env = gym.make(env_id, **knobs)
    env.reset(seed=int(task_seed))
    total, done = 0.0, False
    for text, truncated in moves:
        assert not done
        action = text_to_action(env.unwrapped.renderer, text, terminated=not truncated)
        _obs, reward, terminated, trunc, _info = env.step(np.asarray(action, dtype=np.int64))
        total += float(reward)
        done = terminated or trunc
    assert done
    return total


def math_move(text: str) -> tuple[str, bool]:
    a, b = map(int, re.search(r"(\d+)\+(\d+)=", text).groups())
    answer = a + b
    return [(str(answer), False), (str(answer + 1), False), ("no clue", False),
            (str(answer), True), ("", False)][answer % 5]


class BinarySearch:
    """Guess-the-number by halving, with one garbage reply after the first 'Lower.'."""

    def __init__(self, intro: str):
        self.low, self.high = map(int, re.search(r"from (\d+) to (\d+)", intro).groups())
        self.last: int | None = None
        self.garbage_sent = False

    def move(self, reply: str | None) -> str:
        if reply is not None and self.last is not None:
            if reply.startswith("Higher"):
                self.low = self.last + 1
            elif reply.startswith("Lower"):
                self.high = self.last - 1
                if not self.garbage_sent:
                    self.garbage_sent, self.last = True, None
                    return "hmm, no idea"
        self.last = (self.low + self.high) // 2
        return str(self.last)


@pytest.fixture(scope="module")
def math_server():
    with adapter.serve(MATH, digits=2) as base_url:
        yield base_url
    assert not [t for t in threading.enumerate() if t.name == f"openenv-{MATH}"]  # stopped


def test_single_turn_over_openenv_client(math_server):
    outcomes = set()
    with adapter.LLMGymEnvClient(base_url=math_server).sync() as env:
        for task_seed in range(15):
            result = env.reset(seed=task_seed)
            obs = result.observation
            assert not result.done and obs.task_seed == task_seed
            assert obs.messages[-1]["role"] == "user" and re.search(r"\d+\+\d+=", obs.text)
            move = math_move(obs.text)
            result = env.step(adapter.TextAction(message=move[0], truncated=move[1]))
            assert result.done and isinstance(result.reward, float)
            assert result.reward == pytest.approx(gym_return(MATH, task_seed, [move], digits=2))
            a, b = map(int, re.search(r"(\d+)\+(\d+)=", obs.text).groups())
            assert result.observation.metrics["correct"] == float(move[0] == str(a + b))
            state = env.state()
            assert state.done and state.step_count == 1 and state.episode_return == result.reward
            outcomes.add(round(result.reward, 3))
    assert {1.0, 0.0, -0.1} <= outcomes and len(outcomes) >= 4  # truncated is its own value


def test_multi_turn_sessions_in_parallel():
    knobs = {"max_number": 16, "max_turns": 6}

    async def play(base_url: str, task_seed: int):
        async with adapter.LLMGymEnvClient(base_url=base_url) as env:
            result = await env.reset(seed=task_seed)
            policy = BinarySearch(result.observation.text)
            moves, total, reply = [], 0.0, None
            while not result.done:
                move = policy.move(reply)
                moves.append((move, False))
                result = await env.step(adapter.TextAction(message=move))
                total += result.reward
                reply = result.observation.text
                if not result.done:  # the env's reply is plain text, no chat markup
                    assert reply in ("Higher.", "Lower.") or reply.startswith("Invalid")
            return task_seed, moves, total

    async def main(base_url: str):
        return await asyncio.gather(*(play(base_url, s) for s in range(6, 12)))

    with adapter.serve(GUESS, max_concurrent_envs=6, **knobs) as base_url:
        games = asyncio.run(main(base_url))
    totals = []
    for task_seed, moves, total in games:
        assert total == pytest.approx(gym_return(GUESS, task_seed, moves, **knobs))
        assert len(moves) >= 2
        totals.append(round(total, 6))
    # binary search always wins; the one garbage turn costs exactly the 0.1 penalty
    assert set(totals) == {1.0, 0.9}, totals


def test_generic_client_and_http_endpoints(math_server):
    import httpx
    from openenv import GenericEnvClient

    assert httpx.get(f"{math_server}/health").status_code == 200
    schema = httpx.get(f"{math_server}/schema").json()
    assert "message" in schema["action"]["properties"]
    with GenericEnvClient(base_url=math_server).sync() as env:
        result = env.reset(seed=3)
        move = math_move(result.observation["text"])
        result = env.step({"message": move[0], "truncated": move[1]})
        assert result.reward == pytest.approx(gym_return(MATH, 3, [move], digits=2))
        with pytest.raises(RuntimeError, match="call reset"):  # protocol misuse: a one-line error
            env.step({"message": "1"})
        with pytest.raises(RuntimeError):  # not a TextAction
            env.step({"move": 1})


def test_environment_without_server_and_bad_inputs():
    env = adapter.LLMGymEnvironment(GUESS, max_number=8, range_starts=1)  # the classic 1..8
    obs = env.reset(seed=5)
    assert obs.text.startswith("Guess my number from 1 to 8") and not obs.done
    obs = env.step(adapter.TextAction(message="not a number at all"))
    assert obs.reward == pytest.approx(-0.1) and not obs.done  # bad output: a defined reward
    assert obs.text.startswith("Invalid")
    assert env.get_metadata().name == GUESS
    with pytest.raises(ValueError, match="Did you mean 'llm/Math-v0'"):
        adapter.create_app("llm/Maths-v0")
    with pytest.raises(ValueError, match="seed and episode_id only"):
        env.reset(seed=1, difficulty=3)
    with pytest.raises(RuntimeError, match="call reset"):
        adapter.LLMGymEnvironment(MATH).step(adapter.TextAction(message="1"))


def test_missing_package_names_the_install_command(monkeypatch):
    import importlib.util
    import sys

    monkeypatch.setitem(sys.modules, "openenv.core.client_types", None)  # as if the package were not installed
    spec = importlib.util.spec_from_file_location("_no_openenv_probe", adapter.__file__)
    with pytest.raises(ImportError, match=re.escape("pip install 'openenv-core>=0.3,<0.4'")):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
