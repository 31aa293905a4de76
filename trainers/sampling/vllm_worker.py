"""Code that runs *inside* a vLLM worker: weight pushes from a safetensors file, and the tied lm_head.

A vLLM OpenAI server started by `trainers.sampling.vllm_server` loads `WeightSyncExtension` into
each of its workers (vLLM's `--worker-extension-cls`, the mechanism TRL's own server used for its
weight channel). The trainer's `ServerEngine` (file transport, `trainers/sampling/vllm.py`) writes
the HF model's weights to one safetensors file that the server can read, then calls
`llm_gym_load_weights_file(path)` on every worker through vLLM's `/collective_rpc` endpoint
(available when the server runs with `VLLM_SERVER_DEV_MODE=1`, as vLLM's RL endpoints are). The
method goes through the worker's own `reload_weights` (vLLM's in-place reload, which re-runs the
post-load processing of kernel-format weights) and then re-ties a tied lm_head with
`retie_lm_head`, which the colocated engine uses as well.

This module imports torch and safetensors only (never vLLM at import), so a vLLM worker can
import it cheaply, and it needs nothing from the trainer side.
"""

from __future__ import annotations

import os
from typing import Any

import torch

__all__ = ["WeightSyncExtension", "retie_lm_head"]


def retie_lm_head(model: torch.nn.Module, hf_config: Any) -> bool:
    """After a weight reload, point a tied lm_head at the new embedding again; return whether the
    model has tied embeddings (False: nothing to do).

    With `tie_word_embeddings` the checkpoint has no `lm_head.weight` and vLLM's model skips it on
    load, so vLLM's in-place reload gives `embed_tokens` its new values but puts the lm_head's
    previous kernel tensor back (it logs "ParallelLMHead: Failed to load weights"); on CPU that
    tensor is a separate re-packed GEMM weight, so the output layer would keep the old weights.
    Tying it to the new embedding and redoing its post-load step (on CPU: the re-pack) makes the
    logits follow the push.

    Raises:
        RuntimeError: the config says tied but the model has no `lm_head` / `model.embed_tokens`.
    """
    if not getattr(hf_config, "tie_word_embeddings", False):
        return False
    lm_head = getattr(model, "lm_head", None)
    embed = getattr(getattr(model, "model", None), "embed_tokens", None)
    if lm_head is None or embed is None:
        raise RuntimeError(f"tied embeddings but no lm_head/model.embed_tokens on "
                           f"{type(model).__name__}; the weight push cannot re-tie them")
    lm_head.weight = embed.weight
    lm_head.quant_method.process_weights_after_loading(lm_head)
    return True


class WeightSyncExtension:
    """Mixed into vLLM's worker class by `--worker-extension-cls
    trainers.sampling.vllm_worker.WeightSyncExtension`; its methods are called by name through
    `/collective_rpc`, whose arguments arrive as strings. Names carry an `llm_gym_` prefix so they
    cannot clash with the worker's own methods (vLLM refuses an extension that overrides one)."""

    # Provided by the vLLM worker this class is mixed into.
    model_runner: Any
    model_config: Any
    reload_weights: Any

    def llm_gym_weight_sync_info(self, probe_path: str = "") -> dict:
        """What the trainer checks before its first push: that this server has the extension, and
        (`probe_path`) whether the worker sees a file the trainer wrote, i.e. shares its
        filesystem. Returns `{"extension": 1, "sees_probe": bool, "tied": bool, "loads": the
        number of `llm_gym_load_weights_file` calls this worker has served}`."""
        return {
            "extension": 1,
            "sees_probe": bool(probe_path) and os.path.isfile(probe_path),
            "tied": bool(getattr(self.model_config.hf_config, "tie_word_embeddings", False)),
            "loads": getattr(self, "_llm_gym_loads", 0),
        }

    def llm_gym_load_weights_file(self, path: str) -> dict:
        """Load every `(checkpoint name, tensor)` of the safetensors file at `path` into the model,
        in place, then re-tie a tied lm_head. The file is read completely before this returns,
        so the caller may overwrite or delete it afterwards. The prefix cache is *not* reset
        here (that is the scheduler's, not the worker's): the caller posts `/reset_prefix_cache`.

        Returns `{"tensors": number loaded, "tied": whether the lm_head was re-tied}`."""
        from safetensors.torch import load_file

        # load_file copies into memory (no mmap left open on a file the trainer will replace);
        # the model's weight loaders move each tensor to the worker's device.
        weights = load_file(path, device="cpu")
        with torch.no_grad():
            self.reload_weights(weights_iterator=list(weights.items()), is_checkpoint_format=True)
            tied = retie_lm_head(self.model_runner.model, self.model_config.hf_config)
        self._llm_gym_loads = getattr(self, "_llm_gym_loads", 0) + 1  # a diagnostic: pushes served
        return {"tensors": len(weights), "tied": tied}
