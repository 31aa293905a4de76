"""verifiers 0.4 adapter: llm-gym envs run through verifiers' own eval path (`run_eval`, the code
behind `vf-eval`) against a scripted OpenAI-compatible chat-completions server on loopback; the
rewards verifiers records must be exactly what our Gymnasium env gives for the same texts."""

from __future__ import annotations

import importlib
import json
import os
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import gymnasium as gym
import numpy as np
import pytest

if os.environ.get("LLM_GYM_REQUIRE_ADAPTERS") == "1":  # make test-adapters: a broken install fails
    importlib.import_module("verifiers.v1")
else:
    pytest.importorskip("verifiers.v1", reason="needs verifiers 0.4 (make test-adapters)")

from tests._adapter_helpers import ensure_catalog  # noqa: E402

ensure_catalog()

from llm_gym.adapters import verifiers as adapter  # noqa: E402
from llm_gym.adapters._common import text_to_action  # noqa: E402

MATH = "llm/Math-v0"
GUESS = "llm/GuessNumber-v0"


# --- a scripted OpenAI-compatible server on 127.0.0.1 ------------------------------------------


class StubModel:
    """`POST /v1/chat/completions` → `policy(messages)` as a chat.completion; every request body
    is kept in `requests` (a test-sized list)."""

    def __init__(self, policy):
        self.policy = policy
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                if not self.path.endswith("/chat/completions"):
                    self.send_error(404)
                    return
                with stub._lock:
                    stub.requests.append(body)
                try:
                    content, finish = stub.policy(body["messages"])
                except Exception as exc:  # a broken model server: HTTP 500
                    self.send_error(500, str(exc))
                    return
                payload = json.dumps({
                    "id": f"chatcmpl-{len(stub.requests)}", "object": "chat.completion",
                    "created": int(time.time()), "model": body.get("model", "stub"),
                    "choices": [{"index": 0, "finish_reason": finish,
                                 "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):  # keep test output quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive()


def _content(message: dict) -> str:
    content = message.get("content") or ""
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def math_policy(messages):
    """Right for some sums, wrong or malformed for others, by the sum's value mod 6."""
    a, b = map(int, re.search(r"(\d+)\+(\d+)=", _content(messages[-1])).groups())
    answer = a + b
    return {
        0: (str(answer), "stop"),                 # correct
        1: (f"\\boxed{{{answer}}}", "stop"),      # correct, boxed
        2: (str(answer + 1), "stop"),             # a well-formed wrong number
        3: ("I think it is", "stop"),             # no number: format penalty
        4: (str(answer), "length"),               # right digits, but cut off by max_tokens
        5: (None, "stop"),                        # no content at all
    }[answer % 6]


def guess_policy(messages):
    """Binary search over the conversation so far, except one garbage reply after the first
    'Lower.' (an invalid turn, which costs the env's penalty)."""
    intro = _content(messages[0 if messages[0]["role"] != "system" else 1])
    low, high = map(int, re.search(r"from (\d+) to (\d+)", intro).groups())
    last, garbage_sent = None, False
    for m in messages:
        text = _content(m)
        if m["role"] == "assistant":
            last = int(text) if text.strip().isdigit() else None
            garbage_sent = garbage_sent or last is None
        elif last is not None and text.startswith("Higher"):
            low = last + 1
        elif last is not None and text.startswith("Lower"):
            high = last - 1
    if messages[-1]["role"] == "user" and _content(messages[-1]).startswith("Lower") and not garbage_sent:
        return "no idea, sorry", "stop"
    return str((low + high) // 2), "stop"


def sampled_replies(trace) -> list[tuple[str, bool]]:
    """The model's messages as verifiers recorded them (its own trace, not the adapter's notes),
    with whether each call finished on its own."""
    replies = [node.message.content or "" for node in trace.nodes if node.sampled]
    finished = [call.finish_reason != "length" for call in trace.calls]
    assert len(replies) == len(finished)
    return list(zip(replies, finished))


def gym_return(env_id: str, task_seed: int, replies, **knobs) -> float:
    """Our Gymnasium env's return for these texts: reset on the task's seed, step each reply."""
    env = gym.make(env_id, **knobs)
    env.reset(seed=int(task_seed))
    total, done = 0.0, False
    for text, finished in replies:
        assert not done, "verifiers sent a reply after our episode ended"
        action = text_to_action(env.unwrapped.renderer, text, terminated=finished)
        _obs, reward, terminated, truncated, _info = env.step(np.asarray(action, dtype=np.int64))
        total += float(reward)
        done = terminated or truncated
    assert done, "the episode should be over after the recorded replies"
    return total


# --- tests ----------------------------------------------------------------------------------------


def test_single_turn_rewards_are_the_envs(tmp_path):
    with StubModel(math_policy) as stub:
        episodes = adapter.evaluate(MATH, n=16, seed=1, model="stub-model", base_url=stub.base_url,
                                    api_key_var="LLM_GYM_STUB_KEY", output_dir=tmp_path,
                                    sampling={"max_tokens": 7, "temperature": 0.0}, digits=2)
    assert len(episodes) == 16 and len(stub.requests) == 16
    # verifiers applied the run's model and sampling settings to every call
    assert all(r["model"] == "stub-model" and r["max_tokens"] == 7 for r in stub.requests)
    assert all(e.ok and len(e.traces) == 1 for e in episodes)
    seen_outcomes = set()
    for episode in episodes:
        trace = episode.traces[0]
        data = trace.task.data
        replies = sampled_replies(trace)
        assert len(replies) == 1
        reward = trace.rewards["env_reward"].score
        assert reward == pytest.approx(gym_return(MATH, data.task_seed, replies, digits=2))
        assert trace.reward == pytest.approx(reward)  # the rubric has no other reward
        a, b = map(int, re.search(r"(\d+)\+(\d+)=", data.prompt_text).groups())
        expected = {0: 1.0, 1: 1.0, 2: 0.0, 3: -0.1, 5: -0.1}.get((a + b) % 6)
        if expected is not None:
            assert reward == pytest.approx(expected)
        else:  # truncated: the env's truncation penalty, never full credit
            assert 0.0 < reward < 1.0
        assert trace.metrics["env/correct"] == float((a + b) % 6 in (0, 1, 4))  # env's own metric
        seen_outcomes.add((a + b) % 6)
    assert seen_outcomes == set(range(6))  # every scripted outcome was compared
    # verifiers wrote its own trace file for the run
    assert any(p.name == "traces.jsonl" for p in tmp_path.rglob("*"))


def test_multi_turn_env_plays_the_user(tmp_path):
    knobs = {"max_number": 16, "max_turns": 6}
    with StubModel(guess_policy) as stub:
        episodes = adapter.evaluate(GUESS, n=6, seed=1, model="stub-model", base_url=stub.base_url,
                                    api_key_var="LLM_GYM_STUB_KEY", output_dir=tmp_path, **knobs)
    assert len(episodes) == 6 and all(e.ok for e in episodes)
    rewards = []
    for episode in episodes:
        trace = episode.traces[0]
        replies = sampled_replies(trace)
        reward = trace.rewards["env_reward"].score
        assert reward == pytest.approx(gym_return(GUESS, trace.task.data.task_seed, replies, **knobs))
        # the env's replies reached the model as plain user turns, no chat markup
        users = [n.message.content for n in trace.nodes if n.message.role == "user"]
        low, high = map(int, re.match(r"Guess my number from (\d+) to (\d+)\.", users[0]).groups())
        assert high - low + 1 == 16
        assert all(u in ("Higher.", "Lower.") or u.startswith("Invalid") for u in users[1:])
        assert not any("<|im_start|>" in u for u in users)
        rewards.append(reward)
    # binary search always wins; a garbage turn costs exactly the 0.1 penalty
    assert set(np.round(rewards, 6)) <= {1.0, 0.9}
    assert 1.0 in np.round(rewards, 6) and 0.9 in np.round(rewards, 6)


def tictactoe_policy(messages):
    """Take the lowest free cell of the board in the env's last message."""
    board = re.findall(r"^([1-9X O]\|[1-9X O]\|[1-9X O])$", _content(messages[-1]), re.M)
    free = [c for row in board for c in row.split("|") if c.isdigit()]
    return (free[0] if free else "1"), "stop"


def test_multi_turn_against_a_random_opponent(tmp_path):
    with StubModel(tictactoe_policy) as stub:
        episodes = adapter.evaluate("llm/TicTacToe-v0", n=4, seed=2, model="stub-model",
                                    base_url=stub.base_url, api_key_var="LLM_GYM_STUB_KEY",
                                    output_dir=tmp_path)
    assert len(episodes) == 4 and all(e.ok for e in episodes)
    for episode in episodes:
        trace = episode.traces[0]
        replies = sampled_replies(trace)
        assert len(replies) >= 2  # several moves per game
        assert trace.rewards["env_reward"].score == pytest.approx(
            gym_return("llm/TicTacToe-v0", trace.task.data.task_seed, replies))


def test_a_failing_model_server_fails_the_rollout_not_the_reward(tmp_path):
    def broken(messages):
        raise RuntimeError("model overloaded")

    with StubModel(broken) as stub:
        episodes = adapter.evaluate(MATH, n=2, model="stub-model", base_url=stub.base_url,
                                    api_key_var="LLM_GYM_STUB_KEY", output_dir=tmp_path)
    assert len(episodes) == 2 and len(stub.requests) >= 2
    for episode in episodes:  # verifiers' own error record; no reward is invented
        assert not episode.ok
        assert all(r is None for r in episode.traces[0].rewards.values())


def test_bad_inputs_are_one_line_errors():
    with pytest.raises(ValueError, match="Did you mean 'llm/Math-v0'"):
        adapter.env_config("llm/Maths-v0")
    with pytest.raises(ValueError, match="base_url must be an http"):
        adapter.evaluate(MATH, model="m", base_url="127.0.0.1:9")
    with pytest.raises(ValueError, match="n must be a non-negative int"):
        adapter.env_config(MATH, n=-1)
    with pytest.raises(ValueError, match="num_rollouts must be a positive int"):
        adapter.evaluate(MATH, model="m", base_url="http://127.0.0.1:9/v1", num_rollouts=0)
    with pytest.raises(ValueError, match="taskset.env"):
        list(adapter.LLMGymTaskset(adapter.LLMGymTasksetConfig()).load())


def test_taskset_rows_match_gym_reset():
    taskset = adapter.LLMGymTaskset(adapter.LLMGymTasksetConfig(env=MATH, n=4, seed=3))
    tasks = list(taskset)
    assert [t.data.idx for t in tasks] == [0, 1, 2, 3]
    for task in tasks:
        _obs, info = gym.make(MATH).reset(seed=task.data.task_seed)
        assert task.data.prompt_text in info["text"]
        assert not task.data.multi_turn
    # verifiers resolves the adapter by its id
    from verifiers.v1.utils.loaders import environment_class, taskset_class

    assert taskset_class(adapter.TASKSET_ID) is adapter.LLMGymTaskset
    assert environment_class(adapter.TASKSET_ID) is adapter.LLMGymEnv
    # ... also from a plain config dict, as `vf-eval` parses it
    from verifiers.v1.configs.cli.eval import EvalConfig

    config = EvalConfig.model_validate(
        {"env": {"taskset": {"id": adapter.TASKSET_ID, "env": MATH, "n": 2}}, "push": False})
    assert isinstance(config.env, adapter.LLMGymEnvConfig)
    assert isinstance(config.env.taskset, adapter.LLMGymTasksetConfig)
    assert isinstance(config.env.agent.harness, adapter.LLMGymChatHarnessConfig)
    assert config.env.agent.runtime.type == "subprocess"  # never a remote sandbox by default


def test_missing_package_names_the_install_command(monkeypatch):
    import importlib.util
    import sys

    monkeypatch.setitem(sys.modules, "verifiers.v1", None)  # as if the package were not installed
    spec = importlib.util.spec_from_file_location("_no_verifiers_probe", adapter.__file__)
    with pytest.raises(ImportError, match=re.escape("pip install 'verifiers>=0.4,<0.5'")):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


def test_readme_api_stack_example_runs(tmp_path, monkeypatch):
    """The README's ```py block for verifiers + OpenEnv, run as written except that its model
    server is the loopback stub (the README points at a hosted API)."""
    pytest.importorskip("openenv", reason="needs openenv-core (make test-adapters)")
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    (block,) = [b for b in re.findall(r"```py\n(.*?)```", readme, flags=re.S) if "llm_vf" in b]
    with StubModel(math_policy) as stub:
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("OPENAI_API_KEY", "stub-key")
        code = block.replace('"https://api.openai.com/v1"', repr(stub.base_url))
        namespace: dict = {}
        exec(compile(code, "README.md", "exec"), namespace)
    assert len(namespace["episodes"]) == 8 and all(e.ok for e in namespace["episodes"])
    assert namespace["result"].done in (True, False) and namespace["obs"].text
